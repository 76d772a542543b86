#!/bin/sh
# cli_report: `sharc validate --report/--report-json`: the report's numbers against a generated
# corpus, the problems of a damaged copy, the page self-contained, and no partial file when the
# report cannot be written.
. "$(dirname "$0")/lib.sh"
rcheck() {
    "$PYTHON" "$(dirname "$0")/reportcheck.py" "$@"
}

gen "$tmp/g" --layout shar --shards 3 --cuts-per-shard 8 --max-duration 6 --seed 5 --compress none
expect_rc 0 "$SHARC" validate --threads 2 --report "$tmp/r.html" --report-json "$tmp/r.json" \
    "$tmp/g/shar"
rcheck clean "$tmp/r.json" "$tmp/g/shar.expected.jsonl" 3
rcheck embedded "$tmp/r.html" "$tmp/r.json"
rcheck offline "$tmp/r.html"
# Shard paths with markup in them: escaped in the tables, and the embedded JSON still whole.
mkdir "$tmp/d<!--<script>&'"
cp -r "$tmp/g/shar" "$tmp/d<!--<script>&'/shar"
expect_rc 0 "$SHARC" validate --report "$tmp/m.html" --report-json "$tmp/m.json" \
    "$tmp/d<!--<script>&'/shar"
rcheck embedded "$tmp/m.html" "$tmp/m.json"
rcheck offline "$tmp/m.html"
grep -q "<!--<script>" "$tmp/m.html" && fail "a shard path's markup is in the page as it is"
expect_in "$tmp/m.html" "d&lt;!--&lt;script&gt;&amp;&#39;/shar/recording.000000.tar"

# The text output is the same with a report as without.
cp "$tmp/out" "$tmp/with"
expect_rc 0 "$SHARC" validate --threads 2 "$tmp/g/shar"
diff "$tmp/with" "$tmp/out" | grep -v '^[<>] -- 3 shards' | grep '^[<>]' && fail "text output differs"

# A truncated tar: the archive problem names the shard, member and lost cut, grouped by kind.
cp -r "$tmp/g/shar" "$tmp/x"
member=$(check truncate "$tmp/x/recording.000001.tar")
# The tar breaks inside an audio member (that cut is lost) or right after a cut's .json member
# (the next cut is lost).
lost=$("$PYTHON" -c 'import json,sys
ids = [json.loads(l)["id"] for l in open(sys.argv[1]) if json.loads(l)["shard_index"] == 1]
stem, ext = sys.argv[2].rsplit(".", 1)
print(ids[ids.index(stem) + 1] if ext == "json" else stem)' "$tmp/g/shar.expected.jsonl" "$member")
expect_rc 1 "$SHARC" validate --threads 2 --report "$tmp/d.html" --report-json "$tmp/d.json" "$tmp/x"
rcheck damaged "$tmp/d.json" recording.000001.tar "$member" "$lost"
rcheck problem-rows "$tmp/d.html" "$tmp/d.json"
# Its --json shard records: that shard not checked to its end, the two others checked.
expect_rc 1 "$SHARC" validate --json --threads 2 "$tmp/x"
"$PYTHON" -c 'import json,sys
recs = {r["index"]: r["checked"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "shard"}
assert recs == {0: True, 1: False, 2: True}, recs' "$tmp/out" || fail "shard records of $tmp/x"

# A shard truncated before its one cut, then one whose one cut does not decode: no cut comes
# from either, and the records must still say exactly that the truncated one was not checked
# to its end (the decode problem leaves its shard read on: sharc_problem_report.shard_left).
gen "$tmp/h" --layout shar --shards 4 --cuts-per-shard 1 --max-duration 3 --seed 6 --compress none
check truncate "$tmp/h/shar/recording.000001.tar" >/dev/null
audio=$("$PYTHON" -c 'import sys, tarfile
print([m.name for m in tarfile.open(sys.argv[1]) if not m.name.endswith(".json")][0])' \
    "$tmp/h/shar/recording.000002.tar")
"$PYTHON" "$(dirname "$0")/../corrupt.py" tar-replace "$tmp/h/shar/recording.000002.tar" "$audio" \
    "@flac-garbage:2000"
expect_rc 1 "$SHARC" validate --json --threads 1 "$tmp/h/shar"
"$PYTHON" -c 'import json,sys
rows = list(map(json.loads, open(sys.argv[1])))
recs = {r["index"]: r["checked"] for r in rows if r["type"] == "shard"}
assert recs == {0: True, 1: False, 2: True, 3: True}, recs
assert any(r["type"] == "problem" and r["shard"].endswith("recording.000002.tar") for r in rows)' \
    "$tmp/out" || fail "shard records of $tmp/h"

# A report that cannot be written: exit 1 naming it, the checks' output still printed, and no
# file left behind (the target is a directory, so the rename fails after the write).
mkdir -p "$tmp/o/r.html"
expect_rc 1 "$SHARC" validate --threads 2 --report "$tmp/o/r.html" "$tmp/g/shar"
expect_in "$tmp/err" "cannot write the report $tmp/o/r.html"
expect_in "$tmp/out" "-- OK: no problems found"
[ "$(ls -A "$tmp/o")" = "r.html" ] || fail "left behind: $(ls -A "$tmp/o")"
# A report whose folder does not exist is found before the corpus is read: the run's problem.
expect_rc 1 "$SHARC" validate --report-json "$tmp/missing/r.json" "$tmp/g/shar"
expect_in "$tmp/out" "problem error: cannot write the report $tmp/missing/r.json: No such file or directory"
expect_in "$tmp/out" " 0 cuts,"
expect_in "$tmp/out" "-- 1 problems: error 1"
[ ! -s "$tmp/err" ] || fail "said twice: $(cat "$tmp/err")"
echo "ok"
