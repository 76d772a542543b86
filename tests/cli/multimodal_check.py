#!/usr/bin/env python3
"""multimodal_check.py EXPECTED_JSONL OUT_JSONL TED BATCH_TOKENS Q: check `sharc read --json
--token-equivalent-duration TED --batch-tokens N --quadratic-duration Q` batches against NeMo's
MultimodalSamplingConstraint (Lhotse's TokenConstraint): a cut of d seconds measures
L = ceil(d / TED) audio tokens, counted as L + L*L/Q; cuts join a batch while
(n + 1) * longest <= N, so every prefix of k < n cuts of a batch of n satisfies it; the
bins (the summary's) are in audio tokens, and every batch lies in one bucket
(bisect_left). Every cut must come out once. Prints the cuts and the bins."""
import json
import math
import sys
from bisect import bisect_left


def main():
    exp = {}
    for line in open(sys.argv[1]):
        e = json.loads(line)
        exp[e["id"]] = e["duration"]
    ted, cap, q = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    out = [json.loads(line) for line in open(sys.argv[2])]
    bins = out[-1]["bins"]
    assert all(x == int(x) for x in bins), f"bins {bins} are not audio token counts"
    seen = []
    for b in (o for o in out if o["type"] == "batch"):
        lens = [math.ceil(exp[i] / ted) for i in b["ids"]]
        assert len({bisect_left(bins, n) for n in lens}) == 1, f"step {b['step']}: {lens} spans buckets {bins}"
        eff = [n + n * n / q if q else n for n in lens]
        for k in range(1, len(eff)):
            assert (k + 1) * max(eff[:k]) <= cap, f"step {b['step']}: {eff} is over {cap} at {k}"
        seen += b["ids"]
    assert sorted(seen) == sorted(exp), "not every cut came out once"
    print(len(seen), bins)


if __name__ == "__main__":
    main()
