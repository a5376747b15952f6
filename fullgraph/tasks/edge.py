"""Edge tasks: a class (``--task edge``) or a number (``--task edge-regression``) per labelled edge.

The encoder's output row of a node is its embedding (``--hidden`` wide); the decoder maps an edge's two
ends' embeddings to a logit per class, or to one number (``tasks.decoders.EdgeMLPDecoder``: the two
concatenated, source first, through a two-layer MLP). The labelled edges are an ``EdgeSplit``
(``data.edge_labels``); the encoder passes messages over every edge of the graph.

A training step recomputes the whole-graph encoder and takes ``--edge-batch`` B training edges (0: all of
them; an epoch covers every training edge, its order shuffled by (seed, epoch)); each rank scores those
whose source it owns, fetching the other end's row as a link's (``Engine.pair_rows``, ledger ``link/*``),
and the loss is summed over the ranks' shares and divided by the step's edge count: the cross-entropy of
the class logits, or the squared error of targets standardized by the training edges' mean and
(population) deviation, as node regression standardizes (predictions and metrics in the targets' units).
Evaluation scores every edge of each part, gathers the scores on every rank and computes accuracy,
Macro- and micro-F1 (classes), or RMSE, MAE and R² (numbers).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.nn import functional as F

from fullgraph.data.edge_labels import EdgeSplit
from fullgraph.ops.loss import scaled
from fullgraph.options import REGRESSION_METRICS
from fullgraph.tasks.link import EVAL_PAIRS, NODE_LABEL_FIELDS, PAIR_COPIES
from fullgraph.tasks.metrics import class_counts, macro_f1
from fullgraph.tasks.regression import regression_metrics

__all__ = ["EdgeTask", "EdgeRegressionTask", "EDGE_METRICS"]

EDGE_METRICS = ("acc", "macro-f1", "micro-f1")
"""An edge class's metrics (one decision per edge: micro-F1 is accuracy)."""
PARTS = ("train", "val", "test")


class EdgeTask:
    """A class per labelled edge: what ``--task edge`` trains, on ``split``'s edges."""

    name = "edge"
    metrics = EDGE_METRICS
    joins_rows = True  # (tasks.node.NodeTask.joins_rows)

    def __init__(self, cfg, split: EdgeSplit):
        self.cfg, self.split, self.seed = cfg, split, cfg.optimization.seed
        e = split.train.numel()
        self.batch = min(cfg.task.edge_batch, e) if cfg.task.edge_batch else e
        self._order: tuple[int, torch.Tensor] | None = None

    @property
    def outputs(self) -> int:
        """The decoder's outputs per edge: a logit per class (one number for regression)."""
        return self.split.num_classes or 1

    @staticmethod
    def out_width(num_classes: int, hidden: int) -> int:
        """The encoder's output width: an embedding of ``--hidden`` columns."""
        return hidden

    def bind(self, engine, model) -> None:
        """Let the engine learn who owns which node (collective, once, before the first epoch)."""
        engine.bind_pairs()
        n = engine.graph_nodes()
        if self.split.pairs.numel() and int(self.split.pairs.max()) >= n:
            from fullgraph.errors import InputError

            raise InputError(f"expected node ids in [0, {n}) in the labelled edges of {self.split.name} (got "
                             f"{int(self.split.pairs.max())})")

    def memory(self, ranks: int) -> dict[str, int]:
        """A step's scored edges on one of ``ranks`` ranks and the split's tables (every rank holds them)."""
        s = self.split
        tables = (s.pairs, s.y, s.train, s.val, s.test, *(() if s.x is None else (s.x,)))
        return {"pair_bytes": PAIR_COPIES * 4 * self.cfg.model.hidden * math.ceil(self.batch / ranks),
                "split_bytes": sum(t.numel() * t.element_size() for t in tables)}

    def steps(self, epoch: int) -> int:
        every = math.ceil(self.split.train.numel() / self.batch)
        cap = self.cfg.task.steps_per_epoch
        return min(every, cap) if cap else every

    def dropout_epoch(self, epoch: int, step: int) -> int:
        return (epoch << 24) + step

    def step_rows(self, epoch: int, step: int) -> torch.Tensor:
        """The rows of ``split.pairs`` a training step scores: a slice of the epoch's shuffled training edges."""
        if self._order is None or self._order[0] != epoch:
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, epoch, 0xED6F]))
            self._order = (epoch, self.split.train[torch.from_numpy(rng.permutation(self.split.train.numel()))])
        return self._order[1][step * self.batch:(step + 1) * self.batch]

    def step_pairs(self, epoch: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The labelled edges a training step scores and their labels (what ``plan.link`` counts)."""
        rows = self.step_rows(epoch, step)
        return self.split.pairs[rows], self.split.y[rows]

    def evaluation_pairs(self):
        """Every chunk of labelled edges an evaluation exchanges, in order (what ``plan.link`` counts)."""
        for part in PARTS:
            yield from self.split.pairs[getattr(self.split, part)].split(EVAL_PAIRS)

    @property
    def gathered_row_bytes(self) -> int:
        """The bytes of one scored edge in an evaluation's gather: its index and its outputs, float64."""
        return 8 * (1 + self.outputs)

    def target(self, y: torch.Tensor) -> torch.Tensor:
        return y

    def loss_sum(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, y.to(logits.device), reduction="sum")

    def decode(self, engine, model, out: torch.Tensor, pairs: torch.Tensor, category: str,
               x: torch.Tensor | None = None) -> torch.Tensor:
        """The decoder's outputs of ``pairs`` (this rank's share) with the edges' own features ``x`` (where the
        decoder reads them), their rows fetched by the layout: the MLP's node projections
        (``EdgeMLPDecoder.project``: ``n`` products, not one per edge), else the embeddings. A rank without
        output rows (a pipeline's earlier stage) scores nothing."""
        d = model.decoder
        if not out.shape[0]:
            return out.new_zeros((0, self.outputs))
        extra = (x.to(out.device),) if getattr(d, "edge_dim", 0) else ()
        if not hasattr(d, "project"):
            return d(*engine.pair_rows(out, pairs, category), *extra)
        return d.finish(*engine.pair_rows(d.project(out), pairs, category, halves=True), *extra)

    def loss(self, engine, model, out: torch.Tensor, epoch: int, step: int) -> torch.Tensor:
        rows = self.step_rows(epoch, step)
        pairs, y = self.split.pairs[rows], self.target(self.split.y[rows])
        mine = engine.pair_share(pairs)
        x = self.split.features(rows[mine])
        logits = self.decode(engine, model, out, pairs[mine], "link", x).float()
        return scaled(self.loss_sum(logits, y[mine])) / pairs.shape[0]

    def scores(self, engine, model, out: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """The decoder's outputs ``[n, outputs]`` of the labelled edges ``rows``, the same on every rank (each
        scores its share, ``EVAL_PAIRS`` at a time, and every rank gathers them all)."""
        pairs = self.split.pairs[rows]
        whole = torch.empty((pairs.shape[0], self.outputs), dtype=torch.float64)
        for start in range(0, pairs.shape[0], EVAL_PAIRS):
            chunk = pairs[start:start + EVAL_PAIRS]
            at = torch.nonzero(engine.pair_share(chunk)).flatten()
            x = self.split.features(rows[start:start + EVAL_PAIRS][at])
            got = self.decode(engine, model, out, chunk[at], "eval/link", x).double()
            both = engine.gather_rows(torch.cat([at.to(got)[:, None], got], 1), "eval/reduce").cpu()
            whole[start + both[:, 0].long()] = both[:, 1:]
        return whole

    def split_metrics(self, scores: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        k = self.split.num_classes
        acc = float((scores.argmax(1) == y).double().mean()) if y.numel() else 0.0
        return {"acc": acc, "macro-f1": macro_f1(class_counts(scores, y, k), k), "micro-f1": acc}

    def split_loss(self, scores: torch.Tensor, y: torch.Tensor) -> float:
        return float(self.loss_sum(scores, self.target(y)) / max(y.numel(), 1))

    def predicted(self, scores: torch.Tensor) -> torch.Tensor:
        return scores

    def pair_predictions(self, scores: torch.Tensor) -> dict[str, torch.Tensor]:
        """``predict --pairs``' arrays of the decoder's outputs: each pair's class and the softmax."""
        return {"predictions": scores.argmax(1), "probabilities": torch.softmax(scores, 1).float()}

    def evaluate(self, engine, model, out: torch.Tensor) -> dict:
        """Every metric of each part (``metrics``, by name), ``*_metric`` the chosen one, and the validation loss."""
        metric, record = self.metric(), {"metrics": {}}
        for part in PARTS:
            rows = getattr(self.split, part)
            scores = self.scores(engine, model, out, rows)
            y = self.split.y[rows]
            record["metrics"][part] = self.split_metrics(self.predicted(scores), y)
            record[f"{part}_metric"] = record["metrics"][part][metric]
            if part == "val":
                record["val_loss"] = self.split_loss(scores, y)
        return record | {"metric": metric}

    def metric(self, engine=None) -> str:
        chosen = self.cfg.optimization.metric
        return self.metrics[0] if chosen == "auto" else chosen

    def file_facts(self) -> dict:
        """What ``model.pt`` records of the task to build its decoder again (a user's too): its outputs per edge
        and the edges' feature width."""
        return {"edge_outputs": self.outputs, "edge_features": self.split.edge_dim}

    def sizes(self, engine=None) -> tuple[str, dict[str, int]]:
        """How many labelled edges judge the validation and test figures (the warning of a small split)."""
        return "labelled edges", {"validation": int(self.split.val.numel()), "test": int(self.split.test.numel())}

    def graph_summary(self, graph: dict) -> dict:
        """The ``graph`` block of ``summary.json``: without node labels' fields, with the labelled edges' parts."""
        return {k: v for k, v in graph.items() if k not in NODE_LABEL_FIELDS} | {"labelled_edges": self.split.sizes()}

    def describe(self, engine) -> str:
        s, what = self.split.sizes(), ("a number" if self.split.numeric else f"{self.split.num_classes} classes")
        return (f"{engine.name} ({engine.in_dim} features): edges of {what}, "
                f"{s['train']} train, {s['val']} val, {s['test']} test ({self.split.name})")


class EdgeRegressionTask(EdgeTask):
    """A number per labelled edge: what ``--task edge-regression`` trains (targets standardized inside)."""

    name = "edge-regression"
    metrics = REGRESSION_METRICS

    def __init__(self, cfg, split: EdgeSplit):
        super().__init__(cfg, split)
        y = split.y[split.train].double()
        self.mean, self.std = float(y.mean()), float(y.std(unbiased=False)) or 1.0

    def target(self, y: torch.Tensor) -> torch.Tensor:
        return ((y.double() - self.mean) / self.std).float()

    def loss_sum(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (logits[:, 0] - y.to(logits.device, logits.dtype)).square().sum()

    def predicted(self, scores: torch.Tensor) -> torch.Tensor:
        """Numbers in the targets' units."""
        return scores[:, 0] * self.std + self.mean

    def pair_predictions(self, scores: torch.Tensor) -> dict[str, torch.Tensor]:
        """``predict --pairs``' array: each pair's number, in the targets' units."""
        return {"predictions": self.predicted(scores).float()}

    def split_metrics(self, pred: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
        y, err = y.double(), pred - y.double()
        return regression_metrics(float(err.square().sum()), float(err.abs().sum()), float(y.sum()),
                                  float(y.square().sum()), float(y.numel()))
