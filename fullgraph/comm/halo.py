"""Halo exchange as one autograd function.

Forward: every rank sends the rows of its inner nodes that other parts read (``send_idx``, grouped
by peer) and receives its halo rows (grouped by owner) in one ``all_to_all``. Backward: the same
exchange reversed: the gradients of my halo rows go back to their owners, who add them into the
gradients of their inner rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fullgraph.comm.context import Comm

__all__ = ["HaloPlan", "exchange_halo"]


@dataclass
class HaloPlan:
    """Who sends what to whom. ``send_idx``: local inner ids to send, concatenated by peer;
    ``send_counts[q]`` rows go to peer q; ``recv_counts[q]`` halo rows come from peer q."""

    send_idx: torch.Tensor
    send_counts: list[int]
    recv_counts: list[int]

    @property
    def num_recv(self) -> int:
        return sum(self.recv_counts)


class _HaloExchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, comm: Comm, plan: HaloPlan, category: str) -> torch.Tensor:
        ctx.comm, ctx.plan, ctx.category, ctx.rows = comm, plan, category, h.shape[0]
        return comm.all_to_all_rows(h[plan.send_idx], plan.send_counts, plan.recv_counts, f"{category}/fwd")

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        plan = ctx.plan
        back = ctx.comm.all_to_all_rows(g, plan.recv_counts, plan.send_counts, f"{ctx.category}/bwd")
        grad = g.new_zeros((ctx.rows,) + tuple(g.shape[1:]))
        grad.index_add_(0, plan.send_idx, back)
        return grad, None, None, None


def exchange_halo(h: torch.Tensor, comm: Comm, plan: HaloPlan, category: str = "halo") -> torch.Tensor:
    """The halo rows of ``h`` (the inner rows of this part), received from their owners."""
    if torch.is_grad_enabled() and h.requires_grad:
        return _HaloExchange.apply(h, comm, plan, category)
    return comm.all_to_all_rows(h[plan.send_idx], plan.send_counts, plan.recv_counts, f"{category}/fwd")
