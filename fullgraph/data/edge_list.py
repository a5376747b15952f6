"""Edge lists into the in-edge CSR a ``Graph`` holds: the vectorized passes over an edge list, in
blocks of :data:`EDGE_BLOCK` edges so that their temporaries stay small whatever the graph's size,
and the sort that puts edge data in CSR order with its edges (:func:`csr_with_edge_data`)."""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.data.checks import as_tensor, describe
from fullgraph.errors import InputError
from fullgraph.ops.csr import BLOCK_ENTRIES, indptr_from_counts, row_spans

__all__ = ["EDGE_BLOCK", "row_blocks", "unique_sorted_", "shrink_", "csr_from_sorted_keys", "checked_edges",
           "csr_from_edges", "csr_with_edge_data"]

# Edges per block of the vectorized passes over an edge list: every temporary of such a pass is a
# few of these blocks (tens of MiB), whatever the size of the graph.
EDGE_BLOCK = BLOCK_ENTRIES


def row_blocks(indptr: np.ndarray, max_edges: int | None = None):
    """:func:`fullgraph.ops.csr.row_spans` at the data layer's block size, :data:`EDGE_BLOCK`
    (read at each call, so that the tests can shrink it and exercise the block edges)."""
    return row_spans(indptr, EDGE_BLOCK if max_edges is None else max_edges)


def unique_sorted_(keys: np.ndarray) -> int:
    """Drop repeats from the sorted ``keys`` in place, block by block; returns the number kept, at
    the front of ``keys``."""
    w, prev = 0, None
    for a in range(0, keys.size, EDGE_BLOCK):
        c = keys[a : a + EDGE_BLOCK]
        first = np.empty(c.size, dtype=bool)
        first[0] = prev is None or c[0] != prev
        np.not_equal(c[1:], c[:-1], out=first[1:])
        prev = c[-1]
        kept = c[first]  # a copy: the write below may overlap this block
        keys[w : w + kept.size] = kept
        w += kept.size
    return w


def shrink_(a: np.ndarray, size: int) -> np.ndarray:
    """The first ``size`` entries of ``a``, giving the rest back to the allocator when ``a`` owns
    its memory (``realloc`` shrinks in place), else as a copy."""
    if size == a.size:
        return a
    if a.flags.owndata and a.base is None:
        a.resize(size, refcheck=False)  # no other view of ``a`` exists: its callers made it
        return a
    return a[:size].copy()


def csr_from_sorted_keys(keys: np.ndarray, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """In-edge CSR of the sorted int64 ``keys = dst * N + src``; ``indices`` reuses ``keys``'s memory."""
    counts = np.zeros(num_nodes, dtype=np.int64)
    for a in range(0, keys.size, EDGE_BLOCK):
        c = keys[a : a + EDGE_BLOCK]
        rows = c // num_nodes
        r0 = int(rows[0])
        in_block = np.bincount(rows - r0)  # rows ascend, so this block's rows are one short range
        counts[r0 : r0 + in_block.size] += in_block
        rows *= num_nodes
        np.subtract(c, rows, out=c)
    return torch.from_numpy(indptr_from_counts(counts)), torch.from_numpy(keys)


def _edge_ids(name: str, ids) -> np.ndarray:
    """A 1-D numpy view of edge ids (integers kept in their own dtype: no int64 copy is made)."""
    t = as_tensor(name, ids).reshape(-1)
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.is_complex():
        t = t.to(torch.int64)
    return t.numpy()


def checked_edges(src, dst, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """``src`` and ``dst`` as 1-D numpy arrays (views, in their own integer dtype), checked: as many
    of each, ids in ``[0, num_nodes)``; an ``InputError`` naming the first bad id otherwise."""
    src, dst = _edge_ids("src", src), _edge_ids("dst", dst)
    if src.size != dst.size:
        raise InputError(f"expected as many edge sources as destinations (got {src.size} and {dst.size})")
    if num_nodes <= 0:
        raise InputError(f"expected a graph with at least one node (got num_nodes={num_nodes})")
    for name, ids in (("source", src), ("destination", dst)):
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
            bad = ids[(ids < 0) | (ids >= num_nodes)]
            raise InputError(
                f"expected edge {name} ids in [0, {num_nodes}) (got {bad.size} out of range, "
                f"e.g. {int(bad[0])})"
            )
    return src, dst


def csr_from_edges(src, dst, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """In-edge CSR (``indptr``, ``indices``) of the edges ``src[i] -> dst[i]`` (repeats kept).

    Edge ids are checked before anything is built, so a bad id is reported as such instead of as
    an indexing error deep inside a sort. The one edge-sized array made is the int64 sort key
    ``dst * N + src``, sorted in place, which then becomes ``indices``.
    """
    src, dst = checked_edges(src, dst, num_nodes)
    keys = np.empty(src.size, dtype=np.int64)
    for a in range(0, keys.size, EDGE_BLOCK):
        k = keys[a : a + EDGE_BLOCK]
        k[:] = dst[a : a + EDGE_BLOCK]
        k *= num_nodes
        k += src[a : a + EDGE_BLOCK]
    keys.sort()  # equal keys are equal edges: an unstable sort gives the same CSR as a stable one
    return csr_from_sorted_keys(keys, num_nodes)


def csr_with_edge_data(src, dst, num_nodes: int, edge: dict) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """In-edge CSR of ``src[i] -> dst[i]`` with the edge data ``edge`` (``{"edge_weight": [E], ...}``,
    one row per listed edge) put in the same order; repeated edges as :meth:`Graph.from_edges` says."""
    src, dst = checked_edges(src, dst, num_nodes)
    e = src.size
    data = {}
    for name, value in edge.items():
        t = as_tensor(name, value)
        if t.shape[:1] != (e,):
            raise InputError(f"expected '{name}' to have one row per edge, {e} rows (got {describe(t)})")
        if name == "edge_type" and not (t.dtype.is_floating_point or t.dtype == torch.bool):
            t = t.to(torch.int64)
        elif name != "edge_type" and t.dtype in (torch.float16, torch.bfloat16, torch.float64):
            t = t.to(torch.float32)  # as a loader would; Graph checks the rest
        data[name] = t
    keys = dst.astype(np.int64) * num_nodes + src.astype(np.int64)
    rel = data["edge_type"].numpy() if "edge_type" in data else None
    # an edge is keyed by (dst, src, relation): two relations between one pair are two edges, sorted by type
    order = np.argsort(keys, kind="stable") if rel is None else np.lexsort((rel, keys))
    keys = keys[order]
    first = np.ones(e, dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    if rel is not None and e:
        r = rel[order]
        first[1:] |= r[1:] != r[:-1]
    repeats = e - int(first.sum())
    perm = torch.from_numpy(order)
    if repeats and "edge_attr" in data:
        k = int(keys[np.flatnonzero(~first)[0]])
        what = "edge (and relation)" if rel is not None else "edge"
        raise InputError(f"expected each {what} once when edges carry features (got {repeats} repeated "
                         f"edges, e.g. {k % num_nodes} -> {k // num_nodes}): merge them first (weights alone are "
                         f"summed)")
    out = {}
    for name, t in data.items():
        t = t[perm]
        if repeats and name == "edge_type":
            t = t[torch.from_numpy(first)]  # a repeated (src, dst, relation) keeps its one relation
        elif repeats:  # weights: each edge's repeats summed, in the order they were listed
            group = torch.from_numpy(np.cumsum(first) - 1)
            t = torch.zeros(int(first.sum()), dtype=torch.float64).index_add_(0, group, t.double()).to(t.dtype)
        out[name] = t
    keys = keys[first]
    indptr, indices = csr_from_sorted_keys(keys, num_nodes)
    return indptr, indices, out


