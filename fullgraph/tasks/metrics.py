"""The evaluation metric: which one a task calls for, and how to compute it exactly across ranks.

* ``acc``: argmax accuracy (for multi-label targets, micro-F1, as before this option existed).
* ``macro-f1``: the mean over classes of each class's F1 (``2·TP / (2·TP + FP + FN)``, the class
  predicted where it is the argmax; per label, a label predicted where its logit is > 0), over the
  classes that occur in the split's labels or predictions (scikit-learn's ``f1_score(average="macro")``).
* ``micro-f1``: F1 over all (node, label) decisions, a label predicted where its logit is > 0; for
  single-label targets it equals accuracy.
* ``rocauc``: area under the ROC curve. Two classes: the score of class 1 is ``logit₁ - logit₀``
  (monotone in its softmax probability). Multi-label: the mean over labels that have both a
  positive and a negative node in the split (as OGB's evaluator does for ogbn-proteins). More than
  two classes: the mean of one-vs-rest AUCs over softmax probabilities.
* ``auto``: the metric the dataset's publishers report where the dataset says (OGB's ROC-AUC for
  ogbn-proteins); otherwise ROC-AUC for two-class tasks (Platonov et al. report Tolokers, Minesweeper and Questions
  that way), micro-F1 for multi-label, accuracy otherwise.

A node task reports every one of its metrics at each evaluation (:data:`NODE_METRICS`; ROC-AUC where two
classes make it one number, or where it is chosen): ``--metric`` says which selects the best epoch.
Accuracy, micro-F1 and macro-F1 are made of counts (per class for macro-F1), so each rank counts its rows
and the counts are summed. ROC-AUC depends on the order of all scores together, so the trainer gathers
the scores and labels of every rank's rows first (``Engine.gather_rows``) and computes it once over the whole split.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.options import METRICS, NODE_METRICS  # noqa: F401 - the choices, declared with the other options
from fullgraph.ops.loss import correct_count, label_outcomes

__all__ = ["METRICS", "METRIC_NAMES", "NODE_METRICS", "SMALL_SPLIT", "NamedSums", "resolve_metric", "counts", "class_counts",
           "macro_f1", "small_splits", "roc_auc", "roc_auc_columns", "score_columns"]

METRIC_NAMES = {"acc": "accuracy", "rocauc": "ROC-AUC", "micro-f1": "micro-F1", "macro-f1": "Macro-F1",
                "hits@20": "Hits@20", "hits@50": "Hits@50", "hits@100": "Hits@100", "mrr": "MRR", "rmse": "RMSE",
                "mae": "MAE", "r2": "R²"}
"""How progress lines and the command line's last line name each metric."""


SMALL_SPLIT = 30
"""A validation or test set of fewer items (nodes, pairs) gets a warning at start: its figure moves by
more than 3 points with one item."""


def resolve_metric(metric: str, num_classes: int, multilabel: bool, published: str | None = None) -> str:
    """The metric ``auto`` stands for on this task (any other choice is returned as it is):
    ``published``, the one the dataset's publishers report when it records one (ogbn-proteins:
    ROC-AUC; ``fullgraph.data.load.published_metric``), else by the task's shape."""
    if metric != "auto":
        return metric
    if published is not None:
        return published
    if multilabel:
        return "micro-f1"
    return "rocauc" if num_classes == 2 else "acc"


class NamedSums:
    """The values of one reduction over the ranks, added and read back by name (a run of values each), so
    that a task's evaluation sums every split's figures in one collective without addressing them by offset."""

    def __init__(self):
        self.values: list[float] = []
        self.at: dict[str, slice] = {}

    def add(self, name: str, values) -> None:
        self.at[name] = slice(len(self.values), len(self.values) + len(values))
        self.values.extend(values)

    def reduce(self, engine, category: str) -> "NamedSums":
        """Sum the values over the ranks (``Engine.reduce_sum``), in place."""
        self.values = engine.reduce_sum(self.values, category)
        return self

    def __getitem__(self, name: str) -> list[float]:
        return self.values[self.at[name]]


def counts(logits: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """``(numerator, denominator)`` of accuracy (single-label) or micro-F1 (multi-label) over these
    rows; sums over ranks give the global value. For single-label rows micro-F1 *is* accuracy: each
    node makes one decision, right or wrong."""
    return correct_count(logits, y)


def small_splits(unit: str, sizes: dict[str, int]) -> str | None:
    """The warning of a validation or test set under :data:`SMALL_SPLIT` items (``sizes``: by split, in
    ``unit``), or ``None``: its figures mean little, one item moving them by more than 3 points."""
    small = [f"the {split} set has {n} {unit}" for split, n in sizes.items() if n < SMALL_SPLIT]
    if not small:
        return None
    return f"{' and '.join(small)}: under {SMALL_SPLIT}, one of them moves its figures by more than 3 points"


def class_counts(logits: torch.Tensor, y: torch.Tensor, num_classes: int) -> list[float]:
    """Per class (per label, multi-label), its true positives, false positives and false negatives over these
    rows, ``[TP..., FP..., FN...]``: sums over ranks give the split's, from which :func:`macro_f1`."""
    if y.dim() == 2:
        tp, fp, fn = label_outcomes(logits, y)
    else:  # counts per class, O(rows): no [rows, classes] indicator
        pred = logits.argmax(1)
        tp = torch.bincount(y[pred == y], minlength=num_classes)
        fp = torch.bincount(pred, minlength=num_classes) - tp
        fn = torch.bincount(y, minlength=num_classes) - tp
    return torch.cat([tp, fp, fn]).double().tolist()


def macro_f1(sums: list[float], num_classes: int) -> float:
    """The mean F1 over the classes that occur in the labels or the predictions (0.0: none occurs)."""
    tp, fp, fn = (np.asarray(sums[k * num_classes:(k + 1) * num_classes]) for k in range(3))
    seen = (tp + fp + fn) > 0
    return float(np.mean(2 * tp[seen] / (2 * tp[seen] + fp[seen] + fn[seen]))) if seen.any() else 0.0


def score_columns(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores and 0/1 labels ``[n, k]`` whose column-wise ROC-AUCs make up the metric."""
    if y.dim() == 2:
        return logits, y > 0.5
    if logits.shape[1] == 2:
        return (logits[:, 1] - logits[:, 0]).unsqueeze(1), (y == 1).unsqueeze(1)
    onehot = torch.nn.functional.one_hot(y, logits.shape[1]).bool()
    return torch.softmax(logits, 1), onehot


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """ROC-AUC of one column: the probability that a random positive scores above a random negative,
    ties counting one half (the Mann-Whitney statistic, from the ranks of all scores). NaN when the
    column lacks positives or negatives."""
    labels = labels.astype(bool)
    pos, neg = int(labels.sum()), int((~labels).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    from scipy.stats import rankdata  # here: scipy.stats costs a second at import, and only ROC-AUC needs it

    ranks = rankdata(scores.astype(np.float64))  # ties get their average rank
    return float((ranks[labels].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def roc_auc_columns(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean ROC-AUC over the columns that have both classes (0.0 when none has)."""
    s, lab = scores.detach().cpu().numpy(), labels.cpu().numpy()
    aucs = [roc_auc(s[:, j], lab[:, j]) for j in range(s.shape[1])]
    aucs = [a for a in aucs if not np.isnan(a)]
    return float(np.mean(aucs)) if aucs else 0.0
