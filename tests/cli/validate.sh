#!/bin/sh
# cli_validate: `sharc validate` on clean generated corpora exits 0 and reports every cut with the
# right numbers, the same with 1 or 3 threads; text output and the summary.
. "$(dirname "$0")/lib.sh"

gen "$tmp/c" --layout all --shards 3 --cuts-per-shard 4 --max-duration 3 --seed 11
gen "$tmp/w" --layout all --shards 2 --cuts-per-shard 3 --max-duration 2 --seed 12 \
    --codec wav --compress none --channels 2 --sampling-rate 8000

for corpus in c:3 w:2; do
    name=${corpus%:*}
    shards=${corpus#*:}
    for layout in shar nemo wds; do
        d=$tmp/$name/$layout
        exp=$tmp/$name/$layout.expected.jsonl
        expect_rc 0 "$SHARC" validate --json --per-cut "$d"
        cp "$tmp/out" "$tmp/$name-$layout.jsonl"
        check validate-clean "$tmp/$name-$layout.jsonl" "$exp" "$shards"
        expect_rc 0 "$SHARC" validate --json --per-cut --threads 1 "$d"
        cp "$tmp/out" "$tmp/t1.jsonl"
        expect_rc 0 "$SHARC" validate --json --per-cut --threads 3 --layout "$layout" "$d"
        cp "$tmp/out" "$tmp/t3.jsonl"
        check same-cuts "$tmp/t1.jsonl" "$tmp/t3.jsonl"
        check same-cuts "$tmp/t1.jsonl" "$tmp/$name-$layout.jsonl"
    done
done

# Without --per-cut only a record per shard and the summary are printed for a clean corpus.
expect_rc 0 "$SHARC" validate --json "$tmp/c/shar"
[ "$(grep -vc '^{"type":"shard",' "$tmp/out")" -eq 1 ] ||
    fail "validate --json printed more than shard records and a summary"
"$PYTHON" -c 'import json,sys
rows = [json.loads(l) for l in open(sys.argv[1])]
shards = sorted(r["index"] for r in rows if r["type"] == "shard")
assert shards == list(range(rows[-1]["shards"])), shards
assert all(r["checked"] and r["problems"] == 0 and r["bytes"] > 0 for r in rows[:-1]), rows' \
    "$tmp/out" || fail "validate --json: shard records"
expect_in "$tmp/out" '"problems":0'
expect_in "$tmp/out" '"empty_shards":[]'
# A shard that gives no cut and no problem (a tar of zero blocks, an empty cuts file) is legal
# but most likely a writer that stopped early: named in a warning and in empty_shards.
mkdir "$tmp/empty"
cp "$tmp/c/wds/"* "$tmp/empty/"
head -c 10240 /dev/zero >"$tmp/empty/shard-000003.tar.gz"
mkdir "$tmp/empty-shar"
cp "$tmp/c/shar/"* "$tmp/empty-shar/"
: | gzip >"$tmp/empty-shar/cuts.000003.jsonl.gz"
: | gzip >"$tmp/empty-shar/lang_id.000003.jsonl.gz"
head -c 10240 /dev/zero | gzip >"$tmp/empty-shar/recording.000003.tar.gz"
for d in "$tmp/empty/shard-000003.tar.gz" "$tmp/empty-shar/recording.000003.tar.gz"; do
    expect_rc 0 "$SHARC" validate "$(dirname "$d")"
    expect_in "$tmp/out" "-- warning: 1 shard gave no cut (and no problem): $d"
    expect_in "$tmp/out" "-- OK: no problems found"
    expect_rc 0 "$SHARC" validate --json --threads 2 "$(dirname "$d")"
    expect_in "$tmp/out" "\"cuts\":12,"
    expect_in "$tmp/out" "\"empty_shards\":[\"$d\"]"
done
# A shard with no cut whose problem names its cuts file or manifest (not its tar) had a
# problem: it is not listed as empty.
mkdir "$tmp/bad-shar" "$tmp/bad-nemo"
cp "$tmp/c/shar/"* "$tmp/bad-shar/"
echo garbage | gzip >"$tmp/bad-shar/cuts.000001.jsonl.gz"
head -c 10240 /dev/zero | gzip >"$tmp/bad-shar/recording.000001.tar.gz"
cp -r "$tmp/c/nemo/"* "$tmp/bad-nemo/"
echo garbage >"$tmp/bad-nemo/sharded_manifests/manifest_1.json"
head -c 10240 /dev/zero | gzip >"$tmp/bad-nemo/audio_1.tar.gz"
for d in "$tmp/bad-shar" "$tmp/bad-nemo"; do
    expect_rc 1 "$SHARC" validate --json "$d"
    expect_in "$tmp/out" '"code":"json"'
    expect_in "$tmp/out" '"empty_shards":[]'
done
expect_rc 0 "$SHARC" validate "$tmp/c/wds"
expect_in "$tmp/out" "-- OK: no problems found"
expect_in "$tmp/out" "12 cuts"
# Files beside the shards that are not read are counted in the summary, and each is named
# once with --verbose, whatever the number of threads (each opens the dataset).
mkdir "$tmp/mixed"
cp -r "$tmp/c/nemo/"* "$tmp/mixed/"
cp "$tmp/c/wds/"* "$tmp/mixed/"
expect_rc 0 "$SHARC" validate --verbose --threads 3 "$tmp/mixed"
expect_in "$tmp/out" "-- note: 3 files or directories beside the shards were not read"
expect_in "$tmp/out" "subdirectories), named on stderr"
grep -q -- "--verbose names them" "$tmp/out" && fail "--verbose told to use --verbose: $(cat "$tmp/out")"
[ "$(grep -c 'ignoring .*shard-000000.tar.gz: not a NeMo shard or manifest' "$tmp/err")" -eq 1 ] ||
    fail "the warning for an ignored file is not printed once: $(cat "$tmp/err")"
expect_rc 0 "$SHARC" validate "$tmp/mixed"
expect_in "$tmp/out" "subdirectories); --verbose names them"
expect_rc 0 "$SHARC" validate --json "$tmp/mixed"
expect_in "$tmp/out" '"ignored_paths":3'
expect_rc 0 "$SHARC" validate --per-cut "$tmp/w/nemo"
[ "$(grep -c '^cut .* 8000Hz 2ch ' "$tmp/out")" -eq "$(wc -l <"$tmp/w/nemo.expected.jsonl")" ] ||
    fail "text --per-cut: wrong cut lines: $(head -3 "$tmp/out")"

# A required rate that the corpus does not have: one audio_format problem per cut.
expect_rc 1 "$SHARC" validate --json --sampling-rate 16000 "$tmp/w/wds"
check problem "$tmp/out" "code=audio_format,shard=shard-00000,count=6"
# Cuts by sampling rate in the summary; two rates in one dataset are worth a warning (a batch
# holds one rate), though not a problem.
expect_in "$tmp/c/shar.expected.jsonl" '"sampling_rate": 16000'
expect_rc 0 "$SHARC" validate --json "$tmp/c/shar"
expect_in "$tmp/out" '"sampling_rates":{"16000":12},"other_rate_cuts":0,"multichannel_cuts":0'
expect_rc 0 "$SHARC" validate "$tmp/c/shar"
if grep -q "several sampling rates" "$tmp/out"; then fail "a warning for one rate"; fi
if grep -q "more than one channel" "$tmp/out"; then fail "a channel warning for mono cuts"; fi
expect_rc 0 "$SHARC" validate --json "$tmp/c/shar" "$tmp/w/shar"
expect_in "$tmp/out" '"sampling_rates":{"16000":12,"8000":6},"other_rate_cuts":0'
expect_rc 0 "$SHARC" validate "$tmp/w/shar" "$tmp/c/shar"
expect_in "$tmp/out" "-- warning: several sampling rates: 16000 Hz (12 cuts), 8000 Hz (6 cuts)"
# --on-error is a flag of sharc read, not of validate: the hint says whose.
expect_in "$tmp/out" "(or drops it, with sharc read --on-error skip);"
expect_in "$tmp/out" "   --sampling-rate HZ lists every cut not at HZ"
expect_in "$tmp/out" "-- OK: no problems found"
expect_in "$tmp/out" "-- warning: 6 cuts have more than one channel (up to 2)"
# Stereo cuts are not a problem either, but batches need --channel: said so.
gen "$tmp/st" --layout shar --shards 1 --cuts-per-shard 3 --max-duration 2 --channels 2 --codec wav
expect_rc 0 "$SHARC" validate "$tmp/st/shar"
expect_in "$tmp/out" "-- warning: 3 cuts have more than one channel (up to 2): the rows of a"
expect_in "$tmp/out" "batch hold one channel, so reading batches needs --channel C (0..1)"
expect_rc 0 "$SHARC" validate --json "$tmp/st/shar"
expect_in "$tmp/out" '"other_rate_cuts":0,"multichannel_cuts":3,'
# A path of another layout is not left out: the dataset does not open, naming it.
expect_rc 1 "$SHARC" validate "$tmp/c/shar" "$tmp/c/nemo"
expect_in "$tmp/out" "$tmp/c/nemo holds nemo shards, and the dataset is read as shar"
expect_rc 1 "$SHARC" validate --json "$tmp/c/wds" "$tmp/c/wds"
expect_in "$tmp/out" "is found twice"
echo "ok"
