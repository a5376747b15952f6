"""Relations of a typed graph and their reverses: which relation the reverse of an edge stands in.

R-GCN (and PyG's ``ToUndirected``) give each relation a reverse relation, so that messages flow both
ways and the reverse of ``(u, v, r)`` is the edge ``(v, u, rev[r])``. Symmetrizing a graph that is
already symmetric in that sense must leave it as it is (``data.preprocess.symmetrize``, and the
streamed writer's ``formats.edge_sort.paired_relations``), and a held-out link must leave the graph
with its reverse (``data.typed.link_split``): both ask :func:`reverse_relation_map`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from fullgraph.data.graph import Graph

__all__ = ["reverse_relation_map", "pairings", "reverses_present"]


def reverse_relation_map(graph: Graph, reverse_relations: bool = True) -> np.ndarray | None:
    """``rev[r]``: the relation in which the reverse of an edge of relation ``r`` stands in a graph that
    holds its reverses, or ``None`` where the relations do not say. A typed graph pairs them by name
    (``rev_<name>`` with its ends swapped, a relation within one type with itself: ``data.typed``);
    a graph with edge types alone, by :func:`pairings`' first that its edges follow."""
    types = graph.node_types
    if types is not None and types.relations:
        from fullgraph.ops.node_types import REVERSE_PREFIX

        index = {rel: i for i, rel in enumerate(types.relations)}
        rev = []
        for s, name, d in types.relations:
            if name.startswith(REVERSE_PREFIX):
                other = (d, name[len(REVERSE_PREFIX):], s)
            else:
                other = (d, REVERSE_PREFIX + name, s) if (d, REVERSE_PREFIX + name, s) in index or s != d else (s, name, d)
            if other not in index:
                return None
            rev.append(index[other])
        return np.asarray(rev, dtype=np.int64)
    return next((rev for rev in pairings(int(graph.num_relations), reverse_relations)
                 if reverses_present(graph, rev)), None)


def pairings(r: int, reverse_relations: bool) -> list[np.ndarray]:
    """The pairings of ``r`` relations a symmetric graph without relation names may follow: each
    relation with itself (a symmetric relation), then, with ``reverse_relations``, ``r`` with
    ``r ± R/2`` (what symmetrizing with reverse relations makes)."""
    out = [np.arange(r, dtype=np.int64)]
    if reverse_relations and r % 2 == 0:
        out.append((np.arange(r, dtype=np.int64) + r // 2) % r)
    return out


def reverses_present(graph: Graph, rev: np.ndarray) -> bool:
    """Whether every typed edge ``(u, v, r)`` has its reverse ``(v, u, rev[r])``; a loop is its own."""
    r = int(graph.num_relations)
    t = graph.edge_type.numpy()
    src, dst = (x.numpy() for x in graph.edges())
    n = graph.num_nodes
    want = np.where(src == dst, t, rev[t])  # a self loop is its own reverse
    if n * n * max(r, 1) < 2**62:  # one int64 key per typed edge
        have = (dst.astype(np.int64) * n + src) * r + t
        return bool(np.isin((src.astype(np.int64) * n + dst) * r + want, have).all())
    pair = np.concatenate([dst.astype(np.int64) * n + src, src.astype(np.int64) * n + dst])  # else: pair, then type
    rel = np.concatenate([t, want])
    order = np.lexsort((rel, pair))
    pair, rel = pair[order], rel[order]
    distinct = 1 + int(np.count_nonzero((pair[1:] != pair[:-1]) | (rel[1:] != rel[:-1]))) if pair.size else 0
    return distinct == t.size  # the graph's triples are distinct: every reverse among them
