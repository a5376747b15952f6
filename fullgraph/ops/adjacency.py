"""Â, the normalized adjacency a model aggregates with: the one builder every layout uses.

Every layout must aggregate with exactly the full graph's Â, whichever rows of it a process holds:
graph parallelism is checked against one process to 1e-5, and the pipeline's chunks must sum back
to the part's block. So there is one recipe, :func:`block_adjacency`, which builds Â's rows from a
block's structure and the **global** in-degrees of the nodes it touches; the whole graph
(:func:`normalized`) is the block whose rows are every node, and a part is the block of its inner
nodes with the degrees it carries for its halo too. Identical float32 arithmetic on identical
degrees gives identical values, bit for bit, wherever a row is built.

The norms (``NORMS``):

* ``gcn``: ``D^-1/2 (A+I) D^-1/2``, ``D`` the in-degree of ``A+I`` (Kipf & Welling, PyG's
  ``gcn_norm``); existing self loops are replaced by one of weight 1;
* ``mean``: row-normalized ``A`` (a mean over the stored in-edges, a self loop included if stored;
  a row with none stays empty);
* ``self-loops``: ``A+I`` with every value 1 (attention models weigh the entries themselves).
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.errors import InputError
from fullgraph.ops.csr import canonical, row_ids, row_spans

__all__ = ["NORMS", "block_adjacency", "normalized", "check_norm"]

NORMS = ("gcn", "mean", "self-loops")


def check_norm(norm: str) -> str:
    if norm not in NORMS:
        raise InputError(f"unknown normalization {norm!r} (expected one of: {', '.join(NORMS)})")
    return norm


def _self_loop_slots(ip: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Where each row's self loop goes so that a sorted row stays sorted: after the row's columns
    below its own id. Counted block by block of rows, so no per-entry row ids of the whole CSR."""
    before = np.empty(ip.size - 1, dtype=np.int64)
    for r0, r1 in row_spans(ip):
        rows = row_ids(ip, r0, r1)
        below = cols[int(ip[r0]) : int(ip[r1])] <= rows
        before[r0:r1] = np.bincount(rows[below] - r0, minlength=r1 - r0)
    return ip[:-1] + before


def block_adjacency(indptr: torch.Tensor, indices: torch.Tensor, norm: str,
                    degree: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Â's rows of a block: ``(indptr, indices, values)`` (int64, int64, float32).

    Args:
        indptr, indices: the block's structure of ``A``: ``n`` rows, each sorted without repeats;
            column ``j < n`` is row ``j``'s own node (the block convention: dst nodes lead the src
            nodes). ``gcn`` and ``self-loops`` want no self loops in it: they add one per row.
        norm: one of ``NORMS``.
        degree: int ``[num columns]``, the in-degree in the **whole** graph's ``A`` (self loops
            excluded for ``gcn``) of every column's node; ``mean`` reads the rows' only.

    The result may share ``indptr`` / ``indices`` with the input (``mean`` keeps the structure).
    """
    check_norm(norm)
    ip, cols = indptr.numpy(), indices.numpy()
    n = ip.size - 1
    counts = np.diff(ip)
    if norm in ("gcn", "self-loops"):
        cols = np.insert(cols.astype(np.int64, copy=False), _self_loop_slots(ip, cols), np.arange(n, dtype=np.int64))
        ip = ip + np.arange(n + 1)
        counts = counts + 1
    deg = degree.numpy()
    if norm == "gcn":  # the loop adds one to every degree; float32 throughout, as the kernels read it
        dinv = (1.0 / np.sqrt((deg + 1).astype(np.float32))).astype(np.float32)
        vals = np.repeat(dinv[:n], counts)
        vals *= dinv[cols]
    elif norm == "mean":
        d = deg[:n].astype(np.float32)
        inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0).astype(np.float32)
        vals = np.repeat(inv, counts)
    else:
        vals = np.ones(cols.size, dtype=np.float32)
    return torch.from_numpy(ip), torch.from_numpy(cols), torch.from_numpy(vals)


def normalized(indptr: torch.Tensor, indices: torch.Tensor, norm: str):
    """Â of a whole square graph from its in-edge CSR (any: unsorted rows, repeated edges and self
    loops are allowed and merged as the norm says), as ``(indptr, indices, values)``."""
    ip, ix = canonical(indptr, indices, drop_loops=check_norm(norm) != "mean")
    return block_adjacency(ip, ix, norm, ip.diff())
