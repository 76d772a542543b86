#!/bin/sh
# cli_validate_audio: audio that is cut short, damaged or holds NaN/Inf samples is an error of
# its cut, naming shard, member and cut id: `sharc read` (batches and --cuts) exits 1 with it,
# `sharc validate` reports it as a problem and exits 1. Never a shorter or padded cut.
. "$(dirname "$0")/lib.sh"

corrupt() {
    "$PYTHON" "$(dirname "$CLI_CHECK")/../corrupt.py" "$@"
}
# cut LAYOUT FIELD: FIELD (id, member, num_samples) of the second cut of the generated LAYOUT
cut() {
    "$PYTHON" -c 'import json,sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(rows[1][sys.argv[2]])' "$tmp/g/$1.expected.jsonl" "$2"
}
fresh() { # fresh CODEC LAYOUT: a clean corpus of CODEC, LAYOUT copied to $tmp/x
    rm -rf "$tmp/g" "$tmp/x"
    gen "$tmp/g" --layout "$2" --codec "$1" --shards 1 --cuts-per-shard 3 --max-duration 2 \
        --seed 7 --compress none
    cp -r "$tmp/g/$2" "$tmp/x"
    id=$(cut "$2" id)
    member=$(cut "$2" member)
    n=$(cut "$2" num_samples)
}
validate() { # validate $tmp/x, expecting exit 1; the JSON lines in $tmp/v.jsonl
    expect_rc 1 "$SHARC" validate --json --per-cut "$tmp/x"
    cp "$tmp/out" "$tmp/v.jsonl"
}
# problem SPEC: one problem matches SPEC (clicheck's, whose values hold no commas) and its
# message is "$tmp/x/$msg"
problem() {
    check problem "$tmp/v.jsonl" "$1,count=1"
    expect_in "$tmp/v.jsonl" "\"message\":\"$tmp/x/$msg\""
}
# read_fails TEXT ARGS...: `sharc read ARGS... $tmp/x` exits 1 with TEXT in its error
read_fails() {
    text=$1
    shift
    expect_rc 1 "$SHARC" read "$@" "$tmp/x"
    expect_in "$tmp/err" "$text"
}

# 1. A WebDataset WAV member 1000 bytes (500 samples) shorter than its data chunk says, with
# its .json and without (the length then comes from the header).
fresh wav wds
corrupt audio-edit "$tmp/x/shard-000000.tar" "$member" wav-short:1000
msg="shard-000000.tar member $member (cut $id): wav audio is cut short: its header says $n samples ($((2 * n)) bytes), the member holds $((n - 500)) ($((2 * n - 1000)) bytes)"
validate
problem "code=decode,shard=shard-000000.tar,member=$member,cut_id=$id"
check min-cuts "$tmp/v.jsonl" 2
read_fails "$msg" --cuts
read_fails "$msg" --max-duration 10
corrupt tar-drop "$tmp/x/shard-000000.tar" "${member%.*}.json"
validate
problem "code=decode,shard=shard-000000.tar,member=$member,cut_id=$id"
read_fails "$msg" --cuts --no-decode
read_fails "$msg" --max-duration 10

# 2. An Opus member whose last Ogg page fails its CRC (one flipped byte).
fresh opus shar
corrupt audio-edit "$tmp/x/recording.000000.tar" "$member" ogg-last-page
msg="recording.000000.tar member $member (cut $id): ogg audio: no length in its last page: the end of the stream is missing or damaged"
validate
problem "code=decode,shard=recording.000000.tar,member=$member,cut_id=$id"
read_fails "$msg" --cuts
read_fails "$msg" --max-duration 10

# 3. Shar WAV members whose header proves them cut short: fewer samples than the data chunk
# and the metadata say, and a data chunk size of 0xFFFFFFFF. One of 0 samples while the
# metadata give some is a length problem.
fresh wav shar
corrupt audio-edit "$tmp/x/recording.000000.tar" "$member" wav-short:1000
msg="recording.000000.tar member $member (cut $id): wav audio is cut short: its header says $n samples ($((2 * n)) bytes), the member holds $((n - 500)) ($((2 * n - 1000)) bytes)"
validate
problem "code=decode,shard=recording.000000.tar,member=$member,cut_id=$id"
read_fails "$msg" --cuts
rm -rf "$tmp/x" && cp -r "$tmp/g/shar" "$tmp/x"
corrupt audio-edit "$tmp/x/recording.000000.tar" "$member" wav-data-size:4294967295
msg="recording.000000.tar member $member (cut $id): wav audio is cut short: its header says 2147483647 samples (4294967295 bytes), the member holds $n ($((2 * n)) bytes)"
validate
problem "code=decode,shard=recording.000000.tar,member=$member,cut_id=$id"
read_fails "$msg" --max-duration 10
rm -rf "$tmp/x" && cp -r "$tmp/g/shar" "$tmp/x"
corrupt audio-edit "$tmp/x/recording.000000.tar" "$member" wav-data-size:0
msg="recording.000000.tar member $member (cut $id): wav audio: decoded 0 frames, expected $n (tolerance 8000, offset 0)"
validate
problem "code=length,shard=recording.000000.tar,member=$member,cut_id=$id"

# 4. A float WAV with a NaN: a non_finite problem naming the first one.
fresh wav shar
corrupt audio-edit "$tmp/x/recording.000000.tar" "$member" wav-float:5:nan
msg="recording.000000.tar member $member (cut $id): wav audio holds a non-finite sample: NaN at sample 5 (channel 0)"
validate
problem "code=non_finite,shard=recording.000000.tar,member=$member,cut_id=$id"
expect_in "$tmp/v.jsonl" '"non_finite":1'
read_fails "$msg" --max-duration 10
read_fails "$msg" --cuts
expect_rc 1 "$SHARC" validate "$tmp/x"
expect_in "$tmp/out" "problem non_finite: $tmp/x/$msg"

# 5. FLAC members whose STREAMINFO gives no length, in samples without metadata: counted by
# decoding, and read as the intact ones are, sample for sample (peak and RMS per cut).
fresh flac wds
expect_rc 0 "$SHARC" validate --json --per-cut "$tmp/x"
grep '"type":"cut"' "$tmp/out" | sed 's/"wall_seconds":[^,]*//' | sort >"$tmp/intact.jsonl"
for m in $("$PYTHON" -c 'import tarfile,sys
print(" ".join(m.name for m in tarfile.open(sys.argv[1]) if m.name.endswith(".flac")))' \
    "$tmp/x/shard-000000.tar"); do
    corrupt audio-edit "$tmp/x/shard-000000.tar" "$m" flac-no-length
    corrupt tar-drop "$tmp/x/shard-000000.tar" "${m%.*}.json"
done
expect_rc 0 "$SHARC" validate --json --per-cut "$tmp/x"
check cut-samples "$tmp/out" "$id" "$n"
grep '"type":"cut"' "$tmp/out" | sed 's/"wall_seconds":[^,]*//' | sort >"$tmp/edited.jsonl"
cmp -s "$tmp/intact.jsonl" "$tmp/edited.jsonl" ||
    fail "FLAC of unknown length: cut lines differ: $(diff "$tmp/intact.jsonl" "$tmp/edited.jsonl" | head -5)"
expect_rc 0 "$SHARC" read --cuts --json --no-decode "$tmp/x"
expect_in "$tmp/out" "\"num_samples\":$n"
echo "ok"
