#!/usr/bin/env python3
"""A NeMo tarred dataset whose one member is a long recording that every manifest row cuts
a window out of (long-form audio segmented by offset/duration), for tests/test_pipeline.c.

Usage: make_longform.py DIR SECONDS ROWS
  DIR/audio_0.tar holds long.wav: SECONDS of 16 kHz mono PCM16 whose sample i is
  ((i * 7919) % 65536) - 32768; DIR/sharded_manifests/manifest_0.json has ROWS rows
  long-sub<k>.wav (k = 1..ROWS) with offset 2*(k-1) s and duration 2 s.
"""
import io
import json
import os
import struct
import sys
import tarfile
import wave


def main():
    out, seconds, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rate = 16000
    n = seconds * rate
    samples = struct.pack(f"<{n}h", *(((i * 7919) % 65536) - 32768 for i in range(n)))
    wav = io.BytesIO()
    with wave.open(wav, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples)
    data = wav.getvalue()
    os.makedirs(os.path.join(out, "sharded_manifests"), exist_ok=True)
    with tarfile.open(os.path.join(out, "audio_0.tar"), "w", format=tarfile.USTAR_FORMAT) as t:
        info = tarfile.TarInfo("long.wav")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    with open(os.path.join(out, "sharded_manifests", "manifest_0.json"), "w") as f:
        for k in range(1, rows + 1):
            row = {"audio_filepath": f"long-sub{k}.wav", "offset": 2.0 * (k - 1),
                   "duration": 2.0, "text": f"window {k}", "shard_id": 0}
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
