"""Elastic resume from Python (the states of D data-parallel slots resumed on D' slots: every
cut of the epoch delivered once) for sharc.Reader, for a mixture under torch.distributed with
gloo (spawned processes, the states gathered with all_gather_object) and, under mpirun,
sharc.Loader; and the Loader's even steps (every slot ends at the same step, the rest counted
as dropped)."""
import collections
import json
import math
import subprocess

import pytest

import sharc
from sharc import _sharc
from conftest import _gen
from test_loader import MPIRUN, mpirun

SETTINGS = dict(batch_duration=6.0, num_buckets=2, buffer_size=10, seed=1, threads=1, epochs=1)
needs_mpi = pytest.mark.skipif(not (hasattr(_sharc, "CLoader") and MPIRUN),
                               reason="no MPI transport in this build or no mpirun: sharc.Loader is not tested")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """6 Shar shards of 8 cuts of 0.5..3 s: slots get different numbers of batches."""
    out = tmp_path_factory.mktemp("elastic") / "c"
    subprocess.run([_gen(), "--out", str(out), "--layout", "shar", "--shards", "6", "--cuts-per-shard", "8",
                    "--max-duration", "3", "--compress", "none"], check=True, stdout=subprocess.DEVNULL)
    return out / "shar"


@pytest.fixture(scope="module")
def every_id(shards):
    ids = [i for b in sharc.Reader(str(shards), **SETTINGS) for i in b["cut_id"]]
    assert len(ids) == 48
    return sorted(ids)


def stop_on(shards, dp_size, steps):
    """Each slot of dp_size read `steps` batches: (the ids delivered, the slots' states)."""
    ids, states = [], []
    for slot in range(dp_size):
        reader = sharc.Reader(str(shards), dp_rank=slot, dp_size=dp_size, **SETTINGS)
        for _ in range(steps):
            ids += next(reader)["cut_id"]
        states.append(reader.state_dict())
    return ids, states


@pytest.mark.parametrize("old,new,steps", [(2, 3, 1), (2, 3, 2), (3, 2, 1), (3, 2, 2), (1, 3, 2)])
def test_reader_elastic_resume_delivers_every_cut_once(shards, every_id, old, new, steps):
    ids, states = stop_on(shards, old, steps)
    for slot in range(new):
        reader = sharc.Reader(str(shards), dp_rank=slot, dp_size=new, **SETTINGS)
        reader.load_state_dict(states)
        ids += [i for b in reader for i in b["cut_id"]]
    assert max(collections.Counter(ids).values()) == 1
    assert sorted(ids) == every_id


def test_reader_states_saved_right_after_an_elastic_resume_resume_again(shards, every_id):
    """Saved before a batch, each new slot's state is the packed states it was resumed from."""
    ids, states = stop_on(shards, 2, 1)
    again = []
    for slot in range(3):
        reader = sharc.Reader(str(shards), dp_rank=slot, dp_size=3, **SETTINGS)
        reader.load_state_dict(states)
        again.append(reader.state_dict())
    for slot in range(2):
        reader = sharc.Reader(str(shards), dp_rank=slot, dp_size=2, **SETTINGS)
        reader.load_state_dict(again)
        ids += [i for b in reader for i in b["cut_id"]]
    assert sorted(ids) == every_id
    with pytest.raises(ValueError, match="mix states saved right after an elastic resume with others"):
        reader.load_state_dict([again[0], states[1]])


def test_reader_resume_on_as_many_slots_is_the_uninterrupted_run(shards):
    _, states = stop_on(shards, 2, 2)
    for slot in range(2):
        alone = [b["cut_id"] for b in sharc.Reader(str(shards), dp_rank=slot, dp_size=2, **SETTINGS)]
        reader = sharc.Reader(str(shards), dp_rank=slot, dp_size=2, **SETTINGS)
        reader.load_state_dict(states)
        assert [b["cut_id"] for b in reader] == alone[2:]


def test_reader_elastic_resume_refuses_a_missing_slot(shards):
    _, states = stop_on(shards, 3, 1)
    reader = sharc.Reader(str(shards), dp_rank=0, dp_size=3, **SETTINGS)
    reader.load_state_dict([states[0], states[2]])  # slot 1 of 3 left out: read as 2 slots
    with pytest.raises(sharc.Error, match=r"^the state of data-parallel slot 0 of 2 \(the bundle's state 0: "
                       r"a state of another slot, dataset or settings is refused\)") as e:
        next(reader)
    assert e.value.code_name == "SHARC_ERR_STATE"
    with pytest.raises(ValueError, match="gathered state 1 is neither"):
        reader.load_state_dict([states[0], {"other": 1}])
    with pytest.raises(ValueError, match=r"gathered state 1 is None \(its reader had yielded no batch\)"):
        reader.load_state_dict([states[0], {"sharc_reader_state": None}])
    with pytest.raises(ValueError, match="no gathered states"):
        reader.load_state_dict([])


def test_reader_gathered_states_of_different_epochs_are_refused(shards):
    settings = {k: v for k, v in SETTINGS.items() if k != "epochs"}
    readers = [sharc.Reader(str(shards), dp_rank=s, dp_size=2, **settings) for s in range(2)]
    for _ in readers[0]:  # epoch 0 read: the reader is in epoch 1
        pass
    next(iter(readers[0]))
    next(readers[1])
    with pytest.raises(ValueError, match=r"different epochs \(\[0, 1\]\)"):
        readers[1].load_state_dict([r.state_dict() for r in readers])


def loader_run(mesh, shards, out, **cfg):
    """sharc.Loader on the ranks of `mesh` (mpirun): ({slot: its batches' ids}, {slot: its
    source's dropped counts}), each peer having got its source's batches."""
    n = math.prod(int(axis.split("=")[1]) for axis in mesh.split(","))
    got = mpirun(n, "run", shards, out, json.dumps(dict(SETTINGS, mesh=mesh, **cfg)))
    batches, dropped = {}, {}
    for lines in got.values():
        slot, source = lines[0]["slot"], lines[0].get("source", True)
        ids = [e["ids"] for e in lines if "ids" in e]
        if source:
            batches[slot] = ids
            dropped[slot] = lines[-1].get("dropped")
        else:
            assert lines[-1].get("dropped", [0, 0]) == [0, 0]
    for lines in got.values():
        assert [e["ids"] for e in lines if "ids" in e] == batches[lines[0]["slot"]]
    return batches, dropped


@needs_mpi
@pytest.mark.parametrize("old,new", [("dp=2,cp=2", "dp=3"), ("dp=3", "dp=2"), ("dp=2", "dp=2")])
def test_loader_elastic_resume_delivers_every_cut_once(shards, every_id, tmp_path, old, new):
    """The states of every rank, the peers' empty ones too, gathered in rank order."""
    saved = tmp_path / "states"
    saved.mkdir()
    first, _ = loader_run(old, shards, tmp_path / "a", steps=2, save=str(saved), even_steps=False)
    assert [len(ids) for ids in first.values()] == [2] * len(first)
    rest, dropped = loader_run(new, shards, tmp_path / "b", resume=str(saved), even_steps=False)
    assert list(dropped.values()) == [[0, 0]] * len(rest)
    ids = [i for got in (first, rest) for batches in got.values() for b in batches for i in b]
    assert max(collections.Counter(ids).values()) == 1
    assert sorted(ids) == every_id
    if old == new:  # each slot goes on as it would have without the stop
        for slot, batches in rest.items():
            alone = [b["cut_id"] for b in sharc.Reader(str(shards), dp_rank=slot, dp_size=2, **SETTINGS)]
            assert batches == alone[2:]


@needs_mpi
def test_loader_even_steps_end_every_slot_at_the_same_step(shards, every_id, tmp_path):
    uneven, _ = loader_run("dp=3", shards, tmp_path / "a", even_steps=False)
    counts = [len(uneven[slot]) for slot in range(3)]
    assert len(set(counts)) > 1  # the slots alone end at different steps
    even, dropped = loader_run("dp=3", shards, tmp_path / "b")  # even steps by default
    for slot in range(3):
        assert even[slot] == uneven[slot][:min(counts)]
        left = uneven[slot][min(counts):]
        assert dropped[slot] == [len(left), sum(len(b) for b in left)]
    delivered = sum(len(b) for batches in even.values() for b in batches)
    assert delivered + sum(d[1] for d in dropped.values()) == len(every_id)


def gloo_group(world, reader_args, settings, steps=None, states=None):
    """`world` spawned processes in a torch.distributed gloo group, each its own data-parallel
    slot reading through sharc.Reader (_gloo_elastic.worker): (every rank's delivered ids, every
    rank's state gathered with all_gather_object when `steps` stopped them)."""
    torch = pytest.importorskip("torch", reason="torch is not installed: the gloo tests need it "
                                                "(tools/dev setup installs Debian's python3-torch)")
    import queue as queue_mod
    import torch.multiprocessing as mp
    import _gloo_elastic
    from _dist_workers import free_port

    del torch
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_gloo_elastic.worker,
                         args=(r, world, port, q, reader_args, settings, steps, states))
             for r in range(world)]
    for p in procs:
        p.start()
    try:
        got = q.get(timeout=120)
    except queue_mod.Empty:
        got = ("crash", None, "no answer within 120 s")
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.terminate()
    assert got[0] == "ok", got
    return got[1], got[2]


@pytest.fixture(scope="module")
def mixture(tmp_path_factory, shards):
    """A finite mixture of the Shar corpus and a WebDataset one, each cut tagged by corpus."""
    root = tmp_path_factory.mktemp("mixture")
    subprocess.run([_gen(), "--out", str(root / "w"), "--layout", "wds", "--shards", "3", "--cuts-per-shard", "5",
                    "--max-duration", "3", "--compress", "none", "--seed", "4"], check=True,
                   stdout=subprocess.DEVNULL)
    cfg = root / "mix.yaml"
    cfg.write_text(f"- {{type: lhotse_shar, shar_path: {shards}, weight: 2, tags: {{corpus: a}}}}\n"
                   f"- {{type: wds, paths: {root / 'w' / 'wds'}, weight: 1, tags: {{corpus: b}}}}\n")
    want = [f"a/{i}" for i in (json.loads(l)["id"] for l in open(shards.parent / "shar.expected.jsonl"))]
    want += [f"b/{json.loads(l)['id']}" for l in open(root / "w" / "wds.expected.jsonl")]
    return cfg, sorted(want)


@pytest.mark.parametrize("old,new", [(2, 3)])
def test_gloo_elastic_resume_of_a_mixture_delivers_every_cut_once(mixture, old, new):
    """Under torch.distributed with gloo (spawned processes, no MPI): each rank a data-parallel
    slot of a finite mixture; the states gathered with all_gather_object on `old` ranks are
    loaded on `new` ranks, and over the two groups every cut of both corpora comes once."""
    cfg, want = mixture
    settings = dict(SETTINGS, input_cfg=str(cfg), mix_finite=True)
    settings.pop("epochs")
    first, states = gloo_group(old, ([],), settings, steps=2)
    assert all(len(ids) > 0 for ids in first) and all(s is not None for s in states)
    rest, _ = gloo_group(new, ([],), settings, states=states)
    ids = [i for got in (first, rest) for per_rank in got for i in per_rank]
    assert max(collections.Counter(ids).values()) == 1
    assert sorted(ids) == want
