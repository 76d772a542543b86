#!/bin/sh
# Build fuzz targets with clang's libFuzzer under ASan and UBSan.
#
#   tests/fuzz/build.sh TARGET...     (TARGET: a tests/fuzz/<TARGET>.c)
#
# The library is compiled with coverage instrumentation into build-fuzz/obj (the MPI and
# NCCL transports are left out: no target needs them), again only where a source or a
# header changed, several files at a time; each target is linked to build-fuzz/TARGET.
# Used by libfuzzer.sh (one long campaign) and ci.sh (every target for a bounded time).
# Needs clang, clang++ and the libFuzzer runtime (Debian: clang libclang-rt-dev), or CC_FUZZ
# and CXX_FUZZ.
set -eu
[ $# -ge 1 ] || { sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2; }
repo=$(cd "$(dirname "$0")/../.." && pwd)
cc=${CC_FUZZ:-clang}
command -v "$cc" >/dev/null || { echo "build.sh: needs clang (or CC_FUZZ)" >&2; exit 2; }
for target in "$@"; do
    [ -f "$repo/tests/fuzz/$target.c" ] || { echo "build.sh: no tests/fuzz/$target.c" >&2; exit 2; }
done

out=$repo/build-fuzz
mkdir -p "$out/obj"
san="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all"
# Sources include each other by stage ("io/tar.h") from src/; config.h is the build's
# switches, all off here (no CUDA, MPI or NCCL: the CUDA-only sources are left out below).
mkdir -p "$out/config"
printf '#pragma once\n#define SHARC_HAVE_CUDA 0\n#define SHARC_HAVE_FBANK_CUDA 0\n#define SHARC_HAVE_MPI 0\n#define SHARC_HAVE_NCCL 0\n' \
    >"$out/config/config.h.new"
cmp -s "$out/config/config.h.new" "$out/config/config.h" 2>/dev/null ||
    mv "$out/config/config.h.new" "$out/config/config.h"
rm -f "$out/config/config.h.new"
deps_cflags=$(pkg-config --cflags libarchive sndfile flac libcjson opus kissfft-float libcurl yaml-0.1 \
    soxr sentencepiece 2>/dev/null || true)
common="-g -O1 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -pthread -I$repo/include -I$repo/src -I$out/config"
cflags="$common -std=c11 $deps_cflags"
# vptr checks need the C++ UBSan runtime, which a link by clang (the targets are C) lacks;
# this comes after the sanitizer flags, which would turn them on again.
cxxflags="$common -std=c++17 -fno-sanitize=vptr $deps_cflags"
cxx=${CXX_FUZZ:-clang++}

# One build at a time when several campaigns start together.
exec 9>"$out/.build.lock"
flock 9
objs=""
stale=""
for f in "$repo"/src/*/*.c "$repo"/src/*/*.cc; do
    rel=${f#"$repo"/src/}
    case $rel in
    bcast/transport_mpi.c | bcast/transport_nccl.c | bcast/cuda_mem.c | reader/device_mem.c | \
        reader/device_copy.c) continue ;;
    esac
    name=$(printf '%s' "${rel%.*}" | tr / _)
    obj=$out/obj/$name.o
    objs="$objs $obj"
    # shellcheck disable=SC3013 # -nt: dash and bash have it
    if [ ! -f "$obj" ] || [ "$f" -nt "$obj" ] || [ -n "$(find "$repo/src" -name '*.h' -newer "$obj")" ]; then
        stale="$stale $rel"
    fi
done
if [ -n "$stale" ]; then
    # C sources as C11, the one C++ source (the tokenizer) as C++17 with clang++.
    FUZZ_CC=$cc FUZZ_CXX=$cxx FUZZ_FLAGS="$san -fsanitize=fuzzer-no-link" FUZZ_SRC=$repo/src
    FUZZ_CFLAGS="$cflags" FUZZ_CXXFLAGS="$cxxflags" FUZZ_OBJ=$out/obj
    export FUZZ_CC FUZZ_CXX FUZZ_FLAGS FUZZ_CFLAGS FUZZ_CXXFLAGS FUZZ_SRC FUZZ_OBJ
    # A failed compile leaves no object, so the next run compiles that file again.
    # shellcheck disable=SC2016,SC2086
    printf '%s\n' $stale | xargs -P "$(nproc)" -I{} sh -c \
        'f={}; o=$FUZZ_OBJ/$(printf %s "${f%.*}" | tr / _).o
         case $f in
         *.cc) $FUZZ_CXX $FUZZ_FLAGS $FUZZ_CXXFLAGS -c "$FUZZ_SRC/$f" -o "$o" ;;
         *) $FUZZ_CC $FUZZ_CFLAGS $FUZZ_FLAGS -c "$FUZZ_SRC/$f" -o "$o" ;;
         esac || { rm -f "$o"; exit 255; }'
fi
for target in "$@"; do
    # shellcheck disable=SC2086
    "$cc" $cflags $san -fsanitize=fuzzer "$repo/tests/fuzz/$target.c" $objs \
        -larchive -lsndfile -lFLAC -lcjson -lzstd -lz -lkissfft-float -lcurl -lyaml -lsoxr \
        -lsentencepiece -lstdc++ -lm -o "$out/$target"
done
