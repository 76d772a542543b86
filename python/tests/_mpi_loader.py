"""Run under mpirun by test_loader.py: sharc.Loader on every rank, one JSON line per event."""
import itertools
import json
import os
import pickle
import sys

import sharc

RANK = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))


def emit(**kw):
    # One file per rank: lines that ranks print together may interleave in mpirun's output.
    with open(os.path.join(sys.argv[3], f"{RANK}.jsonl"), "a") as f:
        f.write(json.dumps(dict(rank=RANK, **kw)) + "\n")


def run(data, cfg):
    """sharc.Loader with cfg's settings: resumed from every state file in cfg["resume"] (an
    elastic resume, the states in rank order), stopped after cfg["steps"] batches with this
    rank's state saved in cfg["save"], or read to the end, its dropped counts emitted."""
    steps, save, resume = cfg.pop("steps", None), cfg.pop("save", None), cfg.pop("resume", None)
    loader = sharc.Loader(data, **cfg)
    if resume:
        names = sorted(os.listdir(resume), key=int)
        states = []
        for name in names:
            with open(os.path.join(resume, name), "rb") as f:
                states.append(pickle.load(f))
        loader.load_state_dict(states)
    info = loader.info
    for b in itertools.islice(loader, steps):
        emit(slot=info["dp_rank"], source=info["is_source"], step=b.step, ids=b["cut_id"])
        del b
    if save:
        with open(os.path.join(save, str(RANK)), "wb") as f:
            pickle.dump(loader.state_dict(), f)
    else:
        emit(slot=info["dp_rank"], dropped=list(loader.dropped))
    loader.close()


def main():
    scenario, data = sys.argv[1], sys.argv[2]
    settings = dict(batch_duration=12.0, seed=1, threads=1)
    if scenario == "read":
        loader = sharc.Loader(data, mesh="dp=2,cp=2", **settings)
        info = loader.info
        for b in loader:
            emit(slot=info["dp_rank"], source=info["is_source"], step=b.step, ids=b["cut_id"],
                 shape=list(b["audio"].shape))
            del b
    elif scenario == "resume":
        loader = sharc.Loader(data, mesh="dp=2,cp=2", **settings)
        first = next(loader)
        emit(step=first.step, ids=first["cut_id"])
        del first
        state = loader.state_dict()
        loader.close()
        again = sharc.Loader(data, mesh="dp=2,cp=2", **settings)
        again.load_state_dict(state)
        for b in again:
            emit(step=b.step, ids=b["cut_id"])
            del b
    elif scenario == "run":
        run(data, json.loads(sys.argv[4]))
    elif scenario == "api":  # one rank: re-iteration, keywords of the mesh, the context manager
        with sharc.Loader(data, **settings) as loader:
            emit(batches=len([b.step for b in loader]))
            for again in (lambda: iter(loader), lambda: next(loader)):
                try:
                    again()
                    emit(again="no error")
                except StopIteration:
                    emit(again="StopIteration")
                except sharc.Error as e:
                    emit(again=str(e), code=e.code_name, message=e.message)
        try:
            next(loader)
        except ValueError as e:
            emit(closed=str(e))
        try:
            sharc.Loader(data, dp_rank=1, dp_size=2, **settings)
        except TypeError as e:
            emit(dp=str(e))
    elif scenario == "error":
        loader = sharc.Loader(data, mesh="cp=2", **settings)
        try:
            for b in loader:
                emit(step=b.step, ids=b["cut_id"])
                del b
        except sharc.Error as e:
            emit(error=type(e).__name__, code=e.code_name, message=str(e))


if __name__ == "__main__":
    main()
