"""Workers for test_torch.py: each spawned process joins a gloo group and runs every
scenario in turn, putting (scenario, rank, result) on a queue. The scenarios run in the same
group one after another, so each also proves that the one before it left the group in step."""
import collections
import dataclasses
import fractions
import hashlib
import os
import socket
import traceback

import torch
import torch.distributed as dist

import sharc
from sharc.torch import BroadcastingDataLoader, broadcast_batch, is_dp_source_rank


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------
# A DeviceMesh stand-in over real process groups (torch 1.13 has no DeviceMesh): named axes,
# each with its size, this rank's coordinate, its group and its global ranks.
# ---------------------------------------------------------------------------


class Axis:
    def __init__(self, size, local_rank, group, ranks):
        self._size = size
        self._local_rank = local_rank
        self._group = group
        self.mesh = torch.tensor(ranks)

    def size(self):
        return self._size

    def get_local_rank(self):
        return self._local_rank

    def get_group(self):
        return self._group

    def _flatten(self, mesh_dim_name):
        return self


class Mesh:
    """Ranks laid out row-major over `sizes` (an ordered dict of axis -> size)."""

    def __init__(self, sizes):
        self.mesh_dim_names = tuple(sizes)
        self._sizes = dict(sizes)
        world = dist.get_world_size()
        rank = dist.get_rank()
        dims = list(sizes.values())
        assert torch.tensor(dims).prod().item() == world
        grid = torch.arange(world).reshape(dims)
        self._axes = {}
        # Every rank creates every group in the same order, as new_group requires.
        keys = [(n,) for n in self.mesh_dim_names]
        if len(dims) > 1:
            keys.append(tuple(self.mesh_dim_names))
        for key in keys:
            idx = [self.mesh_dim_names.index(n) for n in key]
            other = [i for i in range(len(dims)) if i not in idx]
            g = grid.permute(*other, *idx).reshape(-1, int(torch.tensor([dims[i] for i in idx]).prod()))
            mine = None
            for row in g.tolist():
                group = dist.new_group(row)
                if rank in row:
                    mine = (group, row)
            local = mine[1].index(rank)
            self._axes[key] = Axis(len(mine[1]), local, mine[0], mine[1])

    def __getitem__(self, name):
        return self._axes[name if isinstance(name, tuple) else (name,)]


# ---------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------


class RaisesAfterOneBatch:
    def __iter__(self):
        yield {"i": 0}
        raise ValueError("source iterator exploded")


class RaisesOnIteratorCreation:
    def __iter__(self):
        raise ValueError("iterator creation failed")


class NotFramable:
    """An object of no type the frame knows: it travels pickled."""

    def __init__(self, payload):
        self.payload = payload

    def __eq__(self, other):
        return type(other) is NotFramable and other.payload == self.payload


class CutSetLike:
    """Stands for a Lhotse CutSet (NeMo's return_cuts=True): a container of cut objects."""

    def __init__(self, cuts):
        self.cuts = list(cuts)

    def __eq__(self, other):
        return type(other) is CutSetLike and other.cuts == self.cuts


class Unpicklable:
    def __reduce__(self):
        raise TypeError("batch is intentionally unpicklable")


Pair = collections.namedtuple("Pair", "audio text")


@dataclasses.dataclass
class AudioBatch:
    audio: torch.Tensor
    lens: torch.Tensor
    pairs: list
    cuts: object = None


@dataclasses.dataclass(frozen=True)
class Frozen:
    step: int
    name: str


class StatefulSource:
    def __init__(self):
        self.loaded = None

    def __iter__(self):
        return iter([{"i": i} for i in range(3)])

    def __len__(self):
        return 3

    def state_dict(self):
        return {"position": 7}

    def load_state_dict(self, state):
        self.loaded = state


def nested_batch(step: int, big: bool):
    g = torch.Generator().manual_seed(step)
    n = 40000 if big else 7  # 40000 float32 = 160 KB: over the control block
    return {
        "audio": torch.randn(3, n, generator=g),
        "lens": torch.tensor([n, n - 1, 2], dtype=torch.int64),
        "mask": torch.rand(3, 5, generator=g) > 0.5,
        "half": torch.randn(4, generator=g).to(torch.float16),
        "bf16": torch.randn(2, 2, generator=g).to(torch.bfloat16),
        "i8": torch.tensor([-3, 4, 127], dtype=torch.int8),
        "five_d": torch.arange(32, dtype=torch.float32).reshape(2, 2, 2, 2, 2),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 4),
        "strided": torch.arange(12).reshape(3, 4).t(),
        "cut_id": [f"utt-{step}-{k}" for k in range(3)],
        "text": ["zażółć gęślą jaźń", "", "über 🎧"],
        "meta": {"step": step, "lr": 0.5, "flag": True, "big": 1 << 80, "none": None, "raw": b"\x00\xffbytes"},
        "pair": (torch.tensor([1, 2], dtype=torch.int32), ["a", ("b", 2)]),
        7: "int key",
    }


def canonical(obj):
    """A picklable, comparable picture of a batch: tensors as dtype, shape, device and a hash
    of their bytes."""
    if torch.is_tensor(obj):
        c = obj.detach().cpu().contiguous()
        raw = c.reshape(-1).view(torch.uint8).numpy().tobytes() if c.numel() else b""
        return ("tensor", str(c.dtype), tuple(c.shape), hashlib.sha256(raw).hexdigest())
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if isinstance(obj, dict):
        return ("dict", [(canonical(k), canonical(v)) for k, v in obj.items()])
    if isinstance(obj, (list, tuple)):
        return (name, [canonical(v) for v in obj])
    if dataclasses.is_dataclass(obj):
        return (name, [(f.name, canonical(getattr(obj, f.name))) for f in dataclasses.fields(obj)])
    return (name, obj)


# ---------------------------------------------------------------------------
# Scenarios: each returns a picklable result for the test to check.
# ---------------------------------------------------------------------------


def s_lockstep(ctx):
    mesh = Mesh({"cp": ctx["world"]})
    source = [{"i": i} for i in range(3)] if is_dp_source_rank(mesh) else None
    return [b["i"] for b in BroadcastingDataLoader(source=source, device_mesh=mesh)]


def s_dp_slots(ctx):
    # dp=2 x cp=W/2: the source of each slot (cp coordinate 0) reads its own data.
    mesh = Mesh({"dp": 2, "cp": ctx["world"] // 2})
    slot = mesh["dp"].get_local_rank()
    source = [{"i": 10 * slot + i} for i in range(2 + slot)] if is_dp_source_rank(mesh) else None
    return (slot, [b["i"] for b in BroadcastingDataLoader(source=source, device_mesh=mesh)])


def s_cp_tp(ctx):
    # Two named axes: the broadcast group is their flattened sub-mesh, its source rank 0.
    mesh = Mesh({"cp": 2, "tp": ctx["world"] // 2})
    source = [{"x": torch.full((2,), float(i))} for i in range(2)] if is_dp_source_rank(mesh) else None
    return (is_dp_source_rank(mesh), [b["x"].tolist() for b in BroadcastingDataLoader(source, mesh)])


def _errors(ctx, source_type):
    mesh = Mesh({"cp": ctx["world"]})
    source = source_type() if is_dp_source_rank(mesh) else None
    received = []
    try:
        received.extend(b["i"] for b in BroadcastingDataLoader(source=source, device_mesh=mesh))
    except Exception as error:
        return ("err", received, type(error).__name__, str(error))
    return ("unexpected-success", received, None, None)


def s_iter_error(ctx):
    return _errors(ctx, RaisesAfterOneBatch)


def s_creation_error(ctx):
    return _errors(ctx, RaisesOnIteratorCreation)


def typed_batches():
    """Leaves the frame has no tag for, next to tensors: named tuples and dataclasses (which
    arrive as themselves, their tensors as frame tensors) and objects that travel pickled."""
    g = torch.Generator().manual_seed(5)
    audio = torch.randn(2, 50, generator=g)
    return [
        Pair(audio, ["a", "b"]),
        {"batch": AudioBatch(audio, torch.tensor([50, 40]), [Pair(torch.ones(1), "x")],
                             CutSetLike([{"id": "c1", "duration": 1.5}, {"id": "c2", "duration": 0.5}])),
         "frozen": Frozen(3, "s")},
        {"obj": NotFramable({"k": [1, 2]}), "frac": fractions.Fraction(1, 3), "t": torch.arange(3)},
    ]


def s_typed_leaves(ctx):
    mesh = Mesh({"cp": ctx["world"]})
    source = typed_batches() if is_dp_source_rank(mesh) else None
    got = [canonical(b) for b in BroadcastingDataLoader(source=source, device_mesh=mesh)]
    return (got, [canonical(b) for b in typed_batches()])


def s_unframeable(ctx):
    mesh = Mesh({"cp": ctx["world"]})
    source = [{"i": 0}, {"i": 1, "obj": Unpicklable()}] if is_dp_source_rank(mesh) else None
    received = []
    try:
        received.extend(b["i"] for b in BroadcastingDataLoader(source=source, device_mesh=mesh))
    except Exception as error:
        return ("err", received, type(error).__name__, str(error))
    return ("unexpected-success", received, None, None)


def s_early_break(ctx):
    mesh = Mesh({"cp": ctx["world"]})
    source = [{"i": i} for i in range(3)] if is_dp_source_rank(mesh) else None
    received = []
    for batch in BroadcastingDataLoader(source=source, device_mesh=mesh):
        received.append(batch["i"])
        break
    # The group is still in step: a second loop over a fresh loader works on every rank.
    again = [b["i"] for b in BroadcastingDataLoader(source=source, device_mesh=mesh)]
    return (received, again)


def s_len_and_state(ctx):
    mesh = Mesh({"cp": ctx["world"]})
    src = is_dp_source_rank(mesh)
    loader = BroadcastingDataLoader(source=StatefulSource() if src else None, device_mesh=mesh)
    try:
        length = len(loader)
    except TypeError as error:
        length = f"TypeError: {error}"
    state = loader.state_dict()
    loader.load_state_dict({"position": 9})
    loaded = loader._source.loaded if src else None
    return (length, state, loaded, [b["i"] for b in loader])


def s_nested(ctx):
    mesh = Mesh({"cp": ctx["world"]})
    src = is_dp_source_rank(mesh)
    batches = [nested_batch(s, big=s == 1) for s in range(3)]
    # A structure larger than the control block (it travels alone), a bare tensor, None.
    batches += [{"texts": [f"{i}-" + "x" * 100 for i in range(1000)]}, torch.arange(6).reshape(2, 3), None, {}]
    loader = BroadcastingDataLoader(source=batches if src else None, device_mesh=mesh)
    got = [canonical(b) for b in loader]
    return (got, [canonical(b) for b in batches])


def s_collectives(ctx):
    """One broadcast per step when the frame fits the control block, two when not."""
    mesh = Mesh({"cp": ctx["world"]})
    src = is_dp_source_rank(mesh)
    calls = []
    real = dist.broadcast

    def counting(tensor, *args, **kwargs):
        calls.append(tensor.numel())
        return real(tensor, *args, **kwargs)

    dist.broadcast = counting
    try:
        small = {"x": torch.zeros(100)}
        large = {"x": torch.zeros(100000)}
        # Two mid-sized tensors besides the largest: more than the control block's room.
        mixed = {"x": torch.zeros(100000), "a": torch.ones(6000), "b": torch.full((6000,), 2.0)}
        source = [small, large, small, mixed] if src else None
        out = []
        for b in BroadcastingDataLoader(source, mesh):
            out.append(b["x"].numel())
            if "a" in b:
                assert b["a"].eq(1).all() and b["b"].eq(2).all() and b["x"].eq(0).all()
    finally:
        dist.broadcast = real
    return (out, calls)


def s_broadcast_batch(ctx):
    mesh = Mesh({"cp": ctx["world"]})
    batch = {"x": torch.arange(5), "s": "hello"} if is_dp_source_rank(mesh) else None
    got = broadcast_batch(batch, mesh)
    return (got["x"].tolist(), got["s"])


def s_reader_source(ctx):
    mesh = Mesh({"cp": ctx["world"]})
    src = is_dp_source_rank(mesh)
    # max_held_batches=1: the loader holds no batch of the reader once the caller lets go.
    reader = sharc.Reader(ctx["corpus"], batch_duration=12.0, threads=1, seed=3, max_held_batches=1) if src else None
    out = []
    for b in BroadcastingDataLoader(reader, mesh):
        assert torch.is_tensor(b["audio"]) and torch.is_tensor(b["audio_lens"])
        out.append((b["cut_id"], b["text"], canonical(b["audio"]), b["audio_lens"].tolist()))
        del b
    return out


def s_native_loader_nccl_without_gpu(ctx):
    """sharc.Loader(transport="nccl") on ranks without a usable GPU: the unique id made on
    rank 0 reaches every rank over the gloo group, and each fails alike, naming the device."""
    if torch.cuda.is_available():
        return "skipped: a GPU is visible"
    if not hasattr(sharc._sharc, "nccl_unique_id"):
        return "skipped: no NCCL in this build"
    try:
        sharc.Loader(ctx["corpus"], mesh=f"cp={ctx['world']}", transport="nccl", batch_duration=12.0)
    except sharc.Error as error:
        return (type(error).__name__, str(error).split(":")[0])
    return "no error"


SCENARIOS = [
    s_lockstep,
    s_iter_error,
    s_creation_error,
    s_unframeable,
    s_typed_leaves,
    s_early_break,
    s_len_and_state,
    s_nested,
    s_collectives,
    s_broadcast_batch,
    s_reader_source,
    s_native_loader_nccl_without_gpu,
]
SCENARIOS_4 = [s_dp_slots, s_cp_tp]


def worker(rank: int, world: int, port: int, queue, corpus: str) -> None:
    try:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        ctx = {"rank": rank, "world": world, "corpus": corpus}
        for scenario in SCENARIOS + (SCENARIOS_4 if world == 4 else []):
            try:
                queue.put((scenario.__name__, rank, scenario(ctx)))
            except Exception:
                queue.put((scenario.__name__, rank, ("crash", traceback.format_exc())))
        queue.put(("done", rank, None))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
