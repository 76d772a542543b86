#!/bin/sh
# cli_validate_corrupt: `sharc validate` on corrupted copies of generated corpora exits 1, reports
# each problem with the right code, shard, member and cut id, keeps going, and never crashes.
. "$(dirname "$0")/lib.sh"

# Uncompressed tars and JSON lines so that the copies can be edited in place.
gen "$tmp/g" --layout all --shards 3 --cuts-per-shard 4 --max-duration 2 --seed 21 --compress none
ids() { # layout shard_index: the expected ids of a shard, in order
    "$PYTHON" -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["shard_index"] == int(sys.argv[2]): print(r["id"])' "$tmp/g/$1.expected.jsonl" "$2"
}
fresh() { # layout: a clean copy in $tmp/x
    rm -rf "$tmp/x"
    cp -r "$tmp/g/$1" "$tmp/x"
}
validate() { # run validate on $tmp/x, expect exit 1, keep the output in $tmp/v.jsonl
    expect_rc 1 "$SHARC" validate --json --per-cut --threads 2 "$tmp/x"
    cp "$tmp/out" "$tmp/v.jsonl"
}

# Truncated tar: an archive problem on that shard, naming the member it broke at and the cut
# lost with it; the other shards are still checked. The tar is cut right after a cut's .json
# member, so that cut was read whole and the next one is lost.
fresh shar
member=$(check truncate "$tmp/x/recording.000001.tar")
case $member in *.json) ;; *) fail "check truncate cut after $member, not after a .json" ;; esac
lost=$(ids shar 1 | grep -A1 -x -F -e "${member%.*}" | sed -n 2p)
[ -n "$lost" ] || fail "no cut follows ${member%.*} in shard 1"
validate
check problem "$tmp/v.jsonl" "code=archive,shard=recording.000001.tar,member=$member,cut_id=$lost"
check min-cuts "$tmp/v.jsonl" 8
summary_field() { # the summary's value of field $1
    "$PYTHON" -c 'import json,sys
print([r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "summary"][0][sys.argv[2]])' \
        "$tmp/v.jsonl" "$1"
}
[ "$(summary_field shards_cut_short)" = 1 ] || fail "shards_cut_short is not 1 after a truncated tar"

# A cut line that is not JSON: that cut only; the cuts after it in its shard are checked.
fresh shar
"$PYTHON" -c 'import sys
p = sys.argv[1]
lines = open(p).read().splitlines()
lines[1] = "{not json"
open(p, "w").write("\n".join(lines) + "\n")' "$tmp/x/cuts.000000.jsonl"
validate
check problem "$tmp/v.jsonl" "code=json,shard=cuts.000000.jsonl,member=line 2,count=1"
check min-cuts "$tmp/v.jsonl" 11
[ "$(summary_field shards_cut_short)" = 0 ] || fail "a bad cut line cut its shard short"

# Audio members over --max-member-bytes: a too_large problem each, the other cuts all checked.
fresh shar
cap=$("$PYTHON" -c 'import glob,sys,tarfile
sizes = sorted(m.size for p in glob.glob(sys.argv[1] + "/recording.*.tar")
               for m in tarfile.open(p) if not m.name.endswith(".json"))
print(sizes[len(sizes) // 2])' "$tmp/x")
# over_cap LAYOUT TARS CHECK...: validate a fresh copy of LAYOUT with the cap; each member of
# the tars matching TARS over it is one too_large problem, and no shard is cut short.
over_cap() {
    fresh "$1"
    big=$("$PYTHON" -c 'import glob,sys,tarfile
print(sum(m.size > int(sys.argv[3]) for p in glob.glob(sys.argv[1] + "/" + sys.argv[2])
          for m in tarfile.open(p) if not m.name.endswith(".json")))' "$tmp/x" "$2" "$cap")
    expect_rc 1 "$SHARC" validate --json --per-cut --max-member-bytes "$cap" "$tmp/x"
    cp "$tmp/out" "$tmp/v.jsonl"
    check problem "$tmp/v.jsonl" "code=too_large,count=$big,message=over the cap"
    [ "$(summary_field shards_cut_short)" = 0 ] || fail "$1: an oversized member cut its shard short"
}
over_cap shar "recording.*.tar"
check min-cuts "$tmp/v.jsonl" $((12 - big))
# NeMo: the rows of an oversized member are lost, the rest of its shard is read.
over_cap nemo "audio_*.tar"
# WebDataset: the sample of an oversized member is lost, named with the member.
over_cap wds "*.tar"
check min-cuts "$tmp/v.jsonl" $((12 - big))

# Garbage at the start of a FLAC member: a decode problem naming member and cut.
fresh shar
id=$(ids shar 0 | sed -n 3p)
member=$(check flac-header "$tmp/x/recording.000000.tar" 2)
[ "$member" = "$id.flac" ] || fail "member $member is not $id.flac"
validate
check problem "$tmp/v.jsonl" "code=decode,shard=recording.000000.tar,member=$id.flac,cut_id=$id,count=1"
check min-cuts "$tmp/v.jsonl" 11

# Flipped bytes inside FLAC frames: whatever libsndfile makes of it, no crash and valid JSON.
fresh wds
check flac-middle "$tmp/x/shard-000001.tar" 1 >/dev/null
set +e
"$SHARC" validate --json --per-cut "$tmp/x" >"$tmp/v.jsonl" 2>"$tmp/err"
rc=$?
set -e
[ $rc -le 1 ] || fail "validate on flipped FLAC frames exited with $rc"
if grep -qE 'runtime error:|Sanitizer' "$tmp/err"; then
    fail "validate on flipped FLAC frames: $(head -20 "$tmp/err")"
fi
check min-cuts "$tmp/v.jsonl" 11

# A deleted cut line: the members after it no longer pair with their lines.
fresh shar
deleted=$(check delete-line "$tmp/x" cuts.000000.jsonl 1)
validate
check problem "$tmp/v.jsonl" "code=id_mismatch|orphan_member|missing_member|layout,shard=.000000."

# Two swapped lines: id mismatch at those positions.
fresh shar
set -- $(ids shar 1)
check swap-lines "$tmp/x" cuts.000001.jsonl 0 1 >/dev/null
validate
check problem "$tmp/v.jsonl" "code=id_mismatch,shard=.000001.,cut_id=$1|$2"

# An orphan member in a NeMo tar (not in any manifest).
fresh nemo
check add-member "$tmp/x/audio_1.tar" orphan_extra.flac
validate
check problem "$tmp/v.jsonl" "code=orphan_member,shard=audio_1.tar,member=orphan_extra.flac,count=1"
check min-cuts "$tmp/v.jsonl" 12

# A NeMo member that appears twice: its rows are read once, the second copy is a problem.
fresh nemo
dup=$(python3 -c "import sys, tarfile
print(next(m.name for m in tarfile.open(sys.argv[1]) if m.name.endswith('.flac')))" \
    "$tmp/x/audio_1.tar")
check add-member "$tmp/x/audio_1.tar" "$dup"
validate
check problem "$tmp/v.jsonl" "code=orphan_member,shard=audio_1.tar,member=$dup,count=1"
expect_in "$tmp/v.jsonl" "appears again; its rows in"
check min-cuts "$tmp/v.jsonl" 12

# An orphan audio member with its metadata appended to a Shar tar: more members than lines.
fresh shar
check add-member "$tmp/x/recording.000002.tar" extra-cut.flac extra-cut.json
validate
check problem "$tmp/v.jsonl" "code=orphan_member|layout,shard=.000002."

# A manifest row whose audio_filepath is no string, or that has none: a json problem that
# says which.
fresh nemo
m=$(ls "$tmp/x/sharded_manifests/"*_1.json)
echo '{"audio_filepath": 5, "duration": 1}' >>"$m"
echo '{"duration": 1}' >>"$m"
validate
expect_in "$tmp/v.jsonl" 'invalid manifest row: manifest row'"'"'s \"audio_filepath\" is not a non-empty string"'
expect_in "$tmp/v.jsonl" 'invalid manifest row: manifest row has no \"audio_filepath\""'

# A member removed from a NeMo tar: its manifest rows have no audio.
fresh nemo
removed=$(check remove-member "$tmp/x/audio_0.tar" 0)
validate
check problem "$tmp/v.jsonl" "code=missing_member,shard=audio_0.tar,member=$removed"

# A manifest duration 5 s longer than the audio: the cut stops at the member's end, as
# NeMo's (Lhotse's truncate), with all its samples and no problem. A row that starts past
# the end is a length problem for that cut (NeMo's truncate fails on it).
fresh nemo
set -- $("$PYTHON" -c 'import json,sys
rows = [json.loads(l) for l in open(sys.argv[1])]
r = [r for r in rows if r["shard_index"] == 2][1]
print(r["member"], r["num_samples"])' "$tmp/g/nemo.expected.jsonl")
member=$1
check nemo-duration "$tmp/x" "$member" 5
expect_rc 0 "$SHARC" validate --json --per-cut --threads 2 "$tmp/x"
check cut-samples "$tmp/out" "$member" "$2"
check nemo-set "$tmp/x" "$member" offset=60
validate
check problem "$tmp/v.jsonl" "code=length,shard=audio_2.tar,member=$member"

# A Shar recording whose num_samples lies (2^61 samples for well under a second of audio): a
# length problem naming the cut, found from the metadata before any buffer is sized by it.
fresh shar
id=$(ids shar 0 | sed -n 2p)
check json-member "$tmp/x/recording.000000.tar" "$id.json" num_samples=2305843009213693952
validate
check problem "$tmp/v.jsonl" "code=length,shard=recording.000000.tar,member=$id.flac,cut_id=$id,count=1,message=num_samples says 2305843009213693952"
check min-cuts "$tmp/v.jsonl" 11

# A lie that agrees with itself: 9e6 s in the cut line and in the tar .json, for a member of
# a few kilobytes. The member cannot hold that much audio: a length problem, before anything
# is allocated for it.
fresh shar
id=$(ids shar 0 | sed -n 3p)
check cut-line "$tmp/x" cuts.000000.jsonl "$id" duration=9e6 recording.duration=9e6 \
    recording.num_samples=144000000000
check json-member "$tmp/x/recording.000000.tar" "$id.json" duration=9e6 num_samples=144000000000
validate
check problem "$tmp/v.jsonl" "code=length,shard=recording.000000.tar,member=$id.flac,cut_id=$id,count=1,message=more than any codec holds"
check min-cuts "$tmp/v.jsonl" 11

# A cut line whose duration is 100 s for a cut of at most 2 s: a length problem too.
fresh shar
id=$(ids shar 1 | sed -n 1p)
check cut-line "$tmp/x" cuts.000001.jsonl "$id" duration=100.0
validate
check problem "$tmp/v.jsonl" "code=length,shard=recording.000001.tar,cut_id=$id,count=1,message=a duration of 100 s is 1600000 samples"

# A Shar shard duplicated under another index: every id of it is reported, naming both shards.
fresh shar
check duplicate-shard "$tmp/x" 000000 000003
validate
for id in $(ids shar 0); do
    check problem "$tmp/v.jsonl" "code=duplicate_id,cut_id=$id,count=1,message=recording.000000.tar"
    check problem "$tmp/v.jsonl" "code=duplicate_id,cut_id=$id,count=1,message=recording.000003.tar"
done
expect_rc 1 "$SHARC" validate "$tmp/x"
[ "$(grep -c '^problem duplicate_id: ' "$tmp/out")" -eq 4 ] || fail "text output: not 4 duplicate_id lines"
expect_in "$tmp/out" "-- 4 problems: duplicate_id 4"
echo "ok"
