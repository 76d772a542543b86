#!/bin/sh
# cli_bench_report: `sharc bench --report/--report-json` and `--compare`: the report's JSON
# holds the run's result, a timeline per repetition and the machine; the page embeds it and
# fetches nothing; a comparison embeds both runs.
. "$(dirname "$0")/lib.sh"
rcheck() {
    "$PYTHON" "$(dirname "$0")/reportcheck.py" "$@"
}
gen "$tmp/g" --layout shar --shards 2 --cuts-per-shard 6 --max-duration 3 --seed 4
expect_rc 0 "$SHARC" bench --quiet --json --epochs 0 --seconds 1.2 --repeat 2 --threads 2 \
    --bins 1,2 --buffer-size 50 \
    --report "$tmp/a.html" --report-json "$tmp/a.json" "$tmp/g/shar"
cp "$tmp/out" "$tmp/a.out"
rcheck bench "$tmp/a.json" "$tmp/a.out" 2
rcheck embedded "$tmp/a.html" "$tmp/a.json"
rcheck offline "$tmp/a.html"
# With a perturbation, the stage chart also shows the conditioning's part of decode, as the
# run's decode seconds times its conditioning_share.
expect_rc 0 "$SHARC" bench --quiet --json --epochs 0 --batches 3 --threads 1 --bins 1,2 \
    --volume-perturb -6,6 --report "$tmp/v.html" --report-json "$tmp/v.json" "$tmp/g/shar"
"$PYTHON" - "$tmp/v.json" "$tmp/v.html" <<'PY' || fail "no conditioning bar in the stage chart"
import json, re, sys
res = json.load(open(sys.argv[1]))["result"]
want = res["stage_seconds"]["decode"] * res["conditioning_share"]
page = open(sys.argv[2]).read()
chart = page[page.index('id="chart-stages"'):]
assert "conditioning (part of decode)" in chart.split("</svg>")[0], "bar missing"
assert res["conditioning_share"] > 0 and want > 0, res
PY
expect_rc 0 "$SHARC" bench --quiet --cuts --epochs 0 --seconds 1 --report-json "$tmp/b.json" \
    "$tmp/g/shar"
# Batches give this rank's broadcast seconds (near 0 for a group of one) and the chart a bar
# for them; cuts (no broadcast) give null.
expect_rc 0 "$SHARC" bench --quiet --json --epochs 0 --batches 3 --threads 1 --bins 1,2 \
    --transport self --report "$tmp/t.html" --report-json "$tmp/t.json" "$tmp/g/shar"
"$PYTHON" - "$tmp/t.json" "$tmp/t.html" "$tmp/b.json" <<'PY' || fail "broadcast seconds"
import json, sys
res = json.load(open(sys.argv[1]))["result"]
assert isinstance(res["broadcast_seconds"], float) and res["broadcast_seconds"] >= 0, res
page = open(sys.argv[2]).read()
assert "broadcast" in page[page.index('id="chart-stages"'):].split("</svg>")[0], "bar missing"
assert json.load(open(sys.argv[3]))["result"]["broadcast_seconds"] is None
PY
expect_rc 0 "$SHARC" bench --compare "$tmp/a.json" "$tmp/b.json" --report "$tmp/c.html"
rcheck compare "$tmp/c.html" "$tmp/a.json" "$tmp/b.json"
rcheck offline "$tmp/c.html"
# Not a bench report; a page that cannot be written; no --report.
expect_rc 1 "$SHARC" bench --compare "$tmp/a.json" "$tmp/a.out" --report "$tmp/d.html"
expect_in "$tmp/err" "$tmp/a.out is not the JSON of a bench report"
[ ! -e "$tmp/d.html" ] || fail "a page was written after a failure"
expect_rc 2 "$SHARC" bench --compare "$tmp/a.json" "$tmp/b.json"
expect_in "$tmp/err" "--compare A.json B.json --report C.html"
# --compare has a help of its own, and bench's lists it.
expect_rc 0 "$SHARC" bench --compare --help
expect_in "$tmp/out" "Usage: sharc bench --compare A.json B.json --report C.html"
expect_rc 0 "$SHARC" bench --help
expect_in "$tmp/out" "  --compare A.json B.json  instead of measuring"
expect_rc 1 "$SHARC" bench --quiet --batches 2 --report "$tmp/missing/x.html" "$tmp/g/shar"
expect_in "$tmp/err" "cannot write the report $tmp/missing/x.html"
# ... found before the run, not after it: --json gives the error object, and no result.
expect_rc 1 "$SHARC" bench --json --batches 2 --report-json "$tmp/missing/x.json" "$tmp/g/shar"
"$PYTHON" -c 'import json, sys
o = json.load(open(sys.argv[1]))
assert o["error"] == "cannot write the report " + sys.argv[2] + ": No such file or directory", o
assert "audio_seconds_per_second" not in o, o' "$tmp/out" "$tmp/missing/x.json"
echo "ok"
