"""sharc: audio shards into padded batches, zero-copy into numpy and torch (docs/python.md).

``import sharc`` needs neither torch nor numpy: batches hold :class:`Tensor` objects that
``torch.from_dlpack`` and ``numpy.from_dlpack`` take without a copy. ``sharc.torch`` (which
imports torch) broadcasts batches of any source to the context- and tensor-parallel peers of
a data-parallel slot.
"""
from __future__ import annotations

import atexit
import numbers
import os
import sys
import threading
import weakref
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _sharc
from ._sharc import DataError, Error, RemoteError, Tensor

__all__ = ["Reader", "Loader", "Batch", "Tensor", "Error", "DataError", "RemoteError", "__version__"]
__version__ = _sharc.version

# Result codes of errors the package raises itself (negative errno, as the C library's).
_EINVAL = -22
_ERR_NCCL = -1012  # SHARC_ERR_NCCL


def _error(message: str, code: int = _EINVAL) -> Error:
    """A sharc.Error raised by the package rather than the C library, carrying what one from
    the C library carries: ``code``, ``code_name`` and ``message``."""
    error = Error(message)
    error.code, error.code_name, error.message = code, _sharc.strerror(code)[0], message
    return error


def _spent(who: str, epochs: int, fix: str) -> Error:
    """The error of a reader or loader iterated again once the ``epochs`` it reads are read."""
    read = "1 epoch it was asked for (epochs=1) is" if epochs == 1 else \
        f"{epochs} epochs it was asked for (epochs={epochs}) are"
    return _error(f"{who}: the {read} read; {fix}")


_STATE_KEY = "sharc_reader_state"
# Marks the state of a reader resumed from gathered states that has yielded no batch since:
# the packed blob itself, which every new slot saves alike and which is passed on as it is.
_BUNDLE_KEY = "sharc_reader_bundle"


class Batch(dict):
    """One batch: tensor name -> :class:`Tensor` for numeric tensors (``audio``,
    ``audio_lens``, ``duration``, with conditioning ``speed``, ``gain``, ``snr_db``, ...) and
    name -> ``list[str]`` for the string columns
    (``cut_id``, ``text``, ``speaker``, ``language``). ``step`` and ``epoch`` say where it
    comes from. The batch's memory goes back to the reader's pool when the last of its
    tensors, and of their DLPack exports, is freed."""

    __slots__ = ("step", "epoch")

    def __init__(self, tensors: Dict[str, Any], step: int, epoch: int):
        super().__init__(tensors)
        self.step = step
        self.epoch = epoch


def _next_batch(c: Any) -> Batch:
    """The next batch of a C reader or loader; StopIteration at the end."""
    got = c.next_batch()
    if got is None:
        raise StopIteration
    tensors, step, epoch = got
    return Batch(tensors, step, epoch)


def _open_interruptibly(c: Any, state: Optional[bytes]) -> None:
    """``c.open(state)`` (a C reader's open: finding the shards, listing S3 prefixes) on a
    thread of its own, waited for here, where Ctrl-C interrupts the wait. A C call holds off
    signal handlers until it returns; an open that stalls on a remote listing would hold off
    ``KeyboardInterrupt`` as long. Interrupted, the open finishes on its thread, which then
    closes the reader it opened."""
    lock = threading.Lock()
    flags = {"abandoned": False, "finished": False}
    failure: List[BaseException] = []

    def run() -> None:
        try:
            c.open(state)
        except BaseException as error:  # handed to the waiting thread
            failure.append(error)
        with lock:
            flags["finished"] = True
            if flags["abandoned"]:
                c.close()

    thread = threading.Thread(target=run, name="sharc-open", daemon=True)
    thread.start()
    try:
        thread.join()
    except BaseException:
        with lock:
            flags["abandoned"] = True
            if flags["finished"]:
                c.close()
        raise
    if failure:
        raise failure[0]


_EPOCH_KEY = "sharc_reader_epoch"
# Marks the state of a reader iterated epoch by epoch saved once an epoch's iteration ended:
# it resumes at the start of the next epoch, where the uninterrupted run's next iteration is.
_DONE_KEY = "sharc_reader_epoch_done"


def _pack_gathered(states: Sequence[Any], who: str) -> Optional[bytes]:
    """One blob for an elastic resume from the states of every data-parallel slot of a run,
    gathered in rank order (``torch.distributed.all_gather_object``): each a dict from
    ``state_dict()`` or its blob. Empty states (a broadcast peer's) are left out, so that
    the states of every rank may be passed; the rest must be slot 0, 1, ... D-1. None
    states (a reader's before its first batch) are the start, for all of them or none."""
    blobs, fresh, bundles = [], [], set()
    for i, state in enumerate(states):
        blob = state.get(_STATE_KEY) if isinstance(state, dict) else state
        if (isinstance(state, dict) and _STATE_KEY not in state) or not isinstance(blob, (bytes, type(None))):
            raise ValueError(f"{who}: gathered state {i} is neither a state_dict() with key {_STATE_KEY!r} "
                             "nor a state blob")
        if blob is None:
            fresh.append(i)
        elif isinstance(state, dict) and state.get(_BUNDLE_KEY):
            bundles.add(blob)
        elif blob:
            blobs.append(blob)
    if not states:
        raise ValueError(f"{who}: no gathered states (the list holds one per rank of the saved run)")
    if fresh and (blobs or bundles):
        raise ValueError(f"{who}: gathered state {fresh[0]} is None (its reader had yielded no batch) but "
                         "others are not: save every slot's state at the same step")
    if bundles:  # saved right after an elastic resume: the states it was resumed from
        if blobs or len(bundles) > 1:
            raise ValueError(f"{who}: the gathered states mix states saved right after an elastic resume "
                             "with others: save every slot's state at the same step")
        return bundles.pop()
    return _sharc.pack_states(blobs) if blobs else None  # all None: the start

# The variables that tell a process how many ranks share its node: torchrun's, then Open
# MPI's, Slurm's and MPICH's.
_LOCAL_SIZE_VARS = ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE",
                    "MPI_LOCALNRANKS")


def _default_threads() -> tuple:
    """(threads, why): the cores this process may run on divided by the ranks on its node,
    at least 1, so that ranks sharing a node do not each start a thread per core."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    for var in _LOCAL_SIZE_VARS:
        try:
            ranks = int(os.environ.get(var, ""))
        except ValueError:
            continue
        if ranks > 0:
            return max(1, cores // ranks), f"{cores} cores / {ranks} ranks on the node, {var}"
    return cores, f"{cores} cores"


_TORCH_READER = None


def _torch_reader_class(iterable_dataset: type) -> type:
    """Reader as a torch IterableDataset, so that ``DataLoader(reader, batch_size=None)``
    iterates it instead of indexing it."""
    global _TORCH_READER
    if _TORCH_READER is None:
        _TORCH_READER = type("Reader", (Reader, iterable_dataset), {"__module__": __name__,
                                                                    "__doc__": Reader.__doc__})
    return _TORCH_READER


class Reader:
    """Batches read from shards by the C reader (Lhotse Shar, NeMo tarred, WebDataset).

    ``paths`` is a path, a brace or wildcard pattern, or a list of them. Keyword settings
    carry the names of ``sharc read``'s options with ``_`` for ``-`` (``batch_duration``,
    ``num_buckets``, ``bins``, ``seed``, ``threads``, ``buffer_size``, ``layout``,
    ``dp_rank``, ``dp_size``, ...; docs/python.md lists them all); an unknown keyword
    raises ``TypeError``, a value of the wrong type ``TypeError`` and one out of range
    ``ValueError``, each naming the keyword. Reading happens on the C threads with the GIL
    released; ``threads`` defaults to this process's cores divided by the ranks on its node
    (``LOCAL_WORLD_SIZE``, ``OMPI_COMM_WORLD_LOCAL_SIZE``), as ``repr()`` shows.

    Iterating yields :class:`Batch` objects. Without ``epochs``, each iteration is one
    epoch, and iterating again starts the next (its shards in epoch ``e``'s order, seed
    ``seed + e``), as a PyTorch dataset does; with ``epochs=N`` (0: endless) one iteration
    reads the N epochs as one stream, and iterating again raises :class:`sharc.Error`.
    Made after ``torch`` is imported, a reader is a ``torch.utils.data.IterableDataset``:
    ``DataLoader(reader, batch_size=None)`` yields its batches. ``len()`` is the number of
    batches of an epoch where the metadata fix it (``max_cuts`` with ``num_buckets=1``; see
    :meth:`__len__`) and raises ``TypeError`` otherwise. ``state_dict()`` saves where
    it stands after the last batch yielded and ``load_state_dict()`` resumes there, in
    O(1), with the exact remaining batch sequence.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> "Reader":
        data = sys.modules.get("torch.utils.data")
        if cls is Reader and data is not None and hasattr(data, "IterableDataset"):
            cls = _torch_reader_class(data.IterableDataset)
        return super().__new__(cls)

    def __init__(self, paths: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]], **settings: Any):
        settings = _resolve_device(settings)
        if not isinstance(paths, (str, bytes, os.PathLike)) and hasattr(paths, "__iter__"):
            paths = list(paths)  # kept for load_state_dict, which opens a reader again
        self._threads_why = None
        if "threads" not in settings:
            settings["threads"], self._threads_why = _default_threads()
        # Without `epochs`, one epoch per iteration: the C reader reads epoch e as a reader
        # of one epoch with seed + e (docs/sampler.md, epochs that do not mix).
        self._per_epoch = "epochs" not in settings
        self._seed = settings.get("seed", 0)
        self._epoch = 0
        self._ended = False
        self._closed = False
        self._paths = paths
        self._settings = dict(settings)
        self._bundle = None  # the packed states of the last elastic resume
        self._lens: Dict[int, int] = {}  # len() by epoch
        self._c = self._open(0, None)

    def _epoch_settings(self, epoch: int) -> Dict[str, Any]:
        """The settings of the C reader of ``epoch``: without ``epochs``, seed + epoch."""
        if not (self._per_epoch and epoch):
            return self._settings
        seed = self._seed
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError("sharc.Reader: keyword 'seed' must be an int")
        return {**self._settings, "seed": (int(seed) + epoch) % (1 << 64)}

    def _open(self, epoch: int, state: Optional[bytes]) -> Any:
        c = _sharc.CReader(self._paths, _open=False, **self._epoch_settings(epoch))
        _open_interruptibly(c, state)
        return c

    def __iter__(self) -> Iterator[Batch]:
        if not self._closed:
            self._c.check_process()  # not in a DataLoader worker, which would read it again
        if not self._ended:
            return self
        if self._closed:
            raise ValueError("sharc.Reader is closed")
        if not self._per_epoch:
            raise _spent("sharc.Reader", self._settings["epochs"],
                         "leave epochs unset to iterate once per epoch, or make a new reader")
        c = self._open(self._epoch + 1, None)
        old, self._c = self._c, c
        old.close()
        self._epoch += 1
        self._ended = False
        return self

    def __next__(self) -> Batch:
        if self._ended:
            raise StopIteration
        try:
            batch = _next_batch(self._c)
        except StopIteration:
            self._ended = True
            raise
        if self._epoch:
            batch.epoch += self._epoch
        return batch

    def _unknown_len(self) -> Optional[str]:
        """Why the number of batches is not known from metadata alone, or None."""
        s = self._settings
        if s.get("input_cfg") is not None:
            return "it reads a mixture (input_cfg)"
        epochs = s.get("epochs", 1)
        if epochs == 0:
            return "it reads epochs without end (epochs=0)"
        if epochs != 1:
            return f"one iteration reads {epochs} epochs as one stream"
        by = [k for k in ("batch_duration", "max_duration", "batch_tokens", "bucket_batch_size")
              if s.get(k)]
        if by or not s.get("max_cuts"):
            return (f"it batches by {by[0] if by else 'duration'}: the number of batches depends "
                    "on the data (give max_cuts alone for a fixed batch size)")
        if s.get("bins") is not None or s.get("num_buckets", 10) != 1:
            return ("its cuts go to several buckets, each ending in a partial batch that depends "
                    "on the data (give num_buckets=1)")
        filters = [k for k in ("min_duration", "max_cut_duration", "max_tps", "min_tps",
                               "min_tokens", "max_tokens") if s.get(k)]
        if filters:
            return f"its filter {filters[0]} drops cuts that only reading finds"
        if s.get("buffer_size", 20000) < s["max_cuts"]:
            return "its buffer_size holds less than one batch of max_cuts"
        return None

    def __len__(self) -> int:
        """The number of batches of the epoch that iterating reads (the one under way, or
        the next once it ended), when it is known from metadata alone: ``max_cuts`` alone
        with ``num_buckets=1``, no cut filters, one epoch per iteration or ``epochs=1`` and
        no mixture. It counts this slot's cuts (``dp_rank``/``dp_size``) by reading the
        shards' metadata once per epoch, without decoding, and is ceil(cuts / max_cuts), or
        floor with ``drop_last``. Otherwise it raises ``TypeError`` saying why; iterate, or
        use ``DataLoader(reader, batch_size=None)``, which needs no length."""
        why = self._unknown_len()
        if why is not None:
            raise TypeError(f"len(sharc.Reader) is not known: {why}; iterate the reader, or use DataLoader("
                            f"reader, batch_size=None), which needs no length{self._not_a_dataset()}")
        epoch = self._epoch + 1 if self._ended and self._per_epoch else self._epoch
        if epoch not in self._lens:
            cuts = _sharc.CReader(self._paths, _open=False, **self._epoch_settings(epoch)).count_cuts()
            size = self._settings["max_cuts"]
            self._lens = {epoch: cuts // size if self._settings.get("drop_last") else -(-cuts // size)}
        return self._lens[epoch]

    def _not_a_dataset(self) -> str:
        """Why DataLoader takes this reader for a map-style dataset, when it does: it was made
        before torch was imported."""
        data = sys.modules.get("torch.utils.data")
        if data is None or not hasattr(data, "IterableDataset") or isinstance(self, data.IterableDataset):
            return ""
        return ("; made before torch was imported, this sharc.Reader is not a torch IterableDataset, which "
                "DataLoader(reader, batch_size=None) iterates: make the reader after `import torch`")

    def __getitem__(self, index: Any) -> Any:
        raise TypeError(f"sharc.Reader is iterated, not indexed{self._not_a_dataset()}")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("sharc.Reader cannot be pickled: it holds the C reader, its threads and buffers; keep "
                        "DataLoader's num_workers at 0 (the reader decodes on threads of its own), or make a "
                        "reader in each process")

    def __bool__(self) -> bool:
        return True  # a reader is true, whatever its len() (which may read or raise)

    def __repr__(self) -> str:
        shown = {k: v for k, v in self._settings.items() if k != "threads"}
        threads = f"threads={self._settings['threads']}"
        if self._threads_why:
            threads += f" ({self._threads_why})"
        parts = [repr(self._paths), threads] + [f"{k}={v!r}" for k, v in shown.items()]
        if self._per_epoch:
            parts.append(f"epoch {self._epoch}")
        return f"sharc.Reader({', '.join(parts)})"

    def state_dict(self) -> Dict[str, Any]:
        """The reader's position after the last batch yielded, as a dict holding the C state
        blob (``None`` before the first batch: the start) and, past the first epoch of a
        reader without ``epochs``, the epoch being iterated; saved once an epoch's iteration
        ended (such a reader's), it resumes at the start of the next epoch."""
        blob = self._c.state()
        state: Dict[str, Any] = {_STATE_KEY: blob}
        if self._epoch:
            state[_EPOCH_KEY] = self._epoch
        if self._ended and self._per_epoch:
            state[_DONE_KEY] = True
        if blob is not None and blob == self._bundle:
            state[_BUNDLE_KEY] = True
        return state

    def load_state_dict(self, state_dict: Union[Dict[str, Any], Sequence[Dict[str, Any]]]) -> None:
        """Resume at a state from :meth:`state_dict` (of a reader of the same shards, seed
        and settings): the next batch is the one that followed it. A state saved with other
        data or settings is refused by the first batch with :class:`sharc.Error`.

        Elastic resume: given the list of the states of all D data-parallel slots of a run
        (``dp_rank`` 0 ... D-1, in that order), this reader takes its share (by its own
        ``dp_rank``/``dp_size``) of what they had left of their epoch, so that over the two
        runs every cut of it is delivered once, whatever the new ``dp_size``
        (docs/python.md)."""
        gathered = isinstance(state_dict, (list, tuple))
        # Saved once an epoch's iteration ended (every slot's, when gathered): its next epoch.
        done = bool(state_dict) and all(isinstance(s, dict) and s.get(_DONE_KEY) is True
                                        for s in (state_dict if gathered else [state_dict]))
        if gathered:
            epochs = {s.get(_EPOCH_KEY, 0) for s in state_dict if isinstance(s, dict)}
            if len(epochs) > 1:
                raise ValueError(f"sharc.Reader.load_state_dict: the gathered states are of different "
                                 f"epochs ({sorted(epochs)}); save every slot's state at the same step")
            state_dict = {_STATE_KEY: _pack_gathered(state_dict, "sharc.Reader.load_state_dict"),
                          _EPOCH_KEY: epochs.pop() if epochs else 0}
        if not isinstance(state_dict, dict) or _STATE_KEY not in state_dict:
            raise ValueError(f"sharc.Reader.load_state_dict: expected a dict with key {_STATE_KEY!r}")
        epoch = state_dict.get(_EPOCH_KEY, 0)
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0 or (epoch and not self._per_epoch):
            raise ValueError(f"sharc.Reader.load_state_dict: {_EPOCH_KEY} {epoch!r} is not an epoch of this "
                             "reader (a number >= 0, for a reader without epochs=...)")
        if self._closed:
            raise ValueError("sharc.Reader is closed")
        if done and self._per_epoch:
            epoch, gathered, state_dict = epoch + 1, False, {_STATE_KEY: None}
        # A reader opened at the state replaces this one once it is open: interrupted or
        # refused, this one is left as it was.
        c = self._open(epoch, state_dict[_STATE_KEY])
        old, self._c = self._c, c
        old.close()
        self._bundle = state_dict[_STATE_KEY] if gathered or state_dict.get(_BUNDLE_KEY) else None
        self._epoch = epoch
        self._ended = False

    def close(self) -> None:
        """Stop the reader's threads. Tensors of batches already yielded stay valid."""
        self._c.close()
        self._closed = True

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def shards(self) -> list:
        """The shard files found, in the dataset's order."""
        return self._c.shards()

    def stats(self) -> dict:
        """The reader's counters (cuts, batches, filtered cuts by reason, problems by kind, ...)."""
        return self._c.stats()


_LIVE_LOADERS: "weakref.WeakSet[Loader]" = weakref.WeakSet()


def _finalize_mpi() -> None:
    # Every loader's transport is freed before MPI is finalized, not by the garbage
    # collector after it.
    for loader in list(_LIVE_LOADERS):
        loader.close()
    if hasattr(_sharc, "mpi_finalize"):
        _sharc.mpi_finalize()


def _resolve_device(settings: Dict[str, Any]) -> Dict[str, Any]:
    """``device="cuda"`` (or a torch.device without an index) is the current CUDA device, as
    in torch, when torch is imported and has one; ``"cuda:N"`` and ``"cpu"`` pass as given."""
    device = settings.get("device")
    if device is None or str(device) != "cuda":
        return settings
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return {**settings, "device": f"cuda:{torch.cuda.current_device()}"}
    return settings


def _default_transport() -> str:
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized() and dist.get_backend() == "nccl":
        return "nccl"
    return "mpi"


def _nccl_bootstrap() -> tuple:
    """(unique id, rank, world size, CUDA device) for the NCCL transport: rank 0 of the
    torch.distributed default group makes the id and the group broadcasts it once. The device
    is the current CUDA device (the C loader takes the reader's instead when batches are made
    on a GPU)."""
    if not hasattr(_sharc, "nccl_unique_id"):
        raise _error("sharc.Loader: this build of sharc has no NCCL transport", _sharc.ERR_UNSUPPORTED)
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise _error("sharc.Loader: transport 'nccl' needs torch.distributed initialized "
                     "(init_process_group), whose default group shares the NCCL unique id")
    rank, world = dist.get_rank(), dist.get_world_size()
    # An id that could not be made travels as the error, so that every rank fails alike
    # instead of waiting for a communicator rank 0 never joins.
    box: List[Any] = [None]
    if rank == 0:
        try:
            box[0] = _sharc.nccl_unique_id()
        except Error as error:
            box[0] = f"rank 0 could not make an NCCL unique id: {error}"
    dist.broadcast_object_list(box, src=0)
    if isinstance(box[0], str):
        raise _error(f"sharc.Loader: {box[0]}", _ERR_NCCL)
    device = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return (box[0], rank, world, device)


class Loader:
    """The C loader (``sharc_loader_next``) on every rank of a job: the source rank of each
    broadcast group reads and broadcasts each batch as one frame, its peers receive it, and
    every rank gets the same batch, end and error at the same step
    (docs/training-loop.md, "The failure contract"; a failure on another rank is
    :class:`sharc.RemoteError`). The same code runs on every rank.

    The mesh is ``mesh`` (``"dp=2,cp=2"``, row-major over the ranks) or the axes of a torch
    ``device_mesh`` (its ``mesh_dim_names`` and extents); without either every rank is its
    own data-parallel slot. ``broadcast_axes`` (default ``("cp", "tp")``, or a str ``"cp,tp"``)
    span a group; the other axes are the data-parallel slots, whose source reads its own
    shards. The keyword settings are :class:`Reader`'s (``dp_rank``/``dp_size`` come from the
    mesh, and are refused).
    One iteration reads ``epochs`` (default 1) as one stream; iterating again once they are
    read raises :class:`sharc.Error`. A loader is a context manager that closes it.

    ``transport`` is ``"mpi"`` (a job started by ``mpirun``; sharc initializes MPI when the
    program has not) or ``"nccl"`` (a job whose ``torch.distributed`` default group is
    initialized, by torchrun, srun or mpirun: rank 0 makes an NCCL unique id, the default
    group broadcasts it once, and every rank creates the communicator on its current CUDA
    device); the default is ``"nccl"`` when ``torch.distributed`` is initialized with the
    NCCL backend and ``"mpi"`` otherwise.

    ``even_steps`` (default: on when there are several data-parallel slots and ``epochs``
    is finite) makes every slot end at the same step: the sources agree at every step over
    a communicator of their own, the stream ends on every slot when the first one runs dry, and :attr:`dropped`
    counts what a slot still had (docs/training-loop.md, "even steps").

    ``state_dict()``/``load_state_dict()`` wrap the loader's state; loading reopens the
    loader and is collective (every rank calls it at the same step). Given the list of
    every rank's ``state_dict()`` (``torch.distributed.all_gather_object``), loading is an
    elastic resume: each slot takes its share of what the saved slots had left, on any
    number of slots.
    """

    def __init__(self, paths, device_mesh=None, *, mesh: Optional[str] = None,
                 broadcast_axes: Optional[Sequence[str]] = None, transport: Optional[str] = None,
                 even_steps: Optional[bool] = None, **settings: Any):
        if not hasattr(_sharc, "CLoader"):
            raise _error("sharc.Loader: this build of sharc has neither the MPI nor the NCCL transport",
                         _sharc.ERR_UNSUPPORTED)
        if transport is None:
            transport = _default_transport()
        if transport not in ("mpi", "nccl"):
            raise ValueError(f"sharc.Loader: transport {transport!r}: 'mpi' or 'nccl'")
        mesh_keys = [k for k in ("dp_rank", "dp_size") if k in settings]
        if mesh_keys:  # refused on every rank alike, before any collective
            raise TypeError(f"sharc.Loader: keywords {', '.join(mesh_keys)} are not settings of a loader: its "
                            "data-parallel slots come from the mesh (mesh=, device_mesh=, broadcast_axes=); "
                            "remove them")
        if mesh is not None and device_mesh is not None:
            raise ValueError("sharc.Loader: give mesh or device_mesh, not both")
        if device_mesh is not None:
            names = device_mesh.mesh_dim_names
            if not names:
                raise ValueError("sharc.Loader: device_mesh has no mesh_dim_names: name its axes (init_device_mesh"
                                 "(..., mesh_dim_names=(\"dp\", \"cp\"))), or give mesh=\"dp=2,cp=2\"")
            mesh = ",".join(f"{n}={int(e)}" for n, e in zip(names, tuple(device_mesh.mesh.shape)))
        # A str is the axis names as the CLI's --broadcast-axes gives them ("cp" or "cp,tp"),
        # not a sequence of one-letter axes.
        axes = broadcast_axes if broadcast_axes is None or isinstance(broadcast_axes, str) \
            else ",".join(broadcast_axes)
        settings = _resolve_device(settings)
        if "threads" not in settings:
            settings["threads"], _ = _default_threads()
        cfg = _sharc.CReader(paths, _open=False, **settings)
        nccl = _nccl_bootstrap() if transport == "nccl" else None
        first = not _LIVE_LOADERS
        self._bundle = None  # the packed states of the last elastic resume
        self._epochs = settings.get("epochs", 1)
        self._ended = False  # every rank sees the end at the same step
        self._c = _sharc.CLoader(cfg, mesh, axes, nccl, -1 if even_steps is None else int(bool(even_steps)))
        _LIVE_LOADERS.add(self)
        if first:
            atexit.register(_finalize_mpi)

    def __iter__(self) -> Iterator[Batch]:
        if self._ended:
            raise _spent("sharc.Loader", self._epochs,
                         "give epochs=N (0: endless) to read more, or make a new loader")
        return self

    def __next__(self) -> Batch:
        try:
            return _next_batch(self._c)
        except StopIteration:
            self._ended = True
            raise

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def info(self) -> dict:
        """This rank's place: ``is_source``, ``dp_rank``, ``dp_size``, ``source_rank`` and
        ``transport``."""
        return self._c.info()

    @property
    def dropped(self) -> tuple:
        """``(batches, cuts)`` that even steps dropped on this slot's source at the end of
        the stream, because another slot ran dry first; ``(0, 0)`` on peers and before
        the end."""
        return self._c.dropped()

    def state_dict(self) -> Dict[str, Any]:
        blob = self._c.state()
        return {_STATE_KEY: blob, _BUNDLE_KEY: True} if blob and blob == self._bundle else {_STATE_KEY: blob}

    def load_state_dict(self, state_dict: Union[Dict[str, Optional[bytes]], Sequence[Any]]) -> None:
        """Resume at this rank's ``state_dict()``, or elastically at the list of every
        rank's (or every slot source's) states in rank order; collective."""
        gathered = isinstance(state_dict, (list, tuple))
        if gathered:
            state_dict = {_STATE_KEY: _pack_gathered(state_dict, "sharc.Loader.load_state_dict")}
        if not isinstance(state_dict, dict) or _STATE_KEY not in state_dict:
            raise ValueError(f"sharc.Loader.load_state_dict: expected a dict with key {_STATE_KEY!r}")
        self._c.resume(state_dict[_STATE_KEY] or None)
        self._ended = False
        self._bundle = state_dict[_STATE_KEY] if gathered or state_dict.get(_BUNDLE_KEY) else None

    def close(self) -> None:
        """Close the loader and its transport; collective."""
        self._c.close()
        _LIVE_LOADERS.discard(self)
