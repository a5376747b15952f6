"""Gathers onto a block's edges and sums over them, chosen so that a run gives the same bits every time.

A float sum depends on the order of its terms. Attention (GAT) gathers node rows onto edges and sums
edge rows back at nodes, and the obvious PyTorch spellings leave the order of some of those sums to
the thread scheduler: ``x[src]`` differentiates into an accumulating ``index_put_``, whose threads
add the gradients of a node's edges in whatever order they run on the CPU, so two trainings with
the same seed drifted apart in the last bits of the loss (CUDA's ``index_add_`` uses atomics, the
same in kind). Here every sum over edges is instead a product with a constant 0/1 CSR matrix built
from the block's structure once:

* ``D`` ``[num_dst, E]``: row ``v`` holds ``v``'s in-edges, in the block's CSR order. ``D @ m`` sums
  edge rows at their dst node (the forward of the aggregation, the softmax's denominators) and is
  the backward of gathering dst rows onto the edges.
* ``Sᵀ`` ``[num_src, E]``: row ``u`` holds ``u``'s out-edges (the block's transpose, the one
  ``SparseOp`` keeps): ``Sᵀ @ g`` is the backward of gathering src rows onto the edges.

The sparse kernel (MKL on CPU, as for every other product of the package) adds each output row's
entries in their stored order whichever thread runs it, so the result does not depend on how the
threads are scheduled (with another number of threads the dense products around it may still round
differently). On CUDA, cuSPARSE documents run-to-run differences only for transposed products, which
is why ``Sᵀ`` is stored rather than multiplied as a transpose. The gathers are ``index_select`` (no
sums), and the backward of a sum over ``D`` is such a gather. The products are also faster than the
accumulating scatter they replace (GAT on Cora at 2 threads: about 17 → 12 ms an epoch). Only index arrays
are kept: ``E`` 32-bit ids per matrix (64-bit past 2³¹), and a vector of ``E`` ones per dtype used.
"""

from __future__ import annotations

import math

import torch

from fullgraph.ops.csr import row_ids
from fullgraph.ops.sparse import SparseOp, _csr, _kernel_indices_of, csr_mm

__all__ = ["EdgeSums"]


class EdgeSums:
    """The edges ``(src, dst)`` of ``adj`` (CSR order; ``edges``: those arrays, where the caller holds
    them already) with deterministic gathers and sums over them.

    Every method is differentiable in its tensor argument and takes rows of any trailing shape:
    ``[n, ...]`` node rows, ``[E, ...]`` edge rows.
    """

    def __init__(self, adj: SparseOp, edges: tuple[torch.Tensor, torch.Tensor] | None = None):
        n_dst, n_src, E = adj.shape[0], adj.shape[1], adj.nnz
        dev = adj.indptr.device
        self.src, self.dst = (adj.indices, row_ids(adj.indptr)) if edges is None else edges
        t_indptr, positions = adj.transpose_order()  # Sᵀ's row u: the CSR positions of u's out-edges
        self._structure = {
            "dst": (*_kernel_indices_of(adj.indptr, torch.arange(E, device=dev), E), (n_dst, E)),
            "src": (*_kernel_indices_of(t_indptr.to(torch.int64), positions, E), (n_src, E)),
        }
        self._ones: dict[torch.dtype, torch.Tensor] = {}  # the values of both matrices
        self._matrices: dict[tuple[str, torch.dtype], torch.Tensor] = {}

    def gather_src(self, x: torch.Tensor) -> torch.Tensor:
        """``x[src]``: each edge's src row; backward ``Sᵀ @ g``."""
        return _Gather.apply(x, self, "src")

    def gather_dst(self, x: torch.Tensor) -> torch.Tensor:
        """``x[dst]``: each edge's dst row; backward ``D @ g``."""
        return _Gather.apply(x, self, "dst")

    def sum_at_dst(self, m: torch.Tensor) -> torch.Tensor:
        """``D @ m``: the sum of the edge rows ``m`` at each dst node; backward ``g[dst]``."""
        return _SumAtDst.apply(m, self)

    def product(self, side: str, x: torch.Tensor) -> torch.Tensor:
        """``D @ x`` (``side="dst"``) or ``Sᵀ @ x`` (``"src"``) for edge rows ``x`` ``[E, ...]``, in
        ``x``'s dtype (half precisions sum in fp32, as every CSR product of the package does)."""
        dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        a = self._matrix(side, dtype)
        out = csr_mm(a, x.reshape(x.shape[0], math.prod(x.shape[1:])).to(dtype).contiguous())
        return out.to(x.dtype).reshape(a.shape[0], *x.shape[1:])

    def _matrix(self, side: str, dtype: torch.dtype) -> torch.Tensor:
        key = (side, dtype)
        if key not in self._matrices:
            indptr, indices, shape = self._structure[side]
            if dtype not in self._ones:
                self._ones[dtype] = torch.ones(shape[1], dtype=dtype, device=indptr.device)
            self._matrices[key] = _csr(indptr, indices, self._ones[dtype], shape)
        return self._matrices[key]


class _Gather(torch.autograd.Function):
    """Rows ``index`` of ``x`` (one per edge); backward: the CSR product that sums each edge's
    gradient into the row it was read from, in a fixed order."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, sums: EdgeSums, side: str) -> torch.Tensor:
        ctx.sums, ctx.side = sums, side
        return x.index_select(0, sums.src if side == "src" else sums.dst)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        if not ctx.needs_input_grad[0]:
            return None, None, None
        return ctx.sums.product(ctx.side, g), None, None


class _SumAtDst(torch.autograd.Function):
    """``D @ m``; backward: each edge reads its dst row of the gradient (a gather, no sum)."""

    @staticmethod
    def forward(ctx, m: torch.Tensor, sums: EdgeSums) -> torch.Tensor:
        ctx.sums = sums
        return sums.product("dst", m)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        if not ctx.needs_input_grad[0]:
            return None, None
        return g.index_select(0, ctx.sums.dst), None
