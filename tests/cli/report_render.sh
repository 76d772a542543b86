#!/bin/sh
# cli_report_render: the `sharc validate --report` page as headless Chromium renders it: a
# screenshot that is not blank, and a DOM that holds every chart with one bar per bin and the
# shard table.
. "$(dirname "$0")/lib.sh"
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
    echo "chromium is not installed (Debian package chromium); skipping"
    exit 77
fi
# render PAGE PNG DOM: a screenshot and the DOM of PAGE, offline.
render() {
    set -- "$1" "$2" "$3" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --no-first-run --disable-extensions --user-data-dir="$tmp/profile" \
        --proxy-server=127.0.0.1:9
    "$chromium" $(printf '%s\n' "$@" | tail -n +4) --window-size=1360,1600 \
        --screenshot="$2" "file://$1" >"$tmp/chromium.log" 2>&1 ||
        fail "chromium could not render $1: $(tail -5 "$tmp/chromium.log")"
    "$chromium" $(printf '%s\n' "$@" | tail -n +4) --dump-dom "file://$1" >"$3" \
        2>"$tmp/chromium.log" || fail "chromium could not load $1: $(tail -5 "$tmp/chromium.log")"
}

gen "$tmp/g" --layout shar --shards 3 --cuts-per-shard 8 --max-duration 6 --seed 5
expect_rc 0 "$SHARC" validate --threads 2 --report "$tmp/r.html" --report-json "$tmp/r.json" \
    "$tmp/g/shar"
render "$tmp/r.html" "$tmp/r.png" "$tmp/r.dom"
"$PYTHON" "$(dirname "$0")/reportcheck.py" png "$tmp/r.png"
"$PYTHON" "$(dirname "$0")/reportcheck.py" dom "$tmp/r.dom" "$tmp/r.json"

# The bench report: the throughput, memory and stage charts drawn.
expect_rc 0 "$SHARC" bench --quiet --epochs 0 --seconds 1 --bins 1,2 --buffer-size 50 \
    --report "$tmp/b.html" "$tmp/g/shar"
render "$tmp/b.html" "$tmp/b.png" "$tmp/b.dom"
"$PYTHON" "$(dirname "$0")/reportcheck.py" png "$tmp/b.png"
tr '\n' ' ' <"$tmp/b.dom" | sed 's|</svg>|&\n|g' >"$tmp/b.svgs"
for id in chart-audio-rate chart-batch-rate chart-memory; do
    grep -q "<svg id=\"$id\".*<polyline class=\"line\"[^>]*points=\"[0-9]" "$tmp/b.svgs" ||
        fail "the bench page's DOM has no line in $id"
done
# The five stages of the library's clock and this rank's broadcast (no conditioning or host
# features here).
[ "$(grep -o '<rect class="bar"' "$tmp/b.dom" | wc -l)" -eq 6 ] ||
    fail "the bench page's stage chart has not one bar per stage and the broadcast"
echo "ok"
