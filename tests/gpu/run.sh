#!/bin/sh
# Build sharc with CUDA and NCCL (and MPI when found) and run the GPU suite. On a machine
# without a GPU every test reports SKIP (exit 77). Usage: tests/gpu/run.sh [build-dir]
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-"$src/build-gpu"}
if [ -d "$build" ]; then
    meson setup --reconfigure "$build" "$src" -Dcuda=enabled -Dnccl=enabled
else
    meson setup "$build" "$src" -Dcuda=enabled -Dnccl=enabled
fi
ninja -C "$build" -j "${NINJA_JOBS:-2}"
# The suite includes gpu_mpi_device_2 and _4 (mpirun, one GPU) when MPI is found.
meson test -C "$build" --suite gpu --print-errorlogs
# The NCCL bootstrap's failure contract under mpirun (on a GPU a rank that went on to
# ncclCommInitRank without rank 0 would wait forever).
if meson test -C "$build" --list 2>/dev/null | grep -q 'mpi_nccl_boot_2'; then
    meson test -C "$build" --print-errorlogs mpi_nccl_boot_2 mpi_nccl_boot_4
fi
