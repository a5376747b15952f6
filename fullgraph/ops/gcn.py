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

Two temporaries are kept block-sized (blocks of rows of :data:`ROW_BLOCK_ELEMENTS` entries) instead
of activation-sized. In forward, the dropout mask: keyed masks (``ops.dropout``, what training
uses) depend only on each row's global id, so blocks change nothing; unkeyed uniforms (4 bytes per
entry) are drawn block by block from the same generator, which on CPU yields exactly the numbers one
draw for the whole output would (PyTorch's CPU generator fills serially). In backward, when aggregating first,
the masked gradient ``G'``: the weight and bias gradients are sums over the blocks, and ``G' Wᵀ`` is
written block by block, so ``G'`` never exists as a whole. Blocks are large (16 MiB of float32) so
that their number, and the thread synchronizations that come with each operation, stay small.
"""

from __future__ import annotations

import torch

from fullgraph.ops.dropout import keep_mask, keyed_keep, keyed_rows
from fullgraph.ops.sparse import SparseOp, csr_mm

__all__ = ["gcn_layer", "ROW_BLOCK_ELEMENTS"]

ROW_BLOCK_ELEMENTS = 1 << 22  # entries per block of rows in the node-wise passes (16 MiB of float32)
GPU_ROW_BLOCK_ELEMENTS = 1 << 26
"""On a GPU, blocks of 256 MiB of float32: each operation on a block is a kernel launch (~5 µs), and
at the CPU's size a 10^6-node layer of width 256 took 64 blocks of a dozen launches each, which the
H200 waited for (benchmarks/README.md, "The lent GPU"); a few blocks keep the temporaries bounded."""


def _row_blocks(t: torch.Tensor):
    """Slices of consecutive rows of ``t`` with at most ``ROW_BLOCK_ELEMENTS`` entries each (on a GPU,
    ``GPU_ROW_BLOCK_ELEMENTS``)."""
    n, width = t.shape[0], max(1, t.shape[1])
    step = max(1, (ROW_BLOCK_ELEMENTS if t.device.type == "cpu" else GPU_ROW_BLOCK_ELEMENTS) // width)
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


# ``threshold_backward(x, t, c)`` is ReLU's backward kernel, ``where(t <= c, 0, x)`` in one vectorized
# pass. It applies both masks here: about 3x faster than ``masked_fill_`` with a freshly computed
# bool mask, and without that mask.
_zero_where_at_most = torch.ops.aten.threshold_backward


def _below(p: float) -> float:
    """The largest float32 under ``float32(p)``: for float32 ``u``, ``u <= _below(p)`` iff ``u < p``."""
    f = torch.tensor(p, dtype=torch.float32)
    return torch.nextafter(f, torch.tensor(float("-inf"))).item()


def _relu_dropout_(z: torch.Tensor, bias: torch.Tensor | None, p: float, scale: float, generator,
                   keyed: tuple | None) -> None:
    """``z = dropout(relu(z + bias))`` in place: inverted dropout that drops where a uniform < p, or,
    with ``keyed = (rows, key, site)``, where the keyed mask of those global rows says so."""
    if bias is not None:
        z.add_(bias)
    z.relu_()
    if p == 0.0:
        return
    if keyed is not None:  # block by block: the mask of a row depends on nothing but its id
        rows, key, site = keyed
        for blk in _row_blocks(z):
            z[blk].masked_fill_(~keyed_keep(rows[blk], z.shape[1], p, key, site), 0.0)
    elif z.device.type == "cpu" and z.dtype == torch.float32:  # uniforms block by block, the same numbers
        drop_at_most = _below(p)
        for rows in _row_blocks(z):
            zb = z[rows]
            u = torch.rand(zb.shape, generator=generator)
            _zero_where_at_most.grad_input(zb, u, drop_at_most, grad_input=zb)
    else:  # one draw: device generators advance per call, so blocks would change the numbers
        z.masked_fill_(~keep_mask(z.shape, p, generator, z.device), 0.0)
    z.mul_(scale)


def _masked(g: torch.Tensor, out: torch.Tensor, scale: float) -> torch.Tensor:
    """The gradient through ReLU and dropout: ``g * scale`` where ``out > 0``, else 0 (a new tensor)."""
    return _zero_where_at_most(g, out, 0).mul_(scale)


class _GCNLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, bias, adj: SparseOp, x_sparse: SparseOp | None, relu: bool, p: float,
                generator, keyed):
        aggregate_first = x_sparse is None and h.shape[1] < weight.shape[1]
        if x_sparse is not None:  # constant sparse input: X W is cheap, always transform first
            z = adj.mm(csr_mm(x_sparse.A, weight))
            saved = None
        elif aggregate_first:
            saved = adj.mm(h)
            z = saved @ weight
        else:
            z = adj.mm(h @ weight)
            saved = h
        scale = 1.0 / (1.0 - p) if relu and p > 0.0 else 1.0
        if relu:
            _relu_dropout_(z, bias, p, scale, generator, keyed)
        elif bias is not None:
            z.add_(bias)
        ctx.adj, ctx.x_sparse, ctx.relu, ctx.scale = adj, x_sparse, relu, scale
        ctx.aggregate_first = aggregate_first
        ctx.save_for_backward(saved, weight, z if relu else None)
        return z

    @staticmethod
    def backward(ctx, g):
        saved, weight, out = ctx.saved_tensors
        adj = ctx.adj
        if g.dtype != weight.dtype:  # under --precision bf16/fp16: the fused backward runs in fp32, as the weights
            g, saved = g.to(weight.dtype), None if saved is None else saved.to(weight.dtype)
        if ctx.aggregate_first:
            return _GCNLayer._backward_aggregate_first(ctx, g, saved, weight, out)
        g = _masked(g, out, ctx.scale) if ctx.relu else g.contiguous()  # Âᵀ multiplies all of it
        grad_b = g.sum(0) if ctx.needs_input_grad[2] else None
        grad_h = None
        gt = adj.mm_t(g)
        if ctx.x_sparse is not None:
            grad_w = csr_mm(ctx.x_sparse.At, gt)
        else:
            grad_w = saved.t() @ gt
            if ctx.needs_input_grad[0]:
                grad_h = gt @ weight.t()
        return grad_h, grad_w, grad_b, None, None, None, None, None, None

    @staticmethod
    def _backward_aggregate_first(ctx, g, saved, weight, out):
        """``∂W = (ÂH)ᵀ G'``, ``∂b = Σ G'``, ``∂H = Âᵀ (G' Wᵀ)``, summed block by block over rows."""
        if not ctx.relu:
            g = g.contiguous()
            grad_h = ctx.adj.mm_t(g @ weight.t()) if ctx.needs_input_grad[0] else None
            return grad_h, saved.t() @ g, g.sum(0) if ctx.needs_input_grad[2] else None, *([None] * 6)
        grad_w = torch.zeros_like(weight)
        grad_b = torch.zeros(weight.shape[1], dtype=g.dtype, device=g.device) if ctx.needs_input_grad[2] else None
        gw = torch.empty(saved.shape, dtype=g.dtype, device=g.device) if ctx.needs_input_grad[0] else None
        for rows in _row_blocks(g):
            gb = _masked(g[rows], out[rows], ctx.scale)
            grad_w.addmm_(saved[rows].t(), gb)
            if grad_b is not None:
                grad_b.add_(gb.sum(0))
            if gw is not None:
                torch.mm(gb, weight.t(), out=gw[rows])
        grad_h = ctx.adj.mm_t(gw) if gw is not None else None
        return grad_h, grad_w, grad_b, None, None, None, None, None, None


def gcn_layer(adj: SparseOp, h: torch.Tensor | SparseOp, weight: torch.Tensor, bias: torch.Tensor | None,
              *, relu: bool, dropout: float = 0.0, training: bool = True,
              generator: torch.Generator | None = None, rows: torch.Tensor | None = None,
              site: int | None = None) -> torch.Tensor:
    """``Â (h W) + b``, then (when ``relu``) ReLU and inverted dropout of rate ``dropout``.

    ``h`` is a dense ``[num_src, d_in]`` tensor or a constant ``SparseOp`` of input features; the
    result has ``adj.shape[0]`` rows, whose global ids ``rows`` and the dropout ``site`` key the mask
    when keying is on (``ops.dropout``).
    """
    if dropout and not relu:
        raise ValueError("gcn_layer applies dropout only together with its ReLU")
    p = dropout if training else 0.0
    keyed = keyed_rows(site, rows, adj.shape[0], weight.device) if p > 0.0 else None
    if keyed is not None:
        keyed = (*keyed, site)
    if isinstance(h, SparseOp):
        dummy = weight.new_empty((h.shape[0], 0))
        return _GCNLayer.apply(dummy, weight, bias, adj, h, relu, p, generator, keyed)
    return _GCNLayer.apply(h.contiguous(), weight, bias, adj, None, relu, p, generator, keyed)
