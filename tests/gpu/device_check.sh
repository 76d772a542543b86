#!/bin/sh
# On a lent GPU machine (which has the driver, NCCL and Python but not our build
# dependencies): unpack the bundle that tests/gpu/bundle.sh made here, run the GPU suite
# (gpu_fbank among them: the GPU log-mel features against the CPU path), then the CPU
# benchmarks on that machine's cores (the log-mel features' first). Run from the
# repository root with .gpu carried; results go to $OUT (default ./gpu-out).
#   Usage: tests/gpu/device_check.sh [--no-bench | bench/run.sh options]
#   Exit status: 0 when every GPU test passed, 77 when they were skipped (no GPU), else 1.
#   (default benchmark: --codec wav,flac --what batches,datapath --threads "1 2 16"
#   --seconds 3 --repeat 1)
set -u
repo=$(pwd)
out=${OUT:-"$repo/gpu-out"}
mkdir -p "$out"
root=/tmp/sharc-bundle
rm -rf "$root" && mkdir -p "$root"
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$repo/.gpu/bundle.tar.xz" "$root" || exit 1
b=$root/sharc
nccl=$(find /opt /usr/local /usr/lib /usr/lib64 -name 'libnccl.so.2' 2>/dev/null | head -n 1)
# cuFFT is not in the bundle: the machine's CUDA toolkit (or a Python package of it) has it.
cufft=$(find /usr/local/cuda*/ /usr/lib /usr/lib64 /opt -name 'libcufft.so.12' 2>/dev/null | head -n 1)
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not found"
echo "== NCCL: ${nccl:-not found}"
echo "== cuFFT: ${cufft:-not found}"
export LD_LIBRARY_PATH="$b/lib${nccl:+:$(dirname "$nccl")}${cufft:+:$(dirname "$cufft")}"
export SHARC_GEN="$b/testdata/sharc-gen"
status=0
for t in "$b"/tests/gpu/gpu_*; do
    echo "== $(basename "$t")"
    log=$out/$(basename "$t").log
    NCCL_DEBUG=WARN timeout 240 "$t" >"$log" 2>&1 && rc=0 || rc=$?
    cat "$log"
    case $rc in
    0) echo "== $(basename "$t"): passed" ;;
    77) echo "== $(basename "$t"): skipped (no GPU visible)"; [ "$status" = 1 ] || status=77 ;;
    *) echo "== $(basename "$t"): FAILED (exit $rc)"; status=1 ;;
    esac
done
[ "${1:-}" = --no-bench ] && exit $status
echo "== CPU log-mel features, one thread (bench/fbank.c)"
for mels in 80 128; do
    timeout 120 "$b/bench/sharc-fbank" --n-mels $mels --repeat 9 2>&1 | tee -a "$out/fbank.log"
done
echo "== CPU benchmarks on this machine's cores"
[ $# -gt 0 ] || set -- --codec wav,flac --what batches,datapath --threads "1 2 16" --seconds 3 \
    --repeat 1
timeout 400 sh "$repo/bench/run.sh" --build "$b" --data /tmp/sharc-bench-data --out "$out/bench" \
    "$@" 2>&1 | tee "$out/bench.log"
exit $status
