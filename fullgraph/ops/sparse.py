"""Local sparse-dense products with hand-written backward passes (no communication here).

``SparseOp`` wraps a CSR matrix together with its transpose, built once. PyTorch's own autograd for
``sparse_csr @ dense`` rebuilds the transpose on every backward call, which costs more than the
product itself; here the transpose is kept (or shared, when the matrix is symmetric), and gradients
never flow into the sparse values (normalized adjacencies and input features are constants).

Every product goes through :func:`csr_mm`. The CSR tensors it multiplies carry 32-bit copies of the
index arrays whenever the sizes allow: the sparse BLAS kernels (MKL on CPU, cuSPARSE on CUDA) take
32-bit indices, and PyTorch would otherwise convert the 64-bit ones on every product. ``csr_mm``
writes into a fresh tensor with ``beta=0``, which skips the zero fill and the copy of the result
that ``a @ x`` makes. Both change nothing in the result: it is the same kernel on the same operands.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch

# PyTorch marks its CSR support "beta" with a warning on every construction; the operations used
# here (CSR @ dense on CPU and CUDA) are stable and covered by this package's tests.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

__all__ = ["SparseOp", "columns_read", "csr_mm", "spmm", "matmul"]


_INT32_MAX = 2**31 - 1


def _kernel_indices_of(indptr: torch.Tensor, indices: torch.Tensor, num_cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """CSR index arrays as the sparse kernels want them: int32 when the sizes allow, else int64."""
    small = indices.numel() < _INT32_MAX and num_cols <= _INT32_MAX
    dtype = torch.int32 if small else torch.int64
    return indptr.to(dtype), indices.to(dtype)


def _csr(indptr: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, shape) -> torch.Tensor:
    return torch.sparse_csr_tensor(indptr, indices, values, size=tuple(shape), check_invariants=False)


def csr_mm(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``a @ x`` for a CSR ``a`` and a dense ``x``, into a new tensor (not differentiable itself:
    the autograd functions of this package call it in their forward and backward). PyTorch's CSR
    kernels take fp32 only: under autocast (``--precision bf16|fp16``) the product runs in fp32, on
    ``x`` cast up (``fullgraph.optim.precision``)."""
    if torch.is_autocast_enabled(x.device.type):
        with torch.autocast(x.device.type, enabled=False):
            return csr_mm(a, x.to(a.dtype))
    if x.dtype in (torch.bfloat16, torch.float16):  # a gradient of an autocast product, in the backward
        x = x.to(a.dtype)
    if torch.is_grad_enabled() and x.requires_grad:
        return a @ x
    out = x.new_empty((a.shape[0], x.shape[1]))
    return torch.addmm(out, a, x, beta=0.0, out=out)


class SparseOp:
    """A constant sparse matrix ``A`` (CSR, float32) that can multiply dense matrices both ways.

    Args:
        indptr, indices, values: CSR arrays (int64, int64, float32), canonical (sorted, no duplicates).
        shape: ``(rows, cols)``.
        symmetric: ``True`` if ``A == Aᵀ``, so the transpose is ``A`` itself; ``None`` checks.
    """

    def __init__(self, indptr, indices, values, shape, symmetric: bool | None = False, *,
                 _kernel_indices: tuple[torch.Tensor, torch.Tensor] | None = None):
        self.shape = (int(shape[0]), int(shape[1]))
        self.indptr, self.indices, self.values = indptr, indices, values
        if _kernel_indices is None:  # the index arrays the CSR tensors hold (32-bit when they fit)
            _kernel_indices = _kernel_indices_of(indptr, indices, self.shape[1])
        self._kernel_indices = _kernel_indices
        self.A = _csr(*_kernel_indices, values, self.shape)
        self._perm: torch.Tensor | None = None  # CSR position of each entry of Aᵀ, in Aᵀ's order (index dtype)
        self._At: torch.Tensor | None = None
        if symmetric is None:
            symmetric = self.shape[0] == self.shape[1] and self._is_symmetric()
        self.symmetric = bool(symmetric)

    @classmethod
    def from_tensor(cls, t: torch.Tensor) -> "SparseOp":
        t = t.to_sparse_csr() if t.layout != torch.sparse_csr else t
        return cls(t.crow_indices().to(torch.int64), t.col_indices().to(torch.int64), t.values(), t.shape)

    def _scipy(self, data=None) -> sp.csr_matrix:
        """The structure as SciPy CSR (host arrays; a GPU operator's are copied to the host)."""
        data = self.values.cpu().numpy() if data is None else data
        return sp.csr_matrix((data, self.indices.cpu().numpy(), self.indptr.cpu().numpy()), shape=self.shape)

    def _is_symmetric(self) -> bool:
        a = self._scipy()
        return (a != a.T).nnz == 0

    @property
    def nnz(self) -> int:
        return self.indices.numel()

    @property
    def At(self) -> torch.Tensor:
        """``Aᵀ`` as CSR, built on first use and kept."""
        if self.symmetric:
            return self.A
        if self._At is None:
            self._transpose_structure()
            vals = self.values.index_select(0, self._perm)
            self._At = _csr(self._t_indptr, self._t_indices, vals, self.shape[::-1])
        return self._At

    def transpose_order(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(indptr, positions)`` of ``Aᵀ``'s structure, built on first use and kept: row ``u`` of the
        transpose lists the CSR positions of column ``u``'s entries of ``A``, in row order."""
        self._transpose_structure()
        return self._t_indptr, self._perm

    def _transpose_structure(self) -> None:
        if self._perm is None:  # every array in the kernels' index dtype: int32 where the sizes allow
            small = self.nnz < _INT32_MAX and self.shape[0] <= _INT32_MAX
            dtype = np.int32 if small else np.int64
            pos = self._scipy(np.arange(1, self.nnz + 1, dtype=dtype)).T.tocsr()
            pos.sort_indices()
            pos.data -= 1
            dev = self.indptr.device  # SciPy works on the host; the result lives with the operator
            self._perm, self._t_indptr, self._t_indices = (
                torch.from_numpy(a.astype(dtype, copy=False)).to(dev) for a in (pos.data, pos.indptr, pos.indices))

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        """``A @ x``. Layers multiply through ``mm`` / ``mm_t`` only, so a layout may hand them an
        operator with the same two methods that computes the product across processes."""
        return csr_mm(self.A, x)

    def mm_t(self, x: torch.Tensor) -> torch.Tensor:
        """``Aᵀ @ x``, from the kept transpose."""
        return csr_mm(self.At, x)

    def with_values(self, values: torch.Tensor) -> "SparseOp":
        """The same structure with other values; the transpose's index arrays are shared, so a
        per-epoch dropout of sparse features costs one gather, not a transposition."""
        out = SparseOp(self.indptr, self.indices, values, self.shape, symmetric=False,
                       _kernel_indices=self._kernel_indices)
        self._transpose_structure()
        out._perm, out._t_indptr, out._t_indices = self._perm, self._t_indptr, self._t_indices
        return out

    def rows(self, n: int) -> "SparseOp":
        """The first ``n`` rows (the dst rows of a block whose dst nodes lead its src nodes)."""
        if n == self.shape[0]:
            return self
        end = int(self.indptr[n])
        ip, ix = self._kernel_indices
        return SparseOp(self.indptr[: n + 1], self.indices[:end], self.values[:end], (n, self.shape[1]),
                        _kernel_indices=(ip[: n + 1], ix[:end]))

    def to_dense(self) -> torch.Tensor:
        return self.A.to_dense()

    def to(self, device) -> "SparseOp":
        if self.indptr.device == torch.device(device):
            return self
        out = SparseOp(self.indptr.to(device), self.indices.to(device), self.values.to(device), self.shape,
                       symmetric=self.symmetric)
        return out

    def __repr__(self) -> str:
        return f"SparseOp(shape={self.shape}, nnz={self.nnz}, symmetric={self.symmetric})"


class _SpMM(torch.autograd.Function):
    """``A @ x`` with ``∂/∂x = Aᵀ @ g`` from the kept transpose; no gradient for ``A``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, op: SparseOp) -> torch.Tensor:
        ctx.op = op
        return op.mm(x)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        if not ctx.needs_input_grad[0]:
            return None, None
        return ctx.op.mm_t(g.contiguous()), None


def spmm(op: SparseOp, x: torch.Tensor) -> torch.Tensor:
    """``op.A @ x`` for a dense ``x``, differentiable in ``x``."""
    return _SpMM.apply(x.contiguous(), op)


class _SparseLeftMatmul(torch.autograd.Function):
    """``X @ W`` for a constant sparse ``X``: ``∂/∂W = Xᵀ @ g``."""

    @staticmethod
    def forward(ctx, w: torch.Tensor, x: SparseOp) -> torch.Tensor:
        ctx.x = x
        return csr_mm(x.A, w)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        return csr_mm(ctx.x.At, g.contiguous()), None


def matmul(x: torch.Tensor | SparseOp, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` where ``x`` is a dense tensor or a constant sparse matrix (input features)."""
    if isinstance(x, SparseOp):
        return _SparseLeftMatmul.apply(w, x)
    return x @ w


def columns_read(adj: SparseOp, rows: torch.Tensor) -> torch.Tensor:
    """Which columns the ``rows`` (bool) of ``adj`` read: one product ``Aᵀ·1_rows`` (every value of a
    normalized adjacency is positive), through the transpose the backward keeps anyway; memory of
    a column vector, whatever the number of edges."""
    with torch.no_grad(), torch.autocast(rows.device.type, enabled=False):
        return adj.mm_t(rows.to(adj.values.dtype)[:, None])[:, 0] > 0
