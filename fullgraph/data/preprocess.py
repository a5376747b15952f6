"""Structure preprocessing: symmetrize, deduplicate, self loops; the normalizations by name.

All functions work on in-edge CSR (``indptr``, ``indices``) as in ``Graph``. The structure passes
(``symmetrize``, ``dedupe``, ``remove_self_loops``) work on one sorted int64 key per edge
(``row * N + col``), made and sorted in place and turned into the result in its own memory, so a
10^8-edge graph needs no int64 or SciPy copies beyond that key array. Â itself is built in one place
for every layout, :mod:`fullgraph.ops.adjacency`; ``normalized``, ``gcn_norm`` and ``mean_norm``
here are its names for data-layer callers.

Edge data (``Graph.edge_weight``, ``edge_attr``, ``edge_type``) travels with its edges through every
pass here; a graph without any takes exactly the passes above, bit for bit. A graph with edge data
lists each edge once, rows sorted (``Graph``'s rule), so the passes pick entries by position
(one ``argsort`` of the keys, stable, so that of two equal keys the first listed wins) and gather
the data by the same positions:

* :func:`symmetrize`: a reverse edge ``v -> u`` added for ``u -> v`` gets that edge's weight and
  features; where both ``u -> v`` and ``v -> u`` exist each keeps its own data; a typed graph's
  reverse edges get relations of their own, type ``t + R`` for a reverse of type ``t``, and
  ``num_relations`` doubles to ``2R`` (R-GCN's inverse relations; ``reverse_relations=False``
  keeps type ``t``, for relations that are symmetric by nature). A typed edge is keyed by
  ``(src, dst, relation)``: ``u -> v`` in two relations is two edges, each with its own reverse,
  and ``u -> v`` of type 0 beside ``v -> u`` of type 1 gains ``v -> u`` of type ``R`` (its reverse
  relation) beside its own; a self loop is its own reverse. A
  graph already symmetric is returned as it is (same data, same ``R``), so symmetrizing twice is
  symmetrizing once: untyped, every pair's reverse is there; typed, every edge's reverse is there
  in its reverse relation (``data.typed.relations.reverse_relation_map``).
* :func:`remove_self_loops`: a loop's data goes with it.
* :func:`add_self_loops`: a loop that exists keeps its data; an added one gets weight 1, the mean
  of its node's in-edges' features (zeros without any) and type ``R``, a relation of its own
  (``num_relations`` becomes ``R + 1``): what a normalization's loops get (``ops.edge_data``).
* :func:`dedupe`: a graph with edge data has no repeats; it is returned with its data.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fullgraph.data import edge_list as _edge_list
from fullgraph.data.edge_list import checked_edges, csr_from_sorted_keys, row_blocks, shrink_, unique_sorted_
from fullgraph.data.graph import Graph
from fullgraph.data.typed.relations import reverse_relation_map, reverses_present
from fullgraph.ops.adjacency import normalized
from fullgraph.ops.csr import indptr_from_counts, row_ids

__all__ = [
    "to_scipy",
    "from_scipy",
    "symmetrize",
    "remove_self_loops",
    "add_self_loops",
    "gcn_norm",
    "mean_norm",
    "normalized",
    "row_normalize_features",
    "dedupe",
    "undirected_csr",
    "self_loop_positions",
    "is_standard_structure",
]


def to_scipy(indptr: torch.Tensor, indices: torch.Tensor, num_cols: int | None = None,
             values: torch.Tensor | None = None) -> sp.csr_matrix:
    n = indptr.numel() - 1
    data = np.ones(indices.numel(), dtype=np.float32) if values is None else values.numpy()
    # copies: SciPy sorts and merges in place, and the caller's tensors must stay untouched
    return sp.csr_matrix((data.copy(), indices.numpy().copy(), indptr.numpy().copy()), shape=(n, num_cols or n))


def from_scipy(m: sp.spmatrix) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(indptr, indices, values)`` of a SciPy matrix, canonical (sorted, no duplicates)."""
    m = sp.csr_matrix(m)
    m.sum_duplicates()
    m.sort_indices()
    return (
        torch.from_numpy(m.indptr.astype(np.int64)),
        torch.from_numpy(m.indices.astype(np.int64)),
        torch.from_numpy(m.data.astype(np.float32)),
    )


def _structure(m: sp.spmatrix) -> tuple[torch.Tensor, torch.Tensor]:
    """Canonical ``(indptr, indices)`` of ``m``'s non-zero pattern (duplicates merged, sorted)."""
    indptr, indices, _ = from_scipy(_unit_values(m))
    return indptr, indices


def _edge_keys(indptr: torch.Tensor, indices: torch.Tensor, *, transposed_too: bool = False) -> np.ndarray:
    """int64 ``row * N + col`` of every edge (then, with ``transposed_too``, ``col * N + row`` of
    every edge), filled block by block: the one edge-sized temporary of the structure passes."""
    ip, ix = indptr.numpy(), indices.numpy()
    n, e = ip.size - 1, ix.size
    keys = np.empty(2 * e if transposed_too else e, dtype=np.int64)
    for r0, r1 in row_blocks(ip):
        a, b = int(ip[r0]), int(ip[r1])
        rows = row_ids(ip, r0, r1)
        k = keys[a:b]
        np.multiply(rows, n, out=k)
        k += ix[a:b]
        if transposed_too:
            k = keys[e + a : e + b]
            np.multiply(ix[a:b], n, out=k)
            k += rows
    return keys


def _canonical(keys: np.ndarray, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted, repeat-free CSR of the edge keys, made in ``keys``'s own memory."""
    keys.sort()
    return csr_from_sorted_keys(shrink_(keys, unique_sorted_(keys)), n)


def symmetrize(graph: Graph, *, reverse_relations: bool = True) -> Graph:
    """``A ∪ Aᵀ`` with duplicate edges dropped (self loops are kept as they are).

    Sorts one int64 key per edge and per reversed edge in place (``16 E`` bytes, the only
    edge-sized temporary), which then holds the result.

    With edge data (module doc): a reverse edge copies its edge's weight and features; an edge
    whose reverse exists keeps its own; ``reverse_relations``: a typed graph's reverse edges get
    type ``t + R`` and ``num_relations`` ``2R`` (R-GCN's inverse relations), else keep type ``t``.
    The data path sorts with positions: ``16 E`` bytes of keys and ``16 E`` of positions."""
    if graph.edge_kinds:
        return _symmetrize_with_data(graph, reverse_relations)
    keys = _edge_keys(graph.indptr, graph.indices, transposed_too=True)
    return graph.with_structure(*_canonical(keys, graph.num_nodes))


def _unchanged(graph: Graph) -> Graph:
    """The same edges with their data (a pass that found nothing to do)."""
    return graph.with_structure(graph.indptr, graph.indices, **graph.edge_fields())


def _gather(graph: Graph, pos: torch.Tensor) -> dict:
    """The graph's edge fields taken at the entry positions ``pos`` (``num_relations`` kept)."""
    return {k: (v[pos] if isinstance(v, torch.Tensor) else v) for k, v in graph.edge_fields().items()}


def _entries(keys: np.ndarray, types: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct ``keys`` and, for each, the position of its first occurrence in ``keys``
    (the stable sort makes the first listed win among equal keys). With ``types`` an entry is the
    pair ``(key, type)``, sorted by key then type: the distinct keys may then repeat, once per type."""
    order = np.argsort(keys, kind="stable") if types is None else np.lexsort((types, keys))
    keys = keys[order]
    first = np.ones(keys.size, dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    if types is not None and keys.size:
        t = types[order]
        first[1:] |= t[1:] != t[:-1]
    return keys[first], order[first]


def _typed_symmetric(graph: Graph, reverse_relations: bool) -> bool:
    """Whether every typed edge ``(u, v, r)`` has its reverse ``(v, u, rev[r])`` (module doc)."""
    rev = reverse_relation_map(graph, reverse_relations)
    if rev is None:
        return False
    return graph.node_types is None or not graph.node_types.relations or reverses_present(graph, rev)


def _symmetrize_with_data(graph: Graph, reverse_relations: bool) -> Graph:
    n, e = graph.num_nodes, graph.num_edges
    types = graph.node_types
    typed = graph.edge_type is not None
    if typed and _typed_symmetric(graph, reverse_relations):
        return _unchanged(graph)  # already symmetric: its data and relation count as they are
    r = int(graph.num_relations) if typed else 0
    renamed = typed and (reverse_relations or types is not None)  # a typed graph's reverse edges join other ends
    if typed:  # edges keyed by (src, dst, relation): a reverse edge stands in relation t + R (or t);
        t = graph.edge_type.numpy()  # a self loop is its own reverse, in its own relation
        both = _edge_keys(graph.indptr, graph.indices, transposed_too=True)
        back = t + r if renamed else t
        if renamed:
            back = np.where(both[:e] == both[e:], t, back)
        keys, kept = _entries(both, np.concatenate([t, back]))
        del both, back
    else:
        keys, kept = _entries(_edge_keys(graph.indptr, graph.indices, transposed_too=True))
    reverse = kept >= e  # an added reverse edge: the forward entries come first among equal keys
    if not reverse.any():
        return _unchanged(graph)  # already symmetric: its data and relation count as they are
    kept[reverse] -= e
    edge = _gather(graph, torch.from_numpy(kept))
    if renamed:
        edge["edge_type"] = edge["edge_type"] + r * torch.from_numpy(reverse)
        edge["num_relations"] = 2 * r
    del kept, reverse
    indptr, indices = csr_from_sorted_keys(keys, n)
    if types is not None and types.relations:
        from fullgraph.data.graph import Graph

        g = graph  # the same fields but the edges and the relations (``rev_<name>`` for relation r + R)
        return Graph(indptr=indptr, indices=indices, x=g.x, y=g.y, train_mask=g.train_mask, val_mask=g.val_mask,
                     test_mask=g.test_mask, name=g.name, num_classes=g.num_classes, node_types=types.with_reverse(),
                     **edge)
    return graph.with_structure(indptr, indices, **edge)


def undirected_csr(src, dst, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The standard structure of an edge list straight from the list: the in-edge CSR of
    ``A ∪ Aᵀ`` without repeats or self loops, exactly ``remove_self_loops(symmetrize(...))`` of
    ``Graph.from_edges(src, dst, ...)``, with one int64 key per direction of every edge that is
    not a loop (``16 E`` bytes for ``E`` input edges) as the only edge-sized temporary, which
    then holds the result. ``src`` and ``dst`` may be int32 (they are read, never copied whole)."""
    src, dst = checked_edges(src, dst, num_nodes)
    keys = np.empty(2 * src.size, dtype=np.int64)
    w = 0
    step = _edge_list.EDGE_BLOCK
    for a in range(0, src.size, step):
        s, d = src[a : a + step], dst[a : a + step]
        pair = s != d
        s, d = s[pair].astype(np.int64), d[pair].astype(np.int64)
        m = s.size
        np.multiply(d, num_nodes, out=keys[w : w + m])
        keys[w : w + m] += s
        np.multiply(s, num_nodes, out=keys[w + m : w + 2 * m])
        keys[w + m : w + 2 * m] += d
        w += 2 * m
    return _canonical(shrink_(keys, w), num_nodes)


def is_standard_structure(indptr: torch.Tensor, indices: torch.Tensor, types: torch.Tensor | None = None) -> bool:
    """Whether the CSR is what the loaders leave (``fullgraph.data.datasets.preprocess``):
    symmetric, rows strictly ascending (no repeated edge), no self loops. Exact: the reversed
    edges' int64 keys are sorted (``8 E`` bytes, in place) and compared with the CSR's own, which
    a sorted repeat-free CSR already lists in order; the other checks go block by block. ``types``:
    the entries' relations, where an edge is ``(src, dst, relation)``: a row ascends by column then
    relation, and a pair in ``k`` relations wants its reverse pair in ``k`` too."""
    ip, ix = indptr.numpy(), indices.numpy()
    tp = None if types is None else types.numpy()
    n, e = ip.size - 1, ix.size
    for r0, r1 in row_blocks(ip):
        a, b = int(ip[r0]), int(ip[r1])
        rows, cols = row_ids(ip, r0, r1), ix[a:b]
        same_row = rows[1:] == rows[:-1]
        if tp is None:
            falls = cols[1:] <= cols[:-1]
        else:
            t = tp[a:b]
            falls = (cols[1:] < cols[:-1]) | ((cols[1:] == cols[:-1]) & (t[1:] <= t[:-1]))
        if bool((cols == rows).any()) or bool((falls & same_row).any()):
            return False
    if not np.array_equal(np.bincount(ix, minlength=n), np.diff(ip)):  # in-degree = out-degree first
        return False
    reverse = np.empty(e, dtype=np.int64)
    for r0, r1 in row_blocks(ip):
        a, b = int(ip[r0]), int(ip[r1])
        np.multiply(ix[a:b], n, out=reverse[a:b])
        reverse[a:b] += row_ids(ip, r0, r1)
    reverse.sort()
    for r0, r1 in row_blocks(ip):
        a, b = int(ip[r0]), int(ip[r1])
        forward = row_ids(ip, r0, r1)
        forward *= n
        forward += ix[a:b]
        if not np.array_equal(forward, reverse[a:b]):
            return False
    return True


def self_loop_positions(indptr: torch.Tensor, indices: torch.Tensor) -> np.ndarray:
    """Positions in ``indices`` of the edges ``v -> v`` (found block by block)."""
    ip, ix = indptr.numpy(), indices.numpy()
    found = [np.flatnonzero(ix[int(ip[r0]) : int(ip[r1])] == row_ids(ip, r0, r1)) + int(ip[r0])
             for r0, r1 in row_blocks(ip)]
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def remove_self_loops(graph: Graph) -> Graph:
    """Drop every edge ``v -> v`` (a mask over the CSR, so row order and sorting are kept).

    A graph without self loops keeps its arrays (no copy); otherwise the new ``indices`` is the one
    edge-sized array made."""
    loops = self_loop_positions(graph.indptr, graph.indices)
    if loops.size == 0:
        return _unchanged(graph)
    keep = np.ones(graph.num_edges, dtype=bool)
    keep[loops] = False
    indices = torch.from_numpy(graph.indices.numpy()[keep])
    edge = _gather(graph, torch.from_numpy(keep)) if graph.edge_kinds else {}
    del keep
    ip = graph.indptr.numpy()
    per_row = np.bincount(np.searchsorted(ip, loops, side="right") - 1, minlength=graph.num_nodes)
    return graph.with_structure(torch.from_numpy(indptr_from_counts(np.diff(ip) - per_row)), indices, **edge)


def add_self_loops(graph: Graph) -> Graph:
    """Every node gets exactly one self loop (existing ones are not doubled). With edge data an
    added loop gets weight 1, its node's mean in-edge features and type ``R`` (module doc)."""
    if graph.edge_kinds:
        return _add_self_loops_with_data(graph)
    a = to_scipy(graph.indptr, graph.indices)
    a = a + sp.identity(graph.num_nodes, dtype=np.float32, format="csr")
    return graph.with_structure(*_structure(a))


def _add_self_loops_with_data(graph: Graph) -> Graph:
    n, e = graph.num_nodes, graph.num_edges
    ip, ix = graph.indptr.numpy(), graph.indices.numpy()
    has = np.zeros(n, dtype=bool)
    has[ix[self_loop_positions(graph.indptr, graph.indices)]] = True
    missing = np.flatnonzero(~has)
    if missing.size == 0:
        return _unchanged(graph)
    r = None if graph.edge_type is None else int(graph.num_relations)
    keys, kept = _entries(np.concatenate([_edge_keys(graph.indptr, graph.indices), missing * (n + 1)]),
                          None if r is None else np.concatenate([graph.edge_type.numpy(), np.full(missing.size, r)]))
    added = kept >= e
    old = torch.from_numpy(kept[~added])
    real, loop = torch.from_numpy(~added), torch.from_numpy(added)
    edge = {}

    def fill(values: torch.Tensor, loops) -> torch.Tensor:
        out = torch.empty((keys.size, *values.shape[1:]), dtype=values.dtype)
        out[real] = values[old]
        out[loop] = loops
        return out

    if graph.edge_weight is not None:
        edge["edge_weight"] = fill(graph.edge_weight, 1.0)
    if graph.edge_attr is not None:  # the mean of each node's in-edges' features (zeros for none, as PyG's)
        rows = torch.from_numpy(row_ids(ip))
        sums = torch.zeros(n, graph.edge_attr.shape[1], dtype=torch.float64).index_add_(0, rows,
                                                                                        graph.edge_attr.double())
        mean = sums / torch.bincount(rows, minlength=n).clamp(min=1).unsqueeze(1)
        edge["edge_attr"] = fill(graph.edge_attr, mean[torch.from_numpy(missing)].to(graph.edge_attr.dtype))
    if r is not None:
        edge["edge_type"], edge["num_relations"] = fill(graph.edge_type, r), r + 1
    indptr, indices = csr_from_sorted_keys(keys, n)
    return graph.with_structure(indptr, indices, **edge)


def dedupe(graph: Graph) -> Graph:
    """The same edges without repeats, each row sorted (one int64 key per edge, sorted in place).
    A graph with edge data has none (``Graph``'s rule): it comes back with its data."""
    if graph.edge_kinds:
        return _unchanged(graph)
    return graph.with_structure(*_canonical(_edge_keys(graph.indptr, graph.indices), graph.num_nodes))


def _unit_values(a: sp.csr_matrix) -> sp.csr_matrix:
    """The structure of ``a`` with every value 1: duplicates merged."""
    a = sp.csr_matrix(a)
    a.sum_duplicates()
    a.data[:] = 1.0
    return a


def gcn_norm(indptr: torch.Tensor, indices: torch.Tensor):
    """``D^-1/2 (A+I) D^-1/2`` as CSR ``(indptr, indices, values)``: :func:`normalized` ``"gcn"``."""
    return normalized(indptr, indices, "gcn")


def mean_norm(indptr: torch.Tensor, indices: torch.Tensor):
    """Row-normalized ``A`` as CSR ``(indptr, indices, values)``: :func:`normalized` ``"mean"``."""
    return normalized(indptr, indices, "mean")


def row_normalize_features(graph: Graph) -> Graph:
    """Divide each feature row by its sum (rows summing to 0 stay 0), as Kipf & Welling's loader does."""
    x = graph.x
    if x.layout == torch.sparse_csr:
        rows = row_ids(x.crow_indices())
        sums = torch.zeros(x.shape[0], dtype=x.dtype).index_add_(0, rows, x.values())
        inv = torch.where(sums != 0, 1.0 / sums, torch.zeros_like(sums))
        vals = x.values() * inv[rows]
        x = torch.sparse_csr_tensor(x.crow_indices(), x.col_indices(), vals, size=x.shape, check_invariants=False)
    else:
        sums = x.sum(1, keepdim=True)
        x = x * torch.where(sums != 0, 1.0 / sums, torch.zeros_like(sums))
    return Graph(indptr=graph.indptr, indices=graph.indices, x=x, y=graph.y, train_mask=graph.train_mask,
                 val_mask=graph.val_mask, test_mask=graph.test_mask, name=graph.name,
                 num_classes=graph.num_classes, node_types=graph.node_types, **graph.edge_fields())
