"""Batch fingerprints for cli_fingerprints: what identifies each batch `sharc read --json`
printed (step, epoch, ids, frames, audio CRC-32), as one JSON line per batch tagged with the
case that made it. Only integers and strings are kept: they print the same on every machine,
while the float fields (seconds, bins) depend on how a libc formats a double.

    fingerprints.py extract CASE OUT.jsonl     append OUT's batches to stdout
    fingerprints.py compare RECORDED GOT       fail on the first batch that differs
"""
import json
import sys


def extract(case, path):
    for line in open(path, encoding="utf-8"):
        row = json.loads(line)
        if row.get("type") != "batch":
            continue
        fp = {"case": case}
        for key in ("step", "epoch", "ids", "frames", "audio_crc32"):
            fp[key] = row[key]
        print(json.dumps(fp, separators=(",", ":")))


def compare(recorded, got):
    want = [json.loads(x) for x in open(recorded, encoding="utf-8") if x.strip()]
    have = [json.loads(x) for x in open(got, encoding="utf-8") if x.strip()]
    cases_want = {r["case"] for r in want}
    cases_have = {r["case"] for r in have}
    if cases_want != cases_have:
        sys.exit(f"FAIL: cases differ: recorded only {sorted(cases_want - cases_have)}, "
                 f"run only {sorted(cases_have - cases_want)}")
    for w, h in zip(want, have):
        if w != h:
            sys.exit(f"FAIL: case {w['case']} step {w['step']}: recorded {json.dumps(w)}, "
                     f"got {json.dumps(h)}")
    if len(want) != len(have):
        extra = have[len(want)] if len(have) > len(want) else want[len(have)]
        sys.exit(f"FAIL: {len(have)} batches, {len(want)} recorded; first unmatched: "
                 f"{json.dumps(extra)}")
    print(f"{len(have)} batches in {len(cases_have)} cases match {recorded}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "extract":
        extract(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
