#!/bin/sh
# cli_fingerprints: `sharc read` gives the batches (step, epoch, ids, frames, audio CRC-32)
# recorded in tests/fingerprints/batches.jsonl, for generated corpora of every layout (Shar,
# NeMo with its offset/duration sub-range rows, WebDataset), compression (none, gzip, zstd)
# and codec (FLAC, WAV), under a few fixed settings: shuffled or not, 1 or 2 threads, two
# epochs, a resume from a saved state. A change that alters which cuts form which batch, or
# their audio, fails here; one that only restructures the code does not.
#
# The recorded file is rewritten from the current build with
#   SHARC_FINGERPRINTS_RECORD=1 meson test -C build cli_fingerprints
# which is only right when the batches are meant to change; say why in the commit.
. "$(dirname "$0")/lib.sh"

recorded=$(cd "$(dirname "$0")/../fingerprints" && pwd)/batches.jsonl
got=$tmp/got.jsonl
: >"$got"

# run CASE ARGS...: `sharc read --json ARGS`, its batches appended to $got under CASE.
run() {
    case_name=$1
    shift
    expect_rc 0 "$SHARC" read --json "$@"
    "$PYTHON" "$(dirname "$0")/fingerprints.py" extract "$case_name" "$tmp/out" >>"$got"
}

B="--max-duration 8 --num-buckets 2 --seed 3"
for codec in flac wav; do
    for comp in none gzip zstd; do
        c=$tmp/$codec-$comp
        gen "$c" --layout all --shards 3 --cuts-per-shard 6 --min-duration 0.5 \
            --max-duration 4 --seed 5 --codec "$codec" --compress "$comp"
        for layout in shar nemo wds; do
            run "$layout-$codec-$comp" $B --threads 2 "$c/$layout"
        done
    done
done

# The settings, over the FLAC/gzip corpus of each layout.
for layout in shar nemo wds; do
    d=$tmp/flac-gzip/$layout
    run "$layout-threads1" $B --threads 1 "$d"
    run "$layout-no-shuffle" --max-duration 8 --num-buckets 2 --no-shuffle --no-shuffle-shards \
        --threads 2 "$d"
    run "$layout-epochs2" --max-cuts 3 --num-buckets 3 --seed 9 --epochs 2 --threads 2 "$d"
    run "$layout-small-buffer" --max-duration 6 --num-buckets 3 --num-cuts-for-bins 6 \
        --buffer-size 5 --seed 1 --threads 1 "$d"
    # A state saved after step 2 of a two-epoch run, resumed: the steps after it.
    expect_rc 0 "$SHARC" read --json $B --epochs 2 --threads 2 --save-state-at 2 \
        "$tmp/$layout.state" --limit 3 "$d"
    run "$layout-resume" $B --epochs 2 --threads 1 --resume "$tmp/$layout.state" "$d"
done

if [ -n "${SHARC_FINGERPRINTS_RECORD:-}" ]; then
    cp "$got" "$recorded"
    echo "recorded $(wc -l <"$got") batches in $recorded"
    exit 0
fi
"$PYTHON" "$(dirname "$0")/fingerprints.py" compare "$recorded" "$got"
