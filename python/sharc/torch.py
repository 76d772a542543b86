"""CP/TP-aware data loading for PyTorch: one source rank per data-parallel slot reads, and
every step broadcasts one sharc frame to the other ranks of its ``(cp, tp)`` sub-mesh.

A drop-in for NeMo's ``nemo.collections.common.data.lhotse.broadcasting`` (same functions,
signatures and semantics; docs/python.md has the migration):

    from sharc.torch import BroadcastingDataLoader, is_dp_source_rank

    loader = BroadcastingDataLoader(
        source=real_loader if is_dp_source_rank(mesh) else None,
        device_mesh=mesh,
    )

Each step is one protocol message, whose kind is data, clean stop or source error, so all
ranks finish or fail together whether or not the source has a length. A batch (nested
dict/list/tuple of tensors, numbers, str, bytes and None; named tuples and dataclasses,
which arrive as themselves; any other value, pickled into a bytes leaf as NeMo pickles the
whole batch) travels as a sharc frame over the caller's ``torch.distributed`` group: the
frame's control block (header, tensor descriptors and, when it fits, the tensors
themselves) in one broadcast, the host tensors packed into one payload in a second
broadcast when they do not fit, and each device tensor in its own broadcast, from and into
device memory (under NCCL, CUDA tensors stay on the GPU and arrive on each peer's current
device). Tensors are never pickled.
"""
from __future__ import annotations

import ctypes
import sys
import threading
import time
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from . import Reader as _Reader
from . import _sharc, _tree
from ._sharc import Tensor as _SharcTensor

__all__ = ["is_dp_source_rank", "broadcast_batch", "BroadcastingDataLoader", "CONTROL_BYTES"]

#: Size of the control block every step broadcasts first. A batch whose descriptors, structure
#: and host tensors fit travels in this one collective.
CONTROL_BYTES = 16 * 1024

#: The largest frame a receiver accepts (control block + payload + device tensors).
MAX_FRAME_BYTES = 1 << 40

_PACKET_DATA = "data"
_PACKET_STOP = "stop"
_PACKET_ERROR = "error"

_TO_SHARC = {
    torch.float32: _sharc.DTYPE_F32,
    torch.float64: _sharc.DTYPE_F64,
    torch.float16: _sharc.DTYPE_F16,
    torch.bfloat16: _sharc.DTYPE_BF16,
    torch.int32: _sharc.DTYPE_I32,
    torch.int64: _sharc.DTYPE_I64,
    torch.uint8: _sharc.DTYPE_U8,
}
_DTYPES = {str(d).replace("torch.", ""): d for d in vars(torch).values() if isinstance(d, torch.dtype)}


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def is_dp_source_rank(device_mesh, axes: Tuple[str, ...] = ("cp", "tp")) -> bool:
    """True iff this rank is the data-parallel source of its DP slot: coordinate 0 along
    every named axis present in the mesh. True when ``device_mesh`` is None or every named
    axis present has size 1."""
    if _is_noop(device_mesh, axes):
        return True
    return all(device_mesh[ax].get_local_rank() == 0 for ax in _present_axes(device_mesh, axes))


def broadcast_batch(batch: Any, device_mesh, axes: Tuple[str, ...] = ("cp", "tp")) -> Any:
    """Broadcast ``batch`` from the DP source rank to every rank of the sub-mesh over
    ``axes``; returns the source's batch on every rank. A no-op (returns ``batch``) when the
    mesh is None, every present axis has size 1, or torch.distributed is not initialized.
    A batch that cannot be framed raises its error on the source and RuntimeError naming it
    on the peers."""
    if _is_noop(device_mesh, axes):
        return batch
    if not (dist.is_available() and dist.is_initialized()):
        return batch
    resolved = _resolve_group_and_source(device_mesh, axes)
    if resolved is None:
        return batch
    group, src = resolved
    packet = (_PACKET_DATA, batch) if dist.get_rank() == src else None
    return _packet_payload(_broadcast_packet(packet, group, src))


class BroadcastingDataLoader:
    """Wraps (real loader | None) and broadcasts each of its batches from the DP source rank
    to the other ranks of the ``(cp, tp)`` sub-mesh.

    Pass ``source=real_loader`` on the DP source rank and ``source=None`` elsewhere. Each
    step broadcasts one frame whose kind is data, clean stop or source error: iteration ends
    on every rank at the step the source is exhausted, and an error of the source (creating
    its iterator, iterating it, or framing a batch) is raised on the source as itself and on
    every peer as RuntimeError naming it. Leaving the loop early on every rank at the same
    step is safe (no further collective runs).

    ``len()`` passes through to the source; ``state_dict`` / ``load_state_dict`` are
    delegated to the source on the source rank and are no-ops elsewhere. When
    ``device_mesh`` is None, every named axis present has size 1, or torch.distributed is
    not initialized, iteration is the source's own. The source may be any iterable (a torch
    or Lhotse DataLoader) or a :class:`sharc.Reader`, whose tensors every rank receives as
    torch tensors.
    """

    def __init__(self, source: Optional[Iterable], device_mesh, axes: Tuple[str, ...] = ("cp", "tp")):
        self._source = source
        self._mesh = device_mesh
        self._axes = axes
        self._group_and_source = None
        if not _is_noop(device_mesh, axes):
            self._is_source = is_dp_source_rank(device_mesh, axes)
            if self._is_source and source is None:
                raise ValueError("BroadcastingDataLoader on a DP source rank requires a non-None source")

    def _own_iteration(self) -> Iterator[Any]:
        if self._source is None:
            return
        for batch in self._source:
            batch = _from_sharc(batch)
            yield batch
            # Held here, a sharc.Reader's batch could not go back to its pool before the
            # next one is asked for.
            del batch

    def __iter__(self) -> Iterator[Any]:
        if _is_noop(self._mesh, self._axes) or not (dist.is_available() and dist.is_initialized()):
            yield from self._own_iteration()
            return
        if self._group_and_source is None:
            self._group_and_source = _resolve_group_and_source(self._mesh, self._axes)
        if self._group_and_source is None:
            yield from self._own_iteration()
            return
        group, src = self._group_and_source
        if self._is_source:
            try:
                source_iterator = iter(self._source)
            except Exception as error:
                _broadcast_packet(_error_packet(error, "source iterator creation failed"), group, src)
                raise
            while True:
                try:
                    batch = _next_source_batch(source_iterator)
                except StopIteration:
                    _broadcast_packet((_PACKET_STOP, None), group, src)
                    return
                except Exception as error:
                    _broadcast_packet(_error_packet(error, "source iterator failed"), group, src)
                    raise
                packet = _broadcast_packet((_PACKET_DATA, batch), group, src)
                del batch
                batch = _packet_payload(packet)
                del packet
                yield batch
                del batch
        else:
            while True:
                packet = _broadcast_packet(None, group, src)
                if packet[0] == _PACKET_STOP:
                    return
                batch = _packet_payload(packet)
                del packet
                yield batch
                del batch

    def __len__(self) -> int:
        if self._source is not None:
            return len(self._source)
        raise TypeError("BroadcastingDataLoader on non-source rank has no defined length")

    def state_dict(self) -> dict:
        if self._source is not None and hasattr(self._source, "state_dict"):
            return self._source.state_dict()
        return {}

    def load_state_dict(self, state_dict) -> None:
        if self._source is not None and hasattr(self._source, "load_state_dict"):
            self._source.load_state_dict(state_dict)


# ---------------------------------------------------------------------------
# Mesh handling
# ---------------------------------------------------------------------------


def _present_axes(device_mesh, axes: Sequence[str]) -> Tuple[str, ...]:
    if device_mesh is None:
        return ()
    if isinstance(axes, str):  # one axis name, not a sequence of one-letter names
        axes = (axes,)
    names = device_mesh.mesh_dim_names or ()
    return tuple(ax for ax in axes if ax in names)


def _is_noop(device_mesh, axes: Sequence[str]) -> bool:
    if device_mesh is None:
        return True
    present = _present_axes(device_mesh, axes)
    if not present:
        return True
    return all(device_mesh[ax].size() == 1 for ax in present)


def _broadcast_device(group) -> torch.device:
    if dist.get_backend(group) == "nccl" and torch.cuda.is_available():
        return torch.device(f"cuda:{torch.cuda.current_device()}")
    return torch.device("cpu")


def _resolve_group_and_source(device_mesh, axes: Sequence[str]):
    """(process group, global rank of the source) of the sub-mesh over `axes`. Not cached by
    the mesh's id: an id is reused once its mesh is freed, so each loader keeps its own."""
    if _is_noop(device_mesh, axes):
        return None
    present = _present_axes(device_mesh, axes)
    if len(present) == 1:
        sub = device_mesh[present[0]]
    else:
        sub = device_mesh[present]._flatten(mesh_dim_name="_".join(present))
    return sub.get_group(), int(sub.mesh.flatten()[0].item())


# ---------------------------------------------------------------------------
# Packets: (kind, payload) as one sharc frame per step
# ---------------------------------------------------------------------------


def _error_packet(error: BaseException, context: str):
    try:
        error_text = f"{type(error).__module__}.{type(error).__qualname__}: {error}"
    except Exception:
        error_text = f"{type(error).__module__}.{type(error).__qualname__}"
    return _PACKET_ERROR, f"{context}: {error_text}"


def _packet_payload(packet):
    kind, payload = packet
    if kind == _PACKET_ERROR:
        raise RuntimeError(f"BroadcastingDataLoader source error: {payload}")
    if kind != _PACKET_DATA:
        raise RuntimeError(f"Expected a data packet, received {kind!r}")
    return payload


#: How long a sharc.Reader source may refuse a batch because the previous one is still held.
_RELEASE_WAIT_S = 2.0


def _next_source_batch(source_iterator) -> Any:
    """The source's next batch. A sharc.Reader's batch is sent from its own memory, and
    gloo lets go of a sent tensor on its worker thread a moment after the broadcast returns:
    until then that batch still counts as held, and a reader with few batches to lend
    (max_held_batches) refuses the next with SHARC_ERR_BACKPRESSURE. The refusal is
    retried for that moment; one that lasts is the caller's holding, and raised."""
    if not isinstance(source_iterator, _Reader):
        return next(source_iterator)
    deadline = None
    while True:
        try:
            return next(source_iterator)
        except _sharc.Error as error:
            if error.code != _sharc.ERR_BACKPRESSURE:
                raise
            now = time.monotonic()
            deadline = deadline or now + _RELEASE_WAIT_S
            if now >= deadline:
                raise
            time.sleep(0.0005)


def _from_sharc(obj: Any) -> Any:
    """A batch of a sharc.Reader with torch tensors in place of sharc.Tensor (zero copy)."""
    if isinstance(obj, _SharcTensor):
        return torch.from_dlpack(obj)
    if isinstance(obj, dict) and any(isinstance(v, _SharcTensor) for v in obj.values()):
        return {k: _from_sharc(v) for k, v in obj.items()}
    return obj


class _HostBuffers:
    """Host memory reused from step to step for control blocks and payloads.

    Memory fresh from the system costs a page fault per page when first written, which for a
    20 MB payload takes as long as its broadcast; a buffer reused has its pages already. Each
    buffer is a bytearray lent as a new tensor over it (torch.frombuffer), whose storage holds
    the bytearray: once the last tensor or view over it is freed, only this pool refers to it
    and it is lent again. A receiver hands out views of its payload, so a buffer stays taken
    for as long as the caller keeps any tensor of that batch.
    """

    MAX_BUFFERS = 8

    def __init__(self):
        self._bufs: List[bytearray] = []
        self._lock = threading.Lock()

    def take(self, n: int) -> torch.Tensor:
        if n == 0:
            return torch.empty(0, dtype=torch.uint8)
        with self._lock:
            bufs = self._bufs
            best = None
            for i in range(len(bufs)):
                # 2: the list's reference and getrefcount's own argument; a storage over
                # the buffer would hold a third.
                if len(bufs[i]) >= n and sys.getrefcount(bufs[i]) == 2:
                    if best is None or len(bufs[i]) < len(bufs[best]):
                        best = i
            if best is None:
                # Room for batches that grow a little, so that sizes from step to step do
                # not each need a new buffer.
                buf = bytearray(n + n // 4)
                bufs.append(buf)
                if len(bufs) > self.MAX_BUFFERS:
                    del bufs[0]  # still lent: freed with the last tensor over it
                best = len(bufs) - 1
            return torch.frombuffer(bufs[best], dtype=torch.uint8, count=n)


_SEND_BUFFERS = _HostBuffers()
_RECEIVE_BUFFERS = _HostBuffers()


class _Framed:
    """A frame ready to send: the control block, then the payload (None when inline), then
    each device tensor."""

    __slots__ = ("control", "payload", "device_tensors")

    def __init__(self, control, payload, device_tensors):
        self.control = control
        self.payload = payload
        self.device_tensors = device_tensors


def _as_bytes_view(t: torch.Tensor) -> torch.Tensor:
    flat = t.reshape(-1)
    return flat if flat.dtype == torch.uint8 else flat.view(torch.uint8)


def _align(n: int) -> int:
    return (n + _sharc.FRAME_ALIGN - 1) // _sharc.FRAME_ALIGN * _sharc.FRAME_ALIGN


def _split_at(descs, offsets, payload_bytes: int, control_used: int) -> Optional[int]:
    """Where the payload of a frame whose payload is not inline is split, or None.

    The payload is laid out by the frame codec, host tensors in descriptor order. When every
    host tensor but the last fits in the control block's room after the descriptors (at the
    inline position), those travel there and the last one alone makes the second
    collective, sent straight from its own memory and received in place: a batch dominated
    by one large tensor (the audio) is never copied. Sender and receivers compute the same
    split from the descriptors; otherwise the whole payload is the second collective."""
    host = [i for i, d in enumerate(descs) if d[2] == _sharc.DEVICE_HOST]
    if not host:
        return None
    head = offsets[host[-1]]
    at = _align(control_used)
    return head if at + head <= CONTROL_BYTES and head < payload_bytes else None


def _frame_data(batch: Any, device: torch.device) -> _Framed:
    """Frame a batch, before any collective, so that a batch that cannot be framed becomes
    an error frame while the peers still wait for the control block."""
    tensors: List[torch.Tensor] = []

    def add(t: torch.Tensor) -> int:
        tensors.append(t.detach().contiguous())
        return len(tensors) - 1

    tree = _tree.encode(_from_sharc(batch), torch.is_tensor, add, lambda t: str(t.dtype).replace("torch.", ""))
    tree_t = torch.frombuffer(bytearray(tree), dtype=torch.uint8) if tree else torch.empty(0, dtype=torch.uint8)
    entries = [(("tree", _sharc.DTYPE_U8, _sharc.DEVICE_HOST, 0, (len(tree),), len(tree)), tree_t)]
    device_tensors = []
    for i, t in enumerate(tensors):
        nbytes = t.numel() * t.element_size()
        native = _TO_SHARC.get(t.dtype)
        shape = tuple(t.shape) if native is not None and t.dim() <= 4 else (nbytes,)
        code = native if native is not None and t.dim() <= 4 else _sharc.DTYPE_U8
        if t.is_cuda:
            entries.append(((f"t{i}", code, _sharc.DEVICE_CUDA, t.device.index or 0, shape, nbytes), t))
        elif t.device.type == "cpu":
            entries.append(((f"t{i}", code, _sharc.DEVICE_HOST, 0, shape, nbytes), t))
        else:
            raise TypeError(f"cannot frame a tensor on device {t.device}: host and CUDA tensors only")
    # The largest host tensor goes last, so that it can travel alone (_split_at). The
    # structure names tensors by index, and the receivers find them by name.
    host = [k for k, (d, _) in enumerate(entries) if d[2] == _sharc.DEVICE_HOST]
    largest = max(host, key=lambda k: entries[k][0][5])
    entries.append(entries.pop(largest))
    descs = [d for d, _ in entries]
    control_bytes, offsets, payload_bytes, inline_offset = _sharc.frame_data(CONTROL_BYTES, 0, 0, descs, True)
    control = _SEND_BUFFERS.take(CONTROL_BYTES)
    control[: len(control_bytes)] = torch.frombuffer(bytearray(control_bytes), dtype=torch.uint8)
    payload = None
    split = None if inline_offset else _split_at(descs, offsets, payload_bytes, len(control_bytes))
    if inline_offset:
        base, dest = inline_offset, control
    elif split is not None:
        base, dest = _align(len(control_bytes)), control
    else:
        payload = _SEND_BUFFERS.take(payload_bytes)
        base, dest = 0, payload
    for (d, t), off in zip(entries, offsets):
        if d[2] != _sharc.DEVICE_HOST:
            device_tensors.append(t)
        elif split is not None and off >= split:
            payload = _as_bytes_view(t)  # the last host tensor: sent from its own memory
        elif d[5]:
            dest[base + off : base + off + d[5]].copy_(_as_bytes_view(t))
    if device.type != "cpu":
        control = control.to(device)
        payload = payload.to(device) if payload is not None else None
    return _Framed(control, payload, device_tensors)


def _frame_bytes(frame: bytes, device: torch.device) -> _Framed:
    control = _SEND_BUFFERS.take(CONTROL_BYTES)
    control[: len(frame)] = torch.frombuffer(bytearray(frame), dtype=torch.uint8)
    return _Framed(control.to(device) if device.type != "cpu" else control, None, [])


def _send(framed: _Framed, group, src: int) -> None:
    dist.broadcast(framed.control, src=src, group=group)
    if framed.payload is not None:
        dist.broadcast(framed.payload, src=src, group=group)
    for t in framed.device_tensors:
        dist.broadcast(t, src=src, group=group)


def _receive_into(target: torch.Tensor, device: torch.device, group, src: int) -> None:
    """Receive a collective into host memory `target` (through device memory under NCCL)."""
    if device.type == "cpu":
        dist.broadcast(target, src=src, group=group)
    else:
        staged = torch.empty(target.numel(), dtype=torch.uint8, device=device)
        dist.broadcast(staged, src=src, group=group)
        target.copy_(staged)


def _receive(group, src: int, device: torch.device):
    if device.type == "cpu":
        control = _RECEIVE_BUFFERS.take(CONTROL_BYTES)
    else:
        control = torch.empty(CONTROL_BYTES, dtype=torch.uint8, device=device)
    dist.broadcast(control, src=src, group=group)
    host_control = control.cpu() if control.device.type != "cpu" else control
    raw = ctypes.string_at(host_control.data_ptr(), CONTROL_BYTES)
    try:
        kind, _step, _epoch, inline_offset, payload_bytes, _code, message, descs = _sharc.frame_decode(
            raw, MAX_FRAME_BYTES
        )
    except _sharc.Error as error:
        # A control block that is not a frame cannot say whether more collectives follow,
        # so the group cannot go on: the peer fails with the reason.
        raise RuntimeError(f"BroadcastingDataLoader received a malformed frame: {error}") from None
    if kind == _sharc.FRAME_STOP:
        return (_PACKET_STOP, None)
    if kind == _sharc.FRAME_ERROR:
        return (_PACKET_ERROR, message)
    if inline_offset:
        payload = host_control[inline_offset : inline_offset + payload_bytes]
    else:
        used = _sharc.FRAME_HEADER_SIZE + _sharc.FRAME_DESC_SIZE * len(descs)
        offsets = [d[5] for d in descs]
        split = _split_at(descs, offsets, payload_bytes, used)
        payload = _RECEIVE_BUFFERS.take(payload_bytes)
        if split is None:
            _receive_into(payload, device, group, src)
        else:
            at = _align(used)
            if split:
                payload[:split].copy_(host_control[at : at + split])
            _receive_into(payload[split:], device, group, src)
    tensors = {}
    for name, _code, dev, _ordinal, _shape, offset, nbytes in descs:
        if dev == _sharc.DEVICE_HOST:
            tensors[name] = (payload, offset, nbytes)
        else:
            target = torch.device("cuda", torch.cuda.current_device())
            t = torch.empty(nbytes, dtype=torch.uint8, device=target)
            dist.broadcast(t, src=src, group=group)
            tensors[name] = (t, 0, nbytes)
    if "tree" not in tensors:
        raise RuntimeError("BroadcastingDataLoader received a frame without its batch structure")
    buf, off, n = tensors.pop("tree")
    tree = ctypes.string_at(buf.data_ptr() + off, n) if n else b""
    try:
        batch = _tree.decode(tree, _TensorMaker(tensors))
    except (ValueError, RuntimeError) as error:
        raise RuntimeError(f"BroadcastingDataLoader received a malformed batch: {error}") from None
    return (_PACKET_DATA, batch)


class _TensorMaker:
    """The received tensors, as the structure names them: views of the payload (or the
    device tensors), typed and shaped as sent."""

    __slots__ = ("tensors",)

    def __init__(self, tensors):
        self.tensors = tensors

    def __call__(self, index: int, dtype_name: str, shape: Sequence[int]) -> torch.Tensor:
        entry = self.tensors.get(f"t{index}")
        if entry is None:
            raise ValueError(f"batch structure names tensor {index}, which the frame lacks")
        dtype = _DTYPES.get(dtype_name)
        if dtype is None:
            raise ValueError(f"unknown tensor dtype {dtype_name!r}")
        store, at, size = entry
        if not size:
            return torch.empty(shape, dtype=dtype, device=store.device)
        return store[at : at + size].view(dtype).reshape(shape)


def _broadcast_packet(packet, group, src: int):
    """Broadcast one protocol packet, (kind, payload), from `src` over `group`: one sharc
    frame. On the source, a data packet is framed before the first collective, so that one
    that cannot be framed goes out as an error packet and its error is raised here; on the
    other ranks `packet` is None and the received packet is returned. A failure after a
    collective has begun is left to the process group's timeout and the job's teardown."""
    device = _broadcast_device(group)
    if dist.get_rank() != src:
        return _receive(group, src, device)
    kind, payload = packet
    source_error = None
    if kind == _PACKET_DATA:
        try:
            framed = _frame_data(payload, device)
            payload = _from_sharc(payload)
        except Exception as error:
            source_error = error
            kind, payload = _error_packet(error, "batch serialization failed")
    if kind == _PACKET_STOP:
        framed = _frame_bytes(_sharc.frame_stop(0), device)
    elif kind == _PACKET_ERROR:
        framed = _frame_bytes(_sharc.frame_error(0, _sharc.ERR_REMOTE, payload), device)
    elif kind != _PACKET_DATA:
        raise RuntimeError(f"unknown broadcast packet kind: {kind!r}")
    _send(framed, group, src)
    if source_error is not None:
        raise source_error
    return (kind, payload)
