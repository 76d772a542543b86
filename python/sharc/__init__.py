"""sharc: audio shards into padded batches, zero-copy into numpy and torch (docs/python.md).

``import sharc`` needs neither torch nor numpy: batches hold :class:`Tensor` objects that
``torch.from_dlpack`` and ``numpy.from_dlpack`` take without a copy. ``sharc.torch`` (which
imports torch) broadcasts batches of any source to the context- and tensor-parallel peers of
a data-parallel slot.
"""
from __future__ import annotations

import atexit
import os
import weakref
from typing import Any, Dict, Iterator, Optional, Sequence, Union

from . import _sharc
from ._sharc import DataError, Error, RemoteError, Tensor

__all__ = ["Reader", "Loader", "Batch", "Tensor", "Error", "DataError", "RemoteError", "__version__"]
__version__ = _sharc.version

_STATE_KEY = "sharc_reader_state"


class Batch(dict):
    """One batch: tensor name -> :class:`Tensor` for numeric tensors (``audio``,
    ``audio_lens``, ``duration``, ...) and name -> ``list[str]`` for the string columns
    (``cut_id``, ``text``, ``speaker``, ``language``). ``step`` and ``epoch`` say where it
    comes from. The batch's memory goes back to the reader's pool when the last of its
    tensors, and of their DLPack exports, is freed."""

    __slots__ = ("step", "epoch")

    def __init__(self, tensors: Dict[str, Any], step: int, epoch: int):
        super().__init__(tensors)
        self.step = step
        self.epoch = epoch


class Reader:
    """Batches read from shards by the C reader (Lhotse Shar, NeMo tarred, WebDataset).

    ``paths`` is a path, a brace or wildcard pattern, or a list of them. Keyword settings
    carry the names of ``sharc read``'s options with ``_`` for ``-`` (``max_duration``,
    ``num_buckets``, ``bins``, ``seed``, ``threads``, ``buffer_size``, ``layout``,
    ``dp_rank``, ``dp_size``, ...; docs/python.md lists them all); an unknown keyword
    raises ``TypeError``, a value of the wrong type ``TypeError`` and one out of range
    ``ValueError``, each naming the keyword. Reading happens on the C threads with the GIL
    released.

    Iterating yields :class:`Batch` objects until the configured epochs are read; a reader
    is one pass. ``state_dict()`` saves where it stands after the last batch yielded and
    ``load_state_dict()`` resumes there, in O(1), with the exact remaining batch sequence.
    """

    def __init__(self, paths: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]], **settings: Any):
        self._c = _sharc.CReader(paths, **settings)
        self._settings = dict(settings)

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        got = self._c.next_batch()
        if got is None:
            raise StopIteration
        tensors, step, epoch = got
        return Batch(tensors, step, epoch)

    def state_dict(self) -> Dict[str, Optional[bytes]]:
        """The reader's position after the last batch yielded, as a dict holding the C state
        blob (``None`` before the first batch: the start)."""
        return {_STATE_KEY: self._c.state()}

    def load_state_dict(self, state_dict: Dict[str, Optional[bytes]]) -> None:
        """Resume at a state from :meth:`state_dict` (of a reader of the same shards, seed
        and settings): the next batch is the one that followed it. A state saved with other
        data or settings is refused by the first batch with :class:`sharc.Error`."""
        if not isinstance(state_dict, dict) or _STATE_KEY not in state_dict:
            raise ValueError(f"sharc.Reader.load_state_dict: expected a dict with key {_STATE_KEY!r}")
        self._c.resume(state_dict[_STATE_KEY])

    def close(self) -> None:
        """Stop the reader's threads. Tensors of batches already yielded stay valid."""
        self._c.close()

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def shards(self) -> list:
        """The shard files found, in the dataset's order."""
        return self._c.shards()

    def stats(self) -> dict:
        """The reader's counters (cuts, batches, problems by kind, ...)."""
        return self._c.stats()


_LIVE_LOADERS: "weakref.WeakSet[Loader]" = weakref.WeakSet()


def _finalize_mpi() -> None:
    # Every loader's transport is freed before MPI is finalized, not by the garbage
    # collector after it.
    for loader in list(_LIVE_LOADERS):
        loader.close()
    _sharc.mpi_finalize()


class Loader:
    """The C loader (``sharc_loader_next``) on every rank of an MPI job (``mpirun``): the
    source rank of each broadcast group reads and broadcasts each batch over MPI as one
    frame, its peers receive it, and every rank gets the same batch, end and error at the
    same step (docs/training-loop.md, "The failure contract"; a failure on another rank is
    :class:`sharc.RemoteError`). The same code runs on every rank.

    The mesh is ``mesh`` (``"dp=2,cp=2"``, row-major over the MPI ranks) or the axes of a
    torch ``device_mesh`` (its ``mesh_dim_names`` and extents); without either every rank is
    its own data-parallel slot. ``broadcast_axes`` (default ``("cp", "tp")``) span a group;
    the other axes are the data-parallel slots, whose source reads its own shards. The
    keyword settings are :class:`Reader`'s (``dp_rank``/``dp_size`` come from the mesh).
    ``state_dict()``/``load_state_dict()`` wrap the loader's state; loading reopens the
    loader and is collective (every rank calls it at the same step).
    """

    def __init__(self, paths, device_mesh=None, *, mesh: Optional[str] = None,
                 broadcast_axes: Optional[Sequence[str]] = None, **settings: Any):
        if not hasattr(_sharc, "CLoader"):
            raise Error("sharc.Loader: this build of sharc has no MPI transport")
        if mesh is None and device_mesh is not None:
            names = device_mesh.mesh_dim_names
            mesh = ",".join(f"{n}={int(e)}" for n, e in zip(names, tuple(device_mesh.mesh.shape)))
        axes = None if broadcast_axes is None else ",".join(broadcast_axes)
        cfg = _sharc.CReader(paths, _open=False, **settings)
        first = not _LIVE_LOADERS
        self._c = _sharc.CLoader(cfg, mesh, axes)
        _LIVE_LOADERS.add(self)
        if first:
            atexit.register(_finalize_mpi)

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        got = self._c.next_batch()
        if got is None:
            raise StopIteration
        tensors, step, epoch = got
        return Batch(tensors, step, epoch)

    @property
    def info(self) -> dict:
        """This rank's place: ``is_source``, ``dp_rank``, ``dp_size``, ``source_rank`` and
        ``transport``."""
        return self._c.info()

    def state_dict(self) -> Dict[str, Optional[bytes]]:
        return {_STATE_KEY: self._c.state()}

    def load_state_dict(self, state_dict: Dict[str, Optional[bytes]]) -> None:
        if not isinstance(state_dict, dict) or _STATE_KEY not in state_dict:
            raise ValueError(f"sharc.Loader.load_state_dict: expected a dict with key {_STATE_KEY!r}")
        self._c.resume(state_dict[_STATE_KEY] or None)

    def close(self) -> None:
        """Close the loader and its transport; collective."""
        self._c.close()
        _LIVE_LOADERS.discard(self)
