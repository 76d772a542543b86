#!/usr/bin/env bash
# sharc ranks on three hosts: three network namespaces, each with one veth link to a bridge in
# a fourth ("the switch"), OpenMPI over TCP between them (no shared memory). The test makes
# the namespaces with iproute2 and removes them on exit; where that is not allowed (not root,
# no network namespaces, no veth) it is skipped (exit 77) and says why. It shows:
#   (a) under 20 ms latency and 1% loss on every link (tc netem, or where the kernel has no
#       netem a hub of our own, tests/net/wire.py), the batches equal those of a one-host run;
#   (b) one host's link cut mid-run: every rank ends within --timeout plus one step, with an
#       error naming the unreachable rank and the step; no state file is left half-written.
# Only the namespaces' own addresses are used.     netns.sh BUILD_ROOT SHARC_GEN
set -euo pipefail
build=$1 gen=$2
sharc=$build/tools/sharc
skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
command -v ip >/dev/null || skip "needs iproute2 (ip)"
command -v mpirun >/dev/null || skip "needs mpirun"

tmp=$(mktemp -d)
pfx=sharc$$ # namespace names of this run: ${pfx}h0 ${pfx}h1 ${pfx}h2 ${pfx}sw
hosts=(h0 h1 h2)
job=""
cleanup() {
  [ -z "$job" ] || kill "$job" 2>/dev/null || true
  for h in "${hosts[@]}" sw; do # what this test started in its namespaces, then them
    for p in $(ip netns pids "$pfx$h" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$pfx$h" 2>/dev/null || true
  done
  [ -n "${SHARC_NETNS_KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
net=10.77.0
ip netns add "${pfx}sw" 2>"$tmp/err" || skip "cannot make a network namespace: $(cat "$tmp/err")"
ip -n "${pfx}sw" link add br0 type bridge 2>"$tmp/err" ||
  skip "cannot make a bridge: $(cat "$tmp/err")"
ip -n "${pfx}sw" link set br0 up
for i in 0 1 2; do
  ns=$pfx${hosts[$i]}
  ip netns add "$ns"
  ip link add eth0 netns "$ns" type veth peer name "p$i" netns "${pfx}sw" 2>"$tmp/err" ||
    skip "cannot make a veth link: $(cat "$tmp/err")"
  ip -n "${pfx}sw" link set "p$i" master br0 up
  ip -n "$ns" addr add "$net.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  mkdir "$tmp/$ns"
  echo "$net.$((i + 1)) slots=1" >>"$tmp/hostfile"
done

# mpirun starts its daemons through this "remote shell": the host argument names the
# namespace to run the command in (ssh would run it through the remote user's shell). The
# hosts share one file system and one host name, so each has a TMPDIR of its own: OpenMPI's
# daemons of one job on the same host name would otherwise make the same session directory
# and write the same topology file in it at once, and one in ten launches failed or hung.
cat >"$tmp/agent.sh" <<EOF
#!/bin/sh
host=\$1
shift
case "\$host" in
  $net.1) ns=${pfx}h0 ;;
  $net.2) ns=${pfx}h1 ;;
  $net.3) ns=${pfx}h2 ;;
  *) echo "agent.sh: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" env TMPDIR="$tmp/\$ns" /bin/sh -c "\$*"
EOF
chmod +x "$tmp/agent.sh"

# netem on each host's end of its link (its outgoing packets): every packet from one host to
# another crosses one, so 20 ms one way and 1% of the packets lost.
shape() {
  local i
  for i in 0 1 2; do
    ip netns exec "$pfx${hosts[$i]}" tc qdisc replace dev eth0 root netem "$@" || return 1
  done
}
shaped="20 ms, 1% loss (tc netem)"
if ! shape delay 20ms loss 1% 2>"$tmp/err"; then
  # No netem in this kernel: the switch's bridge gives way to tests/net/wire.py, a hub that
  # delays and drops the frames itself. Segments of one MTU each, so that it can forward them.
  echo "netem: not available here ($(head -n 1 "$tmp/err")); tests/net/wire.py shapes the links"
  for i in 0 1 2; do
    ip -n "${pfx}sw" link set "p$i" nomaster
    ip -n "$pfx${hosts[$i]}" link set eth0 gso_max_segs 1
  done
  ip netns exec "${pfx}sw" python3 "$(dirname "$0")/wire.py" "$tmp/wire.ready" 20 1 7 p0 p1 p2 &
  for _ in $(seq 100); do [ -e "$tmp/wire.ready" ] && break; sleep 0.05; done
  [ -e "$tmp/wire.ready" ] || fail "tests/net/wire.py did not start"
  shaped="20 ms, 1% loss (tests/net/wire.py)"
fi

"$gen" --out "$tmp/data" --layout shar --shards 6 --cuts-per-shard 20 --max-duration 6 >/dev/null
data=$tmp/data/shar
# Each rank's output, and when and how it ended, in a file of its own.
cat >"$tmp/rank.sh" <<'EOF'
out=$1.$OMPI_COMM_WORLD_RANK
shift
echo "rank $OMPI_COMM_WORLD_RANK in namespace $(ip netns identify)" >"$out"
rc=0
"$@" >>"$out" 2>&1 || rc=$?
echo "rank $OMPI_COMM_WORLD_RANK exited $rc at $(date +%s.%N)" >>"$out"
EOF
mpi_net=(--mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include
  "$net.0/24" --mca plm_rsh_agent "$tmp/agent.sh" --mca plm_rsh_no_tree_spawn 1
  --mca orte_abort_on_non_zero_status 0 --hostfile "$tmp/hostfile" -n 3 --map-by node)
read_args=(read --transport mpi --mesh dp=1,cp=3 --json --batch-duration 20 --threads 1)

# (a) The batches of three hosts equal those of one.
start=$(date +%s.%N)
ip netns exec "${pfx}h0" timeout -k 5 60 env -u OMPI_MCA_btl TMPDIR="$tmp/${pfx}h0" mpirun "${mpi_net[@]}" \
  bash "$tmp/rank.sh" "$tmp/a" "$sharc" "${read_args[@]}" "$data" >"$tmp/a.mpirun" 2>&1 ||
  { cat "$tmp/a.mpirun" "$tmp"/a.* >&2; fail "(a): the run across namespaces failed"; }
took=$(python3 -c "print(round($(date +%s.%N) - $start, 2))")
timeout -k 5 60 mpirun --oversubscribe -n 3 bash "$tmp/rank.sh" "$tmp/one" "$sharc" \
  "${read_args[@]}" "$data"
pfx=$pfx python3 - "$tmp" "$took" "$shaped" <<'PY'
import json, os, sys
tmp, took, shaped = sys.argv[1], float(sys.argv[2]), sys.argv[3]
def batches(run, namespace):
    out = {}
    for rank in range(3):
        lines = open(os.path.join(tmp, f"{run}.{rank}")).read().splitlines()
        assert lines[-1].startswith(f"rank {rank} exited 0"), lines[-3:]
        assert lines[0] == f"rank {rank} in namespace {namespace(rank)}", lines[0]
        rows = [json.loads(l) for l in lines if l.startswith("{")]
        out.update({(r["rank"], r["step"]): (r["ids"], r["audio_crc32"])
                    for r in rows if "ids" in r})
    return out
one = batches("one", lambda rank: "")
net = batches("a", lambda rank: f"{os.environ['pfx']}h{rank}")
assert one and net == one, (len(one), len(net))
steps = len(one) // 3
open(os.path.join(tmp, "step_s"), "w").write(str(took / steps))
print(f"(a) {steps} steps on 3 hosts ({shaped}) in {took} s,"
      f" {took / steps * 1000:.0f} ms a step: the batches of the one-host run")
PY

# (b) h2's link goes down mid-run (an endless read, saving its state every few steps): every
# rank ends by itself, within the timeout plus one step, naming the rank it lost and the step.
timeout_s=3
step_s=$(cat "$tmp/step_s")
saves=()
for s in $(seq 4 4 64); do saves+=(--save-state-at "$s" "$tmp/state$s"); done
# Fixed bins and a small buffer: the first batch comes at once even though the read is endless.
endless=(--epochs 0 --bins 2,4 --buffer-size 100)
ip netns exec "${pfx}h0" timeout -k 5 60 env -u OMPI_MCA_btl TMPDIR="$tmp/${pfx}h0" mpirun "${mpi_net[@]}" \
  bash "$tmp/rank.sh" "$tmp/b" "$sharc" "${read_args[@]}" "${endless[@]}" --timeout $timeout_s \
  "${saves[@]}" "$data" >"$tmp/b.mpirun" 2>&1 &
job=$!
for _ in $(seq 400); do # until the ranks are a few steps in
  [ "$(cat "$tmp/b.2" 2>/dev/null | grep -c "\"ids\"")" -ge 8 ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.05
done
[ "$(cat "$tmp/b.2" 2>/dev/null | grep -c "\"ids\"")" -ge 8 ] ||
  { cat "$tmp/b.mpirun" "$tmp"/b.[012] >&2 2>/dev/null; fail "(b): the ranks did not start"; }
cut=$(date +%s.%N)
ip -n "${pfx}h2" link set eth0 down
for _ in $(seq 300); do # until every rank has ended, or 30 s
  [ "$(cat "$tmp"/b.[012] 2>/dev/null | grep -c '^rank [0-9] exited')" = 3 ] && break
  sleep 0.1
done
# The link comes back: mpirun hears from h2's daemon and ends (killed if it does not).
ip -n "${pfx}h2" link set eth0 up
for _ in $(seq 100); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && echo "(b) mpirun had not ended 10 s after the link came back"
kill "$job" 2>/dev/null || true
wait "$job" 2>/dev/null || true
job=""
window_s=0.6 # the probe, the timeout's last fifth (0.1 to 2 s)
python3 - "$tmp" "$cut" "$timeout_s" "$step_s" "$window_s" <<'PY'
import os, re, sys
tmp = sys.argv[1]
cut, timeout_s, step_s, window_s = map(float, sys.argv[2:])
silent = {0: "rank 2", 1: "rank 2", 2: "ranks 0; 1"}  # h2 lost its link
for rank in range(3):
    text = open(os.path.join(tmp, f"b.{rank}")).read()
    end = re.search(r"^rank \d exited (\d+) at ([\d.]+)$", text, re.M)
    assert end, f"rank {rank} did not end:\n{text[-2000:]}"
    rc, took = int(end.group(1)), float(end.group(2)) - cut
    last = max(int(s) for s in re.findall(r'"type":"batch","step":(\d+)', text))
    error = text.splitlines()[-2]
    print(f"(b) rank {rank} ended {took:.2f} s after the cut (last batch: step {last}), "
          f"exit {rc}: {error}")
    info = "\n".join(l for l in text.splitlines() if "\"batch\"" not in l)
    assert rc == 1 and took <= timeout_s + step_s + 1.0, (rank, rc, took, info)
    step = f"step {last + 1}: broadcast over mpi failed: "
    assert error.startswith(f"sharc read: error: {step}"), info
    assert f"within {int(timeout_s * 1000)} ms on rank {rank} of a broadcast group of 3" in error
    probe = f"no answer to a probe within {int(window_s * 1000)} ms from {silent[rank]};"
    assert probe in error, error
PY
# Every state file there is whole: each resumes, and no temporary file is left.
ls "$tmp"/state4 >/dev/null || fail "(b): no state was saved before the cut"
for f in "$tmp"/state*; do
  [[ $f =~ /state[0-9]+$ ]] || fail "(b): a partial state file was left: $f"
  "$sharc" read "${read_args[@]:5}" "${endless[@]}" --resume "$f" --limit 1 "$data" >/dev/null \
    2>"$tmp/err" ||
    fail "(b): $f does not resume: $(cat "$tmp/err")"
done
echo "(b) the $(ls "$tmp"/state* | wc -l) state files written before the cut all resume"
