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
read_flags="--layout --epochs --seed --no-shuffle --dp-rank --dp-size --on-error --sampling-rate
  --channel --no-decode --limit --json --quiet --verbose --help"
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
expect_rc 2 "$SHARC" read --epochs
expect_rc 2 "$SHARC" validate
expect_in "$tmp/err" "Try 'sharc validate --help'."
expect_rc 2 "$SHARC" validate --threads 0 "$tmp"
expect_in "$tmp/err" "invalid value '0' for --threads"
expect_rc 2 "$SHARC" validate --max-member-bytes 0 "$tmp"
expect_rc 2 "$SHARC" validate --per-cut --frobnicate "$tmp"

# A path without shards is a failure (1), not a usage error, and says why.
expect_rc 1 "$SHARC" read "$tmp/nothing-here"
expect_in "$tmp/err" "sharc read: cannot open the dataset"
expect_rc 1 "$SHARC" validate --json "$tmp/nothing-here"
check problem "$tmp/out" "code=layout|archive|error,message=cannot open the dataset"
echo "ok"
