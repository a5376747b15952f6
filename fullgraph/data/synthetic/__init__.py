"""Synthetic graphs, deterministic by seed.

* ``planted_partition``: the built-in default graph. Nodes fall into classes; most edges stay
  inside a class (homophily ``h``) and features are a noisy class centroid, noisy enough that a
  feature-only model is clearly worse than a GCN that also reads the neighbours.
* ``rmat``: a power-law graph (Chakrabarti et al.'s recursive matrix) from 10^5 to 10^8 edges, for
  scale and benchmarks. Edges are drawn in chunks as int32 ids and turned into the symmetric CSR
  by one in-place sort of int64 keys, so memory stays within a few times the size of the output
  (about 12 bytes per directed edge at the peak, plus the features, drawn in blocks).

Both build the standard structure (symmetric, no repeated edges, no self loops) straight from the
edge list with :func:`fullgraph.data.preprocess.undirected_csr`: the same CSR as
``remove_self_loops(symmetrize(Graph.from_edges(...)))``, without the intermediate graphs.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.data.graph import Graph
from fullgraph.data.preprocess import undirected_csr
from fullgraph.errors import InputError

__all__ = ["planted_partition", "rmat", "random_split"]

_FEATURE_BLOCK = 1 << 22  # feature entries drawn per block


def random_split(n: int, rng: np.random.Generator, train: float = 0.1, val: float = 0.1):
    """Boolean masks of a seeded random split (fractions of all nodes)."""
    order = rng.permutation(n)
    n_tr, n_va = max(1, int(train * n)), max(1, int(val * n))
    masks = [np.zeros(n, dtype=bool) for _ in range(3)]
    masks[0][order[:n_tr]] = True
    masks[1][order[n_tr : n_tr + n_va]] = True
    masks[2][order[n_tr + n_va :]] = True
    return [torch.from_numpy(m) for m in masks]


def _class_features(y: np.ndarray, num_features: int, noise: float, rng: np.random.Generator) -> torch.Tensor:
    """``centroid[y] + noise * N(0, 1)`` in float32, drawn in blocks of rows into the one output
    array (the normal stream does not depend on the block size, so neither do the features)."""
    classes = int(y.max()) + 1
    centroids = rng.standard_normal((classes, num_features)).astype(np.float32)
    x = np.empty((y.size, num_features), dtype=np.float32)
    rows = max(1, _FEATURE_BLOCK // num_features)
    for a in range(0, y.size, rows):
        z = rng.standard_normal((min(rows, y.size - a), num_features)).astype(np.float32)
        z *= noise
        np.add(centroids[y[a : a + rows]], z, out=x[a : a + rows])
    return torch.from_numpy(x)


def planted_partition(num_nodes: int = 5000, num_classes: int = 5, avg_degree: float = 10.0,
                      homophily: float = 0.7, num_features: int = 64, noise: float = 8.0,
                      seed: int = 0, name: str = "synthetic") -> Graph:
    """A planted-partition graph whose classes a GCN separates well above chance."""
    if num_nodes < num_classes or num_classes < 2:
        raise InputError(f"expected num_nodes >= num_classes >= 2 (got {num_nodes} and {num_classes})")
    rng = np.random.default_rng(seed)
    y = rng.integers(0, num_classes, num_nodes)
    members = [np.flatnonzero(y == c) for c in range(num_classes)]
    m = int(num_nodes * avg_degree / 2)
    src = rng.integers(0, num_nodes, m)
    inside = rng.random(m) < homophily
    dst = rng.integers(0, num_nodes, m)
    for c, nodes in enumerate(members):  # same-class partner for the homophilous edges
        pick = inside & (y[src] == c)
        dst[pick] = nodes[rng.integers(0, nodes.size, int(pick.sum()))]
    x = _class_features(y, num_features, noise, rng)
    train, val, test = random_split(num_nodes, rng)
    indptr, indices = undirected_csr(src, dst, num_nodes)
    return Graph(indptr=indptr, indices=indices, x=x, y=torch.from_numpy(y.astype(np.int64)), train_mask=train,
                 val_mask=val, test_mask=test, name=name, num_classes=num_classes)


def _rmat_draws(scale: int, num_edges: int, cum: np.ndarray, rng: np.random.Generator,
                chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """``num_edges`` R-MAT draws ``(src, dst)`` as int32 (ids < 2**scale <= 2**31), one bit per
    level: quadrant ``q`` = the number of cumulative probabilities ``<= r`` (what
    ``searchsorted(cum, r, side="right")`` gives), the source bit is ``q >= 2``, the destination
    bit ``q`` odd. Draws ``rng.random(k)`` per level per chunk of ``k`` edges, in that order."""
    src = np.zeros(num_edges, dtype=np.int32)
    dst = np.zeros(num_edges, dtype=np.int32)
    for start in range(0, num_edges, chunk):
        k = min(chunk, num_edges - start)
        s, d = src[start : start + k], dst[start : start + k]
        for level in range(scale):
            r = rng.random(k)
            bit = np.int32(1 << (scale - 1 - level))
            odd = r >= cum[0]
            for c in cum[1:]:
                odd ^= r >= c
            np.bitwise_or(s, bit, out=s, where=r >= cum[1])
            np.bitwise_or(d, bit, out=d, where=odd)
    return src, dst


def rmat(scale: int, num_edges: int, *, num_features: int = 128, num_classes: int = 16,
         probs: tuple[float, float, float, float] = (0.57, 0.19, 0.19, 0.05), noise: float = 4.0,
         seed: int = 0, name: str | None = None, chunk: int = 1 << 22) -> Graph:
    """An R-MAT graph with ``2**scale`` nodes and about ``2 * num_edges`` directed edges after
    symmetrizing (duplicates and self loops are dropped). Labels come from a random class per
    node; features are the class centroid plus noise, so the task is learnable.

    Memory: the draws are int32 (``8`` bytes per draw), the symmetric structure is made from one
    int64 key per direction of each draw, sorted in place (``16`` bytes per draw, which then
    holds the result), and the features are drawn in blocks into their one array."""
    if not 1 <= scale <= 31:
        raise InputError(f"expected 1 <= scale <= 31 (got {scale})")
    if abs(sum(probs) - 1.0) > 1e-6 or min(probs) < 0:
        raise InputError(f"expected non-negative R-MAT probabilities summing to 1 (got {probs})")
    rng = np.random.default_rng(seed)
    n = 1 << scale
    src, dst = _rmat_draws(scale, num_edges, np.cumsum(probs), rng, chunk)
    perm = rng.permutation(n).astype(np.int32)  # break the id/degree correlation R-MAT leaves in node ids
    for a in range(0, num_edges, chunk):
        src[a : a + chunk] = perm[src[a : a + chunk]]
        dst[a : a + chunk] = perm[dst[a : a + chunk]]
    del perm
    indptr, indices = undirected_csr(src, dst, n)
    del src, dst
    y = rng.integers(0, num_classes, n)
    x = _class_features(y, num_features, noise, rng)
    train, val, test = random_split(n, rng)
    return Graph(indptr=indptr, indices=indices, x=x, y=torch.from_numpy(y.astype(np.int64)), train_mask=train,
                 val_mask=val, test_mask=test, name=name or f"rmat-{scale}", num_classes=num_classes)
