#!/usr/bin/env python3
"""Turn a sharc-gen NeMo corpus into long-form windows (for tests/test_pipeline.c): the
manifest of shard 0 is rewritten so that ROWS rows cut consecutive windows of SECONDS out
of its first member, as NeMo manifests segment a long recording by offset/duration. The
other members of the shard are left without rows (orphans, skipped with a problem each).

Usage: nemo_windows.py CORPUS_DIR ROWS SECONDS [PAST_END_OFFSET]
With PAST_END_OFFSET, one more row <stem>-sub9999<ext> cuts SECONDS from that offset, running
past the end of the member. Prints the first member's name.
"""
import json
import os
import sys


def main():
    corpus, rows, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    path = os.path.join(corpus, "nemo", "sharded_manifests", "manifest_0.json")
    with open(path) as f:
        first = json.loads(f.readline())
    stem, ext = os.path.splitext(first["audio_filepath"])
    with open(path, "w") as f:
        for k in range(1, rows + 1):
            row = dict(first, audio_filepath=f"{stem}-sub{k}{ext}", offset=seconds * (k - 1),
                       duration=seconds, text=f"window {k}")
            f.write(json.dumps(row) + "\n")
        if len(sys.argv) > 4:
            row = dict(first, audio_filepath=f"{stem}-sub9999{ext}", offset=float(sys.argv[4]),
                       duration=seconds, text="past the end")
            f.write(json.dumps(row) + "\n")
    print(first["audio_filepath"])


if __name__ == "__main__":
    main()
