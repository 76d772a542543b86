#!/usr/bin/env bash
# The main job end to end, on generated data (what `bash tools/dev demo` runs after building):
# a synthetic corpus in the three layouts, `sharc validate` of each, bucketed batches with
# `sharc read`, then 4 MPI ranks broadcasting them (tools/demo_mpi.sh) when mpirun is there.
# The test suite runs it too (cli_demo), so the README's first command keeps working.
#   bash tools/demo.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=${1:?usage: demo.sh BUILD_DIR OUT_DIR}
out=${2:?usage: demo.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
sharc=$build/tools/sharc
rm -rf "$out"
echo "== generating a synthetic corpus (Shar, NeMo, WebDataset; FLAC) in $out"
"$build/testdata/sharc-gen" --out "$out" --layout all --shards 4 --cuts-per-shard 24
echo "== sharc validate: every shard of each layout, every member decoded"
for layout in shar nemo wds; do
  "$sharc" validate "$out/$layout"
done
echo "== sharc read: duration-bucketed padded batches from the Shar corpus"
"$sharc" read "$out/shar" --batch-duration 120 --num-buckets 4 --limit 8
if command -v mpirun >/dev/null; then
  echo "== 4 MPI ranks, mesh dp=2,cp=2: one source per data-parallel slot broadcasts"
  bash "$here/demo_mpi.sh" "$build" "$out/shar"
fi
