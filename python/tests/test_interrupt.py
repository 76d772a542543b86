"""Ctrl-C while sharc waits: KeyboardInterrupt comes at once, not when a stalled shard or
listing finally answers, and the reader is left usable (next) or never half open (open)."""
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

# Bound on the time from SIGINT to KeyboardInterrupt: generous for a loaded machine, far
# below the stall (600 s) that it was before.
BOUND_S = 5.0


def _start(code, env=None):
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})
    line = proc.stdout.readline()
    if line != "waiting\n":
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the child did not start: {line!r} {out!r} {err!r}")
    time.sleep(0.5)  # into the C call's wait
    return proc


def _interrupt(proc):
    """SIGINT to the child; the seconds until it reports KeyboardInterrupt."""
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    line = proc.stdout.readline() if ready else "(nothing in 30 s)"
    took = time.monotonic() - t0
    return line, took


def _finish(proc, timeout=60):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the child did not end after the interrupt: {out!r} {err!r}")
    return out, err


def test_ctrl_c_while_next_waits_for_a_stalled_shard(corpus, tmp_path):
    """A shard whose command writes its tar and then waits: next() waits for the end of the
    shard, SIGINT raises KeyboardInterrupt within the bound, and the same reader, once the
    command goes on, returns every cut from step 0."""
    tar = corpus / "wds" / "shard-000000.tar.gz"
    go = tmp_path / "go"
    path = f"pipe:cat '{tar}'; until test -e '{go}'; do sleep 0.05; done # shard-000000.tar.gz"
    code = f"""
import json
import sharc
r = sharc.Reader([{path!r}], layout="wds", batch_duration=1000.0, threads=1)
it = iter(r)
try:
    print("waiting", flush=True)
    next(it)
    print("no interrupt", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
open({str(go)!r}, "w").close()
steps, ids = [], []
for b in r:
    steps.append(b.step)
    ids += b["cut_id"]
print(json.dumps([steps, sorted(ids)]), flush=True)
r.close()
"""
    proc = _start(code)
    line, took = _interrupt(proc)
    out, err = _finish(proc)
    assert line == "interrupted\n", (line, out, err)
    assert took < BOUND_S, f"KeyboardInterrupt came {took:.1f} s after SIGINT"
    with open(corpus / "wds.expected.jsonl") as f:
        want = sorted(e["id"] for e in map(json.loads, f) if e["shard"] == "shard-000000.tar.gz")
    steps, ids = json.loads(out)
    assert steps == list(range(len(steps))) and ids == want
    assert proc.returncode == 0, err


def test_ctrl_c_while_open_waits_for_a_stalled_listing():
    """An S3 listing from an endpoint that accepts the connection and never answers: SIGINT
    raises KeyboardInterrupt from sharc.Reader() within the bound, and the program ends."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)  # the kernel completes the connection; nobody answers
        port = server.getsockname()[1]
        code = """
import sharc
try:
    print("waiting", flush=True)
    sharc.Reader("s3://bucket/prefix/", batch_duration=10.0, timeout_ms=600000, retries=0)
    print("no interrupt", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""
        env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}
        proc = _start(code, env)
        line, took = _interrupt(proc)
        out, err = _finish(proc, timeout=30)
    assert line == "interrupted\n", (line, out, err)
    assert took < BOUND_S, f"KeyboardInterrupt came {took:.1f} s after SIGINT"
    assert proc.returncode == 0, err
