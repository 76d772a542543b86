#!/bin/sh
# cli_read_batches: `sharc read` in its default batch mode over generated corpora of every
# layout: every cut exactly once with drop-last off, the size rules of --max-duration,
# --max-cuts, --quadratic-duration and --bins/--bucket-batch-size, filters and drop-last
# counted; the same batches (ids, audio CRC-32) for 1, 2 and 4 threads; save at step k then
# --resume gives the uninterrupted run's steps k+1...; --dump-dir writes .npy files that
# numpy (or a hand parser) reads back to the same ids, samples and CRC-32; bad states and
# unwritable outputs exit 1 with a clear message.
. "$(dirname "$0")/lib.sh"

# FLAC in gzip'd tars, mono 16 kHz; 4 shards so that a small buffer streams through them.
gen "$tmp/c" --layout all --shards 4 --cuts-per-shard 8 --min-duration 0.5 --max-duration 5 \
    --seed 11
# Batching that makes a dozen batches and a buffer smaller than a shard, so that the reader
# is inside the first shard at the first batch and in the last one near the end.
B="--max-duration 12 --num-buckets 3 --num-cuts-for-bins 8 --buffer-size 6 --seed 4"

for layout in shar nemo wds; do
    d=$tmp/c/$layout
    exp=$tmp/c/$layout.expected.jsonl
    expect_rc 0 "$SHARC" read --json $B "$d"
    cp "$tmp/out" "$tmp/$layout.jsonl"
    check batches "$tmp/$layout.jsonl" "$exp" max_duration=12

    # Decoding with 1, 2 or 4 threads, any prefetch and any read-ahead (4 threads read 4
    # shards ahead; a 1-byte budget holds one entry per lane) gives the same batches.
    expect_rc 0 "$SHARC" read --json $B --threads 1 "$d"
    cp "$tmp/out" "$tmp/$layout-t1.jsonl"
    expect_rc 0 "$SHARC" read --json $B --threads 2 --prefetch 1 "$d"
    cp "$tmp/out" "$tmp/$layout-t2.jsonl"
    expect_rc 0 "$SHARC" read --json $B --threads 4 --prefetch 4 "$d"
    cp "$tmp/out" "$tmp/$layout-t4.jsonl"
    expect_rc 0 "$SHARC" read --json $B --threads 3 --read-ahead-bytes 1 "$d"
    cp "$tmp/out" "$tmp/$layout-ra1.jsonl"
    expect_rc 0 "$SHARC" read --json $B --threads 2 --read-ahead-bytes 0 "$d"
    cp "$tmp/out" "$tmp/$layout-ra0.jsonl"
    check same-batches "$tmp/$layout.jsonl" "$tmp/$layout-t1.jsonl" "$tmp/$layout-t2.jsonl" \
        "$tmp/$layout-t4.jsonl" "$tmp/$layout-ra1.jsonl" "$tmp/$layout-ra0.jsonl"
done

d=$tmp/c/shar
exp=$tmp/c/shar.expected.jsonl
full=$tmp/shar.jsonl
n=$("$PYTHON" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["batches"])' "$full")
[ "$n" -ge 8 ] || fail "only $n batches: the corpus is too small for the resume checks"

# Save at the first step, a middle one and the one before last (in the last shard), in one run
# whose batches are the uninterrupted ones; the options may come before or after PATH.
mid=$((n / 2))
last=$((n - 2))
expect_rc 0 "$SHARC" read --json $B --save-state-at 0 "$tmp/s0.bin" "$d" \
    --save-state-at "$mid" "$tmp/smid.bin" --save-state-at "$last" "$tmp/slast.bin"
cp "$tmp/out" "$tmp/saving.jsonl"
check same-batches "$full" "$tmp/saving.jsonl"
check saved "$tmp/saving.jsonl" "0=$tmp/s0.bin" "$mid=$tmp/smid.bin" "$last=$tmp/slast.bin"
# The last save really is in the last shard: by then all 4 shards have been opened.
expect_rc 0 "$SHARC" read --json $B --limit $((last + 1)) "$d"
"$PYTHON" -c 'import json,sys; s=json.loads(open(sys.argv[1]).readlines()[-1]); assert s["reader"]["shards"] == 4, s' "$tmp/out"
for k in 0 "$mid" "$last"; do
    f=$tmp/s0.bin
    [ "$k" = "$mid" ] && f=$tmp/smid.bin
    [ "$k" = "$last" ] && f=$tmp/slast.bin
    expect_rc 0 "$SHARC" read --json $B --threads 1 --resume "$f" "$d"
    cp "$tmp/out" "$tmp/resumed-$k.jsonl"
    check resume "$full" "$tmp/resumed-$k.jsonl" "$k"
done
# A resumed run can save again: resuming from that equals the uninterrupted run too.
expect_rc 0 "$SHARC" read --json $B --resume "$tmp/s0.bin" --limit 2 "$d"
[ "$(grep -c '"type":"batch"' "$tmp/out")" -eq 2 ] || fail "--limit 2 did not print 2 batches"
expect_rc 1 "$SHARC" read --json $B --resume "$tmp/s0.bin" --save-state-at "$mid" "$tmp/s2.bin" \
    --limit 1 "$d"
expect_in "$tmp/err" "no state saved to $tmp/s2.bin: the run ended before step $mid"
# A step the resumed run starts after cannot be saved, and says why; nor can two saves share
# a step or a file (the later would overwrite the earlier).
expect_rc 1 "$SHARC" read --json $B --resume "$tmp/smid.bin" --save-state-at 0 "$tmp/s00.bin" "$d"
expect_in "$tmp/err" "no state saved to $tmp/s00.bin: step 0 came before this run's first step, $((mid + 1))"
expect_rc 2 "$SHARC" read $B --save-state-at 1 "$tmp/x.bin" --save-state-at 2 "$tmp/x.bin" "$d"
expect_in "$tmp/err" "--save-state-at 2 $tmp/x.bin: step 1 to $tmp/x.bin is given already"
expect_rc 2 "$SHARC" read $B --save-state-at 1 "$tmp/x.bin" --save-state-at 2 "$tmp/./x.bin" "$d"
expect_in "$tmp/err" "--save-state-at 2 $tmp/./x.bin: step 1 to $tmp/x.bin is given already"
mkdir -p "$tmp/sub"
(cd "$tmp/sub" && expect_rc 2 "$SHARC" read $B --save-state-at 1 ../x.bin --save-state-at 2 \
    "$tmp/x.bin" "$d")
expect_in "$tmp/err" "--save-state-at 2 $tmp/x.bin: step 1 to ../x.bin is given already"
expect_rc 2 "$SHARC" read $B --save-state-at 1 "$tmp/x.bin" --save-state-at 1 "$tmp/y.bin" "$d"
expect_in "$tmp/err" "--save-state-at 1 $tmp/y.bin: step 1 to $tmp/x.bin is given already"
expect_rc 0 "$SHARC" read --json $B --resume "$tmp/s0.bin" --save-state-at "$mid" "$tmp/s2.bin" "$d"
expect_rc 0 "$SHARC" read --json $B --resume "$tmp/s2.bin" "$d"
cp "$tmp/out" "$tmp/resumed-again.jsonl"
check resume "$full" "$tmp/resumed-again.jsonl" "$mid"

# Under --on-error skip, a bad cut line in the middle of a shard costs that cut, and a run
# resumed from a state saved before or after it yields the uninterrupted run's batches.
cp -r "$d" "$tmp/badline"
cuts1=$(cd "$tmp/badline" && ls cuts.000001.jsonl*)
(cd "$tmp/badline" &&
    "$PYTHON" "$(dirname "$CLI_CHECK")/../corrupt.py" lines-key "$cuts1" 2 duration abc)
expect_rc 0 "$SHARC" read --json $B --on-error skip --save-state-at 1 "$tmp/b1.bin" \
    --save-state-at "$mid" "$tmp/bmid.bin" "$tmp/badline"
cp "$tmp/out" "$tmp/badline.jsonl"
"$PYTHON" -c 'import json,sys
s = json.loads(open(sys.argv[1]).readlines()[-1])["reader"]
assert s["skipped_cuts"] == 1 and s["skipped_shards"] == 0 and s["problems"]["json"] == 1, s' \
    "$tmp/badline.jsonl"
for k in 1 "$mid"; do
    f=$tmp/b1.bin
    [ "$k" = "$mid" ] && f=$tmp/bmid.bin
    expect_rc 0 "$SHARC" read --json $B --on-error skip --threads 2 --resume "$f" "$tmp/badline"
    cp "$tmp/out" "$tmp/badline-resumed-$k.jsonl"
    check resume "$tmp/badline.jsonl" "$tmp/badline-resumed-$k.jsonl" "$k"
done

# Bad states: exit 1, a message naming the reason and the file.
cp "$tmp/smid.bin" "$tmp/flipped.bin"
check flip-byte "$tmp/flipped.bin" 40
expect_rc 1 "$SHARC" read --json $B --resume "$tmp/flipped.bin" "$d"
expect_in "$tmp/err" "cannot resume: the state blob is corrupt (checksum mismatch)"
expect_in "$tmp/err" "the state in $tmp/flipped.bin was not accepted"
"$PYTHON" -c 'import json,sys; s=json.loads(open(sys.argv[1]).readlines()[-1]); assert s["batches"] == 0 and "checksum" in s["error"], s' "$tmp/out"
head -c 50 "$tmp/smid.bin" >"$tmp/short.bin"
expect_rc 1 "$SHARC" read $B --resume "$tmp/short.bin" "$d"
expect_in "$tmp/err" "cannot resume: the state blob is truncated"
expect_rc 1 "$SHARC" read --json $B --seed 5 --resume "$tmp/smid.bin" "$d"
expect_in "$tmp/err" "saved with other shards or reader settings"
: >"$tmp/empty.bin"
expect_rc 1 "$SHARC" read $B --resume "$tmp/empty.bin" "$d"
expect_in "$tmp/err" "cannot read the state file $tmp/empty.bin: the file is empty"
expect_rc 1 "$SHARC" read $B --resume "$tmp/missing.bin" "$d"
expect_in "$tmp/err" "cannot read the state file $tmp/missing.bin"
# A run that cannot start still ends --json output with its summary and the reason.
expect_rc 1 "$SHARC" read --json $B --resume "$tmp/missing.bin" "$d"
"$PYTHON" -c 'import json,sys; s=json.loads(open(sys.argv[1]).read()); assert s["type"] == "summary" and s["batches"] == 0 and s["error"].startswith("cannot read the state file "), s' "$tmp/out"
expect_rc 1 "$SHARC" read --json "$tmp/no-such-dataset"
"$PYTHON" -c 'import json,sys; s=json.loads(open(sys.argv[1]).read()); assert s["type"] == "summary" and s["layout"] is None and s["error"] == "cannot open the dataset: " + sys.argv[2] + ": No such file or directory", s' "$tmp/out" "$tmp/no-such-dataset"
expect_rc 1 "$SHARC" read --json --cuts "$tmp/no-such-dataset"
"$PYTHON" -c 'import json,sys; s=json.loads(open(sys.argv[1]).read()); assert s["type"] == "summary" and s["cuts"] == 0 and "No such file" in s["error"], s' "$tmp/out"
expect_rc 1 "$SHARC" read $B --save-state-at 1 "$tmp/no/such/dir/s.bin" "$d"
expect_in "$tmp/err" "cannot write the state of step 1 to $tmp/no/such/dir/s.bin"
# ... found before the run, not at that step: no batch is read.
expect_rc 1 "$SHARC" read --json $B --save-state-at 1 "$tmp/no/such/dir/s.bin" "$d"
"$PYTHON" -c 'import json,sys; s=json.loads(open(sys.argv[1]).read()); assert s["type"] == "summary" and s["batches"] == 0 and s["error"] == "cannot write the state of step 1 to " + sys.argv[2] + ": No such file or directory", s' "$tmp/out" "$tmp/no/such/dir/s.bin"

# Size rules and filters: --max-cuts, --quadratic-duration, --bins with --bucket-batch-size,
# --min-duration/--max-cut-duration (counted as filtered), --drop-last (counted as dropped),
# over two epochs and without shuffling.
expect_rc 0 "$SHARC" read --json --max-cuts 3 --max-duration 30 --epochs 2 --no-shuffle "$d"
check batches "$tmp/out" "$exp" epochs=2 max_cuts=3 max_duration=30
expect_rc 0 "$SHARC" read --json --max-duration 14 --quadratic-duration 6 "$d"
check batches "$tmp/out" "$exp" max_duration=14 quadratic=6
expect_rc 0 "$SHARC" read --json --bins 1.5,3 --bucket-batch-size 4,2 --max-cut-duration 3 \
    --min-duration 0.75 --buffer-size 10 "$d"
check batches "$tmp/out" "$exp" bins=1.5,3 bbs=4,2 max_cut_duration=3 min_duration=0.75
"$PYTHON" -c 'import json,sys; s=json.loads(open(sys.argv[1]).readlines()[-1]); assert s["bins"] == [1.5, 3], s["bins"]' "$tmp/out"
# --bins linspace: NeMo's bins for a config with max_duration and no bucket_duration_bins,
# np.linspace(0.3, 40, 31)[1:-1] (these values are numpy 2's, bit for bit).
expect_rc 0 "$SHARC" read --json --bins linspace --num-buckets 30 --min-duration 0.3 \
    --max-cut-duration 40 --max-duration 30 "$d"
check batches "$tmp/out" "$exp" max_duration=30 max_cut_duration=40 min_duration=0.3
"$PYTHON" -c 'import json,sys
want = [1.6233333333333335, 2.9466666666666668, 4.2700000000000005, 5.593333333333334, 6.916666666666667, 8.240000000000002, 9.563333333333334, 10.886666666666668, 12.210000000000003, 13.533333333333335, 14.85666666666667, 16.180000000000003, 17.503333333333337, 18.826666666666668, 20.150000000000002, 21.473333333333336, 22.79666666666667, 24.120000000000005, 25.443333333333335, 26.76666666666667, 28.090000000000003, 29.413333333333338, 30.73666666666667, 32.06, 33.38333333333333, 34.70666666666667, 36.03, 37.35333333333333, 38.67666666666667]
got = json.loads(open(sys.argv[1]).readlines()[-1])["bins"]
assert got == want, got' "$tmp/out" || fail "--bins linspace is not numpy's linspace"
expect_rc 2 "$SHARC" read --bins linspace "$d"
expect_in "$tmp/err" "--bins linspace needs --max-cut-duration"
# (A buffer of 10 cuts over the default 10 buckets would have no bucket ready: Lhotse, and
# sharc, then stop at once and drop all 10.)
expect_rc 0 "$SHARC" read --json --max-duration 12 --drop-last --buffer-size 10 --num-buckets 2 "$d"
check batches "$tmp/out" "$exp" max_duration=12 drop_last=1
# The summary's bins: those of the first --num-cuts-for-bins cuts (sorted shard order here),
# as `sharc buckets --num-cuts` estimates them, though the buffer (5 cuts, 100 kB) holds
# fewer: the durations of the rest are read ahead, and those cuts are not lost.
expect_rc 0 "$SHARC" buckets --json --num-buckets 4 --num-cuts 20 "$d"
cp "$tmp/out" "$tmp/buckets.json"
expect_rc 0 "$SHARC" read --json --no-shuffle-shards --num-buckets 4 --num-cuts-for-bins 20 \
    --buffer-size 5 --max-buffer-bytes 100000 --max-duration 12 "$d"
check batches "$tmp/out" "$exp" max_duration=12
"$PYTHON" -c 'import json,sys
want = json.load(open(sys.argv[1]))["bins"]
got = json.loads(open(sys.argv[2]).readlines()[-1])["bins"]
assert len(want) == 3 and got == want, (got, want)' "$tmp/buckets.json" "$tmp/out"
# Without a size, batches are 600 s: this whole corpus fits in a few.
expect_rc 0 "$SHARC" read --json --num-buckets 1 "$d"
check batches "$tmp/out" "$exp" max_duration=600
[ "$(grep -c '"type":"batch"' "$tmp/out")" -le 2 ] || fail "the default max_duration is not 600 s"

# --dump-dir: every tensor of every batch as .npy, read back by hand and, where available,
# by numpy (whose numpy.save must write the same bytes). NeMo: no speakers (empty column).
for layout in shar nemo; do
    expect_rc 0 "$SHARC" read --json $B --limit 3 --dump-dir "$tmp/dump-$layout" "$tmp/c/$layout"
    cp "$tmp/out" "$tmp/dump-$layout.jsonl"
    check npy-dump "$tmp/dump-$layout" "$tmp/dump-$layout.jsonl" "$tmp/c/$layout.expected.jsonl"
    if ! "$PYTHON" -c 'import numpy' 2>/dev/null && /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        /usr/bin/python3 "$CLI_CHECK" npy-dump "$tmp/dump-$layout" "$tmp/dump-$layout.jsonl" \
            "$tmp/c/$layout.expected.jsonl"
    fi
done
: >"$tmp/a-file"
expect_rc 1 "$SHARC" read $B --dump-dir "$tmp/a-file" "$d"
expect_in "$tmp/err" "cannot create the dump directory $tmp/a-file"

# Text output: a line per batch with step, cuts and the first id, then a 3-line summary.
expect_rc 0 "$SHARC" read $B "$d"
[ "$(grep -c '^step ' "$tmp/out")" -eq "$n" ] || fail "text output: not $n batch lines"
first=$("$PYTHON" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["ids"][0])' "$full")
expect_in "$tmp/out" "$(printf %.30s "$first")" # long ids are shortened with "..."
expect_in "$tmp/out" "-- $n batches (steps 0..$((n - 1)))"
expect_rc 0 "$SHARC" read --quiet $B "$d"
[ "$(wc -l <"$tmp/out")" -eq 3 ] || fail "--quiet printed more than the summary"
# torchrun's RANK and WORLD_SIZE make a plain run read its own slot only, and it says so.
expect_rc 0 env RANK=1 WORLD_SIZE=2 "$SHARC" read --quiet $B "$d"
expect_in "$tmp/err" "sharc read: rank 1 of 2 (RANK and WORLD_SIZE from the environment): reading data-parallel slot 1 of 2"
grep -q -- "-- $n batches" "$tmp/out" && fail "RANK=1 WORLD_SIZE=2 read every batch"
# --dp-rank/--dp-size do not silently lose to the environment's slot, even at their defaults.
expect_rc 2 env RANK=1 WORLD_SIZE=2 "$SHARC" read --quiet --dp-rank 0 --dp-size 1 $B "$d"
expect_in "$tmp/err" "--dp-rank/--dp-size cannot be used when the RANK/WORLD_SIZE environment gives this process its data-parallel slot (1 of 2)"
expect_rc 0 env RANK=0 WORLD_SIZE=1 "$SHARC" read --quiet --dp-rank 1 --dp-size 2 $B "$d"
expect_rc 2 env RANK=3 WORLD_SIZE=2 "$SHARC" read --quiet $B "$d"
expect_in "$tmp/err" "RANK=3 and WORLD_SIZE=2 are not a valid rank and size"
# A mesh axis that is not dp, cp or tp splits the data, and rank 0 says so (a misspelt cp).
expect_rc 0 "$SHARC" read --quiet --mesh pc=1 $B "$d"
expect_in "$tmp/err" "note: --mesh axis pc is a data-parallel axis (its ranks read different data); only cp and tp are broadcast axes"
# A read error is exit 1 with the reader's message; a multi-channel corpus needs --channel.
gen "$tmp/st" --layout shar --shards 1 --cuts-per-shard 3 --max-duration 2 --channels 2 --codec wav
expect_rc 1 "$SHARC" read --json "$tmp/st/shar"
expect_in "$tmp/err" "batches hold one channel and this cut has 2; choose one with the channel setting (--channel)"
expect_rc 0 "$SHARC" read --json --channel 1 "$tmp/st/shar"
check batches "$tmp/out" "$tmp/st/shar.expected.jsonl" max_duration=600
# A channel the cuts do not have is an audio_format problem, found before decoding.
expect_rc 1 "$SHARC" read --json --channel 2 "$tmp/st/shar"
expect_in "$tmp/err" "channel 2 is required (the channel setting, --channel), and the cut has only 2 (channels 0..1)"
expect_in "$tmp/out" '"audio_format":1'
# Metadata that give one channel to stereo audio: said so, in cut mode too (where the
# buffer sized by the metadata's channels is what fails first).
gen "$tmp/st2" --layout shar --shards 1 --cuts-per-shard 3 --max-duration 2 --channels 2 \
    --codec wav --compress none
check cut-line "$tmp/st2/shar" cuts.000000.jsonl "*" channel=0 recording.channel_ids=[0]
check json-member "$tmp/st2/shar/recording.000000.tar" "*" channel_ids=[0]
expect_rc 1 "$SHARC" read --cuts --json "$tmp/st2/shar"
expect_in "$tmp/err" "metadata says 1 channels, the audio has 2"
expect_in "$tmp/out" '"audio_format":1'
# Shar pairs recording members by position, as Lhotse reads them: the second member of a pair
# is the metadata whatever its name (u1.meta, u1.JSON). Batches read it as the cuts mode and
# validate do, with the audio of an uncompressed tar left in the file: the same batches as
# with the names Lhotse writes.
gen "$tmp/names" --layout shar --shards 1 --cuts-per-shard 4 --max-duration 2 --compress none \
    --seed 12
cp -r "$tmp/names/shar" "$tmp/names/renamed"
"$PYTHON" - "$tmp/names/renamed/recording.000000.tar" <<'PYEOF'
import io, sys, tarfile
src = tarfile.open(sys.argv[1])
items = [(m, src.extractfile(m).read()) for m in src.getmembers()]
src.close()
names = iter([".meta", ".JSON", ".txt", ".json"])
with tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT) as t:
    for m, body in items:
        if m.name.endswith(".json"):
            m.name = m.name[:-5] + next(names)
        t.addfile(m, io.BytesIO(body))
PYEOF
expect_rc 0 "$SHARC" read --json --max-cuts 2 --seed 3 "$tmp/names/shar"
cp "$tmp/out" "$tmp/names.jsonl"
expect_rc 0 "$SHARC" read --json --max-cuts 2 --seed 3 "$tmp/names/renamed"
cp "$tmp/out" "$tmp/renamed.jsonl"
check same-batches "$tmp/names.jsonl" "$tmp/renamed.jsonl"
check batches "$tmp/renamed.jsonl" "$tmp/names/shar.expected.jsonl"
expect_rc 0 "$SHARC" read --cuts --json "$tmp/names/renamed"
check read "$tmp/out" "$tmp/names/shar.expected.jsonl"
expect_rc 0 "$SHARC" validate "$tmp/names/renamed"
expect_in "$tmp/out" "OK: no problems found"

# A small set repeated for a long run passes epoch 65535 (where a resume state's cut keys
# ended the run, with or without a save): a state saved past it, holding cuts of those epochs,
# resumes to the uninterrupted run.
gen "$tmp/long" --layout shar --shards 1 --cuts-per-shard 1 --min-duration 0.05 \
    --max-duration 0.1 --compress none --seed 13
expect_rc 0 "$SHARC" read --json --max-cuts 1000 --buffer-size 2000 --epochs 68000 \
    --save-state-at 66 "$tmp/long.bin" "$tmp/long/shar"
cp "$tmp/out" "$tmp/long.jsonl"
"$PYTHON" - "$tmp/long.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
s = rows[-1]
assert s["type"] == "summary" and s["error"] is None and s["cuts"] == 68000, s
assert max(r["epoch"] for r in rows[:-1]) > 65536, "no batch past epoch 65536"
PYEOF
expect_rc 0 "$SHARC" read --json --max-cuts 1000 --buffer-size 2000 --epochs 68000 \
    --resume "$tmp/long.bin" "$tmp/long/shar"
check resume "$tmp/long.jsonl" "$tmp/out" 66

echo "ok"
