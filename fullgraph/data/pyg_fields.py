"""The node fields of PyG's ``Data`` and ``HeteroData`` stores as a fullgraph graph takes them: features,
labels, split masks. Below ``data.pyg`` (homogeneous) and ``data.typed.pyg`` (heterogeneous), which both
read them."""

from __future__ import annotations

import torch

from fullgraph.errors import InputError

__all__ = ["features", "labels", "mask"]


def features(x) -> torch.Tensor:
    """PyG's ``x`` as a graph holds it: float32, dense as given or sparse CSR (COO and CSR taken)."""
    if x is None:
        raise InputError("expected node features 'x' on the PyG data (got none)")
    if not isinstance(x, torch.Tensor):
        raise InputError(f"expected 'x' to be a torch tensor (got {type(x).__name__})")
    if x.layout == torch.strided:
        return x.to(torch.float32)
    x = x.coalesce() if x.layout == torch.sparse_coo else x
    x = x.to_sparse_csr()
    return torch.sparse_csr_tensor(x.crow_indices().to(torch.int64), x.col_indices().to(torch.int64),
                                   x.values().to(torch.float32), size=x.shape, check_invariants=True)


def labels(y, n: int) -> torch.Tensor:
    """PyG's ``y`` as class ids of ``n`` nodes (OGB's ``[N, 1]`` taken; a float's NaN: -1, no label), float
    multi-label rows, or a number per node (float ``y`` with fractions: node regression, NaN kept)."""
    if y is None:
        raise InputError("expected labels 'y' on the PyG data (got none)")
    if y.dim() == 2 and y.shape[1] == 1:  # OGB's [N, 1]
        y = y[:, 0]
    if y.dim() == 1:
        if y.is_floating_point():
            known = ~torch.isnan(y)
            if not torch.equal(y[known], y[known].round()):  # numbers, not class ids
                return y.to(torch.float32)
            out = torch.full((n,), -1, dtype=torch.int64)
            out[known] = y[known].to(torch.int64)
            return out
        return y.to(torch.int64)
    return y.to(torch.float32)


def mask(data, key: str, split: int) -> torch.Tensor | None:
    """A bool mask of ``data`` (column ``split`` where it holds several splits as columns); ``None``: absent."""
    m = getattr(data, key, None)
    if m is None:
        return None
    if m.dim() == 2:  # several splits as columns (e.g. WikipediaNetwork)
        if not 0 <= split < m.shape[1]:
            raise InputError(f"expected split in 0..{m.shape[1] - 1} for '{key}' (got {split})")
        m = m[:, split]
    return m.to(torch.bool).contiguous()
