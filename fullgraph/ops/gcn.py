"""One GCN layer, ``dropout(relu(Â (H W) + b))``, as a single autograd function.

Why one function: written as separate PyTorch ops, a layer keeps its input, the product, the
pre-activation, the ReLU output and a dropout mask alive for backward (4-6 activation-sized
buffers per layer). This function keeps only what backward cannot rebuild:

* its output, from which the ReLU and dropout derivatives follow exactly: after
  ``out = relu(z) * mask / (1 - p)``, ``out > 0`` holds exactly where both ``z > 0`` and the mask
  kept the entry, which is where the gradient passes (scaled by ``1 / (1 - p)``);
* the operand of the weight gradient: the input ``H`` (already alive as the previous layer's
  output) when transforming first, or ``Â H`` when aggregating first.

The order of product and transform is chosen by width (MG-GCN §4.4): aggregate the narrower side.
When the input needs no gradient (the first layer), the backward product ``Âᵀ G`` is skipped
whenever the order allows it (aggregate-first), as MG-GCN does.
"""

from __future__ import annotations

import torch

from fullgraph.ops.dropout import keep_mask
from fullgraph.ops.sparse import SparseOp

__all__ = ["gcn_layer"]


class _GCNLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, bias, adj: SparseOp, x_sparse: SparseOp | None, relu: bool, p: float,
                generator):
        aggregate_first = x_sparse is None and h.shape[1] < weight.shape[1]
        if x_sparse is not None:  # constant sparse input: X W is cheap, always transform first
            z = adj.A @ (x_sparse.A @ weight)
            saved = None
        elif aggregate_first:
            saved = adj.A @ h
            z = saved @ weight
        else:
            z = adj.A @ (h @ weight)
            saved = h
        if bias is not None:
            z.add_(bias)
        scale = 1.0
        if relu:
            z.relu_()
            if p > 0.0:
                scale = 1.0 / (1.0 - p)
                z.masked_fill_(~keep_mask(z.shape, p, generator, z.device), 0.0).mul_(scale)
        ctx.adj, ctx.x_sparse, ctx.relu, ctx.scale = adj, x_sparse, relu, scale
        ctx.aggregate_first = aggregate_first
        ctx.save_for_backward(saved, weight, z if relu else None)
        return z

    @staticmethod
    def backward(ctx, g):
        saved, weight, out = ctx.saved_tensors
        adj = ctx.adj
        g = g.contiguous()
        if ctx.relu:
            g = g.masked_fill(out <= 0, 0.0)
            if ctx.scale != 1.0:
                g.mul_(ctx.scale)
        grad_b = g.sum(0) if ctx.needs_input_grad[2] else None
        grad_h = None
        if ctx.x_sparse is not None:
            gt = adj.At @ g
            grad_w = ctx.x_sparse.At @ gt
        elif ctx.aggregate_first:
            grad_w = saved.t() @ g
            if ctx.needs_input_grad[0]:
                grad_h = adj.At @ (g @ weight.t())
        else:
            gt = adj.At @ g
            grad_w = saved.t() @ gt
            if ctx.needs_input_grad[0]:
                grad_h = gt @ weight.t()
        return grad_h, grad_w, grad_b, None, None, None, None, None


def gcn_layer(adj: SparseOp, h: torch.Tensor | SparseOp, weight: torch.Tensor, bias: torch.Tensor | None,
              *, relu: bool, dropout: float = 0.0, training: bool = True,
              generator: torch.Generator | None = None) -> torch.Tensor:
    """``Â (h W) + b``, then (when ``relu``) ReLU and inverted dropout of rate ``dropout``.

    ``h`` is a dense ``[num_src, d_in]`` tensor or a constant ``SparseOp`` of input features; the
    result has ``adj.shape[0]`` rows.
    """
    if dropout and not relu:
        raise ValueError("gcn_layer applies dropout only together with its ReLU")
    p = dropout if training else 0.0
    if isinstance(h, SparseOp):
        dummy = weight.new_empty((h.shape[0], 0))
        return _GCNLayer.apply(dummy, weight, bias, adj, h, relu, p, generator)
    return _GCNLayer.apply(h.contiguous(), weight, bias, adj, None, relu, p, generator)
