"""sharc.Loader: the C loader over MPI on 4 ranks (mpirun), dp=2 x cp=2, and on 2 ranks
with a corrupt shard. Skipped, saying so, without MPI in this build or without mpirun."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import sharc
from sharc import _sharc
from conftest import corrupt

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(not (hasattr(_sharc, "CLoader") and MPIRUN),
                                reason="no MPI transport in this build or no mpirun: sharc.Loader is not tested")
SETTINGS = dict(batch_duration=12.0, seed=1, threads=1)


def mpirun(n, scenario, data, out, *args):
    env = dict(os.environ)
    # Open MPI refuses root and probes network interfaces otherwise (tools/dev sets the same).
    for k, v in dict(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
                     OMPI_MCA_btl_vader_single_copy_mechanism="none",
                     OMPI_MCA_rmaps_base_oversubscribe="1").items():
        env.setdefault(k, v)
    out.mkdir()
    run = subprocess.run([MPIRUN, "-n", str(n), sys.executable, os.path.join(HERE, "_mpi_loader.py"), scenario,
                          str(data), str(out), *args], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    by_rank = {}
    for rank in range(n):
        with open(out / f"{rank}.jsonl") as f:
            by_rank[rank] = [json.loads(line) for line in f]
        for line in by_rank[rank]:
            assert line.pop("rank") == rank
    return by_rank


def reader_ids(path, **kw):
    return [list(b["cut_id"]) for b in sharc.Reader(str(path), **SETTINGS, **kw)]


def test_every_rank_of_a_slot_gets_the_slot_readers_batches(corpus, tmp_path):
    got = mpirun(4, "read", corpus / "shar", tmp_path / "out")
    assert sorted(got) == [0, 1, 2, 3]
    for slot in range(2):
        want = reader_ids(corpus / "shar", dp_rank=slot, dp_size=2)
        for rank, source in ((2 * slot, True), (2 * slot + 1, False)):
            assert [e["ids"] for e in got[rank]] == want
            assert {(e["slot"], e["source"]) for e in got[rank]} == {(slot, source)}
            assert [e["step"] for e in got[rank]] == list(range(len(want)))


def test_state_round_trip_on_every_rank(corpus, tmp_path):
    got = mpirun(4, "resume", corpus / "shar", tmp_path / "out")
    for slot in range(2):
        want = reader_ids(corpus / "shar", dp_rank=slot, dp_size=2)
        for rank in (2 * slot, 2 * slot + 1):
            assert [e["ids"] for e in got[rank]] == want
            assert [e["step"] for e in got[rank]] == list(range(len(want)))


def test_a_corrupt_shard_fails_every_rank_at_the_same_step(plain_shar, tmp_path):
    corrupt("tar-replace", plain_shar / "recording.000000.tar", "spk04-utt-000000.flac", "@garbage:100")
    got = mpirun(2, "error", plain_shar, tmp_path / "out")
    src, peer = got[0], got[1]
    assert [e.get("ids") for e in src[:-1]] == [e.get("ids") for e in peer[:-1]]
    assert src[-1]["error"] == "DataError" and src[-1]["code"] == "SHARC_ERR_DECODE"
    assert src[-1]["message"].startswith(f"{plain_shar}/recording.000000.tar member spk04-utt-000000.flac "
                                         "(cut spk04-utt-000000): ")
    assert peer[-1]["error"] == "RemoteError" and peer[-1]["code"] == "SHARC_ERR_REMOTE"
    assert peer[-1]["message"] == "source rank 0: " + src[-1]["message"]


def test_broadcast_axes_as_a_string_names_axes_not_letters(corpus, tmp_path):
    # "cp" is the axis cp (as "cp,tp" is two axes), not the axes "c" and "p", which this mesh
    # lacks and which would make both ranks sources of slots of their own.
    cfg = dict(SETTINGS, mesh="cp=2", broadcast_axes="cp", steps=1)
    got = mpirun(2, "run", corpus / "shar", tmp_path / "out", json.dumps(cfg))
    want = reader_ids(corpus / "shar")[:1]
    for rank in (0, 1):
        assert [(e["slot"], e["source"], e["ids"]) for e in got[rank] if "ids" in e] == [(0, rank == 0, want[0])]


def test_iterating_a_spent_loader_again_closing_and_mesh_keywords(corpus, tmp_path):
    """A loader iterated again once its epochs are read raises, as a sharc.Reader with epochs
    does, instead of yielding nothing; it is a context manager; dp_rank/dp_size, which the
    mesh sets, are refused rather than ignored."""
    got = mpirun(1, "api", corpus / "shar", tmp_path / "out")[0]
    assert got[0] == {"batches": len(reader_ids(corpus / "shar"))}
    spent = ("sharc.Loader: the 1 epoch it was asked for (epochs=1) is read; give epochs=N (0: endless) "
             "to read more, or make a new loader")
    assert got[1:3] == [{"again": spent, "code": "EINVAL", "message": spent}, {"again": "StopIteration"}]
    assert got[3] == {"closed": "sharc.Loader is closed"}
    assert got[4] == {"dp": "sharc.Loader: keywords dp_rank, dp_size are not settings of a loader: its "
                            "data-parallel slots come from the mesh (mesh=, device_mesh=, broadcast_axes=); "
                            "remove them"}


def test_an_unnamed_device_mesh_is_refused_before_mpi_starts():
    # init_device_mesh without mesh_dim_names: the axes cannot be told apart from their names.
    mesh = type("DeviceMesh", (), {"mesh_dim_names": None, "mesh": None})()
    with pytest.raises(ValueError, match=r"^sharc.Loader: device_mesh has no mesh_dim_names: name its axes "):
        sharc.Loader("unused", device_mesh=mesh)
    with pytest.raises(ValueError, match=r"^sharc.Loader: give mesh or device_mesh, not both$"):
        sharc.Loader("unused", device_mesh=mesh, mesh="dp=1")
