#!/bin/sh
# The cost of tokens and 2D buckets (docs/sampler.md, docs/benchmarks.md "Tokens and 2D
# buckets"): `sharc bench` runs alternating, the medians of batches per second and of CPU
# seconds per audio second, and their ratios:
#   FLAC and WAV reads without and with --tokenizer (a unigram and a BPE model);
#   the WAV read with tokens, 1D bins against NeMo's 2D bins of the same durations (from
#   `sharc buckets --tokenizer`, 4 x 2), per-bucket batch sizes alike.
# The corpus: NeMo tarred audio, 4 plain tars of 100 cuts of 2-16 s at 16 kHz, transcripts
# rewritten to 2.5 words per second of audio from tests/data/tokenizer_text.txt, and
# SentencePiece models trained on that text (spm_train: vocabulary 1024).
# Usage: bench/tokens.sh [--build DIR] [--data DIR] [--seconds S] [--repeat R] [--threads N]
set -eu
build=build
data=
seconds=5
repeat=5
threads=2
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--data DIR] [--seconds S] [--repeat R] [--threads N]" >&2
        exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
text=$here/../tests/data/tokenizer_text.txt
sharc=${SHARC:-$build/tools/sharc}
gen=${SHARC_GEN:-$build/testdata/sharc-gen}
data=${data:-$build/bench-data/tokens}
mkdir -p "$data"
for codec in flac wav; do
    [ -d "$data/$codec/nemo" ] && continue
    "$gen" --out "$data/$codec" --layout nemo --codec "$codec" --compress none --shards 4 \
        --cuts-per-shard 100 --min-duration 2 --max-duration 16 --seed 7 >/dev/null
    python3 - "$data/$codec/nemo" "$text" <<'PY'
import glob, json, random, sys
words = open(sys.argv[2], encoding="utf-8").read().split()
rnd = random.Random(1)
for path in sorted(glob.glob(sys.argv[1] + "/sharded_manifests/*.json")):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    for r in rows:
        r["text"] = " ".join(rnd.choice(words) for _ in range(max(1, round(2.5 * r["duration"]))))
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
PY
done
for type in unigram bpe; do
    [ -f "$data/$type.model" ] || spm_train --input="$text" --model_prefix="$data/$type" \
        --model_type="$type" --vocab_size=1024 --hard_vocab_limit=false \
        --character_coverage=1.0 --minloglevel=2 >/dev/null 2>&1
done
# NeMo's 2D bins for this corpus, and the 1D bins of the same durations.
bins2d=$("$sharc" buckets --json --tokenizer "$data/unigram.model" --num-buckets 4 \
    --num-subbuckets 2 --max-cut-duration 16 "$data/wav/nemo" |
    python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["bucket_duration_bins"]).replace(" ", ""))')
bins1d=$(python3 -c 'import json, sys; b = json.loads(sys.argv[1]); print(",".join(str(d) for d, _ in b[1::2]))' "$bins2d")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() { # NAME ARGS...
    name=$1
    shift
    "$sharc" bench --threads "$threads" --seconds "$seconds" --epochs 0 --json "$@" 2>/dev/null |
        python3 -c 'import json, sys; d = json.load(sys.stdin)
print(sys.argv[1], d["batches_per_second"], d["cpu_seconds_per_audio_second"])' "$name" >>"$out"
}
B="--batch-duration 200"
i=0
while [ $i -lt "$repeat" ]; do
    run flac $B "$data/flac/nemo"
    run flac_unigram $B --tokenizer "$data/unigram.model" "$data/flac/nemo"
    run wav $B "$data/wav/nemo"
    run wav_unigram $B --tokenizer "$data/unigram.model" "$data/wav/nemo"
    run wav_bpe $B --tokenizer "$data/bpe.model" "$data/wav/nemo"
    run wav_1d --tokenizer "$data/unigram.model" --max-cut-duration 16 --bins "$bins1d" \
        --bucket-batch-size 23,17,14,12 "$data/wav/nemo"
    run wav_2d --tokenizer "$data/unigram.model" --max-cut-duration 16 --bins "$bins2d" \
        --bucket-batch-size 23,23,17,17,14,14,12,12 "$data/wav/nemo"
    i=$((i + 1))
done
python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, bps, cpu = line.split()
    runs.setdefault(name, []).append((float(bps), float(cpu)))
bps = {k: statistics.median(b for b, _ in v) for k, v in runs.items()}
cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
for k in runs:
    print(f"{k:13s} batches/s median {bps[k]:8.1f}   CPU per audio s {cpu[k] * 1e6:7.2f} us"
          f"   (n={len(runs[k])})")
for a, b in (("flac_unigram", "flac"), ("wav_unigram", "wav"), ("wav_bpe", "wav"),
             ("wav_2d", "wav_1d")):
    print(f"{a} / {b}: batches/s {bps[a] / bps[b]:.3f}, CPU per audio s {cpu[a] / cpu[b]:.3f}")
PY
