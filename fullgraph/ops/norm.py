"""Normalization between graph layers: ``none``, ``layer`` (per node) or ``batch`` (over all nodes).

PyG's recipes put a norm after every hidden convolution (conv → norm → activation → dropout), and
BNS-GCN trains GraphSAGE that way; with it, deep or wide models train markedly better on some
graphs. LayerNorm is ``torch.nn.LayerNorm``: each node on its own, so every layout computes it on
the rows it holds.

BatchNorm's statistics are over *all* nodes of the graph, as full-graph training with PyG's
``BatchNorm`` computes them. A layout that splits a layer's dst rows over ranks gives the layer a
``Block.reduce`` that sums over those ranks (``fullgraph.comm.stats``); the statistics, the output
and the gradients are then those of one process (two sums per layer, each an all-reduce of
``hidden + 1`` and ``hidden`` floats, and the same two in backward). Mean and variance are computed
in two passes (Σx, then Σ(x - μ)²), which keeps the variance exact where ``E[x²] - μ²`` would cancel.
In evaluation the running statistics are used, as ``torch.nn.BatchNorm1d`` does; they are updated
from the global statistics, so they are the same on every rank.

PyG's ``LayerNorm`` in its default ``mode='graph'`` takes one mean and one standard deviation over
every entry of every node of the graph (``x - mean``, divided by ``std + eps``, unbiased=False), and
it takes them in evaluation too: it keeps no running statistics. ``graph_layer_norm_over`` sums the
same two statistics over the processes with ``reduce`` (three floats per layer forward, three
backward), so every rank normalizes by the whole graph's, as one process does.

A layer followed by BatchNorm has no bias of its own: the mean subtraction cancels any bias, so its
gradient is zero up to rounding, and Adam, which divides by the gradient's running RMS, would turn
that rounding into steps of size ``lr`` (BatchNorm's shift plays the bias's part). The function the
model computes is unchanged.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

__all__ = ["NORMS", "BatchNorm", "batch_norm_over", "graph_layer_norm_over", "make_norm", "apply_norm"]

NORMS = ("none", "layer", "batch")


class BatchNorm(nn.BatchNorm1d):
    """``torch.nn.BatchNorm1d`` whose training statistics may be summed over processes (``reduce``)."""

    def forward(self, x: torch.Tensor, reduce: Callable[[torch.Tensor], torch.Tensor] | None = None):
        return batch_norm_over(self, x, reduce)


def batch_norm_over(bn: nn.BatchNorm1d, x: torch.Tensor,
                    reduce: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """What ``bn`` (any ``torch.nn.BatchNorm1d``: ours, or one inside a PyG model) computes on ``x``,
    with its training statistics summed by ``reduce`` over the processes that hold the other rows."""
    if not bn.training and bn.track_running_stats:
        return nn.functional.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps)
    s = torch.cat([x.sum(0), x.new_full((1,), x.shape[0])])
    if reduce is not None:
        s = reduce(s)
    count = s[-1]
    mean = s[:-1] / count
    d = x - mean
    v = (d * d).sum(0)
    if reduce is not None:
        v = reduce(v)
    var = v / count
    # a recomputation (--recompute, --recompute-segment) runs this forward again inside backward: the
    # statistics were taken at the first run, and taking them twice would move them twice as far
    if bn.training and bn.track_running_stats and torch._C._current_graph_task_id() == -1:
        with torch.no_grad():
            n = float(count)
            unbiased = var * (n / max(n - 1.0, 1.0))
            bn.running_mean.lerp_(mean.detach(), bn.momentum)
            bn.running_var.lerp_(unbiased.detach(), bn.momentum)
            bn.num_batches_tracked += 1
    out = d * torch.rsqrt(var + bn.eps)
    return out * bn.weight + bn.bias if bn.affine else out


def graph_layer_norm_over(ln: nn.Module, x: torch.Tensor,
                          reduce: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """What PyG's ``LayerNorm(mode='graph')`` ``ln`` computes on ``x`` without a batch vector (the whole
    graph is one example), with its mean and variance summed by ``reduce`` over the processes that
    hold the other rows; in training and evaluation alike (it has no running statistics)."""
    s = torch.stack([x.sum(), x.new_tensor(float(x.numel()))])
    if reduce is not None:
        s = reduce(s)
    d = x - s[0] / s[1]
    v = (d * d).sum().reshape(1)
    if reduce is not None:
        v = reduce(v)
    out = d / ((v[0] / s[1]).sqrt() + ln.eps)
    if getattr(ln, "weight", None) is not None and getattr(ln, "bias", None) is not None:
        out = out * ln.weight + ln.bias
    return out


def make_norm(kind: str, width: int) -> nn.Module | None:
    """The norm module of one hidden layer (``None`` for ``none``)."""
    if kind == "none":
        return None
    if kind == "layer":
        return nn.LayerNorm(width)
    if kind == "batch":
        return BatchNorm(width)
    raise ValueError(f"unknown norm {kind!r} (expected one of {', '.join(NORMS)})")


def apply_norm(norm: nn.Module | None, h: torch.Tensor, reduce=None) -> torch.Tensor:
    """``norm(h)``; a BatchNorm sums its statistics with ``reduce`` (the block's)."""
    if norm is None:
        return h
    if isinstance(norm, BatchNorm):
        return norm(h, reduce)
    return norm(h)
