#!/usr/bin/env bash
# Fuzz every target for a bounded time with libFuzzer under ASan and UBSan (`tools/dev test`).
#
#   tests/fuzz/ci.sh [SECONDS [TARGET...]]    (SECONDS per target, default 30)
#
# Each TARGET (default: every tests/fuzz/fuzz_*.c) is built by build.sh into build-fuzz/
# and run for SECONDS with a fixed seed, starting from its corpus tests/fuzz/corpus/TARGET,
# which is only read: the inputs libFuzzer finds go to a temporary directory, removed at the
# end. FUZZ_JOBS targets run at a time (default: the number of CPUs). A crash, a leak, an
# input that runs longer than 20 s or allocates more than 2 GiB fails the run; its input is
# kept in build-fuzz/ci/TARGET/, and the report, the input's path and the command that
# replays it are printed. Once the bug is fixed, the input goes to tests/fuzz/corpus/TARGET/,
# so that every `meson test` replays it. Without clang's libFuzzer (Debian: clang
# libclang-rt-dev; or set CC_FUZZ) the run is skipped with a line that says so, and succeeds.
set -euo pipefail
seconds=${1:-30}
case $seconds in '' | *[!0-9]* | 0)
    echo "ci.sh: SECONDS must be a positive whole number, not '$seconds'" >&2
    exit 2
    ;;
esac
repo=$(cd "$(dirname "$0")/../.." && pwd)
cc=${CC_FUZZ:-clang}
out=$repo/build-fuzz
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sharc-fuzz-ci.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# libFuzzer comes with clang's runtime package, which a plain clang install may lack.
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }' >"$tmp/probe.c"
if ! command -v "$cc" >/dev/null || ! "$cc" -fsanitize=fuzzer,address,undefined "$tmp/probe.c" \
    -o "$tmp/probe" >/dev/null 2>&1; then
    echo "fuzzing skipped: $cc with libFuzzer is not available (Debian: apt-get install clang" \
        "libclang-rt-dev)"
    exit 0
fi

shift $(($# > 0))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in "$repo"/tests/fuzz/fuzz_*.c; do
        name=$(basename "$f" .c)
        [ "$name" = fuzz_main ] || targets+=("$name")
    done
fi
sh "$repo/tests/fuzz/build.sh" "${targets[@]}"

# A report of undefined behaviour names the call chain that led to it.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# One target: its verdict goes to $tmp/TARGET.result, libFuzzer's output to
# $out/ci/TARGET.log.
fuzz_one() {
    local t=$1
    local found=$tmp/$t.found crashes=$out/ci/$t log=$out/ci/$t.log rc=0
    rm -rf "$crashes" "$log"
    mkdir -p "$found" "$crashes"
    # The first directory receives new inputs; the repository's corpus is read only.
    # -timeout is per input; -rss_limit_mb also caps a single allocation.
    (cd "$crashes" && "$out/$t" -max_total_time="$seconds" -seed=1 -timeout=20 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/" \
        "$found" "$repo/tests/fuzz/corpus/$t") >"$log" 2>&1 || rc=$?
    local runs
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    if [ "$rc" -eq 0 ]; then
        echo "$t: ${runs:-?} inputs in ${seconds} s, $(find "$found" -type f | wc -l) new, no failure" \
            >"$tmp/$t.result"
        return
    fi
    {
        echo "FAILED $t (libFuzzer exit status $rc); its report:"
        # The sanitizer's or libFuzzer's report, from its first line to its SUMMARY.
        awk '!/^#[0-9]/ && !on && /ERROR|runtime error|ALARM|out-of-memory|leak/ { on = 1 }
             on && n++ < 80 { print "    " $0 } on && /^SUMMARY/ { exit }' "$log"
        local input
        for input in "$crashes"/*; do
            [ -f "$input" ] || continue
            echo "  failing input: $input"
            echo "  replay it:     $out/$t $input"
            echo "  once fixed, keep it: cp $input $repo/tests/fuzz/corpus/$t/"
        done
        echo "  full output: $log"
    } >"$tmp/$t.result"
}

jobs=${FUZZ_JOBS:-$(nproc)}
echo "fuzzing ${#targets[@]} targets for ${seconds} s each, $jobs at a time (seed 1)"
for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n || true
    done
    fuzz_one "$t" &
done
wait

failed=0
for t in "${targets[@]}"; do
    if [ ! -f "$tmp/$t.result" ]; then
        echo "FAILED $t: no result (see $out/ci/$t.log)"
        failed=1
        continue
    fi
    cat "$tmp/$t.result"
    grep -q '^FAILED' "$tmp/$t.result" && failed=1
done
exit $failed
