#!/bin/sh
# The cost of conditioning (docs/conditioning.md, docs/benchmarks.md "Conditioning"): CPU
# seconds per audio second of `sharc bench` with one decode thread, plain and conditioned
# runs alternating, the medians and their ratios:
#   48 kHz FLAC read at 16 kHz with --resample, next to the same corpus read at 48 kHz;
#   16 kHz FLAC with --speed-perturb 0.9,1.0,1.1 (and with --volume-perturb -6,6 too), and
#   with --noise (a 16 kHz noise corpus, the default --noise-prob 0.5), next to its plain
#   read.
# Usage: bench/conditioning.sh [--build DIR] [--data DIR] [--seconds S] [--repeat R]
set -eu
build=build
data=
seconds=4
repeat=5
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--data DIR] [--seconds S] [--repeat R]" >&2; exit 2 ;;
    esac
done
sharc=${SHARC:-$build/tools/sharc}
gen=${SHARC_GEN:-$build/testdata/sharc-gen}
data=${data:-$build/bench-data/conditioning}
for rate in 48000 16000; do
    [ -d "$data/r$rate/shar" ] || "$gen" --out "$data/r$rate" --layout shar --codec flac \
        --compress none --shards 2 --cuts-per-shard 40 --sampling-rate "$rate" \
        --min-duration 2 --max-duration 15 >/dev/null
done
[ -d "$data/noise/wds" ] || "$gen" --out "$data/noise" --layout wds --codec flac \
    --compress none --shards 1 --cuts-per-shard 20 --seed 9 --min-duration 1 \
    --max-duration 10 >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() { # NAME ARGS...
    name=$1
    shift
    "$sharc" bench --threads 1 --seconds "$seconds" --epochs 0 --json "$@" 2>/dev/null |
        python3 -c 'import json, sys; d = json.load(sys.stdin)
print(sys.argv[1], d["cpu_seconds_per_audio_second"], d.get("conditioning_share"))' "$name" >>"$out"
}
i=0
while [ $i -lt "$repeat" ]; do
    run plain48 "$data/r48000/shar"
    run resample48to16 --sampling-rate 16000 --resample "$data/r48000/shar"
    run plain16 "$data/r16000/shar"
    run speed16 --speed-perturb 0.9,1.0,1.1 "$data/r16000/shar"
    run speed_volume16 --speed-perturb 0.9,1.0,1.1 --volume-perturb -6,6 "$data/r16000/shar"
    run noise16 --sampling-rate 16000 --noise "$data/noise/wds" "$data/r16000/shar"
    i=$((i + 1))
done
python3 - "$out" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, cpu, share = line.split()
    runs.setdefault(name, []).append((float(cpu), None if share == "None" else float(share)))
med = {k: statistics.median(c for c, _ in v) for k, v in runs.items()}
for k, v in runs.items():
    shares = [s for _, s in v if s is not None]
    print(f"{k:16s} cpu s per audio s: median {med[k] * 1e3:.4f} ms (n={len(v)})"
          + (f", conditioning share of decode {statistics.median(shares):.2f}" if shares else ""))
print(f"resample 48k->16k / plain 48k: {med['resample48to16'] / med['plain48']:.3f}")
print(f"speed 0.9,1.0,1.1 / plain 16k: {med['speed16'] / med['plain16']:.3f}")
print(f"speed + volume / plain 16k:    {med['speed_volume16'] / med['plain16']:.3f}")
print(f"noise (p 0.5) / plain 16k:     {med['noise16'] / med['plain16']:.3f}")
EOF
