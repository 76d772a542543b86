#!/usr/bin/env python3
"""The Lhotse side of sharc's loader comparison (issue 3): what a Lhotse user runs to get
padded batches out of a Shar directory, in one process with one thread:

    CutSet.from_shar(in_dir=...)  ->  DynamicBucketingSampler(...)  ->  for every batch:
    cut.load_audio() for each cut, zero-padded into a float32 [B, T] numpy array

It times --batches N batches or --seconds S seconds after --warmup batches, --repeat times,
and prints one JSON object with the same keys as `sharc bench --json` (medians over the
repetitions).

Collation (--collate): `lhotse` (the default when torch is installed) calls Lhotse's own
lhotse.dataset.collation.collate_audio, as K2SpeechRecognitionDataset and NeMo do, with
torch limited to one thread; `numpy` loads each cut with cut.load_audio() and copies it into a
zero-padded float32 [B, T] numpy array, which is strictly less work than collate_audio (that
pads by turning cuts into MixedCuts), so it favours Lhotse.

torch: Lhotse requires torch, and pip installs the CUDA build from PyPI (bench/setup_lhotse.sh).
The code timed here (Shar reading, the sampler, audio loading) never calls torch except for
collate_audio's tensors. Where torch is not installed (lhotse installed with --no-deps) this
script puts a minimal stand-in on sys.meta_path before importing lhotse: torch.distributed
reports itself unavailable, get_worker_info() returns None (the main process, as with
num_workers=0), Sampler/Dataset are plain classes and any other name is an inert placeholder;
only --collate numpy works then. The JSON says which torch and which collation were used.
"""
import argparse
import importlib.abc
import importlib.machinery
import json
import os
import resource
import statistics
import sys
import time
import types

# One thread: numpy's BLAS is not used for padding, but keep every pool at one thread anyway.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")


class _Inert:
    """A value that absorbs attribute access, calls and subscripts (decorators, annotations)."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return _Inert()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()

    def __getitem__(self, item):
        return _Inert()

    def __bool__(self):
        return False


class _TorchStandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Provides `torch` and `torch.*` modules when no real torch is installed."""

    OVERRIDES = {
        "torch.distributed": {
            "is_available": lambda: False,
            "is_initialized": lambda: False,
        },
        "torch.utils.data": {"get_worker_info": lambda: None},
    }

    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        for k, v in self.OVERRIDES.get(spec.name, {}).items():
            setattr(m, k, v)

        def getattr_(attr, _m=m):
            if attr.startswith("__"):
                raise AttributeError(attr)
            if attr[:1].isupper():  # classes: Sampler, Dataset, Tensor, Generator, ...
                # ignore_index: collation.py reads CrossEntropyLoss().ignore_index at import.
                cls = type(attr, (object,), {"__init__": lambda self, *a, **k: None,
                                             "__class_getitem__": classmethod(lambda c, i: c),
                                             "ignore_index": -100})
                setattr(_m, attr, cls)
                return cls
            return _Inert()

        m.__getattr__ = getattr_
        m.__version__ = "0.0.0+stand-in"
        return m

    def exec_module(self, module):
        pass


def import_lhotse():
    try:
        import torch

        torch.set_num_threads(1)
        torch_kind = "torch " + torch.__version__
    except ImportError:
        sys.meta_path.insert(0, _TorchStandIn())
        torch_kind = None
    import lhotse
    from lhotse import CutSet
    from lhotse.dataset import DynamicBucketingSampler

    return lhotse, CutSet, DynamicBucketingSampler, torch_kind


def peak_rss_bytes():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def collate_lhotse(batch):
    """Lhotse's own collation: float32 [B, T] torch tensor and lengths (as numpy)."""
    from lhotse.dataset.collation import collate_audio

    audio, lens = collate_audio(batch)
    return audio, lens.numpy()


def collate_numpy(batch):
    """Load every cut and zero-pad into float32 [B, T] plus int32 lengths."""
    import numpy as np

    audios = []
    for cut in batch:
        a = cut.load_audio()  # float32 [channels, samples]
        audios.append(a[0] if a.ndim == 2 else a)
    lens = np.array([len(a) for a in audios], dtype=np.int32)
    out = np.zeros((len(audios), int(lens.max())), dtype=np.float32)
    for i, a in enumerate(audios):
        out[i, : len(a)] = a
    return out, lens


def one_run(args, CutSet, Sampler, collate):
    """Open, warm up, time the window. Returns the run's figures."""
    t0 = time.perf_counter()
    cuts = CutSet.from_shar(in_dir=args.in_dir, shuffle_shards=True, seed=args.seed)
    if args.epochs != 1:
        cuts = cuts.repeat(times=args.epochs or None)
    kw = dict(max_duration=args.max_duration, max_cuts=args.max_cuts, shuffle=True,
              buffer_size=args.buffer_size, quadratic_duration=args.quadratic_duration,
              seed=args.seed, world_size=1, rank=0)
    if args.bins:
        kw["duration_bins"] = args.bins
    else:
        kw["num_buckets"] = args.num_buckets
        kw["num_cuts_for_bins_estimate"] = args.num_cuts_for_bins_estimate
    sampler = Sampler(cuts, **kw)
    r = dict(audio=0.0, cuts=0, batches=0, real=0, padded=0, fill=0.0, first=None)
    start = cpu0 = None
    taken = 0
    if args.warmup == 0:
        start, cpu0 = t0, time.process_time()
    for batch in sampler:
        audio, lens = collate(batch)
        taken += 1
        if r["first"] is None:
            r["first"] = time.perf_counter() - t0
        if start is None:
            if taken == args.warmup:
                start, cpu0 = time.perf_counter(), time.process_time()
            continue
        dur = sum(c.duration for c in batch)
        r["audio"] += dur
        r["cuts"] += len(batch)
        r["batches"] += 1
        r["real"] += int(lens.sum())
        r["padded"] += audio.shape[0] * audio.shape[1]
        if args.max_duration:
            r["fill"] += dur / args.max_duration
        elapsed = time.perf_counter() - start
        if (args.batches and r["batches"] >= args.batches) or (
                args.seconds and elapsed >= args.seconds):
            break
    if start is None:
        sys.exit(f"lhotse_bench: the data ended after {taken} batches, during the warm-up")
    r["wall"] = time.perf_counter() - start
    r["cpu"] = time.process_time() - cpu0
    return r


def median(xs):
    return statistics.median(xs) if xs and None not in xs else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--in-dir", required=True, help="Lhotse Shar directory")
    p.add_argument("--max-duration", type=float, default=200.0)
    p.add_argument("--max-cuts", type=int, default=None)
    p.add_argument("--num-buckets", type=int, default=10)
    p.add_argument("--num-cuts-for-bins-estimate", type=int, default=10000)
    p.add_argument("--bins", type=lambda s: [float(x) for x in s.split(",")], default=None,
                   help="explicit bucket boundaries, comma-separated (default: estimate)")
    p.add_argument("--quadratic-duration", type=float, default=None)
    p.add_argument("--buffer-size", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1, help="0 = repeat forever (default 1)")
    p.add_argument("--warmup", type=int, default=2, help="untimed batches first (default 2)")
    p.add_argument("--batches", type=int, default=0, help="time N batches")
    p.add_argument("--seconds", type=float, default=0.0,
                   help="time S seconds (default 10 without --batches)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--collate", choices=["lhotse", "numpy"], default=None,
                   help="lhotse: collate_audio (default with torch); numpy: load + pad")
    args = p.parse_args()
    if not args.batches and not args.seconds:
        args.seconds = 10.0

    lhotse, CutSet, Sampler, torch_kind = import_lhotse()
    from lhotse.audio.backend import get_current_audio_backend

    if args.collate is None:
        args.collate = "lhotse" if torch_kind else "numpy"
    if args.collate == "lhotse" and not torch_kind:
        sys.exit("lhotse_bench: --collate lhotse needs torch; use --collate numpy")
    collate = collate_lhotse if args.collate == "lhotse" else collate_numpy

    runs, peak, scope_run = [], 0, True
    for _ in range(args.repeat):
        scope_run &= reset_peak_rss()
        r = one_run(args, CutSet, Sampler, collate)
        r["peak_rss"] = peak_rss_bytes()
        peak = max(peak, r["peak_rss"])
        runs.append(r)

    def med(f):
        return median([f(r) for r in runs])

    out = {
        "loader": "lhotse",
        "lhotse_version": lhotse.__version__,
        "torch": torch_kind or "stand-in (see bench/lhotse_bench.py)",
        "audio_backend": type(get_current_audio_backend()).__name__,
        "collate": {"lhotse": "lhotse.dataset.collation.collate_audio",
                    "numpy": "cut.load_audio() + numpy zero-padding"}[args.collate],
        "threads": 1,
        "repeat": args.repeat,
        "window_seconds": med(lambda r: r["wall"]),
        "audio_seconds": sum(r["audio"] for r in runs),
        "cuts": sum(r["cuts"] for r in runs),
        "batches": sum(r["batches"] for r in runs),
        "audio_seconds_per_second": med(lambda r: r["audio"] / r["wall"]),
        "cuts_per_second": med(lambda r: r["cuts"] / r["wall"]),
        "batches_per_second": med(lambda r: r["batches"] / r["wall"]),
        "padding_ratio": med(lambda r: r["padded"] / r["real"] if r["real"] else None),
        "batch_fill": med(lambda r: r["fill"] / r["batches"] if r["batches"] else None),
        "max_duration": args.max_duration,
        "time_to_first_batch_s": med(lambda r: r["first"]),
        "cpu_seconds_per_audio_second": med(lambda r: r["cpu"] / r["audio"] if r["audio"]
                                            else None),
        "peak_rss_bytes": peak,
        "peak_rss_scope": "run" if scope_run else "process",
        "runs": [{"window_seconds": r["wall"],
                  "audio_seconds_per_second": r["audio"] / r["wall"],
                  "cuts_per_second": r["cuts"] / r["wall"],
                  "peak_rss_bytes": r["peak_rss"]} for r in runs],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
