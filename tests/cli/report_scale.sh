#!/bin/sh
# cli_report_scale: the report of a corpus of 1 million cuts in 10,000 shards with 20,000
# problems stays under 5 MB, and Chromium renders it (the time it took is printed, not checked).
. "$(dirname "$0")/lib.sh"
: "${REPORT_SCALE:?}"
"$REPORT_SCALE" 1000000 10000 20000 "$tmp/r.html" "$tmp/r.json"
size=$(wc -c <"$tmp/r.html")
echo "report of 1M cuts, 10k shards: $size bytes (JSON $(wc -c <"$tmp/r.json"))"
[ "$size" -lt 5000000 ] || fail "the report is $size bytes, not under 5 MB"
"$PYTHON" "$(dirname "$0")/reportcheck.py" embedded "$tmp/r.html" "$tmp/r.json"
"$PYTHON" -c 'import json,sys
r = json.load(open(sys.argv[1]))
assert r["cuts"] == 1000000 and r["shards"] == 10000 and r["problem_count"] == 20000, r["cuts"]
assert sum(r["duration_histogram"]["counts"]) == 1000000
assert len(r["problems"]) == 1000 and r["problems_omitted"] == 19000
assert sum(k["count"] for k in r["problems_by_kind"]) == 20000
assert len(r["per_shard"]) + r["per_shard_omitted"] == 10000' "$tmp/r.json" ||
    fail "the large report's numbers"
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
    echo "chromium is not installed (Debian package chromium); the rendering is not checked"
    exit 0
fi
t0=$(date +%s.%N)
"$chromium" --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" \
    --proxy-server=127.0.0.1:9 --dump-dom "file://$tmp/r.html" >"$tmp/r.dom" 2>"$tmp/log" ||
    fail "chromium could not load the large report: $(tail -5 "$tmp/log")"
t1=$(date +%s.%N)
grep -q 'id="chart-duration"' "$tmp/r.dom" || fail "the large report's DOM has no duration chart"
echo "chromium loaded it in $(awk "BEGIN { print $t1 - $t0 }") s"
echo "ok"
