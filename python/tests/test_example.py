"""docs/examples/train_loop.py runs as docs/python.md shows: one process, and torchrun with
dp=2 x cp=2 over gloo, each resumed from its checkpoint at the next batch."""
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is not installed: the training loop example is not run")

import sharc  # noqa: E402
from _dist_workers import free_port  # noqa: E402

ROOT = os.environ.get("SHARC_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "docs", "examples", "train_loop.py")


def run(args, nproc=None):
    """Run the example; with `nproc`, as torchrun starts it: `nproc` processes with RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set (torchrun itself is not used:
    Debian 12's torch 1.13 has a torchrun that fails on Python 3.11)."""
    cmd = [sys.executable, EXAMPLE, *map(str, args)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if not nproc:
        outs = [subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=300).stdout]
    else:
        port = str(free_port())
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nproc),
                                           MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
                 for r in range(nproc)]
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            outs.append(out)
    steps = {}
    for line in "".join(outs).splitlines():
        m = re.fullmatch(r"rank (\d+) step (\d+) ids (.*)", line)
        if m:
            steps[(int(m[1]), int(m[2]))] = m[3].split(",")
    return steps


def test_single_process_resumes_at_the_next_batch(corpus, tmp_path):
    data = corpus / "shar"
    whole = run([data, tmp_path / "a", "--steps", 7])
    first = run([data, tmp_path / "b", "--steps", 4])
    second = run([data, tmp_path / "b", "--steps", 3])
    assert sorted(whole) == [(0, s) for s in range(7)]
    assert {**first, **second} == whole
    reader = sharc.Reader(str(data), batch_duration=12.0, seed=1, epochs=0, threads=2)
    assert [whole[(0, s)] for s in range(7)] == [list(next(reader)["cut_id"]) for _ in range(7)]


def test_torchrun_dp2_cp2(corpus, tmp_path):
    data = corpus / "shar"
    first = run([data, tmp_path / "c", "--dp", 2, "--steps", 3], nproc=4)
    second = run([data, tmp_path / "c", "--dp", 2, "--steps", 2], nproc=4)
    got = {**first, **second}
    assert sorted(got) == [(r, s) for r in range(4) for s in range(5)]
    for slot in range(2):
        reader = sharc.Reader(str(data), batch_duration=12.0, seed=1, epochs=0, threads=2, dp_rank=slot, dp_size=2)
        want = [list(next(reader)["cut_id"]) for _ in range(5)]
        for rank in (2 * slot, 2 * slot + 1):  # the slot's source and its cp peer
            assert [got[(rank, s)] for s in range(5)] == want
