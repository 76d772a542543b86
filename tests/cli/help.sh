#!/bin/sh
# cli_help: `sharc --help`, each command's --help, --version, and usage errors (exit 2).
. "$(dirname "$0")/lib.sh"

expect_rc 0 "$SHARC" --help
for c in read validate; do expect_in "$tmp/out" "  $c "; done
expect_rc 0 "$SHARC" --version
grep -qE '^sharc [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/out" || fail "--version printed $(cat "$tmp/out")"
expect_rc 2 "$SHARC"
expect_rc 2 "$SHARC" frobnicate
expect_in "$tmp/err" "unknown command 'frobnicate'"
expect_rc 2 "$SHARC" --frobnicate
expect_rc 2 "$SHARC" help frobnicate

# Every flag, the exit codes and an example are in each command's help.
read_flags="--layout --epochs --seed --shuffle-shards --no-shuffle-shards --dp-rank --dp-size
  --on-error --sampling-rate --channel --limit --max-duration --max-cuts --quadratic-duration
  --num-buckets --num-cuts-for-bins --bins --bucket-batch-size --buffer-size --max-buffer-bytes
  --shuffle --no-shuffle --drop-last --min-duration --max-cut-duration --threads --prefetch
  --save-state-at --resume --dump-dir --cuts --no-decode --json --quiet --verbose --help"
validate_flags="--layout --threads --sampling-rate --max-member-bytes --json --per-cut
  --no-progress --verbose --help"
for c in read validate; do
    expect_rc 0 "$SHARC" "$c" --help
    cp "$tmp/out" "$tmp/help-$c"
    eval "flags=\$${c}_flags"
    for f in $flags; do expect_in "$tmp/help-$c" "$f"; done
    expect_in "$tmp/help-$c" "Exit status:"
    expect_in "$tmp/help-$c" "Example:"
    expect_in "$tmp/help-$c" "  sharc $c "
    expect_rc 0 "$SHARC" help "$c"
    cmp -s "$tmp/out" "$tmp/help-$c" || fail "'sharc help $c' differs from 'sharc $c --help'"
    expect_rc 0 "$SHARC" "$c" -h
    cmp -s "$tmp/out" "$tmp/help-$c" || fail "'sharc $c -h' differs from --help"
done
expect_in "$tmp/help-read" "default 600 when neither"
expect_in "$tmp/help-read" "audio_crc32"
expect_in "$tmp/help-validate" "duplicate_id"
expect_in "$tmp/help-validate" "rms_dbfs"

# Usage errors: exit 2, a message naming the problem and a hint.
expect_rc 2 "$SHARC" read
expect_in "$tmp/err" "no PATH given"
expect_in "$tmp/err" "Try 'sharc read --help'."
expect_rc 2 "$SHARC" read --epochs abc "$tmp"
expect_in "$tmp/err" "invalid value 'abc' for --epochs"
expect_rc 2 "$SHARC" read --epochs -1 "$tmp"
expect_rc 2 "$SHARC" read --seed 12x "$tmp"
expect_rc 2 "$SHARC" read --dp-rank 2 --dp-size 2 "$tmp"
expect_in "$tmp/err" "--dp-rank 2 must be less than --dp-size 2"
expect_rc 2 "$SHARC" read --dp-size 0 "$tmp"
expect_rc 2 "$SHARC" read --layout tarball "$tmp"
expect_in "$tmp/err" "unknown layout 'tarball'"
expect_rc 2 "$SHARC" read --on-error ignore "$tmp"
expect_in "$tmp/err" "unknown error policy 'ignore'"
expect_rc 2 "$SHARC" read --limit 0 "$tmp"
expect_rc 2 "$SHARC" read --sampling-rate 0 "$tmp"
expect_rc 2 "$SHARC" read --channel -1 "$tmp"
expect_rc 2 "$SHARC" read --frobnicate "$tmp"
# Batch options: numbers, lists and combinations; --cuts refuses the batching options.
expect_rc 2 "$SHARC" read --max-duration 0 "$tmp"
expect_in "$tmp/err" "invalid value '0' for --max-duration (a number above 0, up to 1e+09, is expected)"
expect_rc 2 "$SHARC" read --max-duration -1 "$tmp"
expect_in "$tmp/err" "invalid value '-1' for --max-duration (a number above 0, up to 1e+09, is expected)"
expect_rc 2 "$SHARC" read --max-duration nan "$tmp"
expect_rc 2 "$SHARC" read --batch-duration 0 "$tmp"
expect_in "$tmp/err" "invalid value '0' for --batch-duration (a number above 0, up to 1e+09, is expected)"
# --max-duration is --batch-duration's deprecated name in read and bench (NeMo's max_duration
# is the cut filter, --max-cut-duration): it works and warns, naming the new one.
expect_rc 1 "$SHARC" read --max-duration 10 "$tmp/missing"
expect_in "$tmp/err" "sharc read: warning: --max-duration is deprecated; use --batch-duration"
expect_rc 1 "$SHARC" read --batch-duration 10 "$tmp/missing"
grep -q "deprecated" "$tmp/err" && fail "--batch-duration warned: $(cat "$tmp/err")"
expect_rc 1 "$SHARC" bench --max-duration 10 "$tmp/missing"
expect_in "$tmp/err" "sharc bench: warning: --max-duration is deprecated; use --batch-duration"
expect_rc 0 "$SHARC" read --help
expect_in "$tmp/out" "--batch-duration S"
expect_in "$tmp/out" "deprecated: --batch-duration"
expect_rc 0 "$SHARC" buckets --help
expect_in "$tmp/out" "deprecated: --max-cut-duration"
expect_rc 2 "$SHARC" read --max-cuts 0 "$tmp"
expect_rc 2 "$SHARC" read --threads -1 "$tmp"
expect_rc 2 "$SHARC" read --bins 3,1 "$tmp"
expect_in "$tmp/err" "invalid value '3,1' for --bins"
expect_rc 2 "$SHARC" read --bins 1,,3 "$tmp"
# NeMo's 2D bins: '[[D,T],...]' exactly (spaces allowed), the value named as given.
for b in '[' '[[5,10],[3]]' '[[5,10,3,4]]' '[5,10]' '[[2,a]]' '[[5,10],]' '[[5,10]]]' '[[-1,3]]'; do
    expect_rc 2 "$SHARC" read --bins "$b" "$tmp"
    expect_in "$tmp/err" "sharc read: --bins '$b': 2D bins are [duration, tokens] pairs, '[[D,T],...]', of numbers from 0 to 1e+09"
done
expect_rc 2 "$SHARC" bench --bins '[[1,2] [3,4]]' "$tmp"
expect_in "$tmp/err" "sharc bench: --bins '[[1,2] [3,4]]': 2D bins are"
expect_rc 2 "$SHARC" read --bucket-batch-size 8,4 "$tmp"
expect_in "$tmp/err" "--bucket-batch-size needs --bins"
expect_rc 2 "$SHARC" read --bins 2,4 --bucket-batch-size 8 "$tmp"
expect_in "$tmp/err" "one per bin"
expect_rc 2 "$SHARC" read --bins 2 --bucket-batch-size 8 --max-duration 10 "$tmp"
expect_rc 2 "$SHARC" read --min-duration 3 --max-cut-duration 2 "$tmp"
expect_rc 2 "$SHARC" read --save-state-at 3
expect_in "$tmp/err" "--save-state-at needs a STEP and a FILE"
expect_rc 2 "$SHARC" read --save-state-at 1 --json "$tmp"
expect_in "$tmp/err" "needs a FILE after the step, not '--json'"
# An option that only works with another is refused without it, rather than ignored.
needs() { # needs CMD OPTION NEEDED ARGS...: exit 2 naming both
    c=$1 o=$2 w=$3
    shift 3
    expect_rc 2 "$SHARC" "$c" "$@" "$tmp"
    expect_in "$tmp/err" "sharc $c: --$o works with --$w, which is not given"
}
needs read noise-prob noise --sampling-rate 16000 --noise-prob 0.3
needs bench noise-snr noise --noise-snr 1,2
needs read speed-perturb-prob speed-perturb --speed-perturb-prob 0.5
needs read volume-perturb-prob volume-perturb --cuts --volume-perturb-prob 0.5
needs read n-mels features --n-mels 40
needs bench no-keep-audio features --no-keep-audio
needs read json-tokens json --json-tokens
needs read json-tokens tokenizer --json --json-tokens
needs read mix-finite input-cfg --mix-finite
needs bench max-open-streams input-cfg --max-open-streams 2
needs buckets num-subbuckets tokenizer --num-subbuckets 3
# ... and one that does nothing with another: a mixture's sources have their own layouts and
# repeat without end (--mix-finite reads each once).
printf -- '- {type: lhotse_shar, shar_path: %s}\n' "$tmp" >"$tmp/cfg.yaml"
expect_rc 2 "$SHARC" read --input-cfg "$tmp/cfg.yaml" --epochs 2
expect_in "$tmp/err" "sharc read: --epochs does nothing with --input-cfg: give one or the other"
expect_rc 2 "$SHARC" bench --epochs 0 --input-cfg "$tmp/cfg.yaml"
expect_in "$tmp/err" "sharc bench: --epochs does nothing with --input-cfg: give one or the other"
expect_rc 2 "$SHARC" validate --input-cfg "$tmp/cfg.yaml" --layout shar
expect_in "$tmp/err" "sharc validate: --layout does nothing with --input-cfg: give one or the other"
expect_rc 2 "$SHARC" buckets --layout nemo --input-cfg "$tmp/cfg.yaml"
expect_in "$tmp/err" "sharc buckets: --layout does nothing with --input-cfg: give one or the other"
# The broadcast's options are for batches: --cuts refuses them as it refuses --mesh.
for o in "--timeout 5" --even-steps --no-even-steps; do
    expect_rc 2 "$SHARC" read --cuts $o "$tmp"
    expect_in "$tmp/err" "sharc read: ${o% *} applies to batches; it cannot be used with --cuts"
    expect_rc 2 "$SHARC" bench --cuts $o "$tmp"
    expect_in "$tmp/err" "sharc bench: ${o% *} applies to batches; it cannot be used with --cuts"
done
expect_rc 2 "$SHARC" read --bogus "$tmp"
expect_in "$tmp/err" "sharc read: unknown option '--bogus'"
# A refused option is one line that says why, then where to look.
[ "$(wc -l <"$tmp/err")" -eq 2 ] || fail "a bad option printed more than its line: $(cat "$tmp/err")"
expect_rc 2 "$SHARC" read --max "$tmp"
expect_in "$tmp/err" "sharc read: option '--max' is ambiguous: --max-duration, --max-cuts,"
# Each kind of value is checked the same way in every command that takes it (the option
# tables of tools/cli_opts.h), and a command's own check keeps its own words.
expect_rc 2 "$SHARC" read --limit 0 "$tmp"
expect_in "$tmp/err" "sharc read: --limit must be at least 1"
expect_rc 2 "$SHARC" bench --batches 0 "$tmp"
expect_in "$tmp/err" "sharc bench: --batches must be at least 1"
expect_rc 2 "$SHARC" validate --max-member-bytes 0 "$tmp"
expect_in "$tmp/err" "sharc validate: --max-member-bytes must be at least 1"
expect_rc 2 "$SHARC" validate --threads 0 "$tmp"
expect_in "$tmp/err" "sharc validate: invalid value '0' for --threads (an integer from 1 to 1024 is expected)"
expect_rc 2 "$SHARC" read --num-buckets 65537 "$tmp"
expect_in "$tmp/err" "sharc read: invalid value '65537' for --num-buckets (an integer from 1 to 65536 is expected)"
expect_rc 2 "$SHARC" bench --num-buckets 0 "$tmp"
expect_in "$tmp/err" "sharc bench: invalid value '0' for --num-buckets (an integer from 1 to 65536 is expected)"
# bench takes what read takes, up to the library's limits: more is a usage error, not a
# failure to open the dataset.
expect_rc 2 "$SHARC" bench --num-buckets 65537 "$tmp"
expect_in "$tmp/err" "sharc bench: invalid value '65537' for --num-buckets (an integer from 1 to 65536 is expected)"
expect_rc 2 "$SHARC" bench --buffer-size 16777217 "$tmp"
expect_in "$tmp/err" "sharc bench: invalid value '16777217' for --buffer-size (an integer from 1 to 16777216 is expected)"
expect_rc 2 "$SHARC" bench --max-cuts 0 "$tmp"
expect_in "$tmp/err" "sharc bench: --max-cuts must be in [1, 4294967295], not 0"
expect_rc 2 "$SHARC" buckets --max-duration -1 "$tmp"
expect_in "$tmp/err" "sharc buckets: --max-duration wants seconds >= 0, not '-1'"
expect_rc 2 "$SHARC" read --min-duration -1 "$tmp"
expect_in "$tmp/err" "sharc read: invalid value '-1' for --min-duration (a number from 0 to 1e+09 is expected)"
expect_rc 2 "$SHARC" bench --broadcast-only --timeout -1
expect_in "$tmp/err" "sharc bench --broadcast-only: --timeout must be a number of seconds from 0 to 604800, not '-1'"
expect_rc 2 "$SHARC" bench --broadcast-only --layout shar
expect_in "$tmp/err" "sharc bench --broadcast-only: unknown option '--layout'"
expect_rc 2 "$SHARC" buckets --seed 1 "$tmp"
expect_in "$tmp/err" "sharc buckets: unknown option '--seed'"
# Candidates are named with the command's own options first, then the shared ones.
expect_rc 2 "$SHARC" bench --m 3 "$tmp"
expect_in "$tmp/err" "sharc bench: option '--m' is ambiguous: --mesh, --max-duration, --max-cuts, --min-duration, --max-cut-duration"
expect_rc 2 "$SHARC" validate --jso=1 "$tmp"
expect_in "$tmp/err" "sharc validate: option '--json' takes no value"
expect_rc 2 "$SHARC" buckets -x "$tmp"
expect_in "$tmp/err" "sharc buckets: unknown option '-x'"
expect_rc 2 "$SHARC" buckets --json -xy "$tmp"
expect_in "$tmp/err" "sharc buckets: unknown option '-x'"
expect_rc 2 "$SHARC" bench --broadcast-only --steps
expect_in "$tmp/err" "sharc bench --broadcast-only: option '--steps' requires a value"
expect_rc 2 "$SHARC" read --save-state-at x f "$tmp"
expect_rc 2 "$SHARC" read --cuts --max-duration 10 "$tmp"
expect_in "$tmp/err" "--max-duration applies to batches"
expect_rc 2 "$SHARC" read --cuts --no-shuffle "$tmp"
expect_in "$tmp/err" "--no-shuffle-shards"
expect_rc 2 "$SHARC" read --no-decode "$tmp"
expect_in "$tmp/err" "--no-decode applies to --cuts"
expect_rc 2 "$SHARC" read --epochs
expect_in "$tmp/err" "sharc read: option '--epochs' requires a value"
[ "$(wc -l <"$tmp/err")" -eq 2 ] || fail "a missing value printed more than its line: $(cat "$tmp/err")"
expect_rc 2 "$SHARC" validate
expect_in "$tmp/err" "Try 'sharc validate --help'."
expect_rc 2 "$SHARC" validate --threads 0 "$tmp"
expect_in "$tmp/err" "invalid value '0' for --threads"
expect_rc 2 "$SHARC" validate --max-member-bytes 0 "$tmp"
expect_rc 2 "$SHARC" validate --per-cut --frobnicate "$tmp"

# A path without shards is a failure (1), not a usage error, and says why.
expect_rc 1 "$SHARC" read "$tmp/nothing-here"
expect_in "$tmp/err" "sharc read: cannot open the dataset"
# Said once, by the command, with the path: not also as the library's own log line.
for c in "read" "read --cuts" "bench --seconds 1" "buckets"; do
    # shellcheck disable=SC2086
    expect_rc 1 "$SHARC" $c "$tmp/nothing-here"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "sharc $c: a failed open printed $(cat "$tmp/err")"
    expect_in "$tmp/err" "sharc ${c%% *}: cannot open the dataset: $tmp/nothing-here: "
done
expect_rc 1 "$SHARC" validate --json "$tmp/nothing-here"
check problem "$tmp/out" "code=layout|archive|error,message=cannot open the dataset"
echo "ok"
