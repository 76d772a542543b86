#!/bin/sh
# cli_demo: tools/demo.sh, the job `bash tools/dev demo` runs (the README's first command),
# against this build: every layout validates clean and `sharc read` prints its 8 batches.
. "$(dirname "$0")/lib.sh"
[ -n "${SHARC_GEN:-}" ] || { echo "sharc-gen is not built; skipping"; exit 77; }
# The demo ends under mpirun, whose plugins keep allocations LeakSanitizer cannot match (see
# tests/mpi/meson.build); the commands before it are leak-checked by the other cli tests.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
build=$(dirname "$(dirname "$SHARC")")
[ "$build/testdata/sharc-gen" -ef "$SHARC_GEN" ] || fail "unexpected build layout: $SHARC_GEN"
expect_rc 0 bash "$(dirname "$0")/../../tools/demo.sh" "$build" "$tmp/demo"
[ "$(grep -c -- '-- OK: no problems found' "$tmp/out")" -eq 3 ] ||
    fail "not three clean validations: $(grep -- '^--' "$tmp/out")"
expect_in "$tmp/out" "-- 4 shards (shar), 96 cuts"
expect_in "$tmp/out" "-- 4 shards (nemo), 96 cuts"
expect_in "$tmp/out" "-- 4 shards (wds), 96 cuts"
expect_in "$tmp/out" "-- 8 batches (steps 0..7)"
if command -v mpirun >/dev/null; then
    expect_in "$tmp/out" "rank 1 received exactly rank 0's"
fi
echo "ok"
