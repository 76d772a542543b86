#!/bin/sh
# On a lent GPU machine (which has the driver, NCCL and Python but not our build
# dependencies): unpack the bundle that tests/gpu/bundle.sh made here, run the GPU suite
# (gpu_fbank among them: the GPU log-mel features against the CPU path; gpu_device: the
# reader's device batches against its host batches), the MPI device tests under the
# machine's mpirun with 2 and 4 processes on its GPU, the single-process tests again under
# compute-sanitizer memcheck, the device stage's bench, then the CPU benchmarks on that
# machine's cores (the log-mel features' first). Run from the
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
# The device protocol over MPI staging (2 and 4 processes sharing this GPU) and the NCCL
# bootstrap's failures, under this machine's mpirun with its own OpenMPI libraries.
if [ -d "$b/tests/gpu-mpi" ]; then
    if command -v mpirun >/dev/null 2>&1; then
        mpilib=$(find /usr/lib /usr/lib64 /usr/local/lib /opt -name 'libmpi.so.40' 2>/dev/null |
            head -n 1)
        echo "== OpenMPI: $(mpirun --version 2>/dev/null | head -n 1), ${mpilib:-libmpi not found}"
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        export OMPI_MCA_btl_vader_single_copy_mechanism=none
        mpi_path="$LD_LIBRARY_PATH${mpilib:+:$(dirname "$mpilib")}"
        for t in gpu_mpi_device mpi_nccl_boot; do
            for n in 2 4; do
                echo "== $t, $n processes"
                log=$out/${t}_$n.log
                NCCL_DEBUG=WARN LD_LIBRARY_PATH="$mpi_path" timeout 300 mpirun --oversubscribe \
                    -n $n -x LD_LIBRARY_PATH -x NCCL_DEBUG "$b/tests/gpu-mpi/$t" >"$log" 2>&1 &&
                    rc=0 || rc=$?
                cat "$log"
                case $rc in
                0) echo "== $t ($n): passed" ;;
                77) echo "== $t ($n): skipped (no GPU visible)"; [ "$status" = 1 ] || status=77 ;;
                *) echo "== $t ($n): FAILED (exit $rc)"; status=1 ;;
                esac
            done
        done
    else
        echo "== gpu_mpi_device, mpi_nccl_boot: NOT RUN: mpirun not found"
        status=1
    fi
fi
# The single-process GPU tests again under compute-sanitizer's memcheck, where it is found.
cs=$(command -v compute-sanitizer 2>/dev/null ||
    find /usr/local/cuda*/bin /opt -name compute-sanitizer 2>/dev/null | head -n 1)
if [ -n "$cs" ]; then
    for t in "$b"/tests/gpu/gpu_*; do
        echo "== $(basename "$t") under compute-sanitizer memcheck"
        log=$out/$(basename "$t").memcheck.log
        SHARC_GPU_UNDER_SANITIZER=1 NCCL_DEBUG=WARN timeout 600 "$cs" --tool memcheck \
            --error-exitcode 1 "$t" >"$log" 2>&1 && rc=0 || rc=$?
        tail -n 20 "$log"
        case $rc in
        0) echo "== $(basename "$t") memcheck: clean" ;;
        77) echo "== $(basename "$t") memcheck: skipped (no GPU visible)" ;;
        *) echo "== $(basename "$t") memcheck: FAILED (exit $rc)"; status=1 ;;
        esac
    done
else
    echo "== compute-sanitizer: not found"
fi
# The Python package's GPU tests (python/tests/test_cuda.py: sharc.torch over NCCL with CUDA
# tensors, sharc.Loader over NCCL, device batches into torch) with the machine's Python that
# has a CUDA torch (the venv under /opt first), pytest from the bundle when it has none.
if [ -d "$b/python/sharc" ]; then
    py=""
    for cand in /opt/*/bin/python3 /opt/*/*/bin/python3 python3; do
        if "$cand" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
            py=$cand
            break
        fi
    done
    if [ -n "$py" ]; then
        vendor=""
        "$py" -c 'import pytest' 2>/dev/null || vendor=":$b/python/vendor"
        echo "== python/tests/test_cuda.py with $py"
        log=$out/python_cuda.log
        PYTHONPATH="$b/python$vendor" NCCL_DEBUG=WARN timeout 600 "$py" -m pytest -q -rs \
            -p no:cacheprovider "$b/python/tests/test_cuda.py" >"$log" 2>&1 && rc=0 || rc=$?
        tail -n 30 "$log"
        case $rc in
        0) echo "== python test_cuda: passed" ;;
        *) echo "== python test_cuda: FAILED (exit $rc)"; status=1 ;;
        esac
    else
        echo "== python test_cuda: NOT RUN: no Python with a CUDA torch found"
    fi
fi
[ "${1:-}" = --no-bench ] && exit $status
if [ "$status" != 77 ]; then
    # The device stage: from a host batch to log-mel features on the GPU (its own wall time,
    # whatever the CPU decode rate; target >= 300,000 s of audio/s on an H200), and the feature
    # kernels' bandwidth against the device's copy bandwidth.
    echo "== sharc bench --features fbank --device cuda:0"
    rm -rf /tmp/sharc-device-bench
    "$SHARC_GEN" --out /tmp/sharc-device-bench --layout shar --codec wav --compress none \
        --shards 8 --cuts-per-shard 64 --seed 4 >/dev/null &&
        timeout 300 "$b/tools/sharc" bench --features fbank --device cuda:0 --no-keep-audio \
            --max-duration 600 --threads "$(nproc)" --epochs 0 --seconds 10 --repeat 3 --json \
            /tmp/sharc-device-bench/shar >"$out/bench_device.json" 2>"$out/bench_device.err"
    echo "exit $?"
    cat "$out/bench_device.json" "$out/bench_device.err"
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1])).get("device", {})
print("device stage: %.0f s of audio/s (target 300000), features %.3f ms/batch, %.1f GB/s = %.2f x the copy bandwidth (%.1f GB/s)" % (
    d["audio_seconds_per_second"], d["feature_ms_per_batch"], d["feature_bytes_per_second"] / 1e9,
    d["feature_to_copy_bandwidth"], d["copy_bytes_per_second"] / 1e9))' "$out/bench_device.json" ||
        true
fi
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
