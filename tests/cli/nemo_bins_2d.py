#!/usr/bin/env python3
"""nemo_bins_2d.py EXPECTED_JSONL MODEL NUM_BUCKETS NUM_SUBBUCKETS THRESHOLD: NeMo's 2D bin
estimate (estimate_duration_bins_2d.py, as NeMo's speech branch has it), reimplemented from
its description with numpy, over the cuts of a sharc-gen corpus tokenized by Python
sentencepiece. Prints the two lines `sharc buckets --tokenizer --json` must match:
bucket_duration_bins=[[d,t],...] (d to 3 places) and max_tps=[...] (2 places).

The steps: durations as float32 and token counts as int32, sorted by (duration, tokens);
a duration bin (rounded to 3 places in float32) starts wherever the running total exceeds
total / num_buckets; consecutive bins of one duration (and a last bin equal to the longest
duration) are merged into the next, with that many times the sub-buckets. Within a bucket,
cuts whose tokens per second have a z-score above THRESHOLD are left out; the rest, sorted
by (tokens, duration), are cut into sub-buckets whenever the running token total exceeds
total / sub-buckets, each closing at the token count where it stopped, and every sub-bucket
gets the bucket's largest remaining tokens per second.
"""
import json
import sys

import numpy as np
import sentencepiece as spm


def by(a, b):
    rec = np.rec.fromarrays([a, b])
    rec.sort()
    return rec.f0, rec.f1


def main():
    path, model, nb, ns, thr = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    sp = spm.SentencePieceProcessor(model_file=model)
    cuts = [json.loads(line) for line in open(path)]
    sizes = np.array([c["duration"] for c in cuts], dtype=np.float32)
    toks = np.array([len(sp.encode_as_ids(c["text"])) for c in cuts], dtype=np.int32)
    sizes, toks = by(sizes, toks)
    share = sizes.sum() / nb
    longest = round(sizes[-1], 3)
    out, caps = [], []

    def split(bound, lo, hi, k):
        t_all, s_all = toks[lo:hi], sizes[lo:hi]
        tps = t_all / s_all
        keep = np.where((tps - np.mean(tps)) / np.std(tps) <= thr)
        t, s = t_all[keep], s_all[keep]
        cap = (t / s).max()
        t, s = by(t, s)
        per = t.sum() / k
        run = 0
        for n in t:
            if run > per:
                out.append((bound, n))
                caps.append(cap)
                run = 0
            run += n
        out.append((bound, t[-1]))
        caps.append(cap)

    bins, starts, run = [], [], 0.0
    for i, size in enumerate(sizes):
        if run > share:
            size = round(size, 3)
            bins.append(size)
            starts.append(i)
            run = 0.0
        run += size
    lo, merged = 0, 1
    for i, (b, start) in enumerate(zip(bins, starts)):
        if (i + 1 < len(bins) and bins[i + 1] == b) or (i + 1 == len(bins) and longest == b):
            merged += 1
            continue
        split(b, lo, start, ns * merged)
        lo, merged = start, 1
    split(longest, lo, len(sizes), ns * merged)
    print("bucket_duration_bins=[" + ",".join(f"[{b:.3f},{t:d}]" for b, t in out) + "]")
    print("max_tps=[" + ",".join(f"{c:.2f}" for c in caps) + "]")


if __name__ == "__main__":
    main()
