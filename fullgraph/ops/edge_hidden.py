"""``edge_hidden``: the hidden layer of an edge decoder, ``relu(P_src[src] + P_dst[dst] + b + extra)``, gathered,
summed and rectified in one pass, with a backward of its own.

An edge task scores far more edges than the graph has nodes (Amazon-Computers: 196,688 training edges on
13,752 nodes), so its decoder's cost is what it does per edge. The MLP decoder projects each node once
(``tasks.decoders.EdgeMLPDecoder.project``) and only gathers per edge; done by autograd, each gather writes an
``[E, H]`` tensor, the sum a third, the ReLU's backward a fourth, and each gather's backward builds its own
sorted scatter. Here the forward is one ``embedding_bag`` (the two rows of each edge summed as they are read)
and the backward adds the rectified gradient straight into each table's rows (``index_add_``): on one CPU
thread the decoder's step takes about 0.6 of autograd's.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

__all__ = ["edge_hidden"]


class _EdgeHidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, p_src, p_dst, bias, src, dst, extra):
        n = p_src.shape[0]
        z = F.embedding_bag(torch.stack([src, dst + n], 1), torch.cat([p_src, p_dst]), mode="sum")
        z.add_(bias)
        if extra is not None:
            z.add_(extra)
        z.relu_()
        ctx.save_for_backward(z, src, dst)
        ctx.shapes = (p_src.shape, p_dst.shape, bias.dtype, None if extra is None else extra.dtype)
        return z

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        z, src, dst = ctx.saved_tensors
        src_shape, dst_shape, bias_dtype, extra_dtype = ctx.shapes
        g = grad.masked_fill(z <= 0, 0)  # the ReLU's derivative (0 at 0, as torch.relu's backward)
        g_src = g.new_zeros(src_shape).index_add_(0, src, g)
        g_dst = g.new_zeros(dst_shape).index_add_(0, dst, g)
        return g_src, g_dst, g.sum(0).to(bias_dtype), None, None, None if extra_dtype is None else g.to(extra_dtype)


def edge_hidden(p_src: torch.Tensor, p_dst: torch.Tensor, bias: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                extra: torch.Tensor | None = None) -> torch.Tensor:
    """``relu(p_src[src] + p_dst[dst] + bias + extra)`` ``[E, H]`` (``extra``: ``[E, H]`` or ``None``), its gradient
    reaching ``p_src``, ``p_dst``, ``bias`` and ``extra`` (the module doc says why it is one function)."""
    return _EdgeHidden.apply(p_src, p_dst.to(p_src.dtype), bias, src, dst, extra)
