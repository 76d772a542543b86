#!/usr/bin/env python3
"""tokens_buckets.py EXPECTED_JSONL OUT_JSONL SETTINGS_JSON MODEL: check `sharc read --json
--json-tokens` batches against NeMo's 2D bucketing and token filters, reimplemented here.

SETTINGS_JSON holds any of: bins ([[duration, tokens], ...]), bbs (one size per pair),
max_tps (a number, or one per pair), min_tps, min_tokens, max_tokens, min_duration,
max_cut_duration. A cut is filtered as NeMo's DurationFilter, TokenPerSecondFilter (inclusive
bounds, tps = tokens / duration; a list of max_tps leaves it to the buckets),
TokenCountFilter-like min/max tokens, and BucketingFilter
(find_smallest_bucket in strict mode, max_tps per bucket). Every batch must lie in one bucket
with at most its size, and the cuts that come out must be exactly those that pass, with the
ids Python sentencepiece gives their transcripts (MODEL); the summary's filtered_cuts must be
the number filtered here, and its "filtered" object the number filtered for each reason (the
first filter a cut fails, a 2D bucket's max_tps counting as max_tps). Prints that number, then
reason=count for each reason that filtered any.
"""
import json
import sys
from bisect import bisect_left

import sentencepiece as spm


def find_smallest_bucket(bins, dur, tok, max_ratio):
    """NeMo's strict 2D find_smallest_bucket (sampling.py), over a list of pairs."""
    d0 = bisect_left([b[0] for b in bins], dur)
    if d0 == len(bins):
        return None
    end = d0
    while end < len(bins) and bins[end][0] == bins[d0][0]:
        end += 1
    d1 = bisect_left([b[1] for b in bins[d0:end]], tok)
    if d1 == end - d0:
        return None
    fit = d0 + d1
    if max_ratio is not None and (tok / dur if dur else float("inf")) > max_ratio[fit]:
        return None
    return fit


def reason(cfg, dur, n):
    """Why a cut of `dur` s and `n` tokens is filtered (the first filter it fails, in the
    order NeMo applies them: duration, token count, tokens per second, buckets), or None."""
    max_tps = cfg.get("max_tps")
    tps = n / dur
    if dur < cfg.get("min_duration", 0):
        return "min_duration"
    if dur > cfg.get("max_cut_duration", float("inf")):
        return "max_cut_duration"
    if n < cfg.get("min_tokens", 0):
        return "min_tokens"
    if n > cfg.get("max_tokens", 1 << 40):
        return "max_tokens"
    if tps < cfg.get("min_tps", 0):
        return "min_tps"
    if tps > (max_tps if isinstance(max_tps, (int, float)) else float("inf")):
        return "max_tps"
    bins = cfg.get("bins")
    ratios = max_tps if isinstance(max_tps, list) else None
    if bins and find_smallest_bucket(bins, dur, n, ratios) is None:
        # over its bucket's max_tps when it fits one without the caps
        return "no_bucket" if find_smallest_bucket(bins, dur, n, None) is None else "max_tps"
    return None


def main():
    exp, want = {}, set()
    reasons = dict.fromkeys(("min_duration", "max_cut_duration", "min_tokens", "max_tokens",
                             "min_tps", "max_tps", "no_bucket"), 0)
    cfg = json.loads(sys.argv[3])
    sp = spm.SentencePieceProcessor(model_file=sys.argv[4])
    with open(sys.argv[1]) as f:
        for line in f:
            e = json.loads(line)
            exp[e["id"]] = (e["duration"], sp.encode_as_ids(e["text"]))
            why = reason(cfg, e["duration"], len(exp[e["id"]][1]))
            if why is None:
                want.add(e["id"])
            else:
                reasons[why] += 1
    batches, summary = [], None
    with open(sys.argv[2]) as f:
        for line in f:
            o = json.loads(line)
            if o["type"] == "batch":
                batches.append(o)
            elif o["type"] == "summary":
                summary = o
    bins = cfg.get("bins")
    max_tps = cfg.get("max_tps")
    ratios = max_tps if isinstance(max_tps, list) else None
    tps_max = max_tps if isinstance(max_tps, (int, float)) else float("inf")
    seen = {}
    for b in batches:
        buckets = set()
        for cid, toks in zip(b["ids"], b["tokens"]):
            dur, ids = exp[cid]
            assert toks == ids, f"{cid}: tokens {toks}, sentencepiece {ids}"
            n = len(toks)
            tps = n / dur
            assert cfg.get("min_tokens", 0) <= n <= cfg.get("max_tokens", 1 << 40), (cid, n)
            assert cfg.get("min_tps", 0) <= tps <= tps_max, (cid, tps)
            if bins:
                k = find_smallest_bucket(bins, dur, n, ratios)
                assert k is not None, f"{cid} ({dur} s, {n} tokens) fits no bucket"
                buckets.add(k)
            seen[cid] = seen.get(cid, 0) + 1
        if bins:
            assert len(buckets) == 1, f"step {b['step']} spans buckets {sorted(buckets)}"
            k = buckets.pop()
            assert b["cuts"] <= cfg["bbs"][k], f"step {b['step']}: {b['cuts']} cuts in bucket {k}"
    assert all(v == 1 for v in seen.values()), "a cut came out twice"
    assert set(seen) == want, f"out but filtered: {set(seen) - want}; filtered but kept: {want - set(seen)}"
    filtered = len(exp) - len(want)
    got = summary["reader"]["filtered_cuts"]
    assert got == filtered, f"filtered_cuts {got}, but {filtered} cuts did not come out"
    got = summary["reader"]["filtered"]
    assert got == reasons, f"filtered by reason {got}, not {reasons}"
    print(filtered, " ".join(f"{k}={v}" for k, v in reasons.items() if v))


if __name__ == "__main__":
    main()
