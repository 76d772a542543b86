#!/bin/sh
# cli_validate_scale: `sharc validate` over a corpus in parts: --partition I/N covers every
# shard once whatever --threads, --resume-from checks exactly the shards a stopped run did not
# finish, the text output groups problems by kind, --progress-every prints progress lines
# to a stderr that is not a terminal, and --input-cfg checks sources of several layouts.
. "$(dirname "$0")/lib.sh"

gen "$tmp/g" --layout wds --shards 7 --cuts-per-shard 3 --max-duration 1 --seed 8 --compress none
d="$tmp/g/wds"
records() { # FILE: the shard indices of its shard records, sorted, one line
    "$PYTHON" -c 'import json,sys
print(" ".join(str(i) for i in sorted(json.loads(l)["index"] for l in open(sys.argv[1])
      if json.loads(l)["type"] == "shard")))' "$1"
}

# Partitions: every shard exactly once over the N parts, whatever the threads of each.
for n in 2 3; do
    : >"$tmp/all"
    i=0
    while [ $i -lt $n ]; do
        expect_rc 0 "$SHARC" validate --json --threads $((i + 1)) --partition $i/$n "$d"
        for k in $(records "$tmp/out"); do
            [ $((k % n)) -eq $i ] || fail "--partition $i/$n checked shard $k"
            echo "$k" >>"$tmp/all"
        done
        i=$((i + 1))
    done
    [ "$(sort -n "$tmp/all" | tr '\n' ' ')" = "0 1 2 3 4 5 6 " ] ||
        fail "--partition ?/$n checked shards $(sort -n "$tmp/all" | tr '\n' ' ')"
done
expect_rc 0 "$SHARC" validate --json --partition 1/3 "$d"
"$PYTHON" -c 'import json,sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
assert (s["shards"], s["checked_shards"], s["cuts"]) == (7, 2, 6), s' "$tmp/out" ||
    fail "--partition 1/3: summary"
# The text summary says how many shards were checked, as checked_shards does.
expect_rc 0 "$SHARC" validate --partition 1/3 "$d"
expect_in "$tmp/out" "-- 7 shards (wds), 2 checked, 6 cuts,"
expect_rc 0 "$SHARC" validate --partition 9/10 "$d"
expect_in "$tmp/out" "-- 7 shards (wds), 0 checked, 0 cuts,"
expect_rc 0 "$SHARC" validate "$d"
grep -q "checked" "$tmp/out" && fail "a whole run says checked: $(cat "$tmp/out")"
expect_rc 2 "$SHARC" validate --partition 3/3 "$d"
expect_in "$tmp/err" "--partition: '3/3' is not I/N with 0 <= I < N"

# Resume: a log cut after its third shard record checks the four other shards, and only them.
expect_rc 0 "$SHARC" validate --json --threads 2 "$d"
"$PYTHON" -c 'import sys
n = 0
for l in open(sys.argv[1]):
    if n < 3:
        sys.stdout.write(l)
    n += l.startswith("{\"type\":\"shard\"")' "$tmp/out" >"$tmp/log"
done=$(records "$tmp/log")
expect_rc 0 "$SHARC" validate --json --threads 2 --resume-from "$tmp/log" "$d"
expect_in "$tmp/err" "3 shards finished in $tmp/log, 4 to check"
[ "$( (records "$tmp/log"; records "$tmp/out") | tr ' ' '\n' | sort -n | tr '\n' ' ')" = \
    "0 1 2 3 4 5 6 " ] || fail "resumed after shards $done, checked $(records "$tmp/out")"
# A log that cannot be read is the run's problem (code error), never "OK: no problems found".
expect_rc 1 "$SHARC" validate --resume-from "$tmp/nothing.jsonl" "$d"
expect_in "$tmp/out" "problem error: cannot read --resume-from $tmp/nothing.jsonl: No such file or directory"
expect_in "$tmp/out" "-- 1 problems: error 1"
grep -q "OK: no problems" "$tmp/out" && fail "an unreadable --resume-from log said OK: $(cat "$tmp/out")"
expect_rc 1 "$SHARC" validate --json --resume-from "$tmp" "$d"
"$PYTHON" -c 'import json, sys
p, s = [json.loads(l) for l in open(sys.argv[1])]
assert (p["type"], p["code"], p["message"]) == ("problem", "error", "cannot read --resume-from " + sys.argv[2] + ": Is a directory"), p
assert (s["type"], s["problems"], s["by_code"]["error"], s["checked_shards"]) == ("summary", 1, 1, 0), s' "$tmp/out" "$tmp"

# Grouped problems: a rate no cut has is one audio_format problem per cut (21); the text
# prints the first 5 and counts them all.
expect_rc 1 "$SHARC" validate --threads 2 --sampling-rate 8000 "$d"
[ "$(grep -c '^problem audio_format: ' "$tmp/out")" -eq 5 ] ||
    fail "text output: not 5 audio_format lines: $(head -8 "$tmp/out")"
expect_in "$tmp/out" "-- 21 problems: audio_format 21"
expect_in "$tmp/out" "-- audio_format: the first 5 of 21 are printed above"
expect_rc 1 "$SHARC" validate --json --sampling-rate 8000 "$d"
[ "$(grep -c '"code":"audio_format"' "$tmp/out")" -eq 21 ] || fail "--json: not 21 problems"

# Progress lines for a log: stderr is a file here.
expect_rc 0 "$SHARC" validate --threads 1 --progress-every 0.000001 "$d"
[ "$(grep -c '^sharc validate: shards [0-9]*/7, ' "$tmp/err")" -ge 7 ] ||
    fail "no progress lines: $(cat "$tmp/err")"
expect_in "$tmp/err" "sharc validate: shards 7/7, 21 cuts"
expect_rc 0 "$SHARC" validate --threads 1 "$d"
[ ! -s "$tmp/err" ] || fail "progress lines without --progress-every: $(cat "$tmp/err")"

# --input-cfg: the sources of several layouts in one run, every cut once, a record per shard.
gen "$tmp/m1" --layout shar --shards 2 --cuts-per-shard 4 --max-duration 1 --seed 31
gen "$tmp/m2" --layout nemo --shards 2 --cuts-per-shard 3 --max-duration 1 --seed 32
cat >"$tmp/cfg.yaml" <<YAML
- type: lhotse_shar
  shar_path: $tmp/m1/shar
  weight: 0.5
- type: nemo_tarred
  manifest_filepath: $tmp/m2/nemo/sharded_manifests/manifest__OP_0..1_CL_.json
  tarred_audio_filepaths: $tmp/m2/nemo/audio__OP_0..1_CL_.tar.gz
  weight: 0.3
- type: wds
  paths: $d
  weight: 0.2
YAML
set +e
"$SHARC" validate --json --input-cfg "$tmp/cfg.yaml" >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[ $rc -le 1 ] || fail "validate --input-cfg exited with $rc: $(cat "$tmp/err")"
"$PYTHON" - "$tmp/out" "$tmp/m1/shar.expected.jsonl" "$tmp/m2/nemo.expected.jsonl" \
    "$tmp/g/wds.expected.jsonl" <<'PY' || fail "validate --input-cfg: $(tail -1 "$tmp/out")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
exp = [json.loads(l) for p in sys.argv[2:] for l in open(p)]
summary, shards = rows[-1], [r for r in rows if r["type"] == "shard"]
assert summary["layout"] == "mixture" and summary["cuts"] == len(exp), summary
assert summary["shards"] == 11 and sorted(r["index"] for r in shards) == list(range(11)), shards
assert all(r["checked"] for r in shards), shards
# Ids the three generated corpora share are the only problems.
assert all(r["code"] == "duplicate_id" for r in rows if r["type"] == "problem"), rows
PY
expect_rc 2 "$SHARC" validate --input-cfg "$tmp/cfg.yaml" --partition 0/2
expect_in "$tmp/err" "--input-cfg reads the mixture as one: not with --partition or --resume-from"
echo "ok"
