#!/usr/bin/env bash
# The CLI under mpirun: tools/demo_mpi.sh (4 ranks, dp=2,cp=2, peers must print their
# source's batches), `sharc bench --broadcast-only` JSON on 2 ranks, and the usage errors of
# --transport/--mesh, and a peer's batches with the source's conditioning values.
#   cli_mpi.sh BUILD_ROOT SOURCE_ROOT SHARC_GEN
set -euo pipefail
build=$1 src=$2 gen=$3
sharc=$build/tools/sharc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A failing check says where, with what the last commands wrote (most checks are silent).
trap 'echo "cli_mpi.sh: failed at line $LINENO" >&2; tail -n 20 "$tmp"/err* "$tmp"/*.jsonl >&2 2>/dev/null' ERR
"$gen" --out "$tmp/data" --layout shar --shards 4 --cuts-per-shard 10 --max-duration 6 >/dev/null

bash "$src/tools/demo_mpi.sh" "$build" "$tmp/data/shar" >"$tmp/demo.txt"
grep -q "rank 1 received exactly rank 0's" "$tmp/demo.txt"
grep -q "rank 3 received exactly rank 2's" "$tmp/demo.txt"

mpirun --oversubscribe -n 2 "$sharc" bench --broadcast-only --transport mpi --bytes 1048576 \
  --steps 5 --json >"$tmp/bench.jsonl"
python3 - "$tmp/bench.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert sorted(r["rank"] for r in rows) == [0, 1], rows
for r in rows:
    for k in ("seconds_per_step", "raw_seconds_per_step", "ratio", "bytes", "steps", "transport", "ranks"):
        assert k in r, (k, r)
    assert r["transport"] == "mpi" and r["ranks"] == 2 and r["steps"] == 5, r
    assert r["bytes"] == 1048576 + 33 * 4 + 32 * 16, r  # audio + cut_id offsets + bytes
    assert r["seconds_per_step"] > 0 and r["raw_seconds_per_step"] > 0, r
    assert r["source"] == (r["rank"] == 0), r
PY

# The loader benchmark on 4 ranks: peers count the batches they received.
mpirun --oversubscribe -n 4 "$sharc" bench --transport mpi --mesh dp=2,cp=2 --batches 3 \
  --epochs 0 --max-duration 20 --threads 1 --quiet --json "$tmp/data/shar" >"$tmp/lb.jsonl"
python3 - "$tmp/lb.jsonl" <<'PY'
import json, sys
rows = {r["rank"]: r for r in map(json.loads, open(sys.argv[1]))}
assert sorted(rows) == [0, 1, 2, 3], rows.keys()
for src, peer in ((0, 1), (2, 3)):
    assert rows[src]["source"] and not rows[peer]["source"]
    assert rows[src]["batches"] == rows[peer]["batches"] == 3
    assert rows[src]["cuts"] == rows[peer]["cuts"] > 0
PY
# Conditioning's per-cut speed and gain travel in the frames: the peer prints its source's.
mpirun --oversubscribe -n 2 "$sharc" read --json --transport mpi --mesh cp=2 --threads 1 \
  --max-cuts 4 --speed-perturb 0.9,1.1 --volume-perturb -6,6 "$tmp/data/shar" >"$tmp/cond.jsonl"
python3 - "$tmp/cond.jsonl" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "batch"]
by = {rank: [(r["step"], r["ids"], r["speed"], r["gain"]) for r in rows if r["rank"] == rank]
      for rank in (0, 1)}
assert len(by[0]) == 12 and by[0] == by[1], by  # 40 cuts, 4 a batch at most
assert {f for b in by[0] for f in b[2]} == {0.9, 1.1}, by[0]
PY
rc=0
"$sharc" bench --mesh dp=1 --seconds 2 "$tmp/data/shar" >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "ranks must stop together" "$tmp/err"

# A broadcast group needs a transport; a mesh must match the world; --cuts has no loader.
rc=0
WORLD_SIZE=2 RANK=0 "$sharc" read --mesh dp=1,cp=2 "$tmp/data/shar" >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q "use --transport mpi or nccl" "$tmp/err"
rc=0
WORLD_SIZE=2 RANK=1 "$sharc" read --mesh dp=3 "$tmp/data/shar" >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -q -- "--mesh: mesh 'dp=3' has 3 ranks but the world has 2" "$tmp/err"
if "$sharc" read --cuts --transport mpi "$tmp/data/shar" >/dev/null 2>"$tmp/err"; then exit 1; fi
grep -q "cannot be used with --cuts" "$tmp/err"
if "$sharc" bench --broadcast-only --transport tcp >/dev/null 2>"$tmp/err"; then exit 1; fi
grep -q "must be self, mpi or nccl" "$tmp/err"
# Without MPI, RANK/WORLD_SIZE place a process in a mesh of groups of one.
WORLD_SIZE=2 RANK=1 "$sharc" read --mesh dp=2 --json --max-duration 30 "$tmp/data/shar" \
  >"$tmp/r1.jsonl"
python3 - "$tmp/r1.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert all(r["rank"] == 1 and r["source"] for r in rows), rows[-1]
assert rows[-1]["reader"]["shards"] == 2, rows[-1]  # its slot's half of the 4 shards
PY

# Several slots in one job: each slot's source saves FILE.dp<slot> and dumps into DIR/dp<slot>/,
# peers write nothing, and resuming reads each slot's own state: the resumed runs equal the
# rest of the uninterrupted ones, slot by slot.
read_args=(read --transport mpi --mesh dp=2,cp=2 --json --max-duration 30 --threads 1)
mpirun --oversubscribe -n 4 "$sharc" "${read_args[@]}" "$tmp/data/shar" >"$tmp/full.jsonl"
mpirun --oversubscribe -n 4 "$sharc" "${read_args[@]}" --save-state-at 1 "$tmp/st" \
  --dump-dir "$tmp/dump" --limit 2 "$tmp/data/shar" >"$tmp/saved.jsonl"
[ -s "$tmp/st.dp0" ] && [ -s "$tmp/st.dp1" ] && [ ! -e "$tmp/st" ]
mpirun --oversubscribe -n 4 "$sharc" "${read_args[@]}" --resume "$tmp/st" "$tmp/data/shar" \
  >"$tmp/resumed.jsonl"
python3 - "$tmp" "$src/tests/cli" <<'PY'
import json, os, sys, zlib
sys.path.insert(0, sys.argv[2])
from clicheck import read_npy  # the .npy parser of the CLI tests (no numpy needed)
tmp = sys.argv[1]
def batches(name):
    rows = [json.loads(l) for l in open(os.path.join(tmp, name))]
    return {(r["rank"], r["step"]): r for r in rows if "step" in r and "ids" in r}
full, saved, resumed = batches("full.jsonl"), batches("saved.jsonl"), batches("resumed.jsonl")
assert saved and resumed
for (rank, step), r in resumed.items():
    assert step >= 2, (rank, step)
    f = full[(rank, step)]
    assert (r["ids"], r["audio_crc32"]) == (f["ids"], f["audio_crc32"]), (rank, step)
assert {k for k in full if k[1] >= 2} == set(resumed), (sorted(full), sorted(resumed))
for slot, source in ((0, 0), (1, 2)):  # ranks 0 and 2 are the sources of slots 0 and 1
    for step in (0, 1):
        _, _, audio = read_npy(os.path.join(tmp, "dump", f"dp{slot}", f"step{step}.audio.npy"))
        assert zlib.crc32(audio) == saved[(source, step)]["audio_crc32"], (slot, step)
assert sorted(os.listdir(os.path.join(tmp, "dump"))) == ["dp0", "dp1"]
assert saved[(0, 0)]["ids"] != saved[(2, 0)]["ids"]  # the slots read different data
PY

# Even steps: 4 shards over 3 slots give slot 0 twice the batches of the others; every rank
# ends at the same step, and the slots that still had batches say how many they drop. With
# --no-even-steps each slot reads to its own end.
even_args=(read --transport mpi --mesh dp=3 --json --max-duration 30 --threads 1 --epochs 2)
mpirun --oversubscribe -n 3 "$sharc" "${even_args[@]}" "$tmp/data/shar" >"$tmp/even.jsonl" \
  2>"$tmp/err.even"
mpirun --oversubscribe -n 3 "$sharc" "${even_args[@]}" --no-even-steps "$tmp/data/shar" \
  >"$tmp/uneven.jsonl"
python3 - "$tmp" <<'PY'
import collections, json, os, re, sys
tmp = sys.argv[1]
def steps(name):
    n = collections.Counter()
    for l in open(os.path.join(tmp, name)):
        r = json.loads(l)
        n[r["rank"]] += "step" in r and "ids" in r
    return n
even, uneven = steps("even.jsonl"), steps("uneven.jsonl")
assert len(set(uneven.values())) > 1, uneven  # the slots differ, or this proves nothing
assert set(even.values()) == {min(uneven.values())}, (even, uneven)
drops = re.findall(r"slot (\d) drops the (\d+) batches", open(os.path.join(tmp, "err.even")).read())
assert sorted((int(s), int(b)) for s, b in drops) == sorted(
    (r, uneven[r] - even[r]) for r in uneven if uneven[r] > even[r]), drops
PY

# Elastic resume: states saved by D slots after two steps resume on D' (4 -> 2, 2 -> 3, 3 -> 2,
# 3 -> 4, 4 -> 4), of one dataset and of a finite mixture of two (input_cfg; 2 -> 4, 3 -> 2);
# over the two runs every cut is delivered exactly once (without even steps, which would drop
# what the longest slots have left at the end). A slot's file missing is refused.
"$gen" --out "$tmp/mixb" --layout wds --compress none --shards 2 --cuts-per-shard 6 --seed 5 \
  --max-duration 6 >/dev/null
printf -- '- {type: lhotse_shar, shar_path: %s, weight: 2}\n- {type: wds, paths: %s, weight: 1}\n' \
  "$tmp/data/shar" "$tmp/mixb/wds" >"$tmp/mix.yaml"
cat "$tmp/data/shar.expected.jsonl" "$tmp/mixb/wds.expected.jsonl" >"$tmp/mix.expected.jsonl"
for case in "4 2 shar" "2 3 shar" "3 2 shar" "3 4 shar" "4 4 shar" "2 4 mix" "3 2 mix"; do
  set -- $case
  el_args=(read --json --max-duration 30 --threads 1 --transport mpi --no-even-steps)
  if [ "$3" = mix ]; then
    input=(--input-cfg "$tmp/mix.yaml" --mix-finite) expected=$tmp/mix.expected.jsonl
  else
    input=("$tmp/data/shar") expected=$tmp/data/shar.expected.jsonl
  fi
  rm -f "$tmp"/el.dp*
  mpirun --oversubscribe -n "$1" "$sharc" "${el_args[@]}" --mesh dp="$1" --save-state-at 1 \
    "$tmp/el" --limit 2 "${input[@]}" >"$tmp/el_saved.jsonl"
  mpirun --oversubscribe -n "$2" "$sharc" "${el_args[@]}" --mesh dp="$2" --resume "$tmp/el" \
    "${input[@]}" >"$tmp/el_resumed.jsonl"
  python3 - "$tmp" "$expected" "$case" <<'PY'
import collections, json, os, sys
tmp, expected, case = sys.argv[1], sys.argv[2], sys.argv[3]
ids, saved = collections.Counter(), 0
for name in ("el_saved.jsonl", "el_resumed.jsonl"):
    for l in open(os.path.join(tmp, name)):
        r = json.loads(l)
        if "ids" in r:
            ids.update(r["ids"])
            saved += name == "el_saved.jsonl"
want = collections.Counter(json.loads(l)["id"] for l in open(expected))
assert saved >= 2 * int(case.split()[0]), (case, saved)  # every old slot had stopped at step 1
assert ids == want, (case, sum(ids.values()), sum(want.values()), (ids - want).most_common(3),
                     (want - ids).most_common(3))
PY
done
rm "$tmp/el.dp1"
rc=0
"$sharc" read --resume "$tmp/el" --input-cfg "$tmp/mix.yaml" --mix-finite >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -q "the states of --resume $tmp/el are incomplete: $tmp/el.dp1 is missing but $tmp/el.dp2 exists" "$tmp/err"

# A state file that would replace a shard is refused by every rank of the group, before
# anything is read: no rank waits for another, and the shard is intact.
cp "$tmp/data/shar/recording.000000.tar.gz" "$tmp/shard.orig"
ln -s "$tmp/data/shar/recording.000000.tar.gz" "$tmp/link"
# Each rank says how it ended, in a file of its own (mpirun interleaves the ranks' output,
# even within a line); mpirun is told not to end the job when the first one fails.
mpirun --oversubscribe --mca orte_abort_on_non_zero_status 0 -n 2 bash -c \
  'out=$0.$OMPI_COMM_WORLD_RANK; "$@" >/dev/null 2>"$out"; echo "exit $?" >>"$out"' \
  "$tmp/err" "$sharc" read --transport mpi --mesh dp=1,cp=2 --save-state-at 0 "$tmp/link" \
  "$tmp/data/shar"
for rank in 0 1; do
  grep -qx "exit 2" "$tmp/err.$rank"
  grep -q "sharc read: --save-state-at 0 $tmp/link would overwrite $tmp/data/shar/recording.000000.tar.gz, an input of this run" "$tmp/err.$rank"
done
cmp "$tmp/shard.orig" "$tmp/data/shar/recording.000000.tar.gz"
echo ok
