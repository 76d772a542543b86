#!/usr/bin/env python3
"""The Python package's two performance targets (docs/benchmarks.md, "Python"), side by side
in one run:

  reader     batches per second of iterating sharc.Reader in Python (each batch's audio and
             lengths taken with torch.from_dlpack, its strings as lists) against `sharc bench`
             on the same corpus and settings, alternated: target >= 0.95x.
  broadcast  the step of BroadcastingDataLoader with a 20 MB batch (32 x 160000 float32
             audio, int32 lengths, 32 cut ids) over gloo with 2 processes, against a raw
             dist.broadcast of the same bytes, alternated step by step, timed on the peer
             (medians): target <= 1.15x.

Usage (from the repository root, after `ninja -C build`):
  PYTHONPATH=build/python python3 bench/python_bench.py --build build [--what reader|broadcast|all]
Prints one JSON line per measurement and a summary line per target.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def reader_bench(args):
    import sharc
    import torch

    work = tempfile.mkdtemp(prefix="sharc-pybench-")
    results = {}
    for codec in ("flac", "wav"):
        out = os.path.join(work, codec)
        subprocess.run([os.path.join(args.build, "testdata", "sharc-gen"), "--out", out, "--layout", "shar",
                        "--compress", "none", "--shards", "8", "--cuts-per-shard", "64", "--seed", "1",
                        "--codec", codec], check=True, stdout=subprocess.DEVNULL)
        data = os.path.join(out, "shar")
        settings = dict(threads=args.threads, seed=0, epochs=0, max_duration=200.0, buffer_size=1000)
        cli = [os.path.join(args.build, "tools", "sharc"), "bench", "--json", "--repeat", "1", "--seconds",
               str(args.seconds), "--threads", str(args.threads), "--seed", "0", "--epochs", "0",
               "--max-duration", "200", "--buffer-size", "1000", data]
        py_rates, cli_rates = [], []
        for _ in range(args.repeat):
            rep = json.loads(subprocess.run(cli, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            cli_rates.append(rep["batches_per_second"])
            reader = sharc.Reader(data, **settings)
            next(reader)  # as `sharc bench`, the window starts after the first batch
            n, waited, t0 = 0, 0.0, time.perf_counter()
            while time.perf_counter() - t0 < args.seconds:
                w0 = time.perf_counter()
                got = reader._c.next_batch()  # what next(reader) calls: the wait, in C
                waited += time.perf_counter() - w0
                b = sharc.Batch(*got)
                del got
                audio = torch.from_dlpack(b["audio"])
                lens = torch.from_dlpack(b["audio_lens"])
                ids = b["cut_id"]
                assert audio.shape[0] == lens.shape[0] == len(ids)
                del b, audio, lens, ids
                n += 1
            elapsed = time.perf_counter() - t0
            py_rates.append(n / elapsed)
            reader.close()
            print(json.dumps({"what": "reader", "codec": codec, "threads": args.threads,
                              "python_batches_per_second": py_rates[-1],
                              "python_us_per_batch_outside_c": (elapsed - waited) / n * 1e6,
                              "sharc_bench_batches_per_second": cli_rates[-1]}), flush=True)
        ratio = statistics.median(py_rates) / statistics.median(cli_rates)
        results[codec] = ratio
        print(f"reader {codec}, {args.threads} thread(s): python/sharc bench = {ratio:.3f} "
              f"(medians {statistics.median(py_rates):.1f} / {statistics.median(cli_rates):.1f} batches/s; "
              f"target >= 0.95)", flush=True)
    return results


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Axis:
    def __init__(self, group, world, rank):
        import torch

        self._group, self._world, self._rank = group, world, rank
        self.mesh = torch.arange(world)

    def size(self):
        return self._world

    def get_local_rank(self):
        return self._rank

    def get_group(self):
        return self._group


class _Mesh:
    mesh_dim_names = ("cp",)

    def __init__(self, axis):
        self._axis = axis

    def __getitem__(self, name):
        return self._axis


def _bcast_worker(rank, world, port, rounds, queue):
    import torch
    import torch.distributed as dist

    from sharc.torch import BroadcastingDataLoader

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = _Mesh(_Axis(dist.group.WORLD, world, rank))
    batch = {"audio": torch.randn(32, 160000), "audio_lens": torch.full((32,), 160000, dtype=torch.int32),
             "cut_id": [f"cut-{i:06d}" for i in range(32)]}
    nbytes = 32 * 160000 * 4 + 32 * 4 + 32 * 10
    # The raw broadcast sends the batch's own bytes. A buffer never written maps the kernel's
    # one zero page throughout, and sending it reads 4 KiB from the cache instead of 20 MB
    # from memory: a floor no real batch can have.
    raw = torch.empty(nbytes, dtype=torch.uint8)
    raw[: batch["audio"].numel() * 4].copy_(batch["audio"].reshape(-1).view(torch.uint8))
    raw[batch["audio"].numel() * 4 :].fill_(7)

    def source():
        while True:
            yield batch

    loader = iter(BroadcastingDataLoader(source() if rank == 0 else None, mesh))
    next(loader)  # warm up both paths
    dist.broadcast(raw, src=0)
    # Alternated step by step, so that the load of the machine weighs on both alike.
    times = {"raw": [], "loader": []}
    for _ in range(rounds):
        dist.barrier()
        t0 = time.perf_counter()
        dist.broadcast(raw, src=0)
        times["raw"].append(time.perf_counter() - t0)
        dist.barrier()
        t0 = time.perf_counter()
        got = next(loader)
        times["loader"].append(time.perf_counter() - t0)
        assert got["audio"].shape == (32, 160000)
    queue.put((rank, times))
    dist.barrier()
    dist.destroy_process_group()


def broadcast_bench(args):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_bcast_worker, args=(r, 2, port, args.steps, q)) for r in range(2)]
    for p in procs:
        p.start()
    res = dict(q.get(timeout=600) for _ in procs)
    for p in procs:
        p.join()
    peer = res[1]
    raw_t, loader_t = statistics.median(peer["raw"]), statistics.median(peer["loader"])
    print(json.dumps({"what": "broadcast", "bytes": 20480448, "steps": len(peer["raw"]),
                      "raw_step_s": {"median": raw_t, "min": min(peer["raw"])},
                      "loader_step_s": {"median": loader_t, "min": min(peer["loader"])}}), flush=True)
    ratio = loader_t / raw_t
    print(f"broadcast 20 MB over gloo, 2 processes, peer step: loader/raw = {ratio:.3f} "
          f"(medians of {len(peer['raw'])} alternated steps {loader_t * 1e3:.2f} / {raw_t * 1e3:.2f} ms; "
          f"minima {min(peer['loader']) * 1e3:.2f} / {min(peer['raw']) * 1e3:.2f} ms; target <= 1.15)", flush=True)
    return ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--what", choices=["reader", "broadcast", "all"], default="all")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200, help="broadcast steps of each kind, alternated")
    args = ap.parse_args()
    if args.what in ("reader", "all"):
        reader_bench(args)
    if args.what in ("broadcast", "all"):
        broadcast_bench(args)


if __name__ == "__main__":
    sys.exit(main())
