"""sharc.torch: the contract of NeMo's BroadcastingDataLoader (tests of NVIDIA-NeMo/Speech
PR #16069) under torch.distributed with gloo and 2 and 4 spawned processes, with sharc frames
in place of pickle; plus nested batches, collective counts and a sharc.Reader source."""
import collections
import pickle
import queue as queue_mod
import struct

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: sharc.torch is not tested "
                                            "(tools/dev setup installs Debian's python3-torch)")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import sharc  # noqa: E402
from sharc import _sharc, _tree  # noqa: E402
import sharc.torch as st  # noqa: E402
from sharc.torch import BroadcastingDataLoader, broadcast_batch, is_dp_source_rank  # noqa: E402

import _dist_workers as w  # noqa: E402


# ---------------------------------------------------------------------------
# Single process: no-op rules, mesh handling, group resolution, packet on creation failure
# ---------------------------------------------------------------------------


class _FakeAxis:
    def __init__(self, size, local_rank, group=None, ranks=None):
        self._size = size
        self._local_rank = local_rank
        self._group = group
        self.mesh = torch.tensor(range(size) if ranks is None else ranks)

    def size(self):
        return self._size

    def get_local_rank(self):
        return self._local_rank

    def get_group(self):
        return self._group


class _FakeMesh:
    def __init__(self, sizes, coords, groups=None, ranks=None):
        self.mesh_dim_names = tuple(sizes)
        self._sizes, self._coords = sizes, coords
        self._groups, self._ranks = groups or {}, ranks or {}

    def __getitem__(self, name):
        return _FakeAxis(self._sizes[name], self._coords[name], self._groups.get(name), self._ranks.get(name))


def test_is_dp_source_rank_none_mesh():
    assert is_dp_source_rank(None) is True


def test_is_dp_source_rank_axes_absent_or_size_one():
    assert is_dp_source_rank(_FakeMesh({"dp": 4}, {"dp": 3})) is True
    assert is_dp_source_rank(_FakeMesh({"cp": 1, "tp": 1}, {"cp": 0, "tp": 0})) is True


def test_is_dp_source_rank_coordinates():
    assert is_dp_source_rank(_FakeMesh({"cp": 2, "tp": 2}, {"cp": 0, "tp": 0})) is True
    assert is_dp_source_rank(_FakeMesh({"cp": 2, "tp": 2}, {"cp": 0, "tp": 1})) is False
    assert is_dp_source_rank(_FakeMesh({"cp": 2, "tp": 2}, {"cp": 1, "tp": 0})) is False
    assert is_dp_source_rank(_FakeMesh({"cp": 2}, {"cp": 1}), axes=("tp",)) is True


def test_broadcast_batch_noop():
    payload = {"x": torch.arange(3)}
    assert broadcast_batch(payload, None) is payload
    assert broadcast_batch(payload, _FakeMesh({"cp": 1}, {"cp": 0})) is payload
    assert not dist.is_initialized()
    assert broadcast_batch(payload, _FakeMesh({"cp": 2}, {"cp": 1})) is payload  # no process group


def test_noop_loader_iterates_source():
    real = [{"i": i} for i in range(4)]
    assert list(BroadcastingDataLoader(source=real, device_mesh=None)) == real
    assert list(BroadcastingDataLoader(source=real, device_mesh=_FakeMesh({"cp": 1}, {"cp": 0}))) == real
    assert list(BroadcastingDataLoader(source=None, device_mesh=None)) == []
    # torch.distributed not initialized: the source's own iteration.
    assert list(BroadcastingDataLoader(source=real, device_mesh=_FakeMesh({"cp": 2}, {"cp": 0}))) == real


def test_noop_loader_over_a_reader_yields_torch_tensors(corpus):
    n = 0
    for b in BroadcastingDataLoader(sharc.Reader(str(corpus / "shar"), batch_duration=12.0, max_held_batches=1), None):
        assert torch.is_tensor(b["audio"]) and isinstance(b["cut_id"], list)
        n += 1
        del b  # the batch goes back to the pool here, or the next one would be refused
    assert n > 2


def test_source_rank_requires_source():
    with pytest.raises(ValueError, match="requires a non-None source"):
        BroadcastingDataLoader(source=None, device_mesh=_FakeMesh({"cp": 2}, {"cp": 0}))
    BroadcastingDataLoader(source=None, device_mesh=_FakeMesh({"cp": 2}, {"cp": 1}))


def test_len_passthrough_and_state_delegation():
    src = w.StatefulSource()
    loader = BroadcastingDataLoader(source=src, device_mesh=None)
    assert len(loader) == 3
    assert loader.state_dict() == {"position": 7}
    loader.load_state_dict({"position": 1})
    assert src.loaded == {"position": 1}
    peer = BroadcastingDataLoader(source=None, device_mesh=_FakeMesh({"cp": 2}, {"cp": 1}))
    with pytest.raises(TypeError, match="non-source rank has no defined length"):
        len(peer)
    assert peer.state_dict() == {}
    peer.load_state_dict({"position": 1})  # a no-op
    assert BroadcastingDataLoader(source=[1, 2], device_mesh=None).state_dict() == {}


def test_group_resolution_does_not_cache_by_object_id(monkeypatch):
    group_a, group_b = object(), object()
    mesh_a = _FakeMesh({"cp": 2}, {"cp": 0}, groups={"cp": group_a}, ranks={"cp": [2, 3]})
    mesh_b = _FakeMesh({"cp": 2}, {"cp": 0}, groups={"cp": group_b}, ranks={"cp": [6, 7]})
    monkeypatch.setattr(st, "id", lambda _: 1, raising=False)
    assert st._resolve_group_and_source(mesh_a, ("cp",)) == (group_a, 2)
    assert st._resolve_group_and_source(mesh_b, ("cp",)) == (group_b, 6)


def test_iterator_creation_failure_sends_one_error_packet(monkeypatch):
    class FailingSource:
        def __iter__(self):
            raise ValueError("iterator creation failed")

    mesh = _FakeMesh({"cp": 2}, {"cp": 0}, groups={"cp": object()}, ranks={"cp": [0, 1]})
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    packets = []
    monkeypatch.setattr(st, "_broadcast_packet", lambda packet, group, src: packets.append(packet))
    with pytest.raises(ValueError, match="iterator creation failed"):
        list(BroadcastingDataLoader(FailingSource(), mesh))
    assert packets == [("error", "source iterator creation failed: builtins.ValueError: iterator creation failed")]


def test_tree_round_trip_and_refusals():
    tensors = []
    obj = {"a": [1, 2.5, None, True, "ś", b"\x00"], (1, "k"): (-(1 << 70), {"n": []}), "t": torch.ones(2)}
    tree = _tree.encode(obj, torch.is_tensor, lambda t: tensors.append(t) or len(tensors) - 1,
                        lambda t: str(t.dtype).replace("torch.", ""))
    back = _tree.decode(tree, lambda i, name, shape: ("T", i, name, tuple(shape)))
    assert back == {"a": [1, 2.5, None, True, "ś", b"\x00"], (1, "k"): (-(1 << 70), {"n": []}),
                    "t": ("T", 0, "float32", (2,))}
    # Named tuples and dataclasses keep their tensors as frame tensors; other values are
    # pickled; what cannot be pickled raises pickle's error; a local class is not found
    # by name, so its values are pickled, which fails.
    tensors.clear()
    typed = w.typed_batches()
    tree = _tree.encode(typed, torch.is_tensor, lambda t: tensors.append(t) or len(tensors) - 1,
                        lambda t: str(t.dtype).replace("torch.", ""))
    assert [tuple(t.shape) for t in tensors] == [(2, 50), (2, 50), (2,), (1,), (3,)]
    assert tree.count(b"P") >= 2 and b"_dist_workers:AudioBatch" in tree
    back = _tree.decode(tree, lambda i, name, shape: tensors[i])
    assert w.canonical(back) == w.canonical(typed)
    assert type(back[1]["frozen"]) is w.Frozen and back[1]["frozen"] == w.Frozen(3, "s")
    with pytest.raises(TypeError, match="^batch is intentionally unpicklable$"):
        _tree.encode({"x": [1, w.Unpicklable()]}, torch.is_tensor, lambda t: 0, str)
    local = collections.namedtuple("Local", "a")
    with pytest.raises(pickle.PicklingError):
        _tree.encode({"x": local(1)}, torch.is_tensor, lambda t: 0, str)
    with pytest.raises(ValueError, match="cannot find class nowhere:Thing here"):
        _tree.decode(b"Q" + struct.pack("<H", 13) + b"nowhere:Thing", lambda *a: None)
    for bad in (b"", b"L\x02\x00\x00\x00N", b"Q", b"NN", b"S\xff\xff\xff\xff"):
        with pytest.raises(ValueError):
            _tree.decode(bad, lambda *a: None)


def test_malformed_control_block_is_refused():
    frame = bytearray(_sharc.frame_stop(3))
    kind, step, *_ = _sharc.frame_decode(bytes(frame), 1 << 20)
    assert (kind, step) == (_sharc.FRAME_STOP, 3)
    frame[9] ^= 1  # the CRC no longer matches
    with pytest.raises(sharc.Error) as info:
        _sharc.frame_decode(bytes(frame), 1 << 20)
    assert info.value.code_name == "SHARC_ERR_FRAME"
    err = _sharc.frame_decode(_sharc.frame_error(0, _sharc.ERR_REMOTE, "é" * 600), 1 << 20)
    assert err[0] == _sharc.FRAME_ERROR and err[6] == "é" * 512  # cut at a character boundary


# ---------------------------------------------------------------------------
# Spawned gloo groups of 2 and 4 processes
# ---------------------------------------------------------------------------

_RESULTS = {}


def _spawn(world: int, corpus) -> dict:
    if world in _RESULTS:
        return _RESULTS[world]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = w.free_port()
    procs = [ctx.Process(target=w.worker, args=(r, world, port, q, str(corpus / "shar"))) for r in range(world)]
    for p in procs:
        p.start()
    results, done = {}, 0
    try:
        while done < world:
            name, rank, value = q.get(timeout=240)
            if name == "done":
                done += 1
            else:
                results[(name, rank)] = value
    except queue_mod.Empty:
        pass
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.terminate()
            p.join(timeout=5)
    assert done == world, f"only {done} of {world} ranks finished; results: {results}"
    _RESULTS[world] = results
    return results


@pytest.fixture(params=[2, 4], ids=["2procs", "4procs"])
def dist_results(request, corpus):
    world = request.param
    results = _spawn(world, corpus)

    def get(name):
        per_rank = [results.get((name, r)) for r in range(world)]
        for v in per_rank:
            assert not (isinstance(v, tuple) and v and v[0] == "crash"), v[1]
        return per_rank

    get.world = world
    return get


def test_lockstep_iteration(dist_results):
    assert dist_results("s_lockstep") == [[0, 1, 2]] * dist_results.world


def test_source_iterator_error(dist_results):
    res = dist_results("s_iter_error")
    assert res[0][:3] == ("err", [0], "ValueError")
    assert "source iterator exploded" in res[0][3]
    for r in res[1:]:
        assert r[:3] == ("err", [0], "RuntimeError")
        assert r[3] == ("BroadcastingDataLoader source error: source iterator failed: "
                        "builtins.ValueError: source iterator exploded")


def test_iterator_creation_error(dist_results):
    res = dist_results("s_creation_error")
    assert res[0][:3] == ("err", [], "ValueError")
    assert "iterator creation failed" in res[0][3]
    for r in res[1:]:
        assert r[:3] == ("err", [], "RuntimeError")
        assert r[3] == ("BroadcastingDataLoader source error: source iterator creation failed: "
                        "builtins.ValueError: iterator creation failed")


def test_unpicklable_batch(dist_results):
    """A leaf that neither the frame's tags nor pickle can carry: the source raises pickle's
    error, every peer a RuntimeError naming it (the seed's contract)."""
    res = dist_results("s_unframeable")
    assert res[0] == ("err", [0], "TypeError", "batch is intentionally unpicklable")
    for r in res[1:]:
        assert r == ("err", [0], "RuntimeError", "BroadcastingDataLoader source error: batch serialization "
                     "failed: builtins.TypeError: batch is intentionally unpicklable")


def test_typed_leaves_arrive_as_themselves(dist_results):
    """Named tuples, dataclasses (frozen too) and pickled objects (a CutSet stand-in, a
    Fraction) arrive equal and of their own type on every rank."""
    res = dist_results("s_typed_leaves")
    want = res[0][1]
    assert want[0][0] == "_dist_workers.Pair"
    assert want[1][1][0][1][0] == "_dist_workers.AudioBatch"
    assert want[2][1][0][1] == ("_dist_workers.NotFramable", w.NotFramable({"k": [1, 2]}))
    for got, _ in res:
        assert got == want


def test_synchronized_early_break(dist_results):
    assert dist_results("s_early_break") == [([0], [0, 1, 2])] * dist_results.world


def test_len_and_state_delegation(dist_results):
    res = dist_results("s_len_and_state")
    assert res[0] == (3, {"position": 7}, {"position": 9}, [0, 1, 2])
    for r in res[1:]:
        assert r == ("TypeError: BroadcastingDataLoader on non-source rank has no defined length", {}, None, [0, 1, 2])


def test_nested_batches_arrive_equal(dist_results):
    res = dist_results("s_nested")
    want = res[0][1]
    assert len(want) == 7
    for got, _ in res:
        assert got == want


def test_one_collective_when_the_frame_fits_two_otherwise(dist_results):
    c = st.CONTROL_BYTES
    for out, calls in dist_results("s_collectives"):
        assert out == [100, 100000, 100, 100000]
        # small: the control block alone. large: the control block (with the structure),
        # then the one large tensor from its own memory. mixed: the host tensors other than
        # the largest do not fit the control block's room, so the whole payload follows
        # (structure at 0, a at 256, b at 24320, x at 48384). stop: the control block.
        assert calls == [c, c, 400000, c, c, 48384 + 400000, c]


def test_broadcast_batch(dist_results):
    assert dist_results("s_broadcast_batch") == [([0, 1, 2, 3, 4], "hello")] * dist_results.world


def test_reader_as_source(dist_results, corpus):
    res = dist_results("s_reader_source")
    local = [list(b["cut_id"]) for b in sharc.Reader(str(corpus / "shar"), batch_duration=12.0, threads=1, seed=3)]
    assert [b[0] for b in res[0]] == local
    for r in res[1:]:
        assert r == res[0]


def test_dp_slots_and_two_axes(dist_results):
    if dist_results.world != 4:
        pytest.skip("needs 4 ranks")
    assert dist_results("s_dp_slots") == [(0, [0, 1]), (0, [0, 1]), (1, [10, 11, 12]), (1, [10, 11, 12])]
    assert dist_results("s_cp_tp") == [(True, [[0.0, 0.0], [1.0, 1.0]])] + [(False, [[0.0, 0.0], [1.0, 1.0]])] * 3


def test_native_loader_over_nccl_fails_alike_without_a_gpu(dist_results):
    res = dist_results("s_native_loader_nccl_without_gpu")
    if isinstance(res[0], str) and res[0].startswith("skipped"):
        pytest.skip(res[0])
    assert res == [("Error", "CUDA device 0")] * dist_results.world


def test_native_loader_transport_choices():
    import torch.distributed as dist

    assert not dist.is_initialized()
    with pytest.raises(ValueError, match=r"^sharc.Loader: transport 'tcp': 'mpi' or 'nccl'$"):
        sharc.Loader("unused", transport="tcp")
    if hasattr(sharc._sharc, "nccl_unique_id"):
        with pytest.raises(sharc.Error, match=r"transport 'nccl' needs torch.distributed initialized"):
            sharc.Loader("unused", transport="nccl")


def test_axes_given_as_one_string_name_one_axis():
    # axes="cp" is the axis cp, not the letters "c" and "p" (no such axes: every rank a source).
    assert is_dp_source_rank(_FakeMesh({"cp": 2}, {"cp": 1}), axes="cp") is False
    assert is_dp_source_rank(_FakeMesh({"cp": 2}, {"cp": 0}), axes="cp") is True
    with pytest.raises(ValueError, match="requires a non-None source"):
        BroadcastingDataLoader(source=None, device_mesh=_FakeMesh({"cp": 2}, {"cp": 0}), axes="cp")
