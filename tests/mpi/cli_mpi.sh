#!/usr/bin/env bash
# The CLI under mpirun: tools/demo_mpi.sh (4 ranks, dp=2,cp=2, peers must print their
# source's batches), `sharc bench --broadcast-only` JSON on 2 ranks, and the usage errors of
# --transport/--mesh.   cli_mpi.sh BUILD_ROOT SOURCE_ROOT SHARC_GEN
set -euo pipefail
build=$1 src=$2 gen=$3
sharc=$build/tools/sharc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
echo ok
