#!/usr/bin/env python3
"""samebatches.py A B [--from-step N]: the batches of two `sharc read --json` outputs are the
same (step, epoch, ids, frames, audio CRC-32), B's first step being N (the steps of A from N
on). Exits 1 naming the first difference."""
import json
import sys


def batches(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d.get("type") == "batch":
                out.append((d["step"], d["epoch"], tuple(d["ids"]), d["frames"], d["audio_crc32"]))
            elif d.get("type") == "summary" and d.get("error"):
                sys.exit(f"FAIL: {path} ended with an error: {d['error']}")
    return out


def main():
    a, b = batches(sys.argv[1]), batches(sys.argv[2])
    first = int(sys.argv[sys.argv.index("--from-step") + 1]) if "--from-step" in sys.argv else 0
    a = [x for x in a if x[0] >= first]
    if not a:
        sys.exit(f"FAIL: {sys.argv[1]} holds no batch from step {first}")
    for x, y in zip(a, b):
        if x != y:
            sys.exit(f"FAIL: step {x[0]}: {sys.argv[1]} has {x}, {sys.argv[2]} has {y}")
    if len(a) != len(b):
        sys.exit(f"FAIL: {len(a)} batches in {sys.argv[1]}, {len(b)} in {sys.argv[2]}")


if __name__ == "__main__":
    main()
