#!/bin/sh
# cli_features: `sharc read --features fbank` against tests/fbank_ref.py, an independent NumPy
# model of NeMo's FilterbankFeatures: real speech (the Lhotse fixture's FLAC utterances,
# whole) and clips of edge lengths cut from it (1 sample, under a window, exactly a hop, odd
# lengths, digital silence), 64, 80 and 128 mels, frame counts padded to 16 or not: max abs
# error <= 1e-4 on the normalised features, lengths exact, padding exactly 0. The features
# do not depend on the threads; a row skipped under --on-error skip leaves the others' features
# as they are; --no-keep-audio drops only the audio; dither repeats with its seed; bad
# settings and a batch at another rate are refused with a message naming them.
. "$(dirname "$0")/lib.sh"

ref=$(dirname "$0")/../fbank_ref.py
py=$PYTHON
if ! "$py" -c 'import numpy' 2>/dev/null; then
    if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        py=/usr/bin/python3
    else
        echo "numpy is not installed; skipping"
        exit 77
    fi
fi
fx=$SHARC_TESTDATA/lhotse-shar-edge

# Real speech, whole utterances, several rows per batch.
for mels in 64 80 128; do
    expect_rc 0 "$SHARC" read --features fbank --n-mels "$mels" --max-cuts 4 --num-buckets 1 \
        --dump-dir "$tmp/speech$mels" "$fx/flac"
    expect_rc 0 "$py" "$ref" check "$tmp/speech$mels" --n-mels "$mels"
    expect_in "$tmp/out" "10 rows"
done

# Edge lengths, in batches that mix them with longer rows.
expect_rc 0 "$py" "$ref" make-nemo "$fx/wav" "$tmp/edge"
B="--max-cuts 6 --num-buckets 1 --seed 2"
expect_rc 0 "$SHARC" read --features fbank $B --threads 1 --dump-dir "$tmp/e1" "$tmp/edge"
expect_rc 0 "$py" "$ref" check "$tmp/e1"
expect_in "$tmp/out" "25 rows"
expect_rc 0 "$SHARC" read --features fbank --n-mels 128 --fbank-pad-to 0 $B \
    --dump-dir "$tmp/e128" "$tmp/edge"
expect_rc 0 "$py" "$ref" check "$tmp/e128" --n-mels 128 --pad-to 0

# The check itself: a features file 2e-4 off in one valid element, or with a padding
# element set, fails it.
cp -r "$tmp/e1" "$tmp/bad"
"$py" -c 'import numpy, sys
f = numpy.load(sys.argv[1] + "features.npy"); n = numpy.load(sys.argv[1] + "feature_lens.npy")
b = int(n.argmax()); f[b, 3, n[b] - 1] += 2e-4; numpy.save(sys.argv[1] + "features.npy", f)
print(b)' "$tmp/bad/step0." >"$tmp/row"
expect_rc 1 "$py" "$ref" check "$tmp/bad"
expect_in "$tmp/err" "step 0 row $(cat "$tmp/row") "
expect_in "$tmp/err" "> 0.0001"
cp "$tmp/e1/step0.features.npy" "$tmp/bad/"
"$py" -c 'import numpy, sys
f = numpy.load(sys.argv[1]); f[:, :, -1] = -0.0; numpy.save(sys.argv[1], f)' \
    "$tmp/bad/step0.features.npy"
expect_rc 1 "$py" "$ref" check "$tmp/bad"
expect_in "$tmp/err" "is not exactly 0"

# The same features with 3 threads, and without the audio (audio_lens stays).
expect_rc 0 "$SHARC" read --features fbank $B --threads 3 --dump-dir "$tmp/e3" "$tmp/edge"
expect_rc 0 "$SHARC" read --features fbank $B --no-keep-audio --dump-dir "$tmp/na" "$tmp/edge"
for f in "$tmp"/e1/step*.features.npy "$tmp"/e1/step*.feature_lens.npy; do
    cmp "$f" "$tmp/e3/$(basename "$f")" || fail "$f differs with 3 threads"
    cmp "$f" "$tmp/na/$(basename "$f")" || fail "$f differs without the audio"
done
[ ! -e "$tmp/na/step0.audio.npy" ] || fail "--no-keep-audio kept the audio"
[ -e "$tmp/na/step0.audio_lens.npy" ] || fail "--no-keep-audio dropped audio_lens"
cmp "$tmp/e1/step0.audio_lens.npy" "$tmp/na/step0.audio_lens.npy" ||
    fail "audio_lens differs without the audio"

# Under the skip policy a row that fails to decode is dropped before the features are made:
# the batches' features are those of the rows that remain.
expect_rc 0 "$py" "$ref" make-nemo "$fx/wav" "$tmp/broken" --broken
expect_rc 0 "$SHARC" read --features fbank $B --on-error skip --dump-dir "$tmp/sk" "$tmp/broken"
expect_in "$tmp/err" "broken-01000.wav"
expect_rc 0 "$py" "$ref" check "$tmp/sk"
expect_in "$tmp/out" "25 rows"

# Dither: the same with the same seed, another with another seed.
expect_rc 0 "$SHARC" read --features fbank $B --fbank-dither 1e-5 --dump-dir "$tmp/d1" "$tmp/edge"
expect_rc 0 "$SHARC" read --features fbank $B --fbank-dither 1e-5 --dump-dir "$tmp/d2" "$tmp/edge"
expect_rc 0 "$SHARC" read --features fbank --max-cuts 6 --num-buckets 1 --seed 3 \
    --fbank-dither 1e-5 --dump-dir "$tmp/d3" "$tmp/edge"
cmp "$tmp/d1/step0.features.npy" "$tmp/d2/step0.features.npy" || fail "dither does not repeat"
if cmp -s "$tmp/d1/step0.features.npy" "$tmp/e1/step0.features.npy"; then
    fail "--fbank-dither changed nothing"
fi

# Refused settings: exit 1 before any batch, naming the setting.
expect_rc 1 "$SHARC" read --features fbank --fbank-n-fft 300 "$tmp/edge"
expect_in "$tmp/err" "invalid reader settings: fbank window 400: must be 1..n_fft (300) samples"
expect_rc 1 "$SHARC" read --features fbank --fbank-n-fft 513 --fbank-window 400 "$tmp/edge"
expect_in "$tmp/err" "fbank n_fft 513: must be even and 2..65536"
expect_rc 2 "$SHARC" read --features mfcc "$tmp/edge"
expect_in "$tmp/err" "--features"
expect_rc 2 "$SHARC" read --cuts --features fbank "$tmp/edge"
expect_in "$tmp/err" "--features"
# Audio at another rate than the features' is an error naming the step, a cut and both rates.
expect_rc 1 "$SHARC" read --features fbank --fbank-sample-rate 8000 --max-cuts 1 \
    --no-shuffle "$tmp/edge"
expect_in "$tmp/err" "features: step 0: the batch's audio (cut edge-00001.wav, ...) is at 16000 Hz and the fbank features are made for 8000 Hz"
# `sharc bench` reports the decode threads' feature time per batch (a positive number with
# features on the host, null without), outside the decode stage's seconds.
expect_rc 0 "$SHARC" bench --features fbank --json --quiet --seconds 0.5 --epochs 0 --threads 2 \
    "$tmp/edge"
cp "$tmp/out" "$tmp/bench.json"
expect_rc 0 "$py" -c 'import json, sys
d = json.load(open(sys.argv[1]))
ms = d["feature_ms_per_batch"]
assert ms is not None and ms > 0, ms
assert d["stage_seconds"]["decode"] is not None' "$tmp/bench.json"
expect_rc 0 "$SHARC" bench --json --quiet --seconds 0.3 --epochs 0 "$tmp/edge"
cp "$tmp/out" "$tmp/bench.json"
expect_rc 0 "$py" -c 'import json, sys
assert json.load(open(sys.argv[1]))["feature_ms_per_batch"] is None' "$tmp/bench.json"
echo "ok"
