#!/usr/bin/env bash
# The main job's demo: 4 MPI ranks on mesh dp=2,cp=2 read a Shar corpus with sharc read.
# Ranks 0 and 2 are the sources of the two data-parallel slots (they alone open files);
# ranks 1 and 3 receive every batch from them. The script checks that each CP peer got
# exactly its source's batches (ids and audio CRC-32 per step) and that the two slots read
# disjoint cuts that together cover the corpus.
#   bash tools/demo_mpi.sh BUILD_DIR SHAR_DIR
set -euo pipefail
build=${1:?usage: demo_mpi.sh BUILD_DIR SHAR_DIR}
data=${2:?usage: demo_mpi.sh BUILD_DIR SHAR_DIR}
sharc=$build/tools/sharc
[ -x "$sharc" ] || { echo "demo_mpi: $sharc not found (build first)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "demo_mpi: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }

# OpenMPI refuses root and more ranks than cores unless told; shared memory only.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "\$ mpirun --oversubscribe -n 4 $sharc read --transport mpi --mesh dp=2,cp=2 --json" \
  "--batch-duration 120 --num-buckets 4 --threads 2 $data"
mpirun --oversubscribe -n 4 --output-filename "$out/log" \
  "$sharc" read --transport mpi --mesh dp=2,cp=2 --json --batch-duration 120 --num-buckets 4 \
  --threads 2 "$data" >/dev/null

python3 - "$out/log" <<'PY'
import glob, json, os, sys
ranks = {}
for path in glob.glob(os.path.join(sys.argv[1], "**", "stdout"), recursive=True):
    lines = [json.loads(l) for l in open(path) if l.strip()]
    rank = lines[-1]["rank"]
    ranks[rank] = lines
assert sorted(ranks) == [0, 1, 2, 3], f"ranks seen: {sorted(ranks)}"
def batches(r):
    return [(b["step"], tuple(b["ids"]), b["audio_crc32"]) for b in ranks[r] if b["type"] == "batch"]
print()
print("rank  role    slot  batches  cuts  first ids")
for r in range(4):
    b = batches(r)
    summary = ranks[r][-1]
    assert summary["type"] == "summary" and summary["error"] is None, summary
    role = "source" if summary["source"] else "peer"
    print(f"{r:4}  {role:6}  {r // 2:4}  {len(b):7}  {sum(len(x[1]) for x in b):4}  {', '.join(b[0][1][:2])}")
for src, peer in ((0, 1), (2, 3)):
    assert ranks[src][-1]["source"] and not ranks[peer][-1]["source"]
    # A peer never opens the shards: its summary gives no layout.
    assert ranks[src][-1]["layout"] == "shar" and ranks[peer][-1]["layout"] is None
    assert batches(src) == batches(peer), f"rank {peer} differs from its source {src}"
    print(f"rank {peer} received exactly rank {src}'s {len(batches(src))} batches "
          "(same steps, ids and audio CRC-32)")
ids = [set(i for b in batches(s) for i in b[1]) for s in (0, 2)]
assert not ids[0] & ids[1], "the two data-parallel slots share cuts"
print(f"slots 0 and 1 read disjoint cuts: {len(ids[0])} + {len(ids[1])} = {len(ids[0] | ids[1])}")
PY
