"""The one helper for multi-process tests: run a function as P ranks and collect what rank 0 saved.

It goes through fullgraph's own launcher (free port chosen by the OS, per-rank log files, a hard
timeout, all ranks stopped when one fails), so the tests exercise the same start-up path users get.
The function runs as ``python -m tests.dist_worker <payload.json>`` in each rank.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from fullgraph.comm.launch import launch_local


def run_ranks(task: str, nprocs: int, payload: dict, tmp_path: Path, timeout_s: float = 300.0):
    """Run ``tests.dist_worker.<task>(payload, comm)`` on ``nprocs`` ranks; returns rank 0's result."""
    work = tmp_path / f"{task}-{nprocs}"
    work.mkdir(parents=True, exist_ok=True)
    payload = dict(payload, task=task, result=str(work / "result.pt"))
    (work / "payload.json").write_text(json.dumps(payload))
    repo = str(Path(__file__).resolve().parents[1])  # so that every rank can import tests.dist_worker
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))
    rc = launch_local([str(work / "payload.json")], nprocs, threads=1, log_dir=str(work / "logs"),
                      module="tests.dist_worker", timeout_s=timeout_s)
    if rc != 0:
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted((work / "logs").glob("*.log")))
        raise AssertionError(f"ranks failed with status {rc}\n{logs}")
    return torch.load(work / "result.pt", weights_only=True)


def planned_bytes(config: dict, graph, halo_rows: int = 0, node_part=None) -> dict:
    """What ``fullgraph plan`` says a run of ``config`` (options by name) moves per epoch without an
    evaluation (the multi-process tests evaluate once, after the last epoch, so the median epoch of
    their ledger has none); a pruned run's counts come from its partition's ``node_part``."""
    from fullgraph.cli.plan import run_volume
    from fullgraph.config import TrainConfig
    from fullgraph.models import model_spec
    from fullgraph.plan.pruned import pruned_counts

    cfg = TrainConfig.of(**config)
    pruned = None
    if cfg.parallel.prune:
        pruned = pruned_counts(graph, model_spec(cfg.model.name).norm, cfg.model.layers, node_part, cfg.parallel.nprocs)
    return run_volume(cfg, graph, halo_rows, evaluate=False, pruned=pruned)


def cora_config(model: str, root: str, settings: dict, epochs: int, dropout: float, **extra) -> dict:
    """The options of a Cora run of ``model`` with its ``settings`` (layers, hidden, ...), evaluated once
    at the end, as the layouts' equality tests train it."""
    return dict(model=model, dataset="cora", root=root, dropout=dropout, epochs=epochs, eval_every=epochs, seed=0,
                **settings[model]) | extra


def single_runs(root: str, settings: dict, epochs: int, dropout: float) -> dict:
    """One process's per-epoch losses (float64) and final weights for each model of ``settings``: the
    reference a layout's run is compared with."""
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph
    from fullgraph.train.trainer import Trainer

    out = {}
    for model in settings:
        cfg = TrainConfig.of(**cora_config(model, root, settings, epochs, dropout), progress="none")
        trainer = Trainer(cfg, load_graph(cfg))
        result = trainer.build().train()
        out[model] = (torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict())
    return out


def ledger(comm: dict) -> dict:
    """A run's per-epoch ledger without its empty categories."""
    return {k: v for k, v in comm.items() if v}


def sampled_rows(book, norm: str, epoch: int, p: float, n: int):
    """The whole graph's block of a boundary-sampled epoch (rate ``p``, seed 0), put together from every
    part's sampled rows in global ids: ``(indptr, indices, values)``, columns sorted; what a one-process
    reference of BNS-GCN trains on (the tests give its entries their edge data from the graph itself)."""
    import scipy.sparse as sp

    from fullgraph.ops.csr import row_ids
    from fullgraph.parallel.graph import boundary_sample

    rows, cols, vals = [], [], []
    for part in book.parts:
        keep = boundary_sample(0, epoch, part.part_id, part.num_halo, p)
        blk = part.block(norm, halo_keep=keep, scale=1.0 / p)
        rows.append(part.inner[row_ids(blk.adj.indptr)])
        cols.append(torch.cat([part.inner, part.halo[keep]])[blk.adj.indices])
        vals.append(blk.adj.values)
    m = sp.csr_matrix((torch.cat(vals).numpy(), (torch.cat(rows).numpy(), torch.cat(cols).numpy())), shape=(n, n))
    m.sort_indices()
    return torch.from_numpy(m.indptr.astype("int64")), torch.from_numpy(m.indices.astype("int64")), \
        torch.from_numpy(m.data)


def sampled_reference(sampled, graph, norm: str):
    """One process training on ``sampled(norm, epoch)``'s block at each training epoch (a boundary-sampled
    graph-parallel run's reference) and on the whole graph when it evaluates."""
    from fullgraph.parallel.engine import SingleEngine

    class SampledReference(SingleEngine):
        def forward(self, model, epoch, training):
            if training:
                return model(sampled(model.norm, epoch), self.x)
            return super().forward(model, epoch, training)

    return SampledReference(graph, norm)
