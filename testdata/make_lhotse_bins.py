#!/usr/bin/env python3
"""Write reference vectors for sharc's duration-bin estimation from the real Lhotse.

Each case is a list of cut durations, in stream order, and the bins Lhotse's
``estimate_duration_buckets`` returns for them. tests/test_sampler.c reads the files
and requires sharc_estimate_duration_bins() to give bit-identical bins.

Usage: python3 make_lhotse_bins.py [OUTDIR]   (default: lhotse_bins/ next to this file)

Lhotse's package imports torch. Where torch is not installed, the function is taken
from the installed lhotse source file itself (the same code, minus the import chain).
"""
import ast
import importlib.util
import os
import random
import sys
from types import SimpleNamespace

import numpy as np


def load_estimate_duration_buckets():
    try:
        from lhotse.dataset.sampling.dynamic_bucketing import estimate_duration_buckets

        return estimate_duration_buckets, "imported"
    except ImportError:
        pass
    spec = importlib.util.find_spec("lhotse")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("lhotse is not installed: pip install lhotse")
    pkg = spec.submodule_search_locations[0]
    sampling = os.path.join(pkg, "dataset", "sampling")
    # TimeConstraint.measure_length must still be the raw duration for the shim below.
    base = ast.parse(open(os.path.join(sampling, "base.py")).read())
    tc = next(n for n in base.body if isinstance(n, ast.ClassDef) and n.name == "TimeConstraint")
    ml = next(n for n in tc.body if isinstance(n, ast.FunctionDef) and n.name == "measure_length")
    assert ast.unparse(ml.body[-1]) == "return example.duration", ast.unparse(ml)
    src = open(os.path.join(sampling, "dynamic_bucketing.py")).read()
    tree = ast.parse(src)
    fn = next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "estimate_duration_buckets"
    )
    code = ast.get_source_segment(src, fn)

    class TimeConstraint:
        def measure_length(self, example):
            return example.duration

    import typing

    ns = dict(np=np, TimeConstraint=TimeConstraint, **{k: getattr(typing, k) for k in typing.__all__})
    ns.update(Cut=object, SamplingConstraint=object)
    exec(code, ns)
    return ns["estimate_duration_buckets"], "function source from lhotse/dataset/sampling/dynamic_bucketing.py"


def cases():
    r = random.Random(20240601)
    yield "uniform_k10", 10, [r.uniform(0.5, 20.0) for _ in range(1000)]
    r = random.Random(7)
    yield "lognormal_k30_n10000", 30, [min(40.0, r.lognormvariate(1.6, 0.6)) for _ in range(10000)]
    r = random.Random(11)
    # Durations rounded to 10 ms: many ties, boundaries equal to durations, duplicate bins.
    yield "rounded_ties_k8", 8, [round(r.choice([1.0, 2.5, 2.5, 4.0, r.uniform(0.3, 9.0)]), 2) for _ in range(500)]
    r = random.Random(3)
    # Durations as num_samples / 16000, as Lhotse computes them.
    yield "samples16k_k20", 20, [r.randint(8000, 16000 * 30) / 16000 for _ in range(3000)]
    yield "tiny_k7_n7", 7, [3.0, 1.0, 2.0, 7.0, 5.0, 4.0, 6.0]
    r = random.Random(5)
    yield "k2_n50", 2, [r.uniform(1.0, 2.0) for _ in range(50)]
    yield "constant_k4", 4, [2.0] * 64
    r = random.Random(9)
    # Over 8192 values: numpy's pairwise summation splits the sum into blocks.
    yield "bimodal_k12_n20000", 12, [r.choice([r.gauss(3, 0.5), r.gauss(15, 3)]) for _ in range(20000)]

    # Inputs where summing naively instead of numpy's pairwise way changes the bins
    # (found by search): they pin down the summation order.
    for seed in (99, 2646):
        r = random.Random(seed)
        n, k = r.randint(8, 40), r.randint(2, 4)
        d = sorted(round(r.choice([0.1, 0.2, 0.3, 0.7, 1.1, 0.35]) * r.randint(1, 9), 2) for _ in range(n))
        random.Random(seed).shuffle(d)
        yield f"pairwise_sum_seed{seed}_k{k}", k, d


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "lhotse_bins")
    est, how = load_estimate_duration_buckets()
    os.makedirs(out, exist_ok=True)
    try:
        from importlib.metadata import version

        lv = version("lhotse")
    except Exception:
        lv = "unknown"
    for name, k, durs in cases():
        durs = [abs(d) + 0.01 for d in durs] if min(durs) <= 0 else durs
        bins = est([SimpleNamespace(duration=d) for d in durs], k)
        with open(os.path.join(out, name + ".txt"), "w") as f:
            f.write(f"# lhotse {lv} estimate_duration_buckets ({how}), numpy {np.__version__}\n")
            f.write(f"num_buckets {k}\n")
            f.write(f"durations {len(durs)}\n")
            f.writelines(repr(float(d)) + "\n" for d in durs)
            f.write(f"bins {len(bins)}\n")
            f.writelines(repr(float(b)) + "\n" for b in bins)
        print(name, k, len(durs), "->", len(bins), "bins")


if __name__ == "__main__":
    main()
