#!/bin/sh
# Pack the GPU tests, the CLI and the benchmark tools of a CUDA+NCCL build, with the shared
# libraries they need, into one archive for a GPU machine that has the NVIDIA driver, NCCL
# and Python but none of our build dependencies (libarchive, libsndfile, ...).
# tests/gpu/device_check.sh unpacks and runs it there.
#   Usage: tests/gpu/bundle.sh [build-dir] [out-dir]
#   (defaults build-gpu and .gpu; the build is made, without MPI, when the directory is new)
# The bundle keeps the build directory's layout (tools/sharc, testdata/sharc-gen,
# bench/sharc-datapath, tests/gpu/*) so that bench/run.sh --build works on it, and puts the
# libraries in lib/. glibc, NCCL and cuFFT (each over 200 MB) are not packed: the machine's
# own are used.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-"$src/build-gpu"}
out=${2:-"$src/.gpu"}
if [ ! -d "$build" ]; then
    meson setup "$build" "$src" -Dcuda=enabled -Dnccl=enabled -Dmpi=disabled \
        -Dbuildtype=release
fi
ninja -C "$build" -j "${NINJA_JOBS:-2}"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/sharc/lib" "$stage/sharc/tools" "$stage/sharc/testdata" "$stage/sharc/bench" \
    "$stage/sharc/tests/gpu"
cp "$build/tools/sharc" "$stage/sharc/tools/"
cp "$build/testdata/sharc-gen" "$stage/sharc/testdata/"
cp "$build/bench/sharc-datapath" "$stage/sharc/bench/"
cp "$build/bench/sharc-fbank" "$stage/sharc/bench/"
cp "$build"/tests/gpu/gpu_* "$stage/sharc/tests/gpu/" 2>/dev/null || true
rm -rf "$stage"/sharc/tests/gpu/*.p
# The tests that run under mpirun (the device protocol over MPI staging, the NCCL
# bootstrap's failures) come from a second build with MPI, so that the CLI and the library
# above need no MPI on the GPU machine. Only those two targets are built there.
mpi_tests=""
if [ "${BUNDLE_MPI:-1}" = 1 ] && command -v mpicc >/dev/null 2>&1; then
    mpibuild=${MPI_BUILD:-"$build-mpi"}
    if [ ! -d "$mpibuild" ]; then
        meson setup "$mpibuild" "$src" -Dcuda=enabled -Dnccl=enabled -Dmpi=enabled \
            -Dbuildtype=release -Dtools=false -Dpython=disabled
    fi
    ninja -C "$mpibuild" -j "${NINJA_JOBS:-2}" tests/gpu/gpu_mpi_device tests/mpi/mpi_nccl_boot
    mkdir -p "$stage/sharc/tests/gpu-mpi"
    mpi_tests="$mpibuild/tests/gpu/gpu_mpi_device $mpibuild/tests/mpi/mpi_nccl_boot"
    cp $mpi_tests "$stage/sharc/tests/gpu-mpi/"
fi
# The Python package of this build (no MPI) and its GPU tests (python/tests/test_cuda.py),
# with Debian's pytest beside them when the machine's Python lacks one (pure Python).
pyext=""
if [ -d "$build/python/sharc" ]; then
    mkdir -p "$stage/sharc/python/sharc" "$stage/sharc/python/tests" "$stage/sharc/python/vendor"
    cp "$build"/python/sharc/*.py "$build"/python/sharc/*.so "$stage/sharc/python/sharc/"
    pyext=$(ls "$build"/python/sharc/*.so)
    cp "$src"/python/tests/conftest.py "$src"/python/tests/_dist_workers.py \
        "$src"/python/tests/test_cuda.py "$stage/sharc/python/tests/"
    for m in pytest _pytest pluggy iniconfig py packaging; do
        [ -d "/usr/lib/python3/dist-packages/$m" ] &&
            cp -r "/usr/lib/python3/dist-packages/$m" "$stage/sharc/python/vendor/"
    done
    find "$stage/sharc/python" -name __pycache__ -prune -exec rm -rf {} +
fi
# ldd on the build's own executables, whose run paths find libsharc in the build tree.
for exe in "$build/tools/sharc" "$build/testdata/sharc-gen" "$build/bench/sharc-datapath" \
    "$build/bench/sharc-fbank" \
    "$build"/tests/gpu/gpu_* $mpi_tests $pyext; do
    [ -f "$exe" ] || continue
    ldd "$exe" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
    # cuFFT (280 MB) comes with the GPU machine's CUDA toolkit, as NCCL does with its NCCL;
    # OpenMPI's libraries come with its mpirun there (a libmpi of another release would
    # not match the mpirun that starts it).
    case $(basename "$lib") in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux* | \
        libgcc_s.so.* | libstdc++.so.* | libnccl.so.* | libcufft.so.*) ;;
    libmpi.so.* | libopen-rte.so.* | libopen-pal.so.* | libhwloc.so.* | libevent*.so.* | \
        libpmix.so.* | libudev.so.* | libfabric.so.* | libuc[mpst].so.* | libibverbs.so.* | \
        librdmacm.so.* | libpsm*.so.* | libnl-*.so.* | libmunge.so.*) ;;
    *) cp -L "$lib" "$stage/sharc/lib/" ;;
    esac
done
mkdir -p "$out"
tar -C "$stage" -cJf "$out/bundle.tar.xz" sharc
ls -la "$out/bundle.tar.xz"
