"""The NCCL path of sharc.torch with CUDA tensors, on one rank (the GPU suite's machine).
Skipped, saying so, without a CUDA build of torch and a device."""
import os

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the NCCL path is not tested")
if not (torch.cuda.is_available() and torch.distributed.is_nccl_available()):
    pytest.skip("no CUDA device or no NCCL in this torch: the NCCL path of sharc.torch is not tested",
                allow_module_level=True)

import torch.distributed as dist  # noqa: E402

import sharc.torch as st  # noqa: E402
from _dist_workers import free_port  # noqa: E402


def test_nccl_frames_cuda_and_host_tensors_on_one_rank():
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        group = dist.group.WORLD
        assert st._broadcast_device(group).type == "cuda"
        batch = {"audio": torch.randn(4, 50000, device="cuda"), "lens": torch.arange(4), "ids": ["a", "b", "c", "d"]}
        framed = st._frame_data(batch, st._broadcast_device(group))
        assert framed.control.is_cuda and len(framed.device_tensors) == 1
        assert framed.device_tensors[0].data_ptr() == batch["audio"].data_ptr()  # sent in place
        kind, got = st._broadcast_packet(("data", batch), group, 0)
        assert kind == "data" and got["audio"] is batch["audio"] and got["ids"] == batch["ids"]
        torch.cuda.synchronize()
    finally:
        dist.destroy_process_group()


def test_native_loader_over_nccl_on_one_rank(corpus):
    """sharc.Loader's NCCL transport from the torch group (a world of one rank: NCCL refuses
    two ranks on one device): the unique id bootstrap, the split by the mesh, and batches
    equal to sharc.Reader's with the same settings."""
    import sharc

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        settings = dict(batch_duration=12.0, threads=1, seed=5, epochs=1)
        loader = sharc.Loader(str(corpus / "shar"), mesh="cp=1", **settings)
        assert loader.info["transport"] == "nccl" and loader.info["is_source"]
        got = [(list(b["cut_id"]), torch.from_dlpack(b["audio"]).clone()) for b in loader]
        loader.close()
        want = [(list(b["cut_id"]), torch.from_dlpack(b["audio"]).clone())
                for b in sharc.Reader(str(corpus / "shar"), **settings)]
        assert [g[0] for g in got] == [w[0] for w in want] and got
        assert all(torch.equal(g[1], w[1]) for g, w in zip(got, want))
    finally:
        dist.destroy_process_group()


def test_reader_device_batches_into_torch(corpus):
    """device="cuda:0": the batch's numeric tensors are CUDA tensors that torch takes through
    DLPack without a copy, its features within 1e-3 of the host path's, strings on the host."""
    import sharc

    settings = dict(batch_duration=20.0, threads=1, seed=2, epochs=1, features="fbank")
    host = [(list(b["cut_id"]), torch.from_dlpack(b["features"]).clone(), torch.from_dlpack(b["feature_lens"]).clone())
            for b in sharc.Reader(str(corpus / "shar"), **settings)]
    got = []
    for b in sharc.Reader(str(corpus / "shar"), device="cuda:0", **settings):
        assert b["features"].__dlpack_device__() == (2, 0)
        f = torch.from_dlpack(b["features"])
        assert f.is_cuda and f.data_ptr() == torch.from_dlpack(b["features"]).data_ptr()
        got.append((list(b["cut_id"]), f.cpu(), torch.from_dlpack(b["feature_lens"]).cpu()))
    assert [g[0] for g in got] == [h[0] for h in host] and got
    for (_, gf, gl), (_, hf, hl) in zip(got, host):
        assert torch.equal(gl, hl) and gf.shape == hf.shape
        assert (gf - hf).abs().max().item() <= 1e-3


def test_device_batch_memory_waits_for_the_consumers_stream(corpus):
    """A device batch freed while kernels queued on the consumer's stream still read it is
    not rewritten before they are done: with one batch in the pool, each next batch's upload
    waits for the stream (busy with a sleep kernel) that reads the one before."""
    import sharc

    settings = dict(batch_duration=20.0, threads=1, seed=2, epochs=1, max_held_batches=1)
    host = [torch.from_dlpack(b["audio"]).clone() for b in sharc.Reader(str(corpus / "shar"), **settings)]
    stream = torch.cuda.Stream()
    copies = []
    for b in sharc.Reader(str(corpus / "shar"), device="cuda:0", **settings):
        with torch.cuda.stream(stream):
            audio = torch.from_dlpack(b["audio"])  # exported to `stream`
            torch.cuda._sleep(20_000_000)  # the model's step, still running when b is dropped
            copies.append(audio.clone())
        del audio, b
    torch.cuda.synchronize()
    assert len(copies) == len(host) > 1
    assert all(torch.equal(c.cpu(), h) for c, h in zip(copies, host))
