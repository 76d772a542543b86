#!/bin/sh
# Fuzz one target with libFuzzer (clang) for a while, under ASan and UBSan.
#
#   tests/fuzz/libfuzzer.sh TARGET [SECONDS] [JOBS]     (from the repository root)
#
# TARGET is a tests/fuzz/<TARGET>.c (fuzz_tar, fuzz_wav, fuzz_cut_json, fuzz_frame,
# fuzz_shar_pairing, fuzz_nemo_pairing, fuzz_wds_pairing, fuzz_braces); SECONDS defaults to
# 600, JOBS (parallel fuzzing processes) to 1. `meson test` only replays the corpora in
# tests/fuzz/corpus with the GCC build; this script searches for new inputs. The library is
# compiled with clang and coverage instrumentation into build-fuzz/ (the MPI and NCCL
# transports are left out: no target needs them). The corpus grows in
# build-fuzz/corpus/TARGET, seeded from tests/fuzz/corpus/TARGET; crashes, hangs (10 s) and
# leaks land in build-fuzz/crashes/TARGET with libFuzzer's report on stderr. Replay one with
# `build-fuzz/TARGET FILE`. Add an input worth keeping (small, new coverage, handled cleanly
# once fixed) to tests/fuzz/corpus/TARGET.
# Needs clang and its libFuzzer runtime (Debian: clang).
set -eu
[ $# -ge 1 ] || { sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2; }
target=$1
seconds=${2:-600}
jobs=${3:-1}
repo=$(cd "$(dirname "$0")/../.." && pwd)
src=$repo/tests/fuzz/$target.c
[ -f "$src" ] || { echo "libfuzzer.sh: no $src" >&2; exit 2; }
cc=${CC_FUZZ:-clang}
command -v "$cc" >/dev/null || { echo "libfuzzer.sh: needs clang (or CC_FUZZ)" >&2; exit 2; }

out=$repo/build-fuzz
mkdir -p "$out/obj" "$out/corpus/$target" "$out/crashes/$target"
san="-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all"
# Not -I src for the library: its "archive.h" would hide libarchive's <archive.h>.
cflags="-g -O1 -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -pthread -I$repo/include
  $(pkg-config --cflags libarchive sndfile flac libcjson opus 2>/dev/null || true)"

# The library, once per change of its sources (make-like: objects older than their source),
# one build at a time when several campaigns start together.
exec 9>"$out/.build.lock"
flock 9
for f in "$repo"/src/*.c; do
    name=$(basename "$f" .c)
    case $name in transport_mpi | transport_nccl) continue ;; esac
    obj=$out/obj/$name.o
    if [ ! -f "$obj" ] || [ "$f" -nt "$obj" ] || [ -n "$(find "$repo/src" -name '*.h' -newer "$obj")" ]; then
        # shellcheck disable=SC2086
        "$cc" $cflags $san -fsanitize=fuzzer-no-link -c "$f" -o "$obj"
    fi
done
# shellcheck disable=SC2086
"$cc" $cflags -I"$repo/src" $san -fsanitize=fuzzer "$src" "$out"/obj/*.o -larchive -lsndfile -lFLAC -lcjson -lzstd -lz \
    -lm -o "$out/$target"

flock -u 9

cp -n "$repo/tests/fuzz/corpus/$target/"* "$out/corpus/$target/" 2>/dev/null || true
rm -f "$out/crashes/$target/fuzz-"*.log
cd "$out/crashes/$target" # with JOBS > 1, libFuzzer writes fuzz-N.log here
parallel=""
[ "$jobs" -gt 1 ] && parallel="-jobs=$jobs -workers=$jobs"
# shellcheck disable=SC2086
"$out/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    $parallel -artifact_prefix="$out/crashes/$target/" "$out/corpus/$target"
