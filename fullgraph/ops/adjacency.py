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
* ``self-loops``: ``A+I`` with every value 1 (attention models weigh the entries themselves);
* ``relation-mean``: a mean over each relation's in-edges separately (R-GCN's ``1/|N_r(v)|``): an
  entry of relation ``r`` in row ``v`` is ``w / sum of the weights of v's relation-r entries`` (``w``
  = 1 without weights). It reads the entries' types (``EdgeData.type``) and each row's own entries
  only, which every layout's block holds whole (a sampled block drops columns after normalizing).

Weighted edges (``EdgeData.weight``) change the values only, as PyG's ``gcn_norm`` with ``edge_weight``
does: ``gcn`` is ``w_uv / sqrt(d_u d_v)`` with ``d`` the weighted in-degree plus the added loop's
weight 1, ``mean`` is the weighted mean ``w_uv / sum_u w_uv``, ``self-loops`` is ``A_w + I`` (a
weighted sum for GIN; attention reads no values). The
weighted degree has one source, :func:`weighted_in_degree`, so every layout divides by the same bits.
A block built with edge data gets that data back in the order of its entries, the added loops'
filled in (``EdgeData.with_loops``).
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.errors import InputError
from fullgraph.ops.csr import canonical, indptr_from_rows, row_ids, row_spans
from fullgraph.ops.edge_data import EdgeData

__all__ = ["NORMS", "block_adjacency", "block_adjacency_data", "normalized", "normalized_data", "check_norm",
           "weighted_in_degree"]

NORMS = ("gcn", "mean", "self-loops", "relation-mean")


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


def weighted_in_degree(indptr: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """float32 ``[n]``: each row's sum of its entries' weights, added in float64 in entry order (one
    order, so every layout that asks gets the same bits)."""
    ip = indptr.numpy()
    sums = np.bincount(row_ids(ip), weights=weight.numpy().astype(np.float64), minlength=ip.size - 1)
    return torch.from_numpy(sums.astype(np.float32))


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
    return block_adjacency_data(indptr, indices, norm, degree)[:3]


def block_adjacency_data(indptr: torch.Tensor, indices: torch.Tensor, norm: str, degree: torch.Tensor,
                         edata: EdgeData | None = None, node_ids: torch.Tensor | None = None,
                         loop_weight: torch.Tensor | None = None):
    """:func:`block_adjacency` of a block whose entries carry ``edata`` (or none): ``(indptr,
    indices, values, edata)``, the last aligned with the result's entries (``None`` without).

    With weights, ``degree`` is the float :func:`weighted_in_degree` of every column's node (loops
    excluded for ``gcn``) and the values are weighted (module docstring). ``node_ids``: the global id
    of each row's node, the key of the loop added there (default ``0..n-1``). ``loop_weight``: the
    weight of the loop added at each node of a square block (default 1; a stored loop's own weight,
    as PyG's ``add_remaining_self_loops`` keeps it)."""
    check_norm(norm)
    ip, cols = indptr.numpy(), indices.numpy()
    n = ip.size - 1
    counts = np.diff(ip)
    weight = None if edata is None else edata.weight
    is_loop = None
    if norm in ("gcn", "self-loops"):
        slots = _self_loop_slots(ip, cols)
        cols = np.insert(cols.astype(np.int64, copy=False), slots, np.arange(n, dtype=np.int64))
        if edata is not None:
            is_loop = np.zeros(cols.size, dtype=bool)
            is_loop[slots + np.arange(n)] = True
        ip = ip + np.arange(n + 1)
        counts = counts + 1
    deg = degree.numpy()
    loop = 1 if loop_weight is None else loop_weight.numpy()  # the weight of the loop gcn adds
    if weight is not None and norm in ("gcn", "mean"):
        _check_weighted_degree(deg, counts, norm, n, loop)
    if norm == "gcn":  # the loop adds its weight to every degree; float32 throughout, as the kernels read it
        dinv = (1.0 / np.sqrt((deg + loop).astype(np.float32))).astype(np.float32)
        vals = np.repeat(dinv[:n], counts)
        vals *= dinv[cols]
    elif norm == "relation-mean":
        vals = _relation_mean(ip, edata, weight)
    elif norm == "mean":
        d = deg[:n].astype(np.float32)
        inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0).astype(np.float32)
        vals = np.repeat(inv, counts)
    else:
        vals = np.ones(cols.size, dtype=np.float32)
    out = None
    if edata is not None:
        if is_loop is None:
            out = edata
        else:
            loops = torch.from_numpy(is_loop)
            nodes = torch.arange(n) if node_ids is None else node_ids[:n]
            out = edata.with_loops(loops, row_ids(torch.from_numpy(ip)), nodes, loop_weight)
        if weight is not None:
            vals *= out.weight.numpy()
    return torch.from_numpy(ip), torch.from_numpy(cols), torch.from_numpy(vals), out


GIVE_TYPES = ("give the graph its node types and each edge its relation: a typed folder of plain files (one edge "
              "file per relation, docs/data.md), a heterogeneous dataset (HeCo's, OGB's ogbn-mag layout) or a PyG "
              "HeteroData; or train an untyped model (--model gcn, sage, gat)")
"""How a user gives a typed model what it reads: the one advice of every refusal of an untyped graph."""


def _relation_mean(ip: np.ndarray, edata: EdgeData | None, weight) -> np.ndarray:
    """float32 values of ``relation-mean``: each entry over its row's sum for its relation, the sums
    added in float64 in entry order (whole counts without weights: the same bits in every layout)."""
    if edata is None or edata.type is None:
        raise InputError(f"expected each edge to carry its relation for R-GCN, which averages every relation's "
                         f"neighbours apart (got edges without relation types): {GIVE_TYPES}")
    rel = edata.type.numpy()
    r = int(edata.num_relations or (int(rel.max()) + 1 if rel.size else 1))
    key = row_ids(ip) * r + rel
    w = np.ones(rel.size) if weight is None else weight.numpy().astype(np.float64)
    if (ip.size - 1) * r > 4 * max(rel.size, 1):  # many relations (a knowledge graph's 1,070 x 2.5M rows would be
        _, key = np.unique(key, return_inverse=True)  # a 21 GB count): one count per (row, relation) present
    sums = np.bincount(key, weights=w)  # (either way each sum adds its entries in entry order: the same bits)
    with np.errstate(divide="ignore", invalid="ignore"):
        vals = (1.0 / sums[key]).astype(np.float32)  # the weight itself is folded in below
    return np.where(np.isfinite(vals), vals, 0).astype(np.float32)


def _check_weighted_degree(deg: np.ndarray, counts: np.ndarray, norm: str, n: int, loop) -> None:
    """Refuse weights that leave a degree the normalization cannot divide by: ``gcn`` takes the
    square root of every degree plus its loop's weight, ``mean`` divides each row with entries by its sum."""
    bad = (deg + loop <= 0) if norm == "gcn" else ((deg[:n] <= 0) & (counts > 0))
    if bool(bad.any()):
        what = "in-degree + 1 (the added loop)" if norm == "gcn" else "sum over a node's in-edges"
        raise InputError(f"expected edge weights whose weighted {what} is positive for the {norm!r} normalization "
                         f"(got {int(bad.sum())} nodes where it is not, e.g. a weighted degree of "
                         f"{float(deg[np.flatnonzero(bad)[0]]):g}): make the weights positive")


def normalized(indptr: torch.Tensor, indices: torch.Tensor, norm: str):
    """Â of a whole square graph from its in-edge CSR (any: unsorted rows, repeated edges and self
    loops are allowed and merged as the norm says), as ``(indptr, indices, values)``."""
    ip, ix = canonical(indptr, indices, drop_loops=check_norm(norm) in ("gcn", "self-loops"))
    return block_adjacency(ip, ix, norm, ip.diff())


def normalized_data(indptr: torch.Tensor, indices: torch.Tensor, norm: str, edata: EdgeData):
    """:func:`normalized` of a graph whose edges carry ``edata``: ``(indptr, indices, values, edata)``.

    Such a graph's rows are sorted without repeats already (``Graph`` checks it), so only the self
    loops that ``gcn`` and ``self-loops`` replace are dropped, with their data; a dropped loop's
    weight becomes the weight of the loop added at its node (PyG's ``add_remaining_self_loops``)."""
    check_norm(norm)
    loop_weight = None
    if norm in ("gcn", "self-loops"):  # the norms that add a loop of their own
        rows = row_ids(indptr)
        keep = indices != rows
        if not bool(keep.all()):
            if edata.weight is not None:
                loop_weight = torch.ones(indptr.numel() - 1, dtype=edata.weight.dtype)
                loop_weight[rows[~keep]] = edata.weight[~keep]
            indptr = indptr_from_rows(rows[keep], indptr.numel() - 1)
            indices, edata = indices[keep], edata.take(keep)
    degree = indptr.diff() if edata.weight is None else weighted_in_degree(indptr, edata.weight)
    return block_adjacency_data(indptr, indices, norm, degree, edata, loop_weight=loop_weight)
