#!/usr/bin/env python3
"""nemo_long.py DIR: a NeMo tarred corpus of one uncompressed shard whose middle member is a
long recording cut into segments by offset/duration rows, for the ranged-read tests
(tests/cli/remote_range.sh).

DIR/audio_0.tar holds a.wav (1 s), long.wav (20 min) and b.wav (2 s), 16 kHz mono PCM16
with seeded noise; DIR/manifest_0.json has a row for each short member and three windows of
long.wav (long-sub1.wav, ...). Prints one line of JSON: where long.wav's bytes are in the
tar ("at", "size") and where the member after it starts ("next"), so that a test can name
the byte ranges a reader should ask for.
"""
import io
import json
import os
import random
import sys
import tarfile

RATE = 16000
# (member, seconds) in tar order; rows: (audio_filepath, offset, duration).
MEMBERS = [("a.wav", 1.0), ("long.wav", 1200.0), ("b.wav", 2.0)]
ROWS = [("a.wav", None, 1.0), ("long-sub1.wav", 12.5, 3.0), ("long-sub2.wav", 600.25, 2.5),
        ("long-sub3.wav", 1195.0, 4.0), ("b.wav", None, 2.0)]


def wav(seconds, rng):
    data = rng.randbytes(int(seconds * RATE) * 2)
    head = b"RIFF" + (36 + len(data)).to_bytes(4, "little") + b"WAVEfmt "
    head += (16).to_bytes(4, "little") + (1).to_bytes(2, "little") + (1).to_bytes(2, "little")
    head += RATE.to_bytes(4, "little") + (2 * RATE).to_bytes(4, "little")
    head += (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
    return head + b"data" + len(data).to_bytes(4, "little") + data


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(27)
    where = {}
    with tarfile.open(os.path.join(out, "audio_0.tar"), "w", format=tarfile.USTAR_FORMAT) as t:
        for name, seconds in MEMBERS:
            body = wav(seconds, rng)
            info = tarfile.TarInfo(name)
            info.size = len(body)
            info.mtime = 1700000000
            t.addfile(info, io.BytesIO(body))
            if name == "long.wav":
                where = {"at": t.offset - (len(body) + 511) // 512 * 512, "size": len(body),
                         "next": t.offset}
    with open(os.path.join(out, "manifest_0.json"), "w") as f:
        for path, offset, duration in ROWS:
            row = {"audio_filepath": path, "duration": duration, "text": path.split(".")[0],
                   "shard_id": 0}
            if offset is not None:
                row["offset"] = offset
            f.write(json.dumps(row) + "\n")
    print(json.dumps(where))


if __name__ == "__main__":
    main()
