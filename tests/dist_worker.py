"""What each rank runs for the multi-process tests (started by ``tests/distributed.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from fullgraph.comm.context import Comm, DistEnv
from fullgraph.config import TrainConfig
from fullgraph.models import norm_and_depth
from fullgraph.parallel.graph import GraphEngine
from fullgraph.partition.store import load_part
from fullgraph.train.trainer import Trainer


def shape(cfg, partition_dir=None) -> tuple[str, int]:
    """The block normalization and depth of ``cfg``'s model (a user's builder decides both; its
    widths come from the partition folder's metadata: ``partition_dir``'s where the config names none)."""
    from fullgraph.parallel.setup import input_widths

    if partition_dir is not None and cfg.parallel.partition_dir is None:
        from fullgraph.partition.store import load_meta

        meta = load_meta(partition_dir)
        widths = (int(meta["num_features"]), int(meta["num_classes"]), _node_types(partition_dir))
        return norm_and_depth(cfg.model.name, cfg.model.layers, cfg.model.args, lambda: widths)
    return norm_and_depth(cfg.model.name, cfg.model.layers, cfg.model.args, lambda: input_widths(cfg))


def _node_types(partition_dir):
    from fullgraph.ops.node_types import NodeTypes
    from fullgraph.partition.store import load_meta

    return NodeTypes.of_record(load_meta(partition_dir))


def train_runs(payload: dict, comm: Comm) -> dict:
    """Graph-parallel training for each (partition folder, model) of the payload; rank 0 keeps the
    per-epoch losses, the final weights and the per-epoch ledger of every run."""
    out = {}
    for run in payload["runs"]:
        part = load_part(run["partition_dir"], comm.rank)
        cfg = TrainConfig.of(**run["config"], parallel="graph", nprocs=comm.world_size, progress="none", threads=1)
        norm, _ = shape(cfg, run["partition_dir"])
        engine = GraphEngine(part, comm, norm, boundary_rate=cfg.parallel.boundary_rate,
                             seed=cfg.optimization.seed, owns_comm=False, precision=cfg.parallel.comm_precision,
                             prune=cfg.parallel.prune)
        engine.node_types = _node_types(run["partition_dir"])  # what build_engine reads from the folder
        trainer = Trainer(cfg, engine=engine)
        result = trainer.build().train()
        state = engine.consolidate(trainer.model, trainer.model.state_dict())  # node-owned rows put together
        trainer.close()
        out[run["name"]] = {"losses": torch.tensor(result.losses, dtype=torch.float64),
                            "state": state, "comm": result.comm_bytes_per_epoch,
                            "test_acc": result.test_acc, "test_metric": result.test_metric,
                            "rows": result.rows_per_layer}
    return out


def chunked_steps(payload: dict, comm: Comm) -> dict:
    """Drive a hybrid engine epoch by epoch (no optimizer): per epoch the global loss and the summed
    weight gradients, then a plain step ``w -= 0.5 * grad`` so that later epochs mix new values with
    history. The test replays the same epochs with a dense written-out reference."""
    from fullgraph.models import build_model
    from fullgraph.ops.dropout import keyed_dropout
    from fullgraph.parallel.pipeline import chunked_engine

    cfg = TrainConfig.of(**payload["config"], nprocs=comm.world_size, progress="none", threads=1)
    engine = chunked_engine(cfg, shape(cfg)[0], comm=comm)
    torch.manual_seed(0)
    model = build_model(cfg.model.name, engine.in_dim, engine.num_classes, layers=cfg.model.layers,
                        hidden=cfg.model.hidden, dropout=0.0)
    out = {"losses": [], "grads": []}
    for epoch in range(1, payload["epochs"] + 1):
        model.zero_grad()
        with keyed_dropout(cfg.optimization.seed, epoch):
            loss = engine.step(model, epoch)
        total = comm.all_reduce_(torch.tensor([loss], dtype=torch.float64), "meta/metrics")
        out["losses"].append(float(total))
        out["grads"].append({n: p.grad.clone() for n, p in model.named_parameters()})
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.5 * p.grad
    engine.close()
    return out


def chunked_runs(payload: dict, comm: Comm) -> dict:
    """Pipeline / hybrid training for each run of the payload; rank 0 keeps the losses, the
    ledger, the bubble fraction and the final weights, each taken from the stage that owns it."""
    import torch.distributed as dist

    from fullgraph.parallel.pipeline import chunked_engine

    out = {}
    for run in payload["runs"]:
        cfg = TrainConfig.of(**run["config"], nprocs=comm.world_size, progress="none", threads=1)
        norm, layers = shape(cfg)
        engine = chunked_engine(cfg, norm, comm=comm, layers=layers)
        engine.node_types = _node_types(cfg.parallel.partition_dir)
        trainer = Trainer(cfg, engine=engine)
        result = trainer.build().train()
        trainer.close()
        owned = {id(p) for p in engine._owned(trainer.model)}
        mine = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if id(p) in owned}
        states = [None] * comm.world_size
        dist.all_gather_object(states, mine)
        state = {}
        for s in states:
            state.update(s)
        out[run["name"]] = {"losses": torch.tensor(result.losses, dtype=torch.float64), "state": state,
                            "comm": result.comm_bytes_per_epoch, "bubble": result.bubble_fraction,
                            "test_acc": result.test_acc, "test_metric": result.test_metric,
                            "rows": result.rows_per_layer}
    return out


def _replicated_runs(payload: dict, comm: Comm, build, options: dict, extra=lambda engine: {},
                     model=lambda run: None) -> dict:
    """Training for each run of the payload in a layout whose ranks all hold every weight (SpMM, tensor),
    built by ``build(cfg, norm, comm=comm)``. Rank 0 writes the layout's block-row folder, as the
    launcher does, and every rank reads only what it needs from it (the raw dataset is out of reach)."""
    from pathlib import Path

    from fullgraph.parallel.setup import prepare_block_rows_dir

    out = {}
    for run in payload["runs"]:
        cfg = TrainConfig.of(**run["config"], **options, nprocs=comm.world_size, progress="none", threads=1)
        folder = Path(payload["result"]).parent / f"blockrows-{run['name']}"
        if comm.rank == 0:
            prepare_block_rows_dir(cfg, out=folder)
        comm.barrier()
        cfg = cfg.with_options(partition_dir=str(folder), root=str(folder / "no-raw-dataset-here"))
        obj = model(run)  # a model object to train instead of the one cfg names (object_runs)
        engine = build(cfg, shape(cfg)[0] if obj is None else obj.norm, comm=comm)
        trainer = Trainer(cfg, engine=engine, model=obj)
        result = trainer.build().train()
        # every rank holds all weights: how far apart they ended (0 unless replicas saw different rows)
        flat = torch.cat([v.detach().reshape(-1).double() for v in trainer.model.state_dict().values()])
        spread = max((t - flat).abs().max().item() for t in comm.all_gather(flat, "meta/checkpoint"))
        trainer.close()
        out[run["name"]] = {"losses": torch.tensor(result.losses, dtype=torch.float64),
                            "state": trainer.model.state_dict(), "comm": result.comm_bytes_per_epoch,
                            "test_acc": result.test_acc, "spread": spread, **extra(engine)}
    return out


def spmm_runs(payload: dict, comm: Comm) -> dict:
    """SpMM-layout training for each run of the payload (its config names the grid)."""
    from fullgraph.parallel.spmm import spmm_engine

    return _replicated_runs(payload, comm, spmm_engine, {}, lambda e: {
        "block_nnz": e.block_nnz, "block_nnz_unpermuted": e.block_nnz_unpermuted})


def tensor_runs(payload: dict, comm: Comm) -> dict:
    """Tensor-parallel training for each run of the payload (the whole graph as one block row)."""
    from fullgraph.parallel.tensor_engine import tensor_engine

    return _replicated_runs(payload, comm, tensor_engine, {"parallel": "tensor"})


def object_runs(payload: dict, comm: Comm) -> dict:
    """SpMM or tensor training (as each run's config names the layout) of a model object that each rank
    builds with the run's ``builder`` (``path/file.py:function``, called with ``widths`` and
    ``builder_args``) from the run's seed, handed to the trainer as ``fullgraph.train_model(model=...)``
    hands one to each torchrun rank: the config names a built-in model, which these layouts take."""
    from fullgraph.models import as_gnn
    from fullgraph.models.user import load_builder
    from fullgraph.parallel.spmm import spmm_engine
    from fullgraph.parallel.tensor_engine import tensor_engine

    def model(run):
        torch.manual_seed(run["config"].get("seed", 0))
        return as_gnn(load_builder(run["builder"])(*run["widths"], **run.get("builder_args", {})))

    def build(cfg, norm, comm):
        return (tensor_engine if cfg.parallel.mode == "tensor" else spmm_engine)(cfg, norm, comm=comm)

    return _replicated_runs(payload, comm, build, {}, model=model)


def gloo_threads() -> list[str]:
    """The names of this process's threads that gloo started (its work queues and transport loops)."""
    import os

    names = (Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in os.listdir("/proc/self/task"))
    return sorted(n for n in names if "gloo" in n)


def closed_threads(payload: dict, comm: Comm) -> dict:
    """gloo's threads before and after ``Comm.close``, the lanes and a view's group used first."""
    rows = comm.all_to_all_rows(torch.full((2, 3), float(comm.rank)), [1, 1], [1, 1], "halo/fwd")
    view = comm.split([[0], [1]])
    view.all_reduce_(torch.ones(1), "grad/allreduce")
    before = gloo_threads()
    comm.close()
    return {"rows": rows, "before": before, "after": gloo_threads()}


def main(path: str) -> int:
    payload = json.loads(open(path).read())
    env = DistEnv.from_env()
    comm = Comm(env, timeout_s=60)
    result = globals()[payload["task"]](payload, comm)
    if comm.rank == 0:
        torch.save(result, payload["result"])
    if comm.group is not None:  # closed_threads closes it itself
        comm.barrier()
    comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
