#!/bin/sh
# Build sharc with CUDA and NCCL and run the GPU suite. On a machine without a GPU every
# test reports SKIP (exit 77). Usage: tests/gpu/run.sh [build-dir]
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-"$src/build-gpu"}
if [ -d "$build" ]; then
    meson setup --reconfigure "$build" "$src" -Dcuda=enabled -Dnccl=enabled
else
    meson setup "$build" "$src" -Dcuda=enabled -Dnccl=enabled
fi
ninja -C "$build" -j "${NINJA_JOBS:-2}"
meson test -C "$build" --suite gpu --print-errorlogs
