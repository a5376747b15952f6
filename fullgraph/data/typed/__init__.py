"""Heterogeneous graphs: build one typed ``Graph`` from per-type pieces (``data.checks.check_node_types``
checks a typed graph).

Every reader of a heterogeneous format (HeCo's ACM and DBLP folders, PyG's ``HeteroData``, OGB's
ogbn-mag layout) ends here, in :func:`typed_graph`: node counts per type, features per type (dense or
sparse, a width of their own, or none), edges per relation in each type's own id space, labels and
splits on one type. It numbers the nodes type after type (``ops.node_types``), lays the features out
side by side in column blocks, adds the reverse relations (R-GCN's and PyG's ``ToUndirected``'s
convention: ``rev_<name>`` between different types; a relation within one type is made symmetric
in place, as ``ToUndirected`` does), and validates each piece against its type with one line that
names it.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.data.graph import Graph
from fullgraph.errors import InputError
from fullgraph.ops.node_types import REVERSE_PREFIX, NodeTypes

__all__ = ["typed_graph", "typed_relations", "typed_features", "typed_feature_blocks"]


def _as_numpy_ids(a, what: str) -> np.ndarray:
    a = a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        raise InputError(f"expected {what} as a 1-D array of integer ids (got shape {a.shape}, dtype {a.dtype})")
    return a.astype(np.int64, copy=False)


def _feature_block(f, rows: int, name: str) -> torch.Tensor | None:
    """Type ``name``'s features as float32 (dense, or sparse CSR), checked to have one row per node."""
    if f is None:
        return None
    if not isinstance(f, torch.Tensor):
        from fullgraph.data.formats._common import features_to_torch

        f = features_to_torch(f, f"the features of node type {name!r}")
    if f.layout == torch.sparse_coo:
        f = f.coalesce().to_sparse_csr()
    if f.dim() != 2 or f.shape[0] != rows:
        raise InputError(f"expected the features of node type {name!r} to have one row per node, {rows} rows "
                         f"(got shape {tuple(f.shape)})")
    return f.to(torch.float32)


def typed_feature_blocks(counts: dict, features: dict) -> list:
    """Each type's features (``counts``' order) as :func:`typed_features` takes them: float32, dense or
    sparse CSR, checked to have one row per node; ``None`` for a type without features."""
    return [_feature_block(features.get(str(t)), int(counts[t]), str(t)) for t in counts]


def typed_features(types: NodeTypes, blocks: list) -> torch.Tensor:
    """The one feature matrix of a typed graph: type ``t``'s block of ``widths[t]`` columns on its rows.
    Dense where at most one type has features and they are dense (ogbn-mag's papers: the other types'
    rows are zero), else sparse CSR (a block-diagonal matrix stored dense would be mostly zeros)."""
    featured = [t for t, b in enumerate(blocks) if b is not None and b.shape[1] > 0]
    n, width = types.num_nodes, types.num_features
    if len(featured) <= 1 and all(blocks[t].layout == torch.strided for t in featured):
        x = torch.zeros(n, max(width, 1) if not featured else width)
        for t in featured:
            x[types.offsets[t] : types.offsets[t + 1]] = blocks[t]
        return x
    crows, cols, vals = [torch.zeros(1, dtype=torch.int64)], [], []
    nnz = 0
    for t in range(types.num_types):
        b = blocks[t]
        if b is None or b.shape[1] == 0:
            crows.append(torch.full((types.counts[t],), nnz, dtype=torch.int64))
            continue
        b = b if b.layout == torch.sparse_csr else b.to_sparse_csr()
        crows.append(b.crow_indices()[1:] + nnz)
        cols.append(b.col_indices() + types.column_offsets[t])
        vals.append(b.values())
        nnz += b.values().numel()
    empty = torch.zeros(0, dtype=torch.int64)
    return torch.sparse_csr_tensor(torch.cat(crows), torch.cat(cols) if cols else empty,
                                   torch.cat(vals) if vals else torch.zeros(0), size=(n, width),
                                   check_invariants=False)  # each block's were checked, and the offsets keep them


def typed_relations(relations, reverse: bool = True) -> tuple[tuple[str, str, str], ...]:
    """The relations of a typed graph in the order :func:`typed_graph` numbers them: the given ones, then,
    with ``reverse``, the reverse (``rev_<name>``, ends swapped) of each relation between two types (one
    within a type is made symmetric in place instead). The streamed converter numbers them by this too."""
    rels = tuple(tuple(str(k) for k in r) for r in relations)
    return rels + (tuple((d, REVERSE_PREFIX + n, s) for s, n, d in rels if s != d) if reverse else ())


def _relation_edges(types: NodeTypes, edges: dict, reverse: bool):
    """Global ``(src, dst, type)`` of every relation's edges (and their reverses), and the relations."""
    relations, parts = [], []
    for key, pair in edges.items():
        if not (isinstance(key, tuple) and len(key) == 3):
            raise InputError(f"expected each relation keyed (source type, name, destination type) (got {key!r})")
        s, name, d = (str(k) for k in key)
        for end in (s, d):
            if end not in types.names:
                raise InputError(f"expected relation {s}__{name}__{d} to join known node types "
                                 f"({', '.join(types.names)}) (got an unknown type {end!r})")
        src, dst = _as_numpy_ids(pair[0], f"the sources of {s}__{name}__{d}"), _as_numpy_ids(
            pair[1], f"the destinations of {s}__{name}__{d}")
        if src.size != dst.size:
            raise InputError(f"expected as many sources as destinations in relation {s}__{name}__{d} (got {src.size} "
                             f"and {dst.size})")
        for ids, t in ((src, s), (dst, d)):
            count = types.counts[types.index(t)]
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= count):
                bad = int(ids.max()) if int(ids.max()) >= count else int(ids.min())
                raise InputError(f"expected ids of node type {t!r} in [0, {count}) in relation {s}__{name}__{d} "
                                 f"(got {bad})")
        gs, gd = src + types.offsets[types.index(s)], dst + types.offsets[types.index(d)]
        if reverse and s == d:  # symmetric in place, as ToUndirected makes a relation within one type
            gs, gd = np.concatenate([gs, gd]), np.concatenate([gd, gs])
        relations.append((s, name, d))
        parts.append((gs, gd))
    if reverse:  # rev_<name> for the relations between two types, in typed_relations' order
        parts += [(parts[r][1], parts[r][0]) for r, (s, _, d) in enumerate(relations) if s != d]
    rel_types = NodeTypes(types.names, types.counts, types.widths, typed_relations(relations, reverse), types.labelled)
    src = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
    dst = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    etype = np.concatenate([np.full(p[0].size, r, np.int64) for r, p in enumerate(parts)]) if parts else src
    src, dst, etype = _distinct(src, dst, etype, types.num_nodes, len(parts))
    return src, dst, etype, rel_types


def _distinct(src: np.ndarray, dst: np.ndarray, etype: np.ndarray, n: int, relations: int):
    """The edges sorted by (relation, dst, src), a pair listed twice in one relation kept once (R-GCN's
    mean counts each neighbour once): one int64 key per edge where it fits, sorted, not ``np.unique``
    over records (seconds per million edges)."""
    if src.size == 0:
        return src, dst, etype
    if relations * n * n < 2**62:
        key = (etype * n + dst) * n + src
        key.sort()
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]
        return key % n, key // n % n, key // (n * n)
    order = np.lexsort((src, dst, etype))
    src, dst, etype = src[order], dst[order], etype[order]
    keep = np.concatenate([[True], (src[1:] != src[:-1]) | (dst[1:] != dst[:-1]) | (etype[1:] != etype[:-1])])
    return src[keep], dst[keep], etype[keep]


def typed_graph(counts: dict, features: dict, edges: dict, labels: tuple, splits: dict, *, name: str = "graph",
                num_classes: int | None = None, reverse: bool = True):
    """One typed ``Graph`` from per-type pieces.

    Args:
        counts: ``{type: number of nodes}``, in the order ids are given (dicts keep it).
        features: ``{type: [n_t, F_t] dense or scipy/torch sparse}``; a type left out has no features.
        edges: ``{(source type, name, destination type): (src ids, dst ids)}``, ids in each type's own space.
        labels: ``(type, y)``: int64 ``[n_type]`` labels (``-1``: none) of the labelled type.
        splits: ``{"train" | "val" | "test": ids of the labelled type}``.
        reverse: add the reverse relations (module docstring).
    """
    names = tuple(str(k) for k in counts)
    for t in features:
        if str(t) not in names:
            raise InputError(f"expected features for a known node type ({', '.join(names)}) (got {t!r})")
    blocks = typed_feature_blocks(counts, features)
    widths = tuple(0 if b is None else int(b.shape[1]) for b in blocks)
    label_type, y_t = labels
    types = NodeTypes(names, tuple(int(counts[t]) for t in names), widths, (), (str(label_type),))
    src, dst, etype, types = _relation_edges(types, edges, reverse)
    lt = types.index(str(label_type))
    lo, n_t = types.offsets[lt], types.counts[lt]
    y_t = torch.as_tensor(np.asarray(y_t)).long()
    if y_t.shape != (n_t,):
        raise InputError(f"expected one label per node of type {label_type!r}, {n_t} (got shape {tuple(y_t.shape)})")
    y = torch.full((types.num_nodes,), -1, dtype=torch.int64)
    y[lo : lo + n_t] = y_t
    masks = {}
    for split in ("train", "val", "test"):
        if split not in splits:
            raise InputError(f"expected a {split} split of the labelled type {label_type!r} (got splits "
                             f"{sorted(splits)})")
        ids = _as_numpy_ids(splits[split], f"the {split} split")
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n_t):
            raise InputError(f"expected {split} ids of node type {label_type!r} in [0, {n_t}) (got "
                             f"{int(ids.max()) if int(ids.max()) >= n_t else int(ids.min())})")
        m = torch.zeros(types.num_nodes, dtype=torch.bool)
        m[torch.from_numpy(ids) + lo] = True
        masks[f"{split}_mask"] = m
    x = typed_features(types, blocks)
    return Graph.from_edges(torch.from_numpy(src), torch.from_numpy(dst), types.num_nodes,
                            edge_type=torch.from_numpy(etype), num_relations=types.num_relations, x=x, y=y,
                            name=name, num_classes=num_classes, node_types=types, **masks)
