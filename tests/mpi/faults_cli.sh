#!/usr/bin/env bash
# Failures of `sharc read` (and a hang of `sharc bench`) under mpirun, on 2 and 4 ranks: every rank must end, non-zero,
# within the timeout (plus a margin), with a message naming the failing rank and the cause.
#   - the source cannot write --save-state-at, or its file system fills up while it writes
#     --dump-dir files (its peers are told at the next step); a --dump-dir that cannot be
#     made (every rank checks it before the first step);
#   - ranks started with a different --limit or a different --mesh;
#   - the source, or a peer, is killed with SIGKILL mid-run;
#   - `sharc bench`'s peer stops (SIGSTOP): the source times out and exits without hanging.
#   faults_cli.sh BUILD_ROOT SHARC_GEN
set -euo pipefail
build=$1 gen=$2
sharc=$build/tools/sharc
tmp=$(mktemp -d)
mounted=()
cleanup() {
  for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
"$gen" --out "$tmp/data" --layout shar --shards 4 --cuts-per-shard 10 --max-duration 6 >/dev/null
data=$tmp/data/shar
# Ranks end by themselves: mpirun must not kill the others when one exits non-zero (except
# after a SIGKILL below, where mpirun's own reaction is part of what a user sees).
mpi=(mpirun --oversubscribe --mca orte_abort_on_non_zero_status 0)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Each rank runs through this wrapper, which says how that rank ended: rank.sh OUT CMD...
# writes the rank's output and its ending to OUT.<rank>, a file of its own (mpirun would
# interleave the ranks' output, even within a line).
cat >"$tmp/rank.sh" <<'EOF'
out=$1.$OMPI_COMM_WORLD_RANK
shift
rc=0
"$@" >"$out" 2>&1 || rc=$?
echo "rank $OMPI_COMM_WORLD_RANK exited $rc" >>"$out"
EOF

# run_all NAME SECONDS N -n K ARGS... [: -n K ARGS...]: a job of N ranks; every rank must end
# by itself, non-zero, within SECONDS. Output in $tmp/NAME.out.
run_all() {
  local name=$1 limit=$2 n=$3 start rc=0 args=() a
  shift 3
  for a in "$@"; do # each rank's command goes through the wrapper
    [ "$a" = "$sharc" ] && args+=(bash "$tmp/rank.sh" "$tmp/$name.rank")
    args+=("$a")
  done
  rm -f "$tmp/$name".rank.*
  start=$(date +%s.%N)
  timeout 120 "${mpi[@]}" "${args[@]}" >"$tmp/$name.mpirun" 2>&1 || rc=$?
  cat "$tmp/$name.mpirun" "$tmp/$name".rank.* >"$tmp/$name.out" 2>/dev/null || true
  local took
  took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
  [ "$rc" != 124 ] || fail "$name: the job hung (killed by timeout after 120 s)"
  local ended
  ended=$(grep -c "^rank [0-9]* exited [1-9]" "$tmp/$name.out" || true)
  [ "$ended" = "$n" ] || { cat "$tmp/$name.out" >&2; fail "$name: $ended of $n ranks exited non-zero"; }
  python3 -c "import sys; sys.exit(0 if $took <= $limit else 1)" ||
    fail "$name: took $took s, over $limit s"
  echo "$name: all $n ranks ended non-zero in $took s"
}

# expect NAME N TEXT: TEXT appears on N lines of the output (one per rank that prints it).
expect() {
  local n
  n=$(grep -cF -- "$3" "$tmp/$1.out" || true)
  [ "$n" = "$2" ] || { cat "$tmp/$1.out" >&2; fail "$1: '$3' on $n lines, want $2"; }
}

for n in 2 4; do
  mesh=cp=$n
  # The source cannot write its state: every peer is told at the next step.
  run_all "state$n" 30 $n -n $n "$sharc" read --transport mpi --mesh $mesh --quiet --timeout 20 \
    --save-state-at 2 /nonexistent/dir/state.bin "$data"
  expect "state$n" 1 "sharc read: cannot write the state of step 2 to /nonexistent/dir/state.bin"
  expect "state$n" $((n - 1)) \
    "sharc read: error: source rank 0: cannot write the state of step 2 to /nonexistent/dir/state.bin"

  # The source cannot write its dump files.
  touch "$tmp/a-file"
  run_all "dump$n" 30 $n -n $n "$sharc" read --transport mpi --mesh $mesh --quiet --timeout 20 \
    --dump-dir "$tmp/a-file/dumps" "$data"
  expect "dump$n" $n "sharc read: cannot create the dump directory $tmp/a-file/dumps: Not a directory"

  # The source's file system fills up while it dumps the first batch (a 64 KiB tmpfs):
  # every peer is told at the next step, and no partial file is left. Needs the right to
  # mount, which root has here; skipped, and said so, elsewhere.
  mkdir -p "$tmp/full$n"
  if mount -t tmpfs -o size=64k tmpfs "$tmp/full$n" 2>/dev/null; then
    mounted+=("$tmp/full$n")
    run_all "dumpfull$n" 30 $n -n $n "$sharc" read --transport mpi --mesh $mesh --quiet \
      --timeout 20 --max-duration 60 --dump-dir "$tmp/full$n" "$data"
    expect "dumpfull$n" $((n - 1)) \
      "sharc read: error: source rank 0: cannot write tensor audio of step 0 to $tmp/full$n: No space left on device"
    [ -z "$(find "$tmp/full$n" -name '*.tmp*' -o -name 'step0.audio.npy')" ] ||
      fail "dumpfull$n: a partial dump file was left"
  else
    echo "dumpfull$n: skipped (cannot mount a 64 KiB tmpfs here)"
  fi

  # The last rank was started with another --limit.
  run_all "limit$n" 30 $n -n $((n - 1)) "$sharc" read --transport mpi --mesh $mesh --quiet \
    --limit 3 "$data" : -n 1 "$sharc" read --transport mpi --mesh $mesh --quiet "$data"
  expect "limit$n" $n "settings differ in the broadcast group: max_steps is 3 on source rank 0 but 0 on rank $((n - 1))"

  # The last rank was started with another --mesh.
  run_all "mesh$n" 30 $n -n $((n - 1)) "$sharc" read --transport mpi --mesh $mesh --quiet "$data" \
    : -n 1 "$sharc" read --transport mpi --mesh dp=$n --quiet "$data"
  expect "mesh$n" $n "the ranks were started with different meshes: rank 0 has $mesh broadcast=cp but rank $((n - 1)) has dp=$n broadcast=-"
done

# rank_pid NAME PATTERN RANK: the pid of global rank RANK of a job whose command line holds
# PATTERN, once it runs (within 10 s).
rank_pid() {
  local p
  for _ in $(seq 100); do
    for p in $(pgrep -f "$2" || true); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$3"; then
        echo "$p"
        return
      fi
    done
    sleep 0.1
  done
  fail "$1: rank $3 never started"
}

# kill_rank N RANK: SIGKILL global rank RANK of an endless read on N ranks, once it runs.
kill_rank() {
  local n=$1 rank=$2 name=kill$1-$2 pid start rc=0
  mpirun --oversubscribe -n "$n" "$sharc" read --transport mpi --mesh cp="$n" --quiet --epochs 0 \
    --timeout 5 "$data" >"$tmp/$name.out" 2>&1 &
  local job=$!
  pid=$(rank_pid "$name" "$sharc read --transport mpi" "$rank")
  sleep 1 # well into the endless read
  start=$(date +%s.%N)
  kill -9 "$pid"
  wait "$job" || rc=$?
  local took
  took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
  [ "$rc" != 0 ] || fail "$name: the job exited 0"
  python3 -c "import sys; sys.exit(0 if $took <= 5 + 5 else 1)" ||
    fail "$name: the other ranks took $took s to end, over the 5 s timeout + 5 s"
  # Whoever notices first says so: mpirun (the rank and its signal) or a rank's timeout.
  grep -qE "exited on signal 9|did not complete within 5000 ms" "$tmp/$name.out" ||
    { cat "$tmp/$name.out" >&2; fail "$name: no message names the killed rank or the timeout"; }
  echo "$name: the other ranks ended $took s after rank $rank was killed (exit $rc)"
}
kill_rank 2 0
kill_rank 2 1
kill_rank 4 0
kill_rank 4 3

# `sharc bench` on 2 ranks whose peer stops (SIGSTOP) mid-run: the source's collective times
# out, and it exits 1 without MPI_Finalize, which would wait for the stopped rank forever;
# mpirun then ends the job. The job must end within the timeout plus a margin (it hung before).
stall_bench() {
  local name=stall-bench pid start rc=0
  mpirun --oversubscribe -n 2 "$sharc" bench --transport mpi --mesh cp=2 --quiet --epochs 0 \
    --batches 100000 --batch-duration 20 --threads 1 --timeout 3 "$data" >"$tmp/$name.out" 2>&1 &
  local job=$!
  pid=$(rank_pid "$name" "$sharc bench --transport mpi" 1)
  sleep 1 # well into the run
  start=$(date +%s.%N)
  kill -STOP "$pid"
  # Were the source to wait in MPI_Finalize, the job would never end: 40 s, then the stopped
  # rank is killed, which ends it (late, and the check below fails).
  (sleep 40 && kill -KILL "$pid") >/dev/null 2>&1 &
  local guard=$!
  wait "$job" || rc=$?
  kill "$guard" 2>/dev/null || true
  kill -KILL "$pid" 2>/dev/null || true
  local took
  took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
  [ "$rc" != 0 ] || fail "$name: the job exited 0"
  # mpirun takes a few seconds more to end the stopped rank once the source has exited.
  python3 -c "import sys; sys.exit(0 if $took <= 3 + 15 else 1)" ||
    { cat "$tmp/$name.out" >&2; fail "$name: the job took $took s to end after the stop, over the 3 s timeout + 15 s"; }
  grep -q "did not complete within 3000 ms" "$tmp/$name.out" ||
    { cat "$tmp/$name.out" >&2; fail "$name: no message names the timeout"; }
  echo "$name: the job ended $took s after rank 1 stopped (exit $rc)"
}
stall_bench
echo "faults_cli: passed"
