#!/bin/sh
# cli_lhotse: `sharc validate --json --per-cut` on Shar written by the real Lhotse library reports
# every cut with the right id, num_samples and sampling rate and the peak libsndfile decodes;
# `sharc read` gives the right texts and sample sums; a corrupted copy exits 1 with the problems.
. "$(dirname "$0")/lib.sh"

fx=${SHARC_TESTDATA:-}/lhotse-shar-edge
if [ ! -f "$fx/expected.json" ]; then
    echo "no Lhotse fixture at $fx; skipping"
    exit 77
fi
# The peak reference is libsndfile's own decode through python3-soundfile, else sox.
py=$PYTHON
if ! "$py" -c 'import soundfile' 2>/dev/null; then
    if /usr/bin/python3 -c 'import soundfile' 2>/dev/null; then
        py=/usr/bin/python3
    elif ! command -v sox >/dev/null; then
        echo "neither python3-soundfile nor sox is installed; skipping"
        exit 77
    fi
fi

for fmt in flac wav; do
    expect_rc 0 "$SHARC" validate --json --per-cut "$fx/$fmt"
    cp "$tmp/out" "$tmp/$fmt.jsonl"
    "$py" "$CLI_CHECK" lhotse "$tmp/$fmt.jsonl" "$fx/$fmt" "$fx/expected.json"
    expect_rc 0 "$SHARC" read --cuts --json "$fx/$fmt"
    cp "$tmp/out" "$tmp/$fmt-read.jsonl"
    check lhotse-read "$tmp/$fmt-read.jsonl" "$fx/expected.json"
done

# A corrupted copy: a truncated tar and a garbled FLAC member.
cp -r "$fx/flac" "$tmp/x"
chmod -R u+w "$tmp/x"
rm -f "$tmp/x"/*.idx
check truncate "$tmp/x/recording.000002.tar"
member=$(check flac-header "$tmp/x/recording.000000.tar" 1)
cut=${member%.flac}
expect_rc 1 "$SHARC" validate --json --per-cut "$tmp/x"
cp "$tmp/out" "$tmp/bad.jsonl"
check problem "$tmp/bad.jsonl" "code=archive,shard=recording.000002.tar"
check problem "$tmp/bad.jsonl" "code=decode,shard=recording.000000.tar,member=$member,cut_id=$cut,count=1"
check min-cuts "$tmp/bad.jsonl" 3
echo "ok"
