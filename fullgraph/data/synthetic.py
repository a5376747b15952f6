"""Synthetic graphs, deterministic by seed.

* ``planted_partition``: the built-in default graph. Nodes fall into classes; most edges stay
  inside a class (homophily ``h``) and features are a noisy class centroid, noisy enough that a
  feature-only model is clearly worse than a GCN that also reads the neighbours.
* ``rmat``: a power-law graph (Chakrabarti et al.'s recursive matrix) from 10^5 to 10^8 edges, for
  scale and benchmarks. Edges are drawn in chunks so memory stays near the size of the output.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.data.graph import Graph
from fullgraph.data.preprocess import remove_self_loops, symmetrize
from fullgraph.errors import InputError

__all__ = ["planted_partition", "rmat", "random_split"]


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
    classes = int(y.max()) + 1
    centroids = rng.standard_normal((classes, num_features)).astype(np.float32)
    x = centroids[y] + noise * rng.standard_normal((y.size, num_features)).astype(np.float32)
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
    g = Graph.from_edges(src, dst, num_nodes, x=x, y=torch.from_numpy(y.astype(np.int64)),
                         train_mask=train, val_mask=val, test_mask=test, name=name, num_classes=num_classes)
    return remove_self_loops(symmetrize(g))


def rmat(scale: int, num_edges: int, *, num_features: int = 128, num_classes: int = 16,
         probs: tuple[float, float, float, float] = (0.57, 0.19, 0.19, 0.05), noise: float = 4.0,
         seed: int = 0, name: str | None = None, chunk: int = 1 << 22) -> Graph:
    """An R-MAT graph with ``2**scale`` nodes and about ``2 * num_edges`` directed edges after
    symmetrizing (duplicates and self loops are dropped). Labels come from a random class per
    node; features are the class centroid plus noise, so the task is learnable."""
    if not 1 <= scale <= 31:
        raise InputError(f"expected 1 <= scale <= 31 (got {scale})")
    if abs(sum(probs) - 1.0) > 1e-6:
        raise InputError(f"expected R-MAT probabilities summing to 1 (got {probs})")
    rng = np.random.default_rng(seed)
    n = 1 << scale
    cum = np.cumsum(probs)
    srcs, dsts = [], []
    for start in range(0, num_edges, chunk):
        k = min(chunk, num_edges - start)
        s = np.zeros(k, dtype=np.int64)
        d = np.zeros(k, dtype=np.int64)
        for level in range(scale):
            r = rng.random(k)
            quad = np.searchsorted(cum, r, side="right")  # 0: a, 1: b, 2: c, 3: d
            bit = np.int64(1) << (scale - 1 - level)
            s |= np.where(quad >= 2, bit, 0)
            d |= np.where(quad % 2 == 1, bit, 0)
        srcs.append(s)
        dsts.append(d)
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    perm = rng.permutation(n)  # break the id/degree correlation R-MAT leaves in node ids
    src, dst = perm[src], perm[dst]
    y = rng.integers(0, num_classes, n)
    x = _class_features(y, num_features, noise, rng)
    train, val, test = random_split(n, rng)
    g = Graph.from_edges(src, dst, n, x=x, y=torch.from_numpy(y.astype(np.int64)), train_mask=train,
                         val_mask=val, test_mask=test, name=name or f"rmat-{scale}", num_classes=num_classes)
    return remove_self_loops(symmetrize(g))
