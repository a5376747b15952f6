"""Single-process full-graph training: the reference every parallel layout is checked against.

``Trainer(cfg).build()`` loads the graph, builds the block, the model and the optimizer;
``train()`` runs the epochs and returns a ``RunResult``; ``close()`` releases files. One epoch is one
forward over the whole graph, one backward, one optimizer step: the exact full-graph gradient.
"""

from __future__ import annotations

import copy
import logging
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field

import torch

from fullgraph.config import TrainConfig
from fullgraph.data.graph import Graph
from fullgraph.data.preprocess import row_normalize_features
from fullgraph.errors import InputError
from fullgraph.models import GNN, build_model
from fullgraph.ops import Block, SparseOp
from fullgraph.train.memory import peak_rss_bytes
from fullgraph.train.metrics import accuracy, masked_loss
from fullgraph.train.report import Progress, RunWriter

log = logging.getLogger("fullgraph")

__all__ = ["Trainer", "RunResult", "load_graph", "input_features"]

# Planetoid features are bag-of-words rows that Kipf & Welling's loader row-normalizes.
_ROW_NORMALIZED = {"cora", "citeseer", "pubmed"}


def load_graph(cfg: TrainConfig) -> Graph:
    """The graph ``cfg`` names, with the configured feature normalization applied."""
    if cfg.dataset == "synthetic":
        from fullgraph.data.synthetic import planted_partition

        graph = planted_partition(seed=0)
    elif cfg.dataset == "edgelist":
        from fullgraph.data.datasets import preprocess
        from fullgraph.data.formats.edgelist import load_edgelist_folder

        if cfg.root is None:
            raise InputError("expected --root FOLDER with --dataset edgelist (got no --root)")
        graph = preprocess(load_edgelist_folder(cfg.root, seed=cfg.split))
    else:
        from fullgraph.data.datasets import load_dataset

        graph = load_dataset(cfg.dataset, cfg.root, split=cfg.split, seed=cfg.split)
    norm = cfg.feature_norm
    if norm == "auto":
        norm = "row" if cfg.dataset in _ROW_NORMALIZED else "none"
    return row_normalize_features(graph) if norm == "row" else graph


def input_features(graph: Graph) -> torch.Tensor | SparseOp:
    """Features as the first layer reads them: a constant ``SparseOp`` when they are sparse enough
    that multiplying them as such is cheaper (under 10% non-zero), else a dense tensor."""
    x = graph.x
    if x.layout == torch.sparse_csr:
        if x.values().numel() < 0.1 * x.shape[0] * x.shape[1]:
            return SparseOp.from_tensor(x)
        return x.to_dense()
    return x


@dataclass
class RunResult:
    """What a run returns (and writes to ``summary.json``)."""

    dataset: str
    model: str
    layers: int
    hidden: int
    parallel: str
    nprocs: int
    epochs_run: int
    best_epoch: int
    val_acc: float
    test_acc: float
    epoch_time_s: float
    peak_rss_bytes: int
    train_acc: float = 0.0
    val_loss: float = float("nan")
    final_loss: float = float("nan")
    losses: list[float] = field(default_factory=list, repr=False)
    config: dict = field(default_factory=dict, repr=False)
    graph: dict = field(default_factory=dict, repr=False)
    environment: dict = field(default_factory=dict, repr=False)

    def to_dict(self, with_losses: bool = False) -> dict:
        d = asdict(self)
        if not with_losses:
            d.pop("losses")
        return d


def environment() -> dict:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
    }


class Trainer:
    """Trains ``cfg.model`` on ``cfg.dataset`` (or on ``graph`` when one is passed in)."""

    def __init__(self, cfg: TrainConfig, graph: Graph | None = None):
        self.cfg = cfg
        self.graph = graph
        self.model: GNN | None = None
        self.writer: RunWriter | None = None

    # ------------------------------------------------------------------ build
    def build(self) -> "Trainer":
        cfg = self.cfg
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        if self.graph is None:
            self.graph = load_graph(cfg)
        g = self.graph
        torch.manual_seed(cfg.seed)
        self.model = build_model(
            cfg.model, g.num_features, g.num_classes, layers=cfg.layers, hidden=cfg.hidden,
            dropout=cfg.dropout, heads=cfg.heads, gcnii_alpha=cfg.gcnii_alpha, gcnii_lambda=cfg.gcnii_lambda,
        )
        self.block = Block.from_graph(g, self.model.norm)
        self.x = input_features(g)
        self.optimizer = torch.optim.Adam(
            self.model.param_groups(cfg.weight_decay, cfg.conv_weight_decay), lr=cfg.lr
        )
        self.writer = RunWriter(cfg.out)
        log.info("%r; model %s, %d layers, hidden %d", g, cfg.model, cfg.layers, cfg.hidden)
        return self

    # ------------------------------------------------------------------ steps
    def train_step(self) -> float:
        model, g = self.model, self.graph
        model.train()
        self.optimizer.zero_grad(set_to_none=True)
        logits = model(self.block, self.x)
        loss = masked_loss(logits, g.y, g.train_mask)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def evaluate(self) -> dict:
        model, g = self.model, self.graph
        model.eval()
        logits = model(self.block, self.x)
        return {
            "train_acc": accuracy(logits, g.y, g.train_mask),
            "val_acc": accuracy(logits, g.y, g.val_mask),
            "test_acc": accuracy(logits, g.y, g.test_mask),
            "val_loss": masked_loss(logits, g.y, g.val_mask).item(),
        }

    def _better(self, record: dict, best: dict) -> bool:
        if best["epoch"] == 0:
            return True
        if self.cfg.select == "loss":
            return record["val_loss"] < best["val_loss"]
        return record["val_acc"] > best["val_acc"]

    # ------------------------------------------------------------------ loop
    def train(self) -> RunResult:
        if self.model is None:
            self.build()
        cfg = self.cfg
        progress = Progress(cfg.epochs, cfg.progress)
        best = {"val_acc": 0.0, "val_loss": float("inf"), "test_acc": 0.0, "train_acc": 0.0, "epoch": 0}
        best_state = None
        times, losses = [], []
        bad_evals = 0
        epoch = 0
        try:
            for epoch in range(1, cfg.epochs + 1):
                t0 = time.perf_counter()
                loss = self.train_step()
                dt = time.perf_counter() - t0
                times.append(dt)
                losses.append(loss)
                record = {"epoch": epoch, "loss": loss, "epoch_time_s": dt}
                if epoch % cfg.eval_every == 0 or epoch == cfg.epochs:
                    t1 = time.perf_counter()
                    record.update(self.evaluate())
                    record["eval_time_s"] = time.perf_counter() - t1
                    if self._better(record, best):
                        best = {k: record[k] for k in ("val_acc", "val_loss", "test_acc", "train_acc")}
                        best["epoch"] = epoch
                        best_state = copy.deepcopy(self.model.state_dict())
                        bad_evals = 0
                    else:
                        bad_evals += 1
                self.writer.epoch(record)
                progress.update(record)
                if cfg.patience and bad_evals >= cfg.patience:
                    log.info("stopping at epoch %d: no better validation accuracy in %d evaluations",
                             epoch, cfg.patience)
                    break
        finally:
            progress.close()
        if best_state is not None:
            self.model.load_state_dict(best_state)
        result = RunResult(
            dataset=self.graph.name, model=cfg.model, layers=cfg.layers, hidden=cfg.hidden,
            parallel=cfg.parallel, nprocs=cfg.nprocs, epochs_run=epoch, best_epoch=best["epoch"],
            val_acc=best["val_acc"], test_acc=best["test_acc"], train_acc=best["train_acc"],
            val_loss=best["val_loss"],
            epoch_time_s=statistics.median(times[1:] if len(times) > 1 else times),
            peak_rss_bytes=peak_rss_bytes(), final_loss=losses[-1], losses=losses, config=cfg.to_dict(),
            graph=self.graph.summary(), environment=environment(),
        )
        self.writer.summary(result.to_dict())
        return result

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
