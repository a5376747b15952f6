"""A sum over ranks that autograd can differentiate: how batch statistics cover the whole graph.

BatchNorm over all nodes needs, on every rank, sums over every rank's rows (Σx, then Σ(x - μ)²).
If ``S = Σ_r s_r`` is used on every rank, the gradient of the global loss with respect to one
rank's ``s_r`` is ``Σ_q ∂L_q/∂S``: the backward of an all-reduce sum is an all-reduce sum of the
incoming gradients. Both travel under their own ledger categories (``norm/fwd``, ``norm/bwd``), so
the halo and gradient counters keep their analytic values.

Every rank runs the same layers in the same order, so these collectives are issued in the same
order everywhere, forward and backward.
"""

from __future__ import annotations

from typing import Callable

import torch

from fullgraph.comm.context import Comm

__all__ = ["all_reduce_sum", "sum_over"]


class _AllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t: torch.Tensor, comm: Comm) -> torch.Tensor:
        ctx.comm = comm
        return comm.all_reduce_(t.detach().clone(), "norm/fwd")

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        return ctx.comm.all_reduce_(g.contiguous().clone(), "norm/bwd"), None


def all_reduce_sum(t: torch.Tensor, comm: Comm) -> torch.Tensor:
    """``Σ_ranks t``, differentiable (see the module docstring)."""
    return _AllReduceSum.apply(t, comm)


def sum_over(comm: Comm | None) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The ``Block.reduce`` of a layout whose ranks split a layer's dst rows among ``comm``'s ranks
    (``None``: this process holds them all)."""
    if comm is None or comm.world_size == 1:
        return None
    return lambda t: all_reduce_sum(t, comm)
