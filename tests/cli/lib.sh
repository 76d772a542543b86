# Sourced by the CLI tests. meson sets SHARC, PYTHON, CLI_CHECK, SHARC_TESTDATA and, once the
# generator is built, SHARC_GEN.
set -eu
: "${SHARC:?}" "${PYTHON:?}" "${CLI_CHECK:?}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sharc-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

fail() {
    echo "FAIL: $*"
    exit 1
}

check() {
    "$PYTHON" "$CLI_CHECK" "$@"
}

# expect_rc STATUS CMD...: run CMD with stdout in $tmp/out and stderr in $tmp/err; fail unless
# it exits with STATUS (a crash shows as 128 + signal).
expect_rc() {
    want=$1
    shift
    set +e
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    set -e
    # Under the sanitizers a report may come with an exit status of 1, which some cases expect.
    if grep -qE 'runtime error:|Sanitizer' "$tmp/err"; then
        echo "FAIL: '$*' triggered a sanitizer report:"
        head -40 "$tmp/err"
        exit 1
    fi
    if [ "$rc" -ne "$want" ]; then
        echo "FAIL: '$*' exited with $rc, expected $want; stderr:"
        head -20 "$tmp/err"
        echo "stdout:"
        head -20 "$tmp/out"
        exit 1
    fi
}

# expect_in FILE TEXT: fail unless FILE contains TEXT.
expect_in() {
    grep -qF -e "$2" "$1" || fail "'$2' not in $1: $(head -5 "$1")"
}

# gen DIR ARGS...: a synthetic corpus from sharc-gen.
gen() {
    if [ -z "${SHARC_GEN:-}" ]; then
        echo "sharc-gen is not built; skipping"
        exit 77
    fi
    "$SHARC_GEN" --out "$@" >/dev/null
}

# need_spm IMPORTS: skip (77) unless spm_train is installed and a Python ($PYTHON, else
# /usr/bin/python3) runs "import IMPORTS" (e.g. "sentencepiece, numpy"); that Python in $py.
need_spm() {
    command -v spm_train >/dev/null || {
        echo "spm_train is not installed; skipping"
        exit 77
    }
    py=
    for p in "$PYTHON" /usr/bin/python3; do
        if "$p" -c "import $1" 2>/dev/null; then
            py=$p
            return 0
        fi
    done
    echo "no Python with $1; skipping"
    exit 77
}

# spm_model PREFIX VOCAB [spm_train options]: train $tmp/PREFIX.model on
# tests/data/tokenizer_text.txt (English, German, Polish).
spm_model() {
    prefix=$1
    vocab=$2
    shift 2
    spm_train --input="$(dirname "$0")/../data/tokenizer_text.txt" --model_prefix="$tmp/$prefix" \
        --vocab_size="$vocab" --character_coverage=1.0 --minloglevel=2 "$@" >/dev/null 2>&1 ||
        fail "spm_train $prefix failed"
}
