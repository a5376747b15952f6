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

:func:`edge_dot` (a score per edge from its ends' rows) and :func:`weighted_sum` (edge-weighted rows
summed at their dst) are the two halves of attention built on these products; they keep node rows
and per-edge weights for backward, not the ``[E, width]`` edge rows (HGT, ``models.hgt``).
"""

from __future__ import annotations

import math

import torch

from fullgraph.ops.csr import row_ids
from fullgraph.ops.sparse import SparseOp, _csr, _kernel_indices_of, csr_mm

__all__ = ["EdgeSums", "edge_dot", "weighted_sum"]


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
        self.n_dst, self.n_src = n_dst, n_src
        self._node_csr: dict[str, tuple] = {}  # node-by-node CSRs for valued products (``_nodes``)
        self._headed: dict[int, EdgeSums] = {}
        self.edge: torch.Tensor | None = None  # in a headed copy (:meth:`headed`): each entry's edge and head
        self.head: torch.Tensor | None = None

    def headed(self, heads: int) -> "EdgeSums":
        """These edges with every node split into ``heads`` rows, node-major (row ``v * heads + h`` is node
        ``v``'s head ``h``): ``heads`` copies of each edge, one per head, joining the same head of its two
        ends. Node rows ``[n, heads, D]`` as a layer computes them (``x @ W`` split into heads) are then the
        rows ``[n * heads, D]`` of this graph as they lie in memory, and attention runs as one head over it:
        one kernel per product, no heads-first copy of keys, queries or values, no stack of per-head
        results. Its entries go dst-row by dst-row (node ``v``, head 0's in-edges, head 1's, ...);
        ``edge`` and ``head`` give each entry's edge (a position in these sums' CSR order) and head.
        Built on first use and kept; ``heads=1`` is these sums themselves."""
        if heads == 1:
            return self
        if heads not in self._headed:
            self._headed[heads] = _headed_sums(self, heads)
        return self._headed[heads]

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


    def valued(self, side: str, values: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``A_w @ x`` where ``A_w`` holds the edges with ``values`` (``[E]``, CSR order): ``side="dst"``, the
        ``[num_dst, num_src]`` matrix (each dst row sums its in-edges' ``w * x[src]``); ``"src"``, its
        transpose (each src row sums its out-edges' ``w * x[dst]``), its values taken in the transpose's order."""
        indptr, indices, positions = self._nodes(side)
        shape = (self.n_dst, self.n_src) if side == "dst" else (self.n_src, self.n_dst)
        vals = values if positions is None else values.index_select(0, positions)
        return csr_mm(_csr(indptr, indices, vals.contiguous(), shape), x.contiguous())

    def sampled(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``[E]``: ``<a[dst_e], b[src_e]>`` per edge, in CSR order (``torch.sparse.sampled_addmm``: one dot
        product per entry, none of the ``[E, D]`` rows gathered)."""
        indptr, indices, _ = self._nodes("dst")
        ones = self._ones_of(a.dtype)
        pattern = _csr(indptr, indices, ones, (self.n_dst, self.n_src))
        return torch.sparse.sampled_addmm(pattern, a, b.t(), beta=0.0).values()

    def _ones_of(self, dtype: torch.dtype) -> torch.Tensor:
        if dtype not in self._ones:
            self._ones[dtype] = torch.ones(self.src.numel(), dtype=dtype, device=self.src.device)
        return self._ones[dtype]

    def _nodes(self, side: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The edges as a node-by-node CSR in the kernels' index dtype: ``dst`` (rows dst, columns src, CSR
        order) or ``src`` (the transpose, and each of its entries' CSR position), built on first use."""
        if side not in self._node_csr:
            if side == "dst":
                indptr = self._structure["dst"][0]
                self._node_csr[side] = (indptr, _kernel_indices_of(indptr, self.src, self.n_src)[1], None)
            else:
                t_indptr, positions = self._structure["src"][0], self._structure["src"][1]
                cols = self.dst.index_select(0, positions.to(torch.int64))
                self._node_csr[side] = (t_indptr, _kernel_indices_of(t_indptr, cols, self.n_dst)[1],
                                        positions.to(torch.int64))
        return self._node_csr[side]


def _headed_sums(sums: EdgeSums, heads: int) -> EdgeSums:
    """:meth:`EdgeSums.headed`: the expanded graph's CSR, built with index arithmetic (no loop over nodes)."""
    indptr = sums._structure["dst"][0].to(torch.int64)
    deg = indptr.diff().repeat_interleave(heads)  # row v * heads + h: v's in-degree
    h_indptr = torch.zeros(deg.numel() + 1, dtype=torch.int64, device=indptr.device)
    torch.cumsum(deg, 0, out=h_indptr[1:])
    row = row_ids(h_indptr)
    node, head = row // heads, row % heads
    edge = indptr[node] + (torch.arange(row.numel(), device=row.device) - h_indptr[row])
    src = sums.src.to(torch.int64).index_select(0, edge) * heads + head
    adj = SparseOp(h_indptr, src, torch.ones(src.numel(), device=src.device), (sums.n_dst * heads, sums.n_src * heads),
                   symmetric=False)
    out = EdgeSums(adj, (src, row))
    out.edge, out.head = edge, head
    return out


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


def edge_dot(sums: EdgeSums, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``s[e, h] = <q[h, dst_e], k[h, src_e]>``: ``[E, heads]`` from the node rows ``q`` ``[heads, num_dst, D]``
    and ``k`` ``[heads, num_src, D]``, heads first (each head's rows contiguous, as the kernels take them):
    an attention score per edge and head.

    A sampled product (``torch.sparse.sampled_addmm``: each entry one dot product) per head, and in backward
    a CSR product with the scores' gradient as values: no ``[E, heads, D]`` edge rows are made or kept, where
    gathering both ends would make two (ten times the time on ACM's 35k edges) and keep them for backward."""
    return _EdgeDot.apply(q, k, sums)


def weighted_sum(sums: EdgeSums, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``out[h, d] = sum over d's in-edges e of w[e, h] * v[h, src_e]``: ``[heads, num_dst, D]`` from the edge
    weights ``w`` ``[E, heads]`` and the node rows ``v`` ``[heads, num_src, D]`` (attention's aggregation).

    A CSR product per head with ``w`` as values; backward: the transpose's product for ``v``, a sampled
    product for ``w``. Each output row is summed in its stored order, so the bits do not depend on threads."""
    return _WeightedSum.apply(w, v, sums)


def _float(x: torch.Tensor) -> torch.Tensor:
    """``x`` contiguous, in a dtype the CSR kernels take (half precisions run in fp32, as every product here does)."""
    return (x if x.dtype in (torch.float32, torch.float64) else x.float()).contiguous()


def _heads(rows: list[torch.Tensor], dtype: torch.dtype, dim: int = 0) -> torch.Tensor:
    """Per-head results side by side along ``dim`` (one head: a view, no copy)."""
    return (rows[0].unsqueeze(dim) if len(rows) == 1 else torch.stack(rows, dim)).to(dtype)


class _EdgeDot(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, sums: EdgeSums) -> torch.Tensor:
        ctx.sums, ctx.dtypes = sums, (q.dtype, k.dtype)
        q = _float(q)
        k = _float(k).to(q.dtype)
        ctx.save_for_backward(q, k)
        return _heads([sums.sampled(q[h], k[h]) for h in range(q.shape[0])], q.dtype, 1)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        q, k = ctx.saved_tensors
        sums, g = ctx.sums, g.to(q.dtype)
        heads = range(q.shape[0])
        gq = _heads([sums.valued("dst", g[:, h], k[h]) for h in heads], ctx.dtypes[0]) if ctx.needs_input_grad[0] else None
        gk = _heads([sums.valued("src", g[:, h], q[h]) for h in heads], ctx.dtypes[1]) if ctx.needs_input_grad[1] else None
        return gq, gk, None


class _WeightedSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w: torch.Tensor, v: torch.Tensor, sums: EdgeSums) -> torch.Tensor:
        ctx.sums, ctx.dtypes = sums, (w.dtype, v.dtype)
        v = _float(v)
        w = w.to(v.dtype)
        ctx.save_for_backward(w, v)
        return _heads([sums.valued("dst", w[:, h], v[h]) for h in range(v.shape[0])], v.dtype)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        w, v = ctx.saved_tensors
        sums, g = ctx.sums, _float(g).to(v.dtype)
        heads = range(v.shape[0])
        gw = _heads([sums.sampled(g[h], v[h]) for h in heads], ctx.dtypes[0], 1) if ctx.needs_input_grad[0] else None
        gv = _heads([sums.valued("src", w[:, h], g[h]) for h in heads], ctx.dtypes[1]) if ctx.needs_input_grad[1] else None
        return gw, gv, None
