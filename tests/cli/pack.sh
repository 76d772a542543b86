#!/bin/sh
# cli_pack: `sharc pack` writes Lhotse Shar and NeMo tarred shards from manifests of loose WAV,
# FLAC and Ogg files: every cut comes back from `sharc read` with its id, text, speaker,
# language, duration and the source's samples; the members are the files byte for byte;
# shards split at --cuts-per-shard; every error names the manifest line and file, exits 1 and
# leaves nothing behind. With SHARC_LHOTSE_PYTHON (or the build's lhotse-venv), Lhotse's
# CutSet.from_shar loads the output with the same ids, durations, texts and samples.
. "$(dirname "$0")/lib.sh"

pc=$(dirname "$0")/packcheck.py
py=$PYTHON
if ! "$py" -c 'import soundfile, numpy' 2>/dev/null; then
    if /usr/bin/python3 -c 'import soundfile, numpy' 2>/dev/null; then
        py=/usr/bin/python3
    else
        echo "python3-soundfile and numpy are not installed; skipping"
        exit 77
    fi
fi
pcheck() {
    "$py" "$pc" "$@"
}

src=$tmp/src
pcheck make "$src"
m1=$src/a/m1.jsonl
m2=$src/b/m2.jsonl
exp=$src/expected.json

# Shar, 7 cuts at 3 per shard: 3 shards of 3, 3 and 1 cuts, plain, gzip'd and zstd'd tars.
for z in none gzip zstd; do
    sfx=
    [ "$z" = gzip ] && sfx=.gz
    [ "$z" = zstd ] && sfx=.zst
    out=$tmp/shar-$z
    expect_rc 0 "$SHARC" pack --manifest "$m1" --manifest "$m2" --out "$out" \
        --cuts-per-shard 3 --compress "$z" --json
    [ "$(pcheck summary "$tmp/out" "$out" "$exp" 3)" = shar ] || fail "summary layout"
    pcheck shar "$out" "$exp" 3 "$sfx"
    expect_rc 0 "$SHARC" read --cuts --json --no-shuffle-shards "$out"
    pcheck read "$tmp/out" "$exp" shar 3 "$sfx"
    expect_rc 0 "$SHARC" validate --json "$out"
    pcheck validate "$tmp/out" "$exp"
done

# The default: 1000 cuts per shard (one shard), the summary line on stdout.
expect_rc 0 "$SHARC" pack --manifest "$m1" --manifest "$m2" --out "$tmp/one"
expect_in "$tmp/out" "-- packed 7 cuts (6.9s of audio) into 1 shar shard in $tmp/one"
pcheck shar "$tmp/one" "$exp" 1000
expect_rc 0 "$SHARC" pack --manifest "$m1" --manifest "$m2" --out "$tmp/quiet" --quiet
[ ! -s "$tmp/out" ] || fail "--quiet printed $(cat "$tmp/out")"
# --dry-run checks everything and writes nothing; its JSON says so, with the audio's bytes.
expect_rc 0 "$SHARC" pack --manifest "$m1" --manifest "$m2" --out "$tmp/dry" --dry-run \
    --cuts-per-shard 3
expect_in "$tmp/out" "-- checked 7 cuts (6.9s of audio): pack would write 3 shar shards in $tmp/dry"
expect_in "$tmp/out" "nothing was written (--dry-run)"
[ ! -e "$tmp/dry" ] || fail "--dry-run made $tmp/dry"
expect_rc 0 "$SHARC" pack --manifest "$m1" --manifest "$m2" --out "$tmp/dry" --dry-run --json \
    --layout nemo
audio_bytes=$(cat $(sed -n 's/.*"audio_filepath": *"\([^"]*\)".*/\1/p' "$m1" | sed "s|^\([^/]\)|$src/a/\1|") \
    $(sed -n 's/.*"audio_filepath": *"\([^"]*\)".*/\1/p' "$m2" | sed "s|^\([^/]\)|$src/b/\1|") | wc -c)
expect_in "$tmp/out" "\"layout\":\"nemo\",\"shards\":1,\"cuts\":7,"
expect_in "$tmp/out" "\"bytes\":$audio_bytes,\"dry_run\":true}"
[ ! -e "$tmp/dry" ] || fail "--dry-run made $tmp/dry"
expect_rc 1 "$SHARC" pack --manifest "$m1" --out "$tmp/one" --dry-run
expect_in "$tmp/err" "sharc pack: $tmp/one is not empty"
# An existing empty folder is fine.
mkdir "$tmp/empty"
expect_rc 0 "$SHARC" pack --manifest "$m1" --manifest "$m2" --out "$tmp/empty" --cuts-per-shard 7
pcheck shar "$tmp/empty" "$exp" 7

# NeMo tarred audio, 2 per shard: 4 shards.
for z in none zstd; do
    sfx=
    [ "$z" = zstd ] && sfx=.zst
    out=$tmp/nemo-$z
    expect_rc 0 "$SHARC" pack --manifest "$m1" --manifest "$m2" --out "$out" --layout nemo \
        --cuts-per-shard 2 --compress "$z" --json
    [ "$(pcheck summary "$tmp/out" "$out" "$exp" 4)" = nemo ] || fail "summary layout"
    pcheck nemo "$out" "$exp" 2 "$sfx"
    expect_rc 0 "$SHARC" read --cuts --json --no-shuffle-shards "$out"
    pcheck read "$tmp/out" "$exp" nemo 2 "$sfx"
    expect_rc 0 "$SHARC" validate --json "$out"
    pcheck validate "$tmp/out" "$exp"
done

# Ids with spaces, dots and non-ASCII characters (which used to crash libarchive in the C
# locale) come back as they were, from sharc and Lhotse.
u=$tmp/uni
mkdir "$u"
cp "$src/a/wav/one.wav" "$u/a.wav"
printf '%s\n' '{"audio_filepath": "a.wav", "id": "ünï/cödé", "text": "é"}' \
    '{"audio_filepath": "a.wav", "id": "a.b.c", "text": null, "speaker": null}' \
    '{"audio_filepath": "a.wav", "id": "with space"}' >"$u/m.jsonl"
for l in shar nemo; do
    expect_rc 0 "$SHARC" pack --manifest "$u/m.jsonl" --out "$u/$l" --layout "$l" --quiet
    expect_rc 0 "$SHARC" validate "$u/$l"
    expect_rc 0 "$SHARC" read --cuts --json "$u/$l"
    expect_in "$tmp/out" '"id":"ünï/cödé'
    expect_in "$tmp/out" '"text":"é"'
    expect_in "$tmp/out" '"id":"a.b.c'
    expect_in "$tmp/out" '"id":"with space'
done

# A file that changes after its header was checked is not copied with the old metadata:
# pack fails (or, when the change came only after the copy, packed the file as checked).
# A failed NeMo pack into an existing empty folder leaves it empty.
c=$tmp/chg
mkdir "$c" "$c/out"
cp "$src/a/wav/one.wav" "$c/a.wav"
cp "$src/a/wav/one.wav" "$c/last.wav"
i=0
while [ $i -lt 300 ]; do
    printf '{"audio_filepath": "a.wav", "id": "c%d"}\n' $i
    i=$((i + 1))
done >"$c/m.jsonl"
printf '{"audio_filepath": "last.wav"}\n' >>"$c/m.jsonl"
(
    while [ ! -e "$c/out/tarred_audio_manifest.json" ]; do :; done
    head -c 3000 "$src/a/wav/one.wav" >"$c/last.new"
    mv "$c/last.new" "$c/last.wav"
) &
set +e
"$SHARC" pack --manifest "$c/m.jsonl" --out "$c/out" --layout nemo --cuts-per-shard 1 \
    --quiet >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
wait
if [ $rc -eq 1 ]; then
    expect_in "$tmp/err" "sharc pack: $c/m.jsonl:301: $c/last.wav: the file changed"
    [ -z "$(ls -A "$c/out")" ] || fail "a failed pack left $(ls -A "$c/out" | head -3) in $c/out"
else
    [ $rc -eq 0 ] || fail "pack exited with $rc: $(cat "$tmp/err")"
    expect_rc 0 "$SHARC" validate "$c/out"
    tar -xOf "$c/out/audio_300.tar" last.wav | cmp -s - "$src/a/wav/one.wav" ||
        fail "pack copied a file that changed after its header was checked"
fi

# Lhotse reads what pack wrote (plain and gzip'd tars).
lp=${SHARC_LHOTSE_PYTHON:-${SHARC_LHOTSE_VENV:-/nonexistent}/bin/python}
if [ -x "$lp" ] && "$lp" -c 'import lhotse' 2>/dev/null; then
    "$lp" "$pc" lhotse "$tmp/shar-none" "$exp"
    "$lp" "$pc" lhotse "$tmp/shar-gzip" "$exp"
    "$lp" -c 'import sys
from lhotse import CutSet
cuts = list(CutSet.from_shar(in_dir=sys.argv[1]))
ids = [c.id for c in cuts if c.load_audio().shape[1] == c.num_samples]
assert ids == ["ünï/cödé", "a.b.c", "with space"], ids
assert cuts[0].supervisions[0].text == "é"' "$u/shar"
else
    echo "no Lhotse (set SHARC_LHOTSE_PYTHON); the Lhotse check is skipped"
fi

# Errors: exit 1, one line naming the manifest, line and file, and no output folder left.
e=$tmp/err-case
mkdir "$e"
cp "$src/a/wav/one.wav" "$e/a.wav"
printf 'RIFF but not audio' >"$e/bad.wav"
pack_fails() { # MANIFEST-CONTENT EXPECTED-STDERR
    printf '%s\n' "$1" >"$e/m.jsonl"
    expect_rc 1 "$SHARC" pack --manifest "$e/m.jsonl" --out "$e/out"
    [ "$(cat "$tmp/err")" = "sharc pack: $2" ] || fail "stderr '$(cat "$tmp/err")', expected 'sharc pack: $2'"
    [ ! -e "$e/out" ] || fail "a failed pack left $e/out"
}
pack_fails '{"audio_filepath": "a.wav"}
{"audio_filepath": "missing.wav"}' \
    "$e/m.jsonl:2: $e/missing.wav: cannot open: No such file or directory"
pack_fails '{"audio_filepath": "a.wav"}

{"audio_filepath": "bad.wav", "text": "x"}' \
    "$e/m.jsonl:3: $e/bad.wav: not audio libsndfile can read: Format not recognised."
pack_fails '{"audio_filepath": "a.wav"' "$e/m.jsonl:1: not valid JSON"
pack_fails '["a.wav"]' "$e/m.jsonl:1: not a JSON object"
pack_fails '{"text": "no file"}' "$e/m.jsonl:1: no \"audio_filepath\""
pack_fails '{"audio_filepath": 3}' "$e/m.jsonl:1: \"audio_filepath\" is not a string"
pack_fails '{"audio_filepath": "a.wav", "text": 5}' "$e/m.jsonl:1: a.wav: \"text\" is not a string"
pack_fails '{"audio_filepath": "a.wav", "duration": 0.65}' \
    "$e/m.jsonl:1: $e/a.wav: the manifest's duration 0.65 s differs from the audio's 0.5 s by more than 0.1 s"
pack_fails '{"audio_filepath": "a.wav", "duration": "long"}' \
    "$e/m.jsonl:1: a.wav: \"duration\" is not a number of seconds"
pack_fails '{"audio_filepath": "a.wav", "offset": 0.25, "duration": 0.25}' \
    "$e/m.jsonl:1: a.wav: \"offset\" other than 0 is not supported: sharc pack packs whole files"
pack_fails '{"audio_filepath": "a.wav"}
{"audio_filepath": "a.wav", "id": "b"}
{"audio_filepath": "bad.wav", "id": "a"}' \
    "$e/m.jsonl:3: duplicate id 'a': already used at $e/m.jsonl:1"
pack_fails '' "the manifests list no audio files"
pack_fails '{"audio_filepath": "a.wav", "id": "../up"}' \
    "$e/m.jsonl:1: a.wav: id '../up' cannot name a tar member: a part between its slashes is empty, '.' or '..'"
pack_fails '{"audio_filepath": "a.wav", "id": "/abs"}' \
    "$e/m.jsonl:1: a.wav: id '/abs' cannot name a tar member: it starts with '/'"
pack_fails '{"audio_filepath": "a.wav", "id": "a\u0001b"}' \
    "$e/m.jsonl:1: a.wav: the id holds a control character (0x01): it cannot name a tar member"
# A line is one JSON object of UTF-8 text, its strings whole, each key once: nothing after
# the object (a second object would be dropped), no NUL (escaped or not: cJSON would cut the
# string there), no invalid UTF-8 (a non-UTF-8 id used to crash libarchive).
pack_fails '{"audio_filepath": "a.wav"}{"audio_filepath": "a.wav", "id": "b"}' \
    "$e/m.jsonl:1: more after the JSON object (one object a line)"
pack_fails '{"audio_filepath": "a.wav", "text": "a\u0000b"}' \
    "$e/m.jsonl:1: a string holds \"\\u0000\" (NUL), which cannot be kept"
pack_fails '{"audio_filepath": "a.wav", "text": "one", "text": "two"}' \
    "$e/m.jsonl:1: \"text\" is given 2 times"
pack_fails "$(printf '{"audio_filepath": "a.wav", "id": "x\303"}')" \
    "$e/m.jsonl:1: not valid UTF-8 (byte 37 of the line, 0xc3)"
printf '{"audio_filepath": "a.wav"}\000{"audio_filepath": "a.wav", "id": "b"}\n' >"$e/nul.jsonl"
expect_rc 1 "$SHARC" pack --manifest "$e/nul.jsonl" --out "$e/out"
expect_in "$tmp/err" "sharc pack: $e/nul.jsonl:1: the line holds a NUL byte"
# Only regular files: a FIFO used to hang pack, a folder or a device is named as such.
mkfifo "$e/fifo.wav"
mkdir "$e/dir.wav"
printf '{"audio_filepath": "fifo.wav"}\n' >"$e/m.jsonl"
expect_rc 1 timeout 60 "$SHARC" pack --manifest "$e/m.jsonl" --out "$e/out"
expect_in "$tmp/err" "sharc pack: $e/m.jsonl:1: $e/fifo.wav: not a regular file (a FIFO)"
pack_fails '{"audio_filepath": "dir.wav"}' "$e/m.jsonl:1: $e/dir.wav: not a regular file (a folder)"
pack_fails '{"audio_filepath": "/dev/zero"}' "$e/m.jsonl:1: /dev/zero: not a regular file (a device)"
# A WAV cut short (its data chunk longer than the file) is refused, not packed shorter.
head -c 4000 "$e/a.wav" >"$e/cut.wav"
pack_fails '{"audio_filepath": "cut.wav"}' \
    "$e/m.jsonl:1: $e/cut.wav: truncated: its header says 16000 bytes of audio, the file holds 3956"
# A duration exactly 0.1 s away is within the tolerance (1.1 - 1.0 rounds to just above 0.1).
"$py" -c 'import sys, numpy, soundfile; soundfile.write(sys.argv[1], numpy.zeros(16000), 16000)' \
    "$e/one_s.wav"
printf '{"audio_filepath": "one_s.wav", "duration": 1.1}\n' >"$e/m.jsonl"
expect_rc 0 "$SHARC" pack --manifest "$e/m.jsonl" --out "$e/tol" --quiet

printf '{"audio_filepath": "a.wav", "id": "x-sub12"}\n' >"$e/m.jsonl"
expect_rc 1 "$SHARC" pack --manifest "$e/m.jsonl" --out "$e/out" --layout nemo
expect_in "$tmp/err" "sharc pack: $e/m.jsonl:1: id 'x-sub12' ends in -subN"
[ ! -e "$e/out" ] || fail "a failed pack left $e/out"

# A duplicate across manifests names both; --json ends with {"error"}.
printf '{"audio_filepath": "%s"}\n' "$e/a.wav" >"$e/m2.jsonl"
printf '{"audio_filepath": "a.wav"}\n' >"$e/m.jsonl"
expect_rc 1 "$SHARC" pack --manifest "$e/m.jsonl" --manifest "$e/m2.jsonl" --out "$e/out" --json
expect_in "$tmp/err" "sharc pack: $e/m2.jsonl:1: duplicate id 'a': already used at $e/m.jsonl:1"
expect_in "$tmp/out" "{\"error\":\"$e/m2.jsonl:1: duplicate id 'a': already used at $e/m.jsonl:1\"}"
expect_rc 2 "$SHARC" pack --manifest "$e/m.jsonl" --manifest "$e/./m.jsonl" --out "$e/out"
expect_in "$tmp/err" "sharc pack: --manifest $e/./m.jsonl is given twice (as $e/m.jsonl before)"
[ ! -e "$e/out" ] || fail "a refused pack left $e/out"
expect_rc 1 "$SHARC" pack --manifest "$e/missing.jsonl" --out "$e/out"
expect_in "$tmp/err" "sharc pack: cannot open the manifest $e/missing.jsonl: No such file or directory"

# A write error (the file size limit: 20 KiB) names the tar being written, not the shard's
# cuts file or manifest noted after it, and leaves nothing behind.
for l in shar nemo; do
    tar0=$e/out/recording.000000.tar
    [ "$l" = nemo ] && tar0=$e/out/audio_0.tar
    set +e
    (
        trap '' XFSZ
        ulimit -f 40
        exec "$SHARC" pack --manifest "$m1" --out "$e/out" --layout "$l" --quiet
    ) >"$tmp/out" 2>"$tmp/err"
    rc=$?
    set -e
    [ $rc -eq 1 ] || fail "pack under a 20 KiB file size limit exited with $rc"
    expect_in "$tmp/err" "sharc pack: cannot write $tar0: "
    [ ! -e "$e/out" ] || fail "a failed pack left $e/out"
done

# A folder that is not empty is refused and left as it was.
expect_rc 1 "$SHARC" pack --manifest "$m1" --out "$tmp/one"
expect_in "$tmp/err" "sharc pack: $tmp/one is not empty; pack writes only into an empty or new folder"
pcheck shar "$tmp/one" "$exp" 1000

# Usage errors exit 2.
expect_rc 2 "$SHARC" pack --out "$e/out"
expect_in "$tmp/err" "sharc pack: no --manifest given"
expect_rc 2 "$SHARC" pack --manifest "$m1"
expect_in "$tmp/err" "sharc pack: no --out DIR given"
expect_rc 2 "$SHARC" pack --manifest "$m1" --out "$e/out" --layout wds
expect_in "$tmp/err" "sharc pack: --layout wants shar or nemo, not 'wds'"
expect_rc 2 "$SHARC" pack --manifest "$m1" --out "$e/out" --compress xz
expect_in "$tmp/err" "sharc pack: --compress wants none, gzip or zstd, not 'xz'"
expect_rc 2 "$SHARC" pack --manifest "$m1" --out "$e/out" --cuts-per-shard 0
expect_in "$tmp/err" "--cuts-per-shard"
expect_rc 2 "$SHARC" pack --manifest "$m1" --out "$e/out" extra
expect_in "$tmp/err" "sharc pack: unexpected operand 'extra'"
[ ! -e "$e/out" ] || fail "a usage error created $e/out"

# The help names every flag, the exit codes and an example; `sharc help pack` is the same.
expect_rc 0 "$SHARC" pack --help
cp "$tmp/out" "$tmp/help"
for f in --manifest --out --layout --cuts-per-shard --compress --json --quiet --help \
    audio_filepath offset "Exit status:" "Example:" "  sharc pack --manifest "; do
    expect_in "$tmp/help" "$f"
done
expect_rc 0 "$SHARC" help pack
cmp -s "$tmp/out" "$tmp/help" || fail "'sharc help pack' differs from 'sharc pack --help'"
expect_rc 0 "$SHARC" --help
expect_in "$tmp/out" "  pack "
echo "cli_pack: ok"
