"""Node classification: the task every layout trained before tasks had a place of their own.

The model's output row of a node is its class logits; the loss is the cross-entropy (binary, per
label, for multi-label graphs) summed over the training rows a rank holds and divided by the global
number of training nodes, so that the ranks' losses and gradients sum to one process's. Evaluation
counts hits per split on each rank and sums them; ROC-AUC gathers every rank's scores first
(``tasks.metrics``). These are the numbers (and the order of their arithmetic) the engines and the
trainer computed themselves before: moving them here changed no bit.
"""

from __future__ import annotations

import torch

from fullgraph.errors import InputError
from fullgraph.ops.loss import loss_sum
from fullgraph.tasks.metrics import (NODE_METRICS, NamedSums, class_counts, counts, macro_f1, resolve_metric,
                                     roc_auc_columns, score_columns)

__all__ = ["NodeTask", "SPLITS"]

SPLITS = ("train", "val", "test")


class NodeTask:
    """Node labels (single- or multi-label): what ``--task node`` trains."""

    name = "node"
    metrics = NODE_METRICS
    joins_rows = False
    """Whether a loss reads rows of several nodes at once (a link's two ends): the pipeline then scores
    it once every chunk's output rows are in (``parallel.stage_pairs``), not chunk by chunk."""

    def __init__(self, cfg=None):
        self.cfg = cfg

    @staticmethod
    def out_width(num_classes: int, hidden: int) -> int:
        """The model's output width: one logit per class."""
        return num_classes

    def bind(self, engine, model) -> None:
        """Nothing to set up (labels and splits are the engine's rows), but numbers are no classes."""
        if engine.y.dim() == 1 and engine.y.is_floating_point():
            raise InputError("expected class labels with --task node (got a number per node, float labels): train "
                             "--task node-regression")

    @staticmethod
    def memory(ranks: int) -> dict[str, int]:
        """Memory the task holds beyond the graph: none (its labels and masks are the graph's)."""
        return {}

    def steps(self, epoch: int) -> int:
        """Weight updates per epoch: one, from the whole training set."""
        return 1

    def dropout_epoch(self, epoch: int, step: int) -> int:
        return epoch

    def loss(self, engine, model, out: torch.Tensor, epoch: int, step: int) -> torch.Tensor:
        """This rank's share of the loss: its training rows (``out`` may hold fewer rows than the
        rank's: ``Engine.training_rows``)."""
        y = engine.y.index_select(0, engine.train_index())
        return self.rows_loss(engine.training_rows(out), y, engine.num_train)

    @staticmethod
    def rows_loss(logits: torch.Tensor, y: torch.Tensor, count: int) -> torch.Tensor:
        """The loss of some training rows as a share of ``count`` (a pipeline chunk's, say)."""
        return loss_sum(logits, y) / count

    @staticmethod
    def graph_summary(graph: dict) -> dict:
        """The ``graph`` block of ``summary.json``: the layout's statistics of the graph, as they are."""
        return graph

    @staticmethod
    def describe(engine) -> str:
        """The run's header: the graph as the layout names it."""
        return engine.describe()

    def metric(self, engine) -> str:
        """The metric reported and selected by (``--metric``, ``auto`` resolved for these labels)."""
        from fullgraph.data.load import published_metric

        cfg = self.cfg
        published = published_metric(cfg) if cfg is not None else None
        published = published if published in NODE_METRICS else None  # a folder's meta.json may name anything
        chosen = cfg.optimization.metric if cfg is not None else "auto"
        return resolve_metric(chosen, engine.num_classes, engine.y.dim() == 2, published)

    def evaluate(self, engine, model, logits: torch.Tensor) -> dict:
        """Every metric of each split (``metrics``, by name) and the validation loss: accuracy and F1 counts
        summed over ranks in one reduction, ROC-AUC from every rank's scores; ``*_metric``: the chosen one,
        ``*_acc``: accuracy (micro-F1 for multi-label), as before every metric was reported."""
        e, metric = engine, self.metric(engine)
        k, masks, sums = e.num_classes, e.eval_masks(), NamedSums()
        for split, mask in zip(SPLITS, masks):
            sums.add(f"{split}/hits", counts(logits[mask], e.y[mask]))
        sums.add("val/loss", [loss_sum(logits[masks[1]], e.y[masks[1]]).item()])
        for split, mask in zip(SPLITS, masks):
            sums.add(f"{split}/classes", class_counts(logits[mask], e.y[mask], k))
        sums.reduce(e, "eval/reduce")
        ratio = lambda hit, total: hit / total if total else 0.0  # noqa: E731
        record = {f"{split}_acc": ratio(*sums[f"{split}/hits"]) for split in SPLITS}
        record |= {"val_loss": sums["val/loss"][0] / e.num_val, "metric": metric, "metrics": {}}
        binary = e.y.dim() == 1 and k == 2
        for split, mask in zip(SPLITS, masks):
            got = {"acc": record[f"{split}_acc"], "macro-f1": macro_f1(sums[f"{split}/classes"], k),
                   "micro-f1": record[f"{split}_acc"]}  # one decision per node: micro-F1 is accuracy (else counts' own)
            if metric == "rocauc" or binary:
                scores, labels = score_columns(logits[mask], e.y[mask])
                both = e.gather_rows(torch.cat([scores.float(), labels.float()], 1), "eval/reduce")
                got["rocauc"] = roc_auc_columns(both[:, : scores.shape[1]], both[:, scores.shape[1]:] > 0.5)
            record["metrics"][split] = got
            record[f"{split}_metric"] = got[metric]
        return record

    @staticmethod
    def predictions(engine, logits: torch.Tensor) -> dict[str, torch.Tensor]:
        """``predict``'s arrays: each node's class (0/1 per label, multi-label) and probabilities."""
        if engine.y.dim() == 2:
            return {"predictions": (logits > 0).to(torch.int8), "probabilities": torch.sigmoid(logits)}
        return {"predictions": logits.argmax(1), "probabilities": torch.softmax(logits, dim=1)}

    def sizes(self, engine) -> tuple[str, dict[str, int]]:
        """How many nodes judge the validation and test figures (the warning of a small split)."""
        return "nodes", {"validation": engine.num_val, "test": engine.num_test}
