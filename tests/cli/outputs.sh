#!/bin/bash
# cli_outputs: what the commands write. No output replaces an input (read's state and dump
# files, validate's and bench's reports, checked by file identity against every shard, cuts
# file, manifest, noise file, --resume state and --resume-from log, before anything is
# read); a failed write leaves no partial file and exits 1 with the reason, stdout and
# --help included (/dev/full, ulimit -f); a pipe whose reader left ends
# the program quietly, as SIGPIPE does, even when SIGPIPE is ignored.
. "$(dirname "$0")/lib.sh"

gen "$tmp/c" --layout all --shards 2 --cuts-per-shard 6 --max-duration 6 --seed 4
d=$tmp/c/shar
n=$tmp/c/nemo
cp -r "$tmp/c" "$tmp/orig"
unchanged() {
    diff -r "$tmp/orig" "$tmp/c" >/dev/null || fail "the dataset changed: $(diff -rq "$tmp/orig" "$tmp/c")"
}
refused() { # refused OUTPUT INPUT: the usage error for --save-state-at 0 OUTPUT
    expect_in "$tmp/err" "sharc read: --save-state-at 0 $1 would overwrite $2, an input of this run: outputs never replace inputs"
    expect_in "$tmp/err" "Try 'sharc read --help'."
    [ ! -s "$tmp/out" ] || fail "a refused run printed $(head -3 "$tmp/out")"
    unchanged
}

# --- An output never replaces an input --------------------------------------------------
# The shard given by folder, by file, by brace pattern and by wildcard.
expect_rc 2 "$SHARC" read --save-state-at 0 "$d/recording.000000.tar.gz" --limit 1 "$d"
refused "$d/recording.000000.tar.gz" "$d/recording.000000.tar.gz"
expect_rc 2 "$SHARC" read --save-state-at 0 "$d/cuts.000001.jsonl.gz" --limit 1 \
    "$d/cuts.000000.jsonl.gz" "$d/recording.000000.tar.gz" "$d/cuts.000001.jsonl.gz" \
    "$d/recording.000001.tar.gz"
refused "$d/cuts.000001.jsonl.gz" "$d/cuts.000001.jsonl.gz"
expect_rc 2 "$SHARC" read --save-state-at 0 "$d/./recording.000001.tar.gz" --limit 1 \
    "$d/cuts.00000{0..1}.jsonl.gz" "$d/recording.00000{0..1}.tar.gz"
refused "$d/./recording.000001.tar.gz" "$d/recording.000001.tar.gz"
expect_rc 2 "$SHARC" read --save-state-at 0 "$d/lang_id.000000.jsonl.gz" --limit 1 "$d/*"
refused "$d/lang_id.000000.jsonl.gz" "$d/lang_id.000000.jsonl.gz"
# NeMo: the manifests under sharded_manifests/ and the one of all shards are inputs too.
expect_rc 2 "$SHARC" read --save-state-at 0 "$n/sharded_manifests/manifest_1.json" --limit 1 "$n"
refused "$n/sharded_manifests/manifest_1.json" "$n/sharded_manifests/manifest_1.json"
# A link (symbolic or hard) to an input is that input.
ln -s "$d/recording.000000.tar.gz" "$tmp/link"
ln "$d/cuts.000000.jsonl.gz" "$tmp/hard"
expect_rc 2 "$SHARC" read --save-state-at 0 "$tmp/link" --limit 1 "$d"
refused "$tmp/link" "$d/recording.000000.tar.gz"
expect_rc 2 "$SHARC" read --save-state-at 0 "$tmp/hard" --limit 1 "$d"
refused "$tmp/hard" "$d/cuts.000000.jsonl.gz"
# Several data-parallel slots write FILE.dp<slot>: each is checked.
ln -s "$d/recording.000001.tar.gz" "$tmp/slot.dp1"
WORLD_SIZE=2 RANK=1 expect_rc 2 "$SHARC" read --save-state-at 0 "$tmp/slot" --limit 1 "$d"
refused "$tmp/slot.dp1" "$d/recording.000001.tar.gz"
# The state a run resumes from is one of its inputs.
expect_rc 0 "$SHARC" read --save-state-at 0 "$tmp/st" --limit 1 --batch-duration 20 "$d"
cp "$tmp/st" "$tmp/st.orig"
expect_rc 2 "$SHARC" read --resume "$tmp/st" --save-state-at 0 "$tmp/st" --batch-duration 20 "$d"
expect_in "$tmp/err" "sharc read: --save-state-at 0 $tmp/st would overwrite $tmp/st, an input of this run: outputs never replace inputs"
cmp -s "$tmp/st" "$tmp/st.orig" || fail "the --resume state was replaced"
# A dump file named as an input, or a link there to one: refused, the input intact.
mkdir "$tmp/dd" "$tmp/wds"
cp "$tmp/c/wds/"*.tar.gz "$tmp/wds/"
cp "$tmp/wds/$(ls "$tmp/wds" | head -1)" "$tmp/dd/step0.audio.npy"
expect_rc 2 "$SHARC" read --layout wds --dump-dir "$tmp/dd" --limit 1 "$tmp/dd/step0.audio.npy"
expect_in "$tmp/err" "sharc read: --dump-dir $tmp/dd would overwrite $tmp/dd/step0.audio.npy, an input of this run (dump files are named step<k>.<tensor>.npy): outputs never replace inputs"
rm "$tmp/dd/step0.audio.npy"
ln -s "$d/recording.000000.tar.gz" "$tmp/dd/step0.audio.npy"
expect_rc 1 "$SHARC" read --dump-dir "$tmp/dd" --limit 1 --batch-duration 20 --quiet "$d"
expect_in "$tmp/err" "sharc read: cannot write tensor audio of step 0 to $tmp/dd/step0.audio.npy: it is the input file $d/recording.000000.tar.gz, which an output never replaces"
unchanged
rm -r "$tmp/dd"
# The noise dataset, the --input-cfg file and the tokenizer model are inputs of read too.
expect_rc 2 "$SHARC" read --save-state-at 0 "$tmp/c/wds/$(ls "$tmp/c/wds" | head -1)" --limit 1 \
    --noise "$tmp/c/wds" --sampling-rate 16000 "$d"
refused "$tmp/c/wds/$(ls "$tmp/c/wds" | head -1)" "$tmp/c/wds/$(ls "$tmp/c/wds" | head -1)"
printf -- '- {type: lhotse_shar, shar_path: %s}\n' "$d" >"$tmp/cfg.yaml"
expect_rc 2 "$SHARC" read --save-state-at 0 "$tmp/cfg.yaml" --limit 1 --input-cfg "$tmp/cfg.yaml"
refused "$tmp/cfg.yaml" "$tmp/cfg.yaml"
echo model >"$tmp/m.model"
expect_rc 2 "$SHARC" read --save-state-at 0 "$tmp/m.model" --limit 1 --tokenizer "en=$tmp/m.model" "$d"
refused "$tmp/m.model" "$tmp/m.model"
# The report files of validate and bench, and the page of bench --compare: the same rule.
report_refused() { # report_refused CMD OPTION OUTPUT INPUT
    expect_in "$tmp/err" "sharc $1: $2 $3 would overwrite $4, an input of this run: outputs never replace inputs"
    [ ! -s "$tmp/out" ] || fail "a refused run printed $(head -3 "$tmp/out")"
    unchanged
}
expect_rc 2 "$SHARC" validate --report-json "$d/cuts.000001.jsonl.gz" "$d"
report_refused validate --report-json "$d/cuts.000001.jsonl.gz" "$d/cuts.000001.jsonl.gz"
expect_rc 2 "$SHARC" validate --report "$tmp/link" "$d"
report_refused validate --report "$tmp/link" "$d/recording.000000.tar.gz"
expect_rc 2 "$SHARC" bench --batches 1 --report "$d/recording.000001.tar.gz" "$d"
report_refused bench --report "$d/recording.000001.tar.gz" "$d/recording.000001.tar.gz"
# ... also a file of the noise dataset, and the log that validate resumes from.
expect_rc 2 "$SHARC" bench --batches 1 --report-json "$tmp/c/wds/$(ls "$tmp/c/wds" | head -1)" \
    --noise "$tmp/c/wds" --sampling-rate 16000 "$d"
report_refused bench --report-json "$tmp/c/wds/$(ls "$tmp/c/wds" | head -1)" "$tmp/c/wds/$(ls "$tmp/c/wds" | head -1)"
echo '{"type":"summary"}' >"$tmp/v.log"
expect_rc 2 "$SHARC" validate --resume-from "$tmp/v.log" --report-json "$tmp/v.log" "$d"
report_refused validate --report-json "$tmp/v.log" "$tmp/v.log"
expect_rc 2 "$SHARC" validate --report "$tmp/r.html" --report-json "$tmp/./r.html" "$d"
expect_in "$tmp/err" "sharc validate: --report $tmp/r.html and --report-json $tmp/./r.html name the same file: each needs a file of its own"
expect_rc 0 "$SHARC" bench --batches 1 --batch-duration 20 --report-json "$tmp/b.json" "$d"
cp "$tmp/b.json" "$tmp/b.orig"
expect_rc 2 "$SHARC" bench --compare "$tmp/b.json" "$tmp/b.orig" --report "$tmp/b.json"
report_refused bench --report "$tmp/b.json" "$tmp/b.json"
cmp -s "$tmp/b.json" "$tmp/b.orig" || fail "bench --compare replaced its input"

# --- A failed write leaves no partial file and exits 1 ----------------------------------
# A dump file larger than the file size limit: EFBIG (SIGXFSZ ignored), nothing half written.
set +e
(
    trap '' XFSZ
    ulimit -f 4
    exec "$SHARC" read --dump-dir "$tmp/dd" --limit 1 --batch-duration 20 --quiet "$d" \
        >/dev/null 2>"$tmp/err"
)
rc=$?
set -e
[ "$rc" = 1 ] || fail "a dump past the file size limit exited with $rc: $(cat "$tmp/err")"
[ "$(cat "$tmp/err")" = "sharc read: cannot write tensor audio of step 0 to $tmp/dd: File too large" ] ||
    fail "stderr: $(cat "$tmp/err")"
[ -z "$(ls -A "$tmp/dd")" ] || fail "a failed dump left $(ls -Al "$tmp/dd")"
# The same for a state file (stderr into a pipe, which the limit does not apply to).
set +e
(
    trap '' XFSZ
    ulimit -f 0
    exec "$SHARC" read --save-state-at 0 "$tmp/st2" --limit 1 --batch-duration 20 --quiet "$d" \
        2>&1 >/dev/null
) | cat >"$tmp/err"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" = 1 ] || fail "a state past the file size limit exited with $rc: $(cat "$tmp/err")"
[ "$(cat "$tmp/err")" = "sharc read: cannot write the state of step 0 to $tmp/st2: File too large" ] ||
    fail "stderr: $(cat "$tmp/err")"
[ -z "$(ls -A "$tmp" | grep st2)" ] || fail "a failed state left $(ls -A "$tmp" | grep st2)"

# stdout on a full disk: --help, --version and every command's output.
full() { # full CMD...: exit 1 and the message of the command named by $1
    set +e
    "$SHARC" "$@" >/dev/full 2>"$tmp/err"
    rc=$?
    set -e
    [ "$rc" = 1 ] || fail "'sharc $*' to a full disk exited with $rc"
    grep -qx "$want: cannot write the output: No space left on device" "$tmp/err" ||
        fail "'sharc $*' to a full disk: $(cat "$tmp/err")"
    [ "$(grep -c 'cannot write the output' "$tmp/err")" = 1 ] || fail "said twice: $(cat "$tmp/err")"
}
want="sharc"
full --help
full --version
full help
for c in read validate buckets bench pack; do
    want="sharc $c"
    full "$c" --help
    full help "$c"
done
want="sharc read"
full read --json --batch-duration 20 "$d"
full read --cuts "$d"
want="sharc validate"
full validate "$d"
want="sharc buckets"
full buckets --num-buckets 2 "$d"
want="sharc bench"
full bench --batches 2 --batch-duration 20 "$d"
"$PYTHON" -c 'import json; print(json.dumps({"audio_filepath": "a.wav"}))' >"$tmp/m.jsonl"
"$PYTHON" - "$tmp/a.wav" <<'PY'
import sys, wave
with wave.open(sys.argv[1], "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000); w.writeframes(b"\0\1" * 1600)
PY
want="sharc pack"
full pack --manifest "$tmp/m.jsonl" --out "$tmp/p" --json --dry-run

# --- A pipe whose reader left: quiet, as SIGPIPE ends a program -------------------------
# pipe_head IGNORE CMD...: run CMD into `head -1`, with SIGPIPE ignored when IGNORE is 1.
pipe_head() {
    ignore=$1
    shift
    (
        [ "$ignore" = 1 ] && trap '' PIPE
        {
            rc=0
            timeout 60 "$SHARC" "$@" 2>"$tmp/err" || rc=$?
            echo "$rc" >"$tmp/rc"
        } | head -1 >"$tmp/out"
    )
    [ "$(cat "$tmp/rc")" = 141 ] || fail "'sharc $*' into head (SIGPIPE ignored: $ignore) exited with $(cat "$tmp/rc"): $(head -3 "$tmp/err")"
    [ ! -s "$tmp/err" ] || fail "'sharc $*' into head printed on stderr: $(head -3 "$tmp/err")"
    [ -s "$tmp/out" ] || fail "'sharc $*' into head printed nothing"
}
# 160 kB of validate --per-cut lines, more than a pipe holds.
gen "$tmp/big" --layout shar --shards 2 --cuts-per-shard 300 --min-duration 0.2 --max-duration 0.5 \
    --compress none
for ignore in 0 1; do
    pipe_head "$ignore" read --json --epochs 0 --batch-duration 20 --threads 1 "$d"
    pipe_head "$ignore" read --cuts --json --no-decode --epochs 0 "$d"
    pipe_head "$ignore" read --cuts --no-decode --epochs 0 "$d"
    pipe_head "$ignore" validate --per-cut --json "$tmp/big/shar"
done
echo ok
