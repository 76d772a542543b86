#!/bin/sh
# cli_bench: `sharc bench --cuts --json` (and --floor) on a tiny generated corpus: the JSON keys,
# a window of exactly --batches cuts, one epoch covering every cut once with the generator's
# total duration, the floor's figures, usage errors, and a floor error naming the broken tar.
. "$(dirname "$0")/lib.sh"

expect_rc 0 "$SHARC" bench --help
for f in --batches --seconds --warmup --warmup-seconds --repeat --floor --cuts --threads --prefetch --seed \
    --max-duration --max-cuts --num-buckets --bins --quadratic-duration --buffer-size --layout \
    --json "Exit status:" "Example:"; do
    expect_in "$tmp/out" "$f"
done

gen "$tmp/c" --layout shar --shards 2 --cuts-per-shard 4 --max-duration 3 --seed 11 --compress none
d=$tmp/c/shar

# A window of exactly 10 cuts after 3 warm-up cuts (epochs forever, so the corpus wraps).
expect_rc 0 "$SHARC" bench --cuts --json --warmup 3 --batches 10 --epochs 0 --quiet "$d"
"$PYTHON" - "$tmp/out" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
j = json.loads(lines[0])
for k in ("audio_seconds_per_second", "cuts_per_second", "batches_per_second", "padding_ratio",
          "batch_fill", "time_to_first_batch_s", "peak_rss_bytes", "stage_seconds", "runs",
          "cpu_seconds_per_audio_second", "window_seconds"):
    assert k in j, (k, j)
assert j["mode"] == "cuts" and j["threads"] == 1 and j["repeat"] == 1, j
assert j["cuts"] == 10 and j["cuts_per_second"] > 0 and j["audio_seconds_per_second"] > 0, j
assert j["batches_per_second"] is None and j["padding_ratio"] is None, j
assert j["shards"] == 2 and j["tar_files"] == 2, j
assert 0 < j["time_to_first_batch_s"] < 30 and j["peak_rss_bytes"] > 1 << 20, j
stages = ["read", "decompress", "sample", "decode", "collate"]
assert sorted(j["stage_seconds"]) == sorted(stages), j
assert all(v is None for v in j["stage_seconds"].values()), j  # filled in batch mode only
# CPU per cut by thread role: with --cuts all of it is the caller's thread.
roles = j["cpu_us_per_cut"]
assert sorted(roles) == sorted(["planner", "decode", "read_ahead", "noise", "other"]), roles
assert roles["other"] > 0, j
assert roles["planner"] == roles["decode"] == roles["read_ahead"] == roles["noise"] == 0, j
assert j["noise_seconds"] is None, j
assert "floor_audio_seconds_per_second" not in j and len(j["runs"]) == 1, j
PYEOF

# One epoch from the open (no warm-up): every cut once, and the generator's total duration.
expect_rc 0 "$SHARC" bench --cuts --json --warmup 0 --batches 1000 --quiet "$d"
"$PYTHON" - "$tmp/out" "$d.expected.jsonl" <<'PYEOF'
import json, sys
j = json.loads(open(sys.argv[1]).read())
exp = [json.loads(l) for l in open(sys.argv[2])]
assert j["cuts"] == len(exp) == 8, (j["cuts"], len(exp))
total = sum(e["duration"] for e in exp)
assert abs(j["audio_seconds"] - total) < 1e-6 * total, (j["audio_seconds"], total)
assert abs(j["audio_seconds_per_second"] * j["window_seconds"] - total) < 1e-3 * total, j
assert j["runs"][0]["end_of_data"] is True, j
PYEOF

# The floor in the same run: two repetitions, medians and their ratio.
expect_rc 0 "$SHARC" bench --cuts --floor --json --repeat 2 --seconds 0.3 --epochs 0 --quiet "$d"
"$PYTHON" - "$tmp/out" <<'PYEOF'
import json, sys
j = json.loads(open(sys.argv[1]).read())
assert j["repeat"] == 2 and len(j["runs"]) == 2, j
assert j["floor_audio_seconds_per_second"] > 0 and j["floor_cuts_per_second"] > 0, j
ratio = j["audio_seconds_per_second"] / j["floor_audio_seconds_per_second"]
assert abs(j["ratio_to_floor"] - ratio) < 1e-9 * ratio, j
for r in j["runs"]:
    assert r["window_seconds"] >= 0.3 and r["floor_window_seconds"] >= 0.3, r
    assert r["floor_audio_seconds_per_second"] > 0 and r["end_of_data"] is False, r
PYEOF

# Batches: exactly --batches of them in the window, their padding and fill, stage timings.
# Stages are timed when the work is done, which may be before the window for the batches
# prefetched during the warm-up: 24 batches are more than the slots (at most 16 by default).
for t in 1 2; do
    expect_rc 0 "$SHARC" bench --json --threads $t --warmup 1 --batches 24 --epochs 0 --max-duration 8 \
        --num-buckets 2 --buffer-size 6 --quiet "$d"
    "$PYTHON" - "$tmp/out" $t <<'PYEOF'
import json, sys
j = json.loads(open(sys.argv[1]).read())
assert j["mode"] == "batches" and j["threads"] == int(sys.argv[2]), j
assert j["batches"] == 24 and j["batches_per_second"] > 0 and j["cuts"] >= 24, j
assert j["cuts_per_second"] > 0 and j["audio_seconds_per_second"] > 0, j
assert j["padding_ratio"] >= 1.0 and j["max_duration"] == 8, j
# Every batch holds at most max_duration of padded audio, so at most that much real audio;
# a lone cut longer than max_duration is the only exception, and none is longer than 3 s.
assert 0 < j["batch_fill"] <= 1.0, j
assert j["audio_seconds"] <= 24 * 8, j
st = j["stage_seconds"]
assert st["decode"] > 0 and all(v >= 0 for v in st.values()), st
# The planner and the decode threads, told by their names; plain tars and 1-2 decode
# threads: no read-ahead lane.
roles = j["cpu_us_per_cut"]
assert roles["planner"] > 0 and roles["decode"] > 0 and roles["read_ahead"] == 0, roles
assert roles["other"] >= 0, roles
PYEOF
done

# Batches with the floor, in the text report.
expect_rc 0 "$SHARC" bench --floor --threads 1 --repeat 1 --seconds 0.3 --max-duration 8 \
    --buffer-size 6 --epochs 0 "$d"
expect_in "$tmp/out" "batches, 1 thread, 2 shards"
expect_in "$tmp/out" "padding ratio"
expect_in "$tmp/out" "batch fill"
expect_in "$tmp/out" "stages (s)"
expect_in "$tmp/out" "CPU per cut (us) planner"

# A quoted wildcard pattern reaches the floor too, which finds the same shards.
expect_rc 0 "$SHARC" bench --cuts --floor --json --repeat 1 --seconds 0.2 --epochs 0 --quiet "$d/*"
"$PYTHON" - "$tmp/out" <<'PYEOF'
import json, sys
j = json.loads(open(sys.argv[1]).read())
assert j["shards"] == 2 and j["tar_files"] == 2 and j["floor_audio_seconds_per_second"] > 0, j
PYEOF

# A window of a few batches still gets a floor timed over at least a second: a rate, not 0.
expect_rc 0 "$SHARC" bench --floor --batches 2 --repeat 1 --json --quiet "$d"
"$PYTHON" - "$tmp/out" <<'PYEOF'
import json, sys
j = json.loads(open(sys.argv[1]).read())
assert j["floor_audio_seconds_per_second"] > 0 and j["ratio_to_floor"] > 0, j
PYEOF

# The text report.
expect_rc 0 "$SHARC" bench --cuts --floor --repeat 1 --seconds 0.2 --warmup 2 "$d"
expect_in "$tmp/out" "ended with the data"
expect_in "$tmp/out" "cuts (no batching), 1 thread, 2 shards"
expect_in "$tmp/out" "floor "
expect_in "$tmp/out" "ratio "

# Usage errors.
expect_rc 2 "$SHARC" bench --cuts
expect_in "$tmp/err" "no PATH given"
expect_rc 2 "$SHARC" bench --batches 0 "$d"
expect_rc 2 "$SHARC" bench --seconds -1 "$d"
expect_rc 2 "$SHARC" bench --cuts --threads 2 "$d"
expect_in "$tmp/err" "--threads applies to batches"
expect_rc 2 "$SHARC" bench --cuts --max-duration 20 "$d"
expect_in "$tmp/err" "--max-duration applies to batches; it cannot be used with --cuts"
expect_rc 2 "$SHARC" bench --cuts --prefetch 2 "$d"
expect_in "$tmp/err" "--prefetch applies to batches"
expect_rc 2 "$SHARC" bench --batches 5 --seconds 3 "$d"
expect_in "$tmp/err" "--batches and --seconds both set the window: give one"
expect_rc 2 "$SHARC" bench --bins 3,1 "$d"
expect_in "$tmp/err" "--bins needs sorted positive numbers"
expect_rc 2 "$SHARC" bench --repeat 0 "$d"
expect_rc 2 "$SHARC" bench --prefetch 1025 "$d"
expect_in "$tmp/err" "an integer from 0 to 1024 is expected"

# A dataset that ends during the warm-up is an error, not a report of nothing.
expect_rc 1 "$SHARC" bench --cuts --warmup 100 "$d"
expect_in "$tmp/err" "during the warm-up"
# With --json a failed run still ends with one object, saying why.
expect_rc 1 "$SHARC" bench --json --warmup 100 "$d"
"$PYTHON" -c 'import json,sys; j=json.loads(open(sys.argv[1]).read()); assert "during the warm-up" in j["error"] and j["rank"] == 0, j' "$tmp/out"
# --warmup-seconds: the window opens that long after opening the dataset at the earliest, so
# more batches than --warmup go untimed; the data ending first is the same error.
expect_rc 0 "$SHARC" bench --json --warmup 1 --warmup-seconds 1.5 --batches 3 --epochs 0 \
    --max-duration 8 "$d"
"$PYTHON" - "$tmp/out" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
run = d["runs"][0]
assert d["batches"] == 3 and run["warmup_seconds"] >= 1.5 and run["warmup_batches"] >= 1, d
PYEOF
# Without it, the window opens right after the --warmup batches.
expect_rc 0 "$SHARC" bench --json --warmup 2 --batches 3 --epochs 0 --max-duration 8 "$d"
"$PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; assert r["warmup_batches"] == 2 and 0 < r["warmup_seconds"] < 30, r' "$tmp/out"
expect_rc 1 "$SHARC" bench --warmup-seconds 30 --epochs 1 "$d"
expect_in "$tmp/err" "during the warm-up; use --epochs 0 or a shorter warm-up (--warmup, --warmup-seconds)"
expect_rc 2 "$SHARC" bench --warmup-seconds 1 --transport mpi --batches 3 "$d"
expect_in "$tmp/err" "with --transport or --mesh the warm-up is a number of batches (--warmup N)"
expect_rc 2 "$SHARC" bench --warmup-seconds -1 "$d"
expect_rc 1 "$SHARC" bench --json "$tmp/no-such-dataset"
"$PYTHON" -c 'import json,sys; j=json.loads(open(sys.argv[1]).read()); assert j["error"] == "cannot open the dataset: " + sys.argv[2] + ": No such file or directory", j' "$tmp/out" "$tmp/no-such-dataset"

# A truncated tar: the loader skips what it cannot read, the floor fails naming the file.
mkdir "$tmp/broken"
cp "$d"/* "$tmp/broken/"
tar=$tmp/broken/recording.000001.tar
head -c $(($(wc -c <"$tar") / 2)) "$tar" >"$tmp/half" && mv "$tmp/half" "$tar"
expect_rc 1 "$SHARC" bench --cuts --floor --on-error skip --quiet --repeat 1 --seconds 0.2 \
    --epochs 0 "$tmp/broken"
expect_in "$tmp/err" "floor: $tar"
echo "ok"
