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
# transports are left out: no target needs them; see build.sh). The corpus grows in
# build-fuzz/corpus/TARGET, seeded from tests/fuzz/corpus/TARGET; crashes, hangs (10 s) and
# leaks land in build-fuzz/crashes/TARGET with libFuzzer's report on stderr. Replay one with
# `build-fuzz/TARGET FILE`. Add an input worth keeping (small, new coverage, handled cleanly
# once fixed) to tests/fuzz/corpus/TARGET.
# Needs clang and its libFuzzer runtime (Debian: clang libclang-rt-dev). `tools/dev test`
# runs every target for a short while through ci.sh.
set -eu
[ $# -ge 1 ] || { sed -n '2,/^set -eu/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2; }
target=$1
seconds=${2:-600}
jobs=${3:-1}
repo=$(cd "$(dirname "$0")/../.." && pwd)
src=$repo/tests/fuzz/$target.c
[ -f "$src" ] || { echo "libfuzzer.sh: no $src" >&2; exit 2; }

out=$repo/build-fuzz
sh "$repo/tests/fuzz/build.sh" "$target"
mkdir -p "$out/corpus/$target" "$out/crashes/$target"
cp -n "$repo/tests/fuzz/corpus/$target/"* "$out/corpus/$target/" 2>/dev/null || true
rm -f "$out/crashes/$target/fuzz-"*.log
cd "$out/crashes/$target" # with JOBS > 1, libFuzzer writes fuzz-N.log here
parallel=""
[ "$jobs" -gt 1 ] && parallel="-jobs=$jobs -workers=$jobs"
# shellcheck disable=SC2086
"$out/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    $parallel -artifact_prefix="$out/crashes/$target/" "$out/corpus/$target"
