"""A synthetic typed (heterogeneous) graph: R-MAT-like relations between node types, for ``fullgraph generate typed``.

Typed graphs reach every layout and R-GCN through the same ``Graph`` (``ops.node_types``); this makes one
of any size without a download, through the one builder every heterogeneous reader ends in
(:func:`~fullgraph.data.typed.typed_graph`), so what it writes is what a reader would have made.

* ``T`` node types ``type0 .. type{T-1}``, sizes falling as ``1/(t+1)`` (type 0 the largest), ids
  contiguous per type;
* ``R`` relations ``rel{r}``, each joining a pair of types no other joins (a pair of nodes in two
  relations would be one edge of two types): first the chain ``type{a} -> type{a+1 mod T}``, then
  longer jumps, then each type with itself (made symmetric in place; the others get ``rev_rel{r}``,
  as ``typed_graph`` adds them), at most ``T (T + 1) / 2``;
* each relation's edges are R-MAT draws (``synthetic.rmat``'s generator) on the smallest power-of-two
  square holding both types, folded onto their counts and shuffled per type (a few hubs, many leaves);
  self loops are dropped and repeats merged, so a relation has somewhat fewer edges than drawn;
* features on the even types (``F`` columns each; type 0's a class centroid plus noise, so the task
  is learnable, the others noise), none on the odd ones (R-GCN gives them embeddings);
* labels and a 10/10/80 split on type 0 only.

Memory: the draws (8 bytes per drawn edge, int32), their type-local int64 ends (16 bytes per edge), then
``typed_graph``'s global edge list with the reverses and its ``np.unique`` (several int64 copies of the
``2E`` directed edges), then the CSR: about 140 bytes per stored edge at the peak. ``fullgraph generate
typed --nodes 1000000 --edges 10000000`` (19.7M stored edges) peaked at 2.9 GiB RSS, 0.25 GiB of it the
imports, and took 112 s on a busy 2-core machine, most of it ``typed_graph``'s ``np.unique``.
"""

from __future__ import annotations

import numpy as np

from fullgraph.data.graph import Graph
from fullgraph.data.synthetic import _class_features, _rmat_draws, random_split
from fullgraph.errors import InputError

__all__ = ["typed_rmat", "typed_sizes", "typed_relations"]


def typed_sizes(num_nodes: int, num_types: int) -> list[int]:
    """Nodes per type, ``1/(t+1)`` shares of ``num_nodes`` (each at least 1; the rounding's rest to type 0)."""
    share = 1.0 / np.arange(1, num_types + 1)
    sizes = np.maximum(1, np.floor(num_nodes * share / share.sum()).astype(np.int64))
    sizes[0] += num_nodes - int(sizes.sum())
    return [int(s) for s in sizes]


def typed_relations(num_types: int, num_relations: int) -> list[tuple[str, str, str]]:
    """``(source type, name, destination type)`` of each relation (module doc): each pair of types joined
    by one relation at most, since a pair of nodes in two relations would be one edge of two types."""
    pairs = [(a, (a + j) % num_types) for j in range(1, num_types // 2 + 1) for a in range(num_types)
             if 2 * j < num_types or a < j]
    pairs += [(a, a) for a in range(num_types)]
    if not 1 <= num_relations <= len(pairs):
        raise InputError(f"expected 1 <= --relations <= {len(pairs)}, the pairs of {num_types} node types, each "
                         f"joined by one relation at most (got {num_relations})")
    return [(f"type{a}", f"rel{r}", f"type{b}") for r, (a, b) in enumerate(pairs[:num_relations])]


def _relation_edges(ns: int, nd: int, m: int, same: bool, perms: tuple, rng: np.random.Generator):
    """``m`` R-MAT draws between types of ``ns`` and ``nd`` nodes, folded and shuffled; no self loops."""
    scale = max(1, int(np.ceil(np.log2(max(ns, nd)))))
    s, d = _rmat_draws(scale, m, np.cumsum((0.57, 0.19, 0.19, 0.05)), rng, 1 << 22)
    s = perms[0][s.astype(np.int64) % ns]
    d = perms[1][d.astype(np.int64) % nd]
    if same:
        keep = s != d
        s, d = s[keep], d[keep]
    return s, d


def typed_rmat(num_nodes: int, num_edges: int, *, num_types: int = 3, num_relations: int = 4,
               num_features: int = 32, num_classes: int = 8, noise: float = 4.0, seed: int = 0,
               name: str | None = None) -> Graph:
    """A typed graph of ``num_nodes`` nodes and about ``2 * num_edges`` directed edges (module doc), already
    preprocessed: symmetric (every relation has its reverse), no self loops, no repeated edges."""
    from fullgraph.data.typed import typed_graph

    if not 1 <= num_types <= num_nodes // 4:
        raise InputError(f"expected 1 <= --node-types <= --nodes / 4 (got {num_types} types for {num_nodes} nodes)")
    relations = typed_relations(num_types, num_relations)
    if num_edges < num_relations:
        raise InputError(f"expected --edges >= --relations (got {num_edges} edges, {num_relations} relations)")
    rng = np.random.default_rng(seed)
    counts = {f"type{t}": n for t, n in enumerate(typed_sizes(num_nodes, num_types))}
    perms = {t: rng.permutation(n) for t, n in counts.items()}
    edges = {}
    for r, (s, rel, d) in enumerate(relations):
        m = num_edges // num_relations + (r < num_edges % num_relations)
        edges[(s, rel, d)] = _relation_edges(counts[s], counts[d], m, s == d, (perms[s], perms[d]), rng)
    del perms
    n0 = counts["type0"]
    y = rng.integers(0, num_classes, n0)
    y[:num_classes] = np.arange(min(num_classes, n0))  # every class present: num_classes is what it says
    features = {t: (_class_features(y, num_features, noise, rng) if t == "type0"
                    else rng.standard_normal((n, num_features), dtype=np.float32))
                for i, (t, n) in enumerate(counts.items()) if i % 2 == 0}
    splits = {k: np.flatnonzero(m.numpy()) for k, m in zip(("train", "val", "test"), random_split(n0, rng))}
    return typed_graph(counts, features, edges, ("type0", y), splits, name=name or f"typed-{num_types}x{num_relations}",
                       num_classes=num_classes, reverse=True)
