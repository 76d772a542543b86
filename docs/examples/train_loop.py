"""A minimal PyTorch training loop on sharc (docs/python.md, "A complete training loop").

One sharc.Reader per data-parallel slot, on the slot's source rank; BroadcastingDataLoader
gives every rank of the slot's (cp) group the same batch at every step. Checkpoints hold the
model, the optimizer and the loader's state, so a run that stops resumes at the next batch.

    python3 train_loop.py DATA CKPT --steps 4                       # one process
    torchrun --nproc-per-node 4 train_loop.py DATA CKPT --dp 2 --steps 4  # dp=2 x cp=2, gloo

Each rank prints one line per step: `rank R step S ids ID,ID,...`.
"""
import argparse
import os

import torch
import torch.distributed as dist

import sharc
from sharc.torch import BroadcastingDataLoader, is_dp_source_rank


class _Axis:
    """One axis of _Mesh: what DeviceMesh's sub-meshes answer."""

    def __init__(self, ranks, rank, group):
        self.mesh = torch.tensor(ranks)
        self._ranks = ranks
        self._rank = rank
        self._group = group

    def size(self):
        return len(self._ranks)

    def get_local_rank(self):
        return self._ranks.index(self._rank)

    def get_group(self):
        return self._group


class _Mesh:
    """A (dp, cp) mesh for torch < 2.2, which has no torch.distributed.device_mesh; with a
    newer torch, init_device_mesh("cpu", (dp, cp), mesh_dim_names=("dp", "cp")) is the same."""

    mesh_dim_names = ("dp", "cp")

    def __init__(self, dp):
        world, rank = dist.get_world_size(), dist.get_rank()
        cp = world // dp
        self._axes = {}
        for name, rows in (("dp", [[d * cp + c for d in range(dp)] for c in range(cp)]),
                           ("cp", [[d * cp + c for c in range(cp)] for d in range(dp)])):
            for row in rows:  # every rank creates every group, in the same order
                group = dist.new_group(row)
                if rank in row:
                    self._axes[name] = _Axis(row, rank, group)

    def __getitem__(self, name):
        return self._axes[name]


def make_mesh(dp):
    if not dist.is_initialized():
        return None  # one process: BroadcastingDataLoader is the reader itself
    try:
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError:
        return _Mesh(dp)
    return init_device_mesh("cpu", (dp, dist.get_world_size() // dp), mesh_dim_names=("dp", "cp"))


class TinyModel(torch.nn.Module):
    """Predicts a cut's duration from its audio: enough to have gradients."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(1, 4, kernel_size=400, stride=160)
        self.out = torch.nn.Linear(4, 1)

    def forward(self, audio, lens):
        frames = torch.relu(self.conv(audio.unsqueeze(1)))  # [B, 4, F]
        return self.out(frames.mean(dim=2)).squeeze(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("checkpoint")
    ap.add_argument("--dp", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--max-duration", type=float, default=12.0)
    args = ap.parse_args()

    if "RANK" in os.environ:  # started by torchrun
        dist.init_process_group("gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    mesh = make_mesh(args.dp)
    dp_rank = mesh["dp"].get_local_rank() if mesh is not None else 0

    torch.manual_seed(0)
    model = TinyModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    # The reader exists on the slot's source rank only; the other ranks receive its batches.
    reader = None
    if is_dp_source_rank(mesh):
        reader = sharc.Reader(args.data, batch_duration=args.max_duration, seed=1, epochs=0,
                              dp_rank=dp_rank, dp_size=args.dp, threads=2)
    loader = BroadcastingDataLoader(reader, mesh)

    ckpt = f"{args.checkpoint}.dp{dp_rank}.pt"
    step = 0
    if os.path.exists(ckpt):
        saved = torch.load(ckpt)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        loader.load_state_dict(saved["loader"])  # a no-op on the peers
        step = saved["step"]

    stop = step + args.steps
    for batch in loader:
        loss = torch.nn.functional.mse_loss(model(batch["audio"], batch["audio_lens"]), batch["duration"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"rank {rank} step {step} ids {','.join(batch['cut_id'])}", flush=True)
        step += 1
        if step == stop:
            break  # every rank of the group leaves at the same step
        del batch  # the batch's memory goes back to the reader's pool before the next
    if is_dp_source_rank(mesh):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "loader": loader.state_dict(), "step": step}, ckpt)
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
