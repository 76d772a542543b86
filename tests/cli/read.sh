#!/bin/sh
# cli_read: `sharc read --json` over generated corpora of every layout returns every cut exactly
# once per epoch with the right id, text, num_samples and sample_sum; data-parallel ranks
# partition the cuts; --limit, --no-decode, wildcard patterns and the text output work.
. "$(dirname "$0")/lib.sh"

# FLAC in gzip'd tars and WAV in zstd'd tars: lossless, so sample sums are exact.
gen "$tmp/flac" --layout all --shards 3 --cuts-per-shard 4 --max-duration 3 --seed 5
gen "$tmp/wav" --layout all --shards 2 --cuts-per-shard 3 --max-duration 2 --seed 6 \
    --codec wav --compress zstd --channels 2

for corpus in flac wav; do
    for layout in shar nemo wds; do
        d=$tmp/$corpus/$layout
        exp=$tmp/$corpus/$layout.expected.jsonl
        expect_rc 0 "$SHARC" read --cuts --json "$d"
        cp "$tmp/out" "$tmp/$corpus-$layout.jsonl"
        check read "$tmp/$corpus-$layout.jsonl" "$exp"

        expect_rc 0 "$SHARC" read --cuts --json --layout "$layout" --epochs 2 --seed 3 "$d"
        cp "$tmp/out" "$tmp/$corpus-$layout-e2.jsonl"
        check read "$tmp/$corpus-$layout-e2.jsonl" "$exp" 2

        expect_rc 0 "$SHARC" read --cuts --json --dp-rank 0 --dp-size 2 --seed 9 "$d"
        cp "$tmp/out" "$tmp/r0.jsonl"
        expect_rc 0 "$SHARC" read --cuts --json --dp-rank 1 --dp-size 2 --seed 9 "$d"
        cp "$tmp/out" "$tmp/r1.jsonl"
        check partition "$exp" "$tmp/r0.jsonl" "$tmp/r1.jsonl"
    done
done

d=$tmp/flac/shar
exp=$tmp/flac/shar.expected.jsonl
expect_rc 0 "$SHARC" read --cuts --json --no-decode --no-shuffle-shards "$d"
check no-decode "$tmp/out" "$exp"
expect_rc 0 "$SHARC" read --cuts --json --limit 5 --epochs 0 "$d"
check limit "$tmp/out" 5

# Three data-parallel ranks over three shards: each gets one shard.
for r in 0 1 2; do
    expect_rc 0 "$SHARC" read --cuts --json --dp-rank $r --dp-size 3 "$d"
    cp "$tmp/out" "$tmp/r$r.jsonl"
done
check partition "$exp" "$tmp/r0.jsonl" "$tmp/r1.jsonl" "$tmp/r2.jsonl"

# Quoted wildcard patterns (from a config file, or quoted) read what the shell's expansion
# reads: the same cuts in the same order; one that matches nothing is an error naming it.
expect_rc 0 "$SHARC" read --cuts --json --no-shuffle-shards "$tmp/flac/wds"
head -n -1 "$tmp/out" >"$tmp/dir.jsonl"
expect_rc 0 "$SHARC" read --cuts --json --no-shuffle-shards "$tmp/flac/wds/shard-*.tar.?z"
head -n -1 "$tmp/out" >"$tmp/glob.jsonl"
cmp -s "$tmp/dir.jsonl" "$tmp/glob.jsonl" || fail "a wildcard pattern read other cuts than its directory"
[ "$(wc -l <"$tmp/glob.jsonl")" -eq 12 ] || fail "a wildcard pattern: not 12 cuts"
expect_rc 0 "$SHARC" read --cuts --json "$tmp/flac/nemo/audio_*.tar.gz" \
    "$tmp/flac/nemo/sharded_manifests/manifest_?.json"
check read "$tmp/out" "$tmp/flac/nemo.expected.jsonl"
expect_rc 1 "$SHARC" read --cuts "$tmp/flac/wds/*.tar.zst"
expect_in "$tmp/err" "$tmp/flac/wds/*.tar.zst: no file matches the pattern"

# Text output: one line per cut with its id and shard:member, then the summary.
expect_rc 0 "$SHARC" read --cuts "$d"
n=$(wc -l <"$exp")
[ "$(grep -c 'recording\.00000[0-2]\.tar\.gz:' "$tmp/out")" -eq "$n" ] || fail "text output: not $n cut lines"
first=$("$PYTHON" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["id"])' "$exp")
expect_in "$tmp/out" "$first "
expect_in "$tmp/out" "-- $n cuts"
expect_in "$tmp/out" "layout shar"
expect_rc 0 "$SHARC" read --cuts --quiet "$d"
[ "$(wc -l <"$tmp/out")" -eq 3 ] || fail "--quiet printed more than the summary"

# A wrong layout or a required rate that does not match is a read error: exit 1, message.
expect_rc 1 "$SHARC" read --cuts --layout nemo "$d"
[ -s "$tmp/err" ] || fail "no error message for --layout nemo on a Shar directory"
expect_rc 1 "$SHARC" read --cuts --json --sampling-rate 8000 "$d"
# The summary carries the reader's message, which is also on stderr and names the rate.
"$PYTHON" - "$tmp/out" "$tmp/err" <<'PYEOF'
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
err = open(sys.argv[2]).read()
assert s["type"] == "summary" and s["error"] and "8000" in s["error"], s
assert s["error"] in err, (s["error"], err)
PYEOF
# Under --on-error skip the same cuts are skipped and counted instead.
expect_rc 0 "$SHARC" read --cuts --json --sampling-rate 8000 --on-error skip "$d"
"$PYTHON" - "$tmp/out" "$n" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
s = rows[-1]
assert len(rows) == 1 and s["cuts"] == 0, rows[:3]
assert s["skipped_cuts"] == int(sys.argv[2]) and s["problems"]["audio_format"] == int(sys.argv[2]), s
PYEOF

# A subdirectory is not searched, and says so: a dataset of subdirectories is not read as less.
mkdir -p "$tmp/nested/more"
cp "$tmp/flac/wds/"* "$tmp/nested/more/"
cp "$tmp/flac/wds/shard-000000.tar.gz" "$tmp/nested/"
expect_rc 0 "$SHARC" read --cuts --json "$tmp/nested"
expect_in "$tmp/err" "ignoring directory $tmp/nested/more: shards are read from the directories given, not from their subdirectories"

# A FIFO in a dataset directory is not opened (nobody may ever write to it): a warning, and the
# shards beside it are read.
mkfifo "$tmp/nested/shard-000001.tar"
expect_rc 0 timeout 60 "$SHARC" read --cuts --json "$tmp/nested"
expect_in "$tmp/err" "ignoring $tmp/nested/shard-000001.tar: not a regular file (a FIFO, socket or device; give it as a path to read it)"
[ "$(grep -c '"id"' "$tmp/out")" -eq "$(tar -tzf "$tmp/nested/shard-000000.tar.gz" | grep -c '\.json$')" ] || fail "the shard beside the FIFO was not read whole"
rm "$tmp/nested/shard-000001.tar"

# A member name that is not UTF-8 (Latin-1, from an old tar) still gives valid JSON lines:
# its bytes as Python's surrogateescape decodes them, as webdataset gives the key.
mkdir -p "$tmp/latin1"
"$PYTHON" - "$tmp/latin1/shard-000000.tar" "$tmp/flac/wds/shard-000000.tar.gz" <<'PYEOF'
import gzip, io, sys, tarfile
src = tarfile.open(fileobj=io.BytesIO(gzip.decompress(open(sys.argv[2], "rb").read())))
audio = next(m for m in src.getmembers() if m.name.endswith(".flac"))
data = src.extractfile(audio).read()
with tarfile.open(sys.argv[1], "w", format=tarfile.GNU_FORMAT, encoding="latin-1") as t:
    for name, body in (("caf\xe9.flac", data), ("caf\xe9.txt", b"latin")):
        i = tarfile.TarInfo(name); i.size = len(body); t.addfile(i, io.BytesIO(body))
PYEOF
expect_rc 0 "$SHARC" read --cuts --json --no-decode "$tmp/latin1"
"$PYTHON" -c 'import json,sys
rows = [json.loads(l) for l in open(sys.argv[1], "rb")]
assert rows[0]["id"] == "caf\udce9" and rows[0]["text"] == "latin", rows[0]' "$tmp/out" ||
    fail "a Latin-1 member name does not give valid JSON: $(head -c 300 "$tmp/out")"
# A quoted pattern whose matches are folders of two layouts is what the folders given one by
# one are: an error naming the folder of the other layout, not that layout left out.
mkdir "$tmp/mix"
cp -r "$tmp/flac/shar" "$tmp/flac/wds" "$tmp/mix/"
expect_rc 1 "$SHARC" read --cuts "$tmp/mix/shar" "$tmp/mix/wds"
expect_in "$tmp/err" "$tmp/mix/wds holds wds shards, and the dataset is read as shar (from the other paths): one layout is read at a time"
for pattern in "$tmp/mix/*" "$tmp/mix/{shar,wds}" "$tmp/mix/*/*"; do
    expect_rc 1 "$SHARC" read --cuts "$pattern"
    expect_in "$tmp/err" "(matched by $pattern) holds wds shards, and the dataset is read as shar (from the other paths): one layout is read at a time"
    [ -s "$tmp/out" ] && fail "$pattern: cuts were read from one layout of two"
    expect_rc 1 "$SHARC" validate "$pattern"
    expect_in "$tmp/out" "problem layout: cannot open the dataset: invalid shard layout or metadata: $tmp/mix/wds"
done

# A transcript holding the escape \u0000 (Python's json keeps the character) is refused with
# a problem naming the field, the cut and the file, in every mode, never cut short there.
gen "$tmp/nul" --layout shar --shards 1 --cuts-per-shard 2 --max-duration 1 --compress none --seed 7
"$PYTHON" - "$tmp/nul/shar/cuts.000000.jsonl" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
cut = json.loads(lines[0])
cut["supervisions"][0]["text"] = "keep this\x00 and this too"
lines[0] = json.dumps(cut)
assert "\\u0000" in lines[0]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PYEOF
nul_id=$("$PYTHON" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["id"])' \
    "$tmp/nul/shar/cuts.000000.jsonl")
nul_why="$tmp/nul/shar/cuts.000000.jsonl line 1 (cut $nul_id): supervision \"text\" holds the character U+0000 (\\u0000), which sharc refuses rather than cut the string there"
expect_rc 1 "$SHARC" read --cuts --json "$tmp/nul/shar"
expect_in "$tmp/err" "$nul_why"
grep -q 'keep this' "$tmp/out" && fail "a text holding \\u0000 was read cut short"
expect_rc 1 "$SHARC" read --json --max-cuts 2 "$tmp/nul/shar"
expect_in "$tmp/err" "$nul_why"
expect_rc 1 "$SHARC" validate "$tmp/nul/shar"
expect_in "$tmp/out" "problem json: $nul_why"
# So is a WebDataset .txt transcript holding a NUL byte.
mkdir -p "$tmp/nultxt"
"$PYTHON" - "$tmp/nultxt/shard-000000.tar" "$tmp/flac/wds/shard-000000.tar.gz" <<'PYEOF'
import gzip, io, sys, tarfile
src = tarfile.open(fileobj=io.BytesIO(gzip.decompress(open(sys.argv[2], "rb").read())))
audio = next(m for m in src.getmembers() if m.name.endswith(".flac"))
data = src.extractfile(audio).read()
with tarfile.open(sys.argv[1], "w") as t:
    for name, body in (("u1.flac", data), ("u1.txt", b"keep this\0 and this too\n")):
        i = tarfile.TarInfo(name); i.size = len(body); t.addfile(i, io.BytesIO(body))
PYEOF
txt_why="$tmp/nultxt/shard-000000.tar: sample u1: its .txt transcript holds the character U+0000 (a NUL byte), which sharc refuses rather than cut the string there"
expect_rc 1 "$SHARC" read --cuts --json "$tmp/nultxt"
expect_in "$tmp/err" "$txt_why"
expect_rc 1 "$SHARC" read --json "$tmp/nultxt"
expect_in "$tmp/err" "$txt_why"
expect_rc 1 "$SHARC" validate "$tmp/nultxt"
expect_in "$tmp/out" "problem json: $txt_why"

# Control characters in a shard's names and transcripts (ESC sequences, C1 controls) are
# shown as '?' in text output, so that they cannot drive the terminal; JSON keeps them.
mkdir "$tmp/ctl"
"$PYTHON" - "$tmp/nultxt/shard-000000.tar" "$tmp/ctl/shard-000000.tar" <<'PYEOF'
import io, sys, tarfile
src = tarfile.open(sys.argv[1])
audio = src.extractfile(next(m for m in src.getmembers() if m.name.endswith(".flac"))).read()
with tarfile.open(sys.argv[2], "w", format=tarfile.GNU_FORMAT) as t:
    for name, body in (("u\x1b[2Jx.flac", audio), ("u\x1b[2Jx.txt", "a\x1b[31mred\u009b1m".encode()),
                       ("bad\x07.flac", b"no audio here")):
        i = tarfile.TarInfo(name); i.size = len(body); t.addfile(i, io.BytesIO(body))
PYEOF
no_controls() { # no_controls FILE: no C0 control but newlines, no C1 control (UTF-8)
    "$PYTHON" -c 'import re, sys
t = open(sys.argv[1], encoding="utf-8").read()
bad = re.findall("[\x00-\x09\x0b-\x1f\x7f-\x9f]", t)
assert not bad, (bad, t)' "$1" || fail "control characters in $(cat -v "$1")"
}
expect_rc 1 "$SHARC" read --cuts --no-shuffle-shards "$tmp/ctl"
expect_in "$tmp/out" "u?[2Jx "
expect_in "$tmp/out" "a?[31mred?1m"
no_controls "$tmp/out"
no_controls "$tmp/err"
expect_rc 1 "$SHARC" validate --per-cut "$tmp/ctl"
expect_in "$tmp/out" "cut u?[2Jx "
expect_in "$tmp/out" "member bad?.flac"
no_controls "$tmp/out"
expect_rc 0 "$SHARC" read --limit 1 --on-error skip --quiet "$tmp/ctl"
no_controls "$tmp/out"
expect_rc 0 "$SHARC" read --limit 1 --on-error skip "$tmp/ctl"
expect_in "$tmp/out" "u?[2Jx"
expect_rc 1 "$SHARC" read --cuts --json "$tmp/ctl"
expect_in "$tmp/out" '"id":"u\u001b[2Jx"'

# An empty directory: every command fails (1) naming it, --json with its error object.
mkdir "$tmp/void"
none="no shards found in $tmp/void (expected Lhotse Shar cuts.*.jsonl, NeMo audio_N.tar + manifests, or .tar shards)"
for c in "read" "read --cuts" "buckets" "bench --batches 1"; do
    expect_rc 1 "$SHARC" $c "$tmp/void"
    expect_in "$tmp/err" "$none"
    expect_rc 1 "$SHARC" $c --json "$tmp/void"
    "$PYTHON" -c 'import json, sys; assert sys.argv[2] in json.loads(open(sys.argv[1]).readlines()[-1])["error"]' \
        "$tmp/out" "$none" || fail "sharc $c --json: $(cat "$tmp/out")"
done
expect_rc 1 "$SHARC" validate "$tmp/void"
expect_in "$tmp/out" "problem layout: cannot open the dataset: invalid shard layout or metadata: $none"

echo "ok"
