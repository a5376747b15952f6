"""Loss and accuracy over a subset of nodes (local arithmetic, no communication: every layout uses them).

The loss is a *sum* over the selected nodes divided by a count the caller passes in. In a single
process that count is the number of training nodes; a layout that splits the nodes passes the
global count, so that P ranks together compute exactly the single-process gradient.
"""

from __future__ import annotations

import contextlib

import torch
from torch.nn import functional as F

__all__ = ["loss_sum", "masked_loss", "label_outcomes", "correct_count", "accuracy", "loss_scale", "scaled"]

_SCALE = [1.0]


@contextlib.contextmanager
def loss_scale(scale: float):
    """Within: the gradients of ``loss_sum`` are ``scale`` times the true ones (fp16's loss scaling),
    while the loss values stay true. Every layout forms its loss here, so none needs to know."""
    _SCALE.append(float(scale))
    try:
        yield
    finally:
        _SCALE.pop()


class _ScaledGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss, scale: float):
        ctx.scale = scale
        return loss.view_as(loss)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None


def loss_sum(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy (single-label ``y [n]``) or summed binary cross-entropy per node
    (multi-label ``y [n, C]``, averaged over the ``C`` labels of a node)."""
    if y.dim() == 2:
        loss = F.binary_cross_entropy_with_logits(logits, y, reduction="none").mean(1).sum()
    else:
        loss = F.cross_entropy(logits, y, reduction="sum")
    return scaled(loss)


def scaled(loss: torch.Tensor) -> torch.Tensor:
    """``loss`` whose gradient carries the current ``loss_scale`` (every task's loss passes here)."""
    return _ScaledGrad.apply(loss, _SCALE[-1]) if _SCALE[-1] != 1.0 and loss.requires_grad else loss


def masked_loss(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, count: int | None = None):
    count = int(mask.sum()) if count is None else count
    return loss_sum(logits[mask], y[mask]) / count


def label_outcomes(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Multi-label rows' true positives, false positives and false negatives, per label (a logit above 0
    predicts its label): the one rule micro-F1 (their sums) and Macro-F1 (``tasks.metrics``) count by."""
    pred, truth = logits > 0, y > 0.5
    return (pred & truth).sum(0), (pred & ~truth).sum(0), (~pred & truth).sum(0)


def correct_count(logits: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """``(correct, total)``: argmax hits for single-label; for multi-label the micro-F1 numerator
    and denominator (2·TP and 2·TP + FP + FN), so sums over parts give the global micro-F1."""
    if y.dim() == 2:
        tp, fp, fn = (float(t.sum()) for t in label_outcomes(logits, y))
        return 2.0 * tp, 2.0 * tp + fp + fn
    return float((logits.argmax(1) == y).sum().item()), float(y.numel())


def accuracy(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> float:
    """Accuracy (micro-F1 for multi-label) of the masked nodes."""
    hit, total = correct_count(logits[mask], y[mask])
    return hit / total if total else 0.0
