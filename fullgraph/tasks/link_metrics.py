"""The metrics of link prediction, with OGB's meanings (``ogb.linkproppred.Evaluator``).

* ``rocauc``: the probability that a positive outscores a negative (ties one half).
* ``hits@K``: the share of positives that score *above* the K-th best negative of their split
  (negatives shared by every positive, as ogbl-collab, -ddi and -ppa give them); with negatives of
  their own (ogbl-citation2), the share whose rank among their own negatives is at most K.
* ``mrr``: the mean of 1 / rank, each positive ranked against its own negatives (ties: the mean of the
  optimistic and pessimistic ranks, as OGB's evaluator does); with shared negatives, against all of them.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.tasks.metrics import roc_auc

__all__ = ["LINK_METRICS", "link_metric", "link_metrics", "hits_at", "mrr", "rank_of", "shared_rank"]

LINK_METRICS = ("rocauc", "hits@20", "hits@50", "hits@100", "mrr")
"""The ``--metric`` values a link task reports (``auto`` resolved to one of them)."""


def rank_of(pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """Each positive's rank (1 = best) among its negatives ``neg [n, K]``, ties averaged."""
    pos = pos.view(-1, 1)
    optimistic = (neg > pos).sum(1)
    pessimistic = (neg >= pos).sum(1)
    return 0.5 * (optimistic + pessimistic).double() + 1.0


def shared_rank(pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """:func:`rank_of` each positive against the same negatives ``neg [K]``: from the sorted negatives, in
    ``(P + K) log K`` rather than a ``[P, K]`` comparison (a split of 10^5 positives and negatives would
    compare 10^10 pairs)."""
    ordered = torch.sort(neg.reshape(-1)).values
    k = ordered.numel()
    optimistic = k - torch.searchsorted(ordered, pos, right=True)   # negatives above
    pessimistic = k - torch.searchsorted(ordered, pos, right=False)  # negatives above or tied
    return 0.5 * (optimistic + pessimistic).double() + 1.0


def hits_at(pos: torch.Tensor, neg: torch.Tensor, k: int, per_positive: int = 0) -> float:
    """Hits@K of positive scores ``pos`` against negative scores ``neg`` (see the module)."""
    if per_positive:
        return float((rank_of(pos, neg.view(-1, per_positive)) <= k).double().mean())
    if neg.numel() < k:  # fewer negatives than K: every positive is above the K-th
        return 1.0
    kth = torch.topk(neg, k).values[-1]
    return float((pos > kth).double().mean())


def mrr(pos: torch.Tensor, neg: torch.Tensor, per_positive: int = 0) -> float:
    ranks = rank_of(pos, neg.view(-1, per_positive)) if per_positive else shared_rank(pos, neg)
    return float((1.0 / ranks).mean())


def link_metric(metric: str, pos: torch.Tensor, neg: torch.Tensor, per_positive: int = 0) -> float:
    """``metric`` (one of ``LINK_METRICS``) of positive and negative scores."""
    pos, neg = pos.detach().double().cpu(), neg.detach().double().cpu()
    if metric == "rocauc":
        labels = np.concatenate([np.ones(pos.numel(), bool), np.zeros(neg.numel(), bool)])
        return roc_auc(torch.cat([pos, neg]).numpy(), labels)
    if metric == "mrr":
        return mrr(pos, neg, per_positive)
    return hits_at(pos, neg, int(metric.removeprefix("hits@")), per_positive)


def link_metrics(pos: torch.Tensor, neg: torch.Tensor, per_positive: int = 0) -> dict[str, float]:
    """Every metric of :data:`LINK_METRICS`, by name, of the same scores (converted to float64 once)."""
    pos, neg = pos.detach().double().cpu(), neg.detach().double().cpu()
    return {m: link_metric(m, pos, neg, per_positive) for m in LINK_METRICS}
