#!/bin/sh
# cli_report_tokens: `sharc validate --tokenizer M --report-json`: the tokens per second of the
# transcripts. A model trained here with spm_train; every cut's token count is Python
# sentencepiece's encode_as_ids length of its transcript: the totals, the histogram and the
# top-10 lists at both ends (cut ids and values) against those, the page's chart and tables,
# --json's summary; without --tokenizer no token field.
. "$(dirname "$0")/lib.sh"

need_spm sentencepiece
spm_model m 100

gen "$tmp/g" --layout shar --shards 3 --cuts-per-shard 8 --max-duration 6 --seed 5 --compress none
expect_rc 0 "$SHARC" validate --json --threads 2 --tokenizer "$tmp/m.model" --report "$tmp/r.html" \
    --report-json "$tmp/r.json" "$tmp/g/shar"
"$py" - "$tmp/r.json" "$tmp/g/shar.expected.jsonl" "$tmp/m.model" "$tmp/out" <<'PY' ||
import json, sys
import sentencepiece as spm
report, expected, model, out = sys.argv[1:]
t = json.load(open(report))["text"]
sp = spm.SentencePieceProcessor(model_file=model)
cuts = [c for c in map(json.loads, open(expected)) if c.get("text") and c["duration"] > 0]
tps = {c["id"]: len(sp.encode_as_ids(c["text"])) / c["duration"] for c in cuts}
total = sum(len(sp.encode_as_ids(c["text"])) for c in cuts)
summary = [json.loads(l) for l in open(out) if '"type":"summary"' in l][0]
assert t["tokens"] == total == summary["tokens"], (t["tokens"], total, summary["tokens"])
assert total > 0 and len(tps) == 24 == t["cuts"], (total, len(tps))
assert sum(t["tokens_per_second_histogram"]["counts"]) == len(tps)
mean = sum(tps.values()) / len(tps)
assert abs(t["tokens_per_second_mean"] - mean) < 1e-9 * mean, (t["tokens_per_second_mean"], mean)
for name, rev in (("highest_tokens_per_second", True), ("lowest_tokens_per_second", False)):
    want = sorted(tps, key=lambda i: (-tps[i] if rev else tps[i], i))[:10]
    got = t[name]
    assert [e["cut_id"] for e in got] == want, (name, got, want)
    for e in got:
        assert abs(e["value"] - tps[e["cut_id"]]) < 1e-9 * tps[e["cut_id"]], (name, e)
PY
    fail "tokens per second in $tmp/r.json"
expect_in "$tmp/r.html" 'id="chart-tps"'
expect_in "$tmp/r.html" "Lowest tokens per second"

# Without a tokenizer: no token field in the report or the summary.
expect_rc 0 "$SHARC" validate --json --report-json "$tmp/n.json" "$tmp/g/shar"
grep -q '"tokens' "$tmp/n.json" "$tmp/out" && fail "token fields without --tokenizer"
expect_rc 0 "$SHARC" validate --help
expect_in "$tmp/out" "--tokenizer M"
echo "ok"
