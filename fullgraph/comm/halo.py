"""Halo exchange as one autograd function.

Forward: every rank sends the rows of its inner nodes that other parts read (``send_idx``, grouped
by peer) and receives its halo rows (grouped by owner) in one ``all_to_all``. Backward: the same
exchange reversed: the gradients of my halo rows go back to their owners, who add them into the
gradients of their inner rows.

Both directions travel at the run's communication precision (``fullgraph.comm.precision``): rows
are encoded before the ``all_to_all`` and decoded after it, int8's rounding keyed by the global ids
of the rows (``send_ids`` forward, ``recv_ids`` backward) and the layer, so a node's row rounds the
same way in every part that receives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fullgraph.comm.context import Comm
from fullgraph.comm.precision import decode_rows, encode_rows, wire_site
from fullgraph.ops.dropout import current_key

__all__ = ["HaloPlan", "exchange_halo", "send_rows"]


@dataclass
class HaloPlan:
    """Who sends what to whom. ``send_idx``: local inner ids to send, concatenated by peer;
    ``send_counts[q]`` rows go to peer q; ``recv_counts[q]`` halo rows come from peer q.
    ``send_ids`` / ``recv_ids``: the global node ids of the rows sent and received (they key int8's
    rounding; needed only below fp32)."""

    send_idx: torch.Tensor
    send_counts: list[int]
    recv_counts: list[int]
    send_ids: torch.Tensor | None = None
    recv_ids: torch.Tensor | None = None

    @classmethod
    def of_part(cls, part, device) -> "HaloPlan":
        """A part's whole halo exchange (``fullgraph.partition.Part``: its send list and halo)."""
        return cls(part.send_idx.to(device), [int(c) for c in part.send_counts], [int(c) for c in part.recv_counts],
                   part.inner[part.send_idx].to(device), part.halo.to(device))

    @property
    def num_recv(self) -> int:
        return sum(self.recv_counts)


def send_rows(comm: Comm, rows: torch.Tensor, counts_out: list[int], counts_in: list[int], category: str,
               precision: str, ids: torch.Tensor | None, site: int | None, key=None) -> torch.Tensor:
    """``rows`` out by ``counts_out``, the peers' rows in by ``counts_in`` (``Comm.all_to_all_rows``),
    at ``precision``: ``ids`` (the rows' global node ids), ``site`` and ``key`` key int8's rounding."""
    if precision == "fp32":
        return comm.all_to_all_rows(rows, counts_out, counts_in, category)
    width = math.prod(rows.shape[1:])
    sent = encode_rows(rows, precision, rows=ids, site=site, key=key)
    got = comm.all_to_all_rows(sent, counts_out, counts_in, category)
    return decode_rows(got, precision, width).reshape((got.shape[0],) + tuple(rows.shape[1:])).to(rows.dtype)


class _HaloExchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, comm: Comm, plan: HaloPlan, category: str, precision: str,
                layer: int | None) -> torch.Tensor:
        ctx.comm, ctx.plan, ctx.category, ctx.rows = comm, plan, category, h.shape[0]
        ctx.precision, ctx.layer, ctx.key = precision, layer, current_key()
        return send_rows(comm, h[plan.send_idx], plan.send_counts, plan.recv_counts, f"{category}/fwd", precision,
                          plan.send_ids, None if layer is None else wire_site(layer, False))

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        plan = ctx.plan
        back = send_rows(ctx.comm, g, plan.recv_counts, plan.send_counts, f"{ctx.category}/bwd", ctx.precision,
                          plan.recv_ids, None if ctx.layer is None else wire_site(ctx.layer, True), ctx.key)
        grad = g.new_zeros((ctx.rows,) + tuple(g.shape[1:]))
        grad.index_add_(0, plan.send_idx, back)
        return grad, None, None, None, None, None


def exchange_halo(h: torch.Tensor, comm: Comm, plan: HaloPlan, category: str = "halo", precision: str = "fp32",
                  layer: int | None = None) -> torch.Tensor:
    """The halo rows of ``h`` (the inner rows of this part), received from their owners, at
    ``precision``; ``layer`` (the graph layer that reads them) keys int8's rounding."""
    if torch.is_grad_enabled() and h.requires_grad:
        return _HaloExchange.apply(h, comm, plan, category, precision, layer)
    return send_rows(comm, h[plan.send_idx], plan.send_counts, plan.recv_counts, f"{category}/fwd", precision,
                      plan.send_ids, None if layer is None else wire_site(layer, False))
