"""Workers for test_elastic.py's gloo tests: each spawned process joins a torch.distributed
gloo group, is its own data-parallel slot (dp_rank = its rank), and either reads `steps`
batches and gathers every rank's state (all_gather_object, as a training job saves them), or
loads the gathered states of another number of slots and reads to the end. Rank 0 puts what
the group delivered on the queue."""
import os
import traceback

import torch.distributed as dist

import sharc


def worker(rank, world, port, queue, reader_args, settings, steps, states):
    try:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        reader = sharc.Reader(*reader_args, dp_rank=dist.get_rank(), dp_size=dist.get_world_size(),
                              **settings)
        if states is not None:
            reader.load_state_dict(states)  # the list of every old slot's state
        ids = []
        for n, batch in enumerate(reader, 1):
            ids += [f"{c}/{i}" for c, i in zip(batch["corpus"], batch["cut_id"])]
            if n == steps:
                break
        gathered_ids = [None] * world
        dist.all_gather_object(gathered_ids, ids)
        gathered_states = [None] * world
        dist.all_gather_object(gathered_states, reader.state_dict() if steps is not None else None)
        if rank == 0:
            queue.put(("ok", gathered_ids, gathered_states))
    except Exception:
        queue.put(("crash", rank, traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
