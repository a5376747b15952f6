"""Groups of rows, each multiplied by a weight of its own, written into one output.

The typed models map each node type's rows by its type's weight (``models.typed.per_type``) and each
relation's source rows by that relation's (HGT's keys and values). Autograd's own form of it, a split of
the rows, a product per group and a ``cat``, makes a copy of the whole output in forward (the ``cat``),
one of the whole input gradient in backward (a split's backward is a ``cat``) and a stack of the weight
gradients (an ``unbind``'s). Here each group's product writes its rows of one output in place, and
backward writes each group's input and weight gradients in place: the same products and sums, none of
the copies. On ACM (HGT, one thread) the copies were ~8 % of a training step, the step is memory-bound
(benchmarks/README.md, "HGT").

A group is ``(input, start, stop)``: rows ``start:stop`` of ``inputs[input]``, group ``g`` taking
``weight[g]`` (and ``bias[g]``); the output holds the groups' rows in order. Groups may read an input's
rows more than once (every relation of a source type reads its rows): their gradients add up.
"""

from __future__ import annotations

import torch

__all__ = ["grouped_linear"]

Group = tuple[int, int, int]


def _tiled(groups: tuple[Group, ...], which: int, rows: int) -> bool:
    """Whether the groups reading input ``which`` cover its rows once each, in order (then its gradient
    is written, not accumulated into zeros)."""
    at = 0
    for i, start, stop in groups:
        if i == which:
            if start != at:
                return False
            at = stop
    return at == rows


class _GroupedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, groups: tuple[Group, ...], weight: torch.Tensor, bias: torch.Tensor | None,
                *inputs: torch.Tensor) -> torch.Tensor:
        out = inputs[0].new_empty(sum(stop - start for _, start, stop in groups), weight.shape[-1])
        at = 0
        for g, (i, start, stop) in enumerate(groups):
            rows, x = out[at : at + stop - start], inputs[i][start:stop]
            if bias is None:
                torch.mm(x, weight[g], out=rows)
            else:
                torch.addmm(bias[g], x, weight[g], out=rows)
            at += stop - start
        ctx.groups = groups
        ctx.save_for_backward(weight, *inputs)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        weight, *inputs = ctx.saved_tensors
        groups, grad = ctx.groups, grad.contiguous()
        need = ctx.needs_input_grad
        gw = torch.empty(weight.shape, dtype=grad.dtype, device=grad.device) if need[1] else None
        gb = grad.new_empty(len(groups), grad.shape[1]) if need[2] else None
        tiled = [_tiled(groups, i, x.shape[0]) for i, x in enumerate(inputs)]
        gx = [None if not need[3 + i] else (x.new_empty(x.shape) if tiled[i] else x.new_zeros(x.shape))
              for i, x in enumerate(inputs)]
        at = 0
        for g, (i, start, stop) in enumerate(groups):
            rows = grad[at : at + stop - start]
            at += stop - start
            if gw is not None:
                torch.mm(inputs[i][start:stop].t(), rows, out=gw[g])
            if gb is not None:
                torch.sum(rows, 0, out=gb[g])
            if gx[i] is not None and tiled[i]:
                torch.mm(rows, weight[g].t(), out=gx[i][start:stop])
            elif gx[i] is not None:
                gx[i][start:stop].addmm_(rows, weight[g].t())
        return None, gw, gb, *gx


def grouped_linear(inputs: tuple[torch.Tensor, ...], groups: list[Group], weight: torch.Tensor,
                   bias: torch.Tensor | None = None) -> torch.Tensor:
    """``cat([inputs[i][start:stop] @ weight[g] + bias[g] for g, (i, start, stop) in enumerate(groups)])``
    without the copies (module docstring). ``weight`` ``[G, d_in, d_out]``, ``bias`` ``[G, d_out]``.

    Under ``torch.autocast`` the products run in its dtype, as ``torch.addmm``'s do there."""
    device = inputs[0].device.type
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        inputs = tuple(x.to(dtype) for x in inputs)
        weight, bias = weight.to(dtype), (None if bias is None else bias.to(dtype))
        with torch.autocast(device, enabled=False):
            return _GroupedLinear.apply(tuple(groups), weight, bias, *inputs)
    return _GroupedLinear.apply(tuple(groups), weight, bias, *inputs)
