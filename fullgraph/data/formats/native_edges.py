"""A native folder written from edges that arrive in blocks: a graph larger than memory.

:func:`write_native_edges` checks the blocks as they come (:func:`_edge_pairs`), sorts them on disk
(:mod:`.edge_sort`: spilled, split by destination into row ranges small enough to sort in memory,
each range sorted and deduplicated on its way into ``indices.npy``; the folder: :mod:`.native`),
and writes the node data and ``meta.json``. Node data comes as arrays, or as :class:`Rows`, an
array that arrives in row blocks (a converter reading a compressed archive), so that neither the
edges nor the features are ever held whole.

Edges may carry data (a weight, features, a type: ``Graph.edge_weight``, ``edge_attr``,
``edge_type``): each spilled edge is then a record of its ends, the flag of a reverse edge added by
symmetrizing, and its data, and the data leaves the sort in CSR order beside ``indices.npy``
(``edge_weight.npy``, ``edge_attr.npy``, ``edge_type.npy``, format version 3). What is stored is
what :func:`fullgraph.data.datasets.preprocess` makes of ``Graph.from_edges`` of the same edges
(:mod:`fullgraph.data.preprocess`): repeated edges have their weights summed (float64, in the order
listed) and are refused with features or types; a reverse edge gets its edge's data, and where both
directions are listed each keeps its own; a typed graph's added reverse edges get type ``t + R``
(``2R`` relations, unless none was added); a self loop's data goes with it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np
import torch

from fullgraph.data.formats.edge_sort import (
    _bucket_edges, _Payload, _sort_buckets, _sort_records, paired_relations, _spill_edges, _spill_records, _then_first,
    _write_edge_files, _write_structure,
)
from fullgraph.data.formats.native import (
    _I4, _I8, BLOCK_BYTES, INT32_MAX, _base_meta, _FolderWriter, _write_nodes, checked_splits,
)
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError
from fullgraph.ops.csr import indptr_from_counts

__all__ = ["write_native_edges", "Rows"]

_EDGE_ARGS = {"edge_weight": "weight", "edge_attr": "attr", "edge_type": "type"}
"""The edge data a block may carry, by ``Graph.from_edges``'s keyword names, and the kind each is."""


def _numpy(a) -> np.ndarray:
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)


def _block_parts(block, i: int):
    """``(src, dst, edge data or None)`` of one block as given."""
    try:
        parts = tuple(block)
    except TypeError:
        parts = ()
    if len(parts) == 2:
        return parts[0], parts[1], None
    if len(parts) == 3 and isinstance(parts[2], dict):
        return parts
    raise InputError(f"expected each edge block to be a (src, dst) pair or a (src, dst, edge data dict) triple (got "
                     f"{type(block).__name__} as block {i})")


def _edge_pairs(edge_blocks, n: int, idx: np.dtype) -> Iterator[tuple[np.ndarray, np.ndarray, dict | None]]:
    for i, block in enumerate(edge_blocks):
        src, dst, edge = _block_parts(block, i)
        src, dst = _numpy(src), _numpy(dst)
        if src.shape != dst.shape or src.ndim != 1 or not (np.issubdtype(src.dtype, np.integer)
                                                           and np.issubdtype(dst.dtype, np.integer)):
            raise InputError(f"expected edge block {i} to be two equally long 1-D integer arrays "
                             f"(got {src.dtype} {src.shape} and {dst.dtype} {dst.shape})")
        for what, ids in (("source", src), ("destination", dst)):
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
                raise InputError(f"expected edge {what} ids in [0, {n}) in edge block {i} "
                                 f"(got {int(ids.min())}..{int(ids.max())})")
        yield src.astype(idx, copy=False), dst.astype(idx, copy=False), \
            None if edge is None else _edge_block_data(edge, src.size, i)


def _edge_block_data(edge: dict, k: int, i: int) -> dict:
    """One block's edge data checked as ``Graph`` checks it and converted as ``Graph.from_edges``
    converts it (floats to float32, integer types to int64), by kind."""
    unknown = sorted(set(edge) - set(_EDGE_ARGS))
    if unknown:
        raise InputError(f"expected edge data named {', '.join(_EDGE_ARGS)} in edge block {i} (got {unknown[0]!r})")
    out = {}
    for name, value in edge.items():
        if value is None:
            continue
        a = _numpy(value)
        dims = 2 if name == "edge_attr" else 1
        if a.ndim != dims or a.shape[0] != k or (dims == 2 and a.shape[1] == 0):
            shape = "[k, d] with d >= 1" if dims == 2 else "[k]"
            raise InputError(f"expected '{name}' of edge block {i} to be {shape} for its {k} edges "
                             f"(got {a.dtype} {list(a.shape)})")
        if name == "edge_type":
            if not np.issubdtype(a.dtype, np.integer):
                raise InputError(f"expected integer '{name}' in edge block {i} (got {a.dtype})")
            a = a.astype(np.int64, copy=False)
            if a.size and int(a.min()) < 0:
                raise InputError(f"expected edge types >= 0 in edge block {i} (got {int(a.min())})")
        else:
            if not np.issubdtype(a.dtype, np.floating):
                raise InputError(f"expected float '{name}' in edge block {i} (got {a.dtype})")
            a = a.astype(np.float32, copy=False)
            if not np.isfinite(a).all():
                raise InputError(f"expected finite values in '{name}' (got {int((~np.isfinite(a)).sum())} NaN or "
                                 f"infinite entries in edge block {i})")
        out[_EDGE_ARGS[name]] = a
    return out


@dataclass(frozen=True)
class Rows:
    """An array that arrives in row blocks: ``shape``, and ``blocks()``, a fresh iterator of numpy
    arrays of whole rows each time it is called (row counts summing to ``shape[0]``). ``finite``:
    every block is checked for NaN and infinity as it passes (features)."""

    shape: tuple[int, ...]
    blocks: Callable[[], Iterator[np.ndarray]]
    what: str = "array"
    finite: bool = False
    layout = torch.strided  # what the writer asks of features (dense)

    def row_blocks(self, block_bytes: int = BLOCK_BYTES) -> Iterator[np.ndarray]:
        done = 0
        for b in self.blocks():
            if b.shape[1:] != tuple(self.shape[1:]):
                raise InputError(f"expected rows of shape {list(self.shape[1:])} for the {self.what} "
                                 f"(got a block of shape {list(b.shape)})")
            if self.finite and not np.isfinite(b).all():
                raise InputError(f"expected finite values in the {self.what} (got NaN or infinity in rows "
                                 f"{done}..{done + b.shape[0] - 1})")
            done += b.shape[0]
            yield b
        if done != self.shape[0]:
            raise InputError(f"expected {self.shape[0]} rows of the {self.what} (got {done})")


@dataclass
class _Nodes:
    """Node data given as :class:`Rows`: what the folder writer reads off a :class:`Graph` otherwise."""

    x: Rows
    y: Rows
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    name: str
    num_classes: int
    num_nodes: int
    num_edges: int = 0

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    @property
    def multilabel(self) -> bool:
        return len(self.y.shape) == 2


def _node_data(n: int, x, y, masks: dict, name: str, num_classes: int | None):
    """The node data as the writer takes it: a :class:`Graph` over no edges (which checks arrays and
    tensors without copying them), or :class:`_Nodes` when features or labels arrive as rows."""
    if not isinstance(x, Rows) and not isinstance(y, Rows):
        return Graph(indptr=torch.zeros(n + 1, dtype=torch.int64), indices=torch.zeros(0, dtype=torch.int64), x=x,
                     y=y, name=name, num_classes=num_classes, **masks)
    for what, t in (("features", x), ("labels", y)):
        if t.shape[0] != n:
            raise InputError(f"expected {n} rows of {what} (got {t.shape[0]})")
    for m, v in masks.items():
        v = np.asarray(v)
        if v.dtype != np.bool_ or v.shape != (n,):
            raise InputError(f"expected {m} to be a bool array of {n} (got {v.dtype} {list(v.shape)})")
    if num_classes is None:
        raise InputError("expected num_classes with labels that arrive as rows (got None)")
    return _Nodes(x=x, y=y, name=name, num_classes=int(num_classes), num_nodes=n,
                  **{m: np.asarray(v) for m, v in masks.items()})


def _checked_splits(splits, nodes):
    """``splits`` checked as :func:`write_native` checks them, against labels given as an array."""
    if splits is not None and isinstance(nodes.y, Rows):
        raise InputError("expected labels as an array to check the splits against (got rows)")
    return checked_splits(splits, nodes.y)


def write_native_edges(out_dir: str | os.PathLike, num_nodes: int, edge_blocks: Iterable, *, x, y, train_mask,
                       val_mask, test_mask, name: str = "graph", num_classes: int | None = None,
                       symmetrize: bool = True, dedupe: bool = True, drop_self_loops: bool = True,
                       feature_norm: str = "none", source: str | None = None, block_bytes: int = BLOCK_BYTES,
                       extra: dict | None = None, num_relations: int | None = None,
                       reverse_relations: bool = True, splits=None) -> dict:
    """Write a native folder from edges that arrive in blocks, without holding them all in memory.

    ``edge_blocks`` yields ``(src, dst)`` pairs of integer arrays (edges ``src -> dst``, any order,
    any block size); a generator producing a graph too large for memory writes it this way. With
    the defaults the stored structure is what :func:`fullgraph.data.datasets.preprocess` would make
    of the same edges (the reverse of each edge added, duplicates merged, self loops dropped), and
    meta.json says so. ``x``, ``y`` and the masks are as :class:`Graph` takes them (an ``np.memmap``
    of features is read block by block), or ``x`` and ``y`` are :class:`Rows` (then ``num_classes``
    is required and the masks are bool arrays). ``extra``: further meta.json entries (what a
    converter records of the source). ``splits``: every fixed split, stored as :func:`write_native`
    stores them (``y`` then an array). Returns what :func:`write_native` returns.

    Edge data: blocks ``(src, dst, {"edge_weight": [k], "edge_attr": [k, d], "edge_type": [k]})``
    (any of the three, the same in every block, by ``Graph.from_edges``'s names) carry each edge's
    data, stored as version 3 (``edge_*.npy`` in the order of ``indices.npy``). The folder then
    holds ``preprocess(Graph.from_edges(src, dst, ..., edge_weight=...))`` (module doc), whose
    ``reverse_relations`` this takes; ``num_relations``: ``R`` of the edges as given (default: the
    largest type + 1). Repeated edges are merged (weights summed, a pair listed twice in one relation
    kept once) or refused (features) whatever ``dedupe`` says, as a :class:`Graph` with edge data
    lists each edge once; with types an edge is ``(src, dst, relation)``: a pair in two relations is
    two edges.

    Memory: two ``int64 [N]`` arrays plus a few times ``block_bytes``, whatever the edge count. Disk:
    the edges are spilled into the temporary folder (8 or 16 bytes per edge, both directions when
    symmetrizing; with edge data, a record of its ends, a byte and the data per edge), split by
    destination into row-range buckets small enough to sort in memory, and each bucket is sorted
    (and deduplicated) on its way into ``indices.npy``: three sequential passes over the spill, never
    a random write. Edge data adds only its own bytes per edge to the buckets being sorted (a bucket
    holds fewer edges), and its spills of the sorted data beside ``sorted.spill``.
    """
    n = int(num_nodes)
    if n < 1:
        raise InputError(f"expected num_nodes >= 1 (got {num_nodes})")
    nodes = _node_data(n, x, y, {"train_mask": train_mask, "val_mask": val_mask, "test_mask": test_mask}, name,
                       num_classes)
    idx = _I4 if n - 1 <= INT32_MAX else _I8
    splits = _checked_splits(splits, nodes)
    _base_meta(nodes, preprocessed=False, feature_norm=feature_norm, source=source, splits=splits)  # refused early
    if num_relations is not None and (isinstance(num_relations, bool) or int(num_relations) < 1):
        raise InputError(f"expected num_relations >= 1 (got {num_relations})")
    w = _FolderWriter(out_dir, block_bytes)
    try:
        pairs = _edge_pairs(edge_blocks, n, idx)
        first = next(pairs, None)
        if first is not None and first[2] is not None:
            return _write_with_data(w, nodes, n, idx, pairs, first, symmetrize, drop_self_loops, feature_norm,
                                    source, extra, num_relations, reverse_relations, splits)
        if num_relations is not None:
            raise InputError(f"expected 'edge_type' with num_relations={num_relations} (got no edge types)")
        return _write_plain(w, nodes, n, idx, pairs, first, symmetrize, dedupe, drop_self_loops, feature_norm,
                            source, extra, splits)
    except BaseException:
        w.abort()
        raise


def _write_plain(w: _FolderWriter, nodes, n: int, idx: np.dtype, pairs, first, symmetrize: bool, dedupe: bool,
                 drop_self_loops: bool, feature_norm: str, source, extra, splits=None) -> dict:
    """:func:`write_native_edges` of blocks without edge data (``first``: the first block, or None)."""
    pair = np.dtype([("dst", idx), ("src", idx)])
    step = max(1, w.block_bytes // pair.itemsize)  # edges per block read back from a spill
    meta = _base_meta(nodes, preprocessed=symmetrize and dedupe and drop_self_loops, feature_norm=feature_norm,
                      source=source, splits=splits) | dict(extra or {})
    rest = () if first is None else _then_first(first, pairs)
    counts, spilled = _spill_edges(w.tmp / "edges.spill", rest, n, pair, symmetrize, drop_self_loops)
    bounds = _bucket_edges(w, indptr_from_counts(counts), spilled, pair, step)
    stored = _sort_buckets(w, bounds, counts, n, idx, pair, dedupe)
    indptr = indptr_from_counts(counts)  # of the rows as stored (deduplicated)
    _write_structure(w, indptr, n, idx, stored, step)
    _write_nodes(w, nodes, splits)
    meta["counts"]["num_edges"] = stored
    return w.commit(meta)


def _write_with_data(w: _FolderWriter, nodes, n: int, idx: np.dtype, pairs, first, symmetrize: bool,
                     drop_self_loops: bool, feature_norm: str, source, extra, num_relations, reverse_relations,
                     splits=None):
    """:func:`write_native_edges` of blocks that carry edge data (module doc)."""
    load = _Payload(first[2], idx, symmetrize)
    counts, spilled = _spill_records(w.tmp / "edges.spill", pairs, first, n, load, symmetrize, w.block_bytes)
    relations = None
    if "type" in load.kinds:
        relations = load.max_type + 1 if num_relations is None else int(num_relations)
        if load.max_type >= relations:
            raise InputError(f"expected edge types in [0, {relations}) (got a type {load.max_type}, "
                             f"num_relations={relations})")
        relations = max(relations, 1)  # no edges at all: as Graph counts one relation
    elif num_relations is not None:
        raise InputError(f"expected 'edge_type' with num_relations={num_relations} (got no edge types)")
    step = max(1, w.block_bytes // load.record.itemsize)
    bounds = _bucket_edges(w, indptr_from_counts(counts), spilled, load.record, step, load.sort_bytes)
    pairing = None
    if symmetrize and reverse_relations and relations is not None:
        pairing = paired_relations(w, bounds, n, load, relations)
    stored, out = _sort_records(w, bounds, counts, n, idx, load, symmetrize, drop_self_loops, reverse_relations,
                                pairing)
    indptr = indptr_from_counts(counts)
    _write_structure(w, indptr, n, idx, stored, max(1, w.block_bytes // 8))
    _write_edge_files(w, load, stored, w.block_bytes, relations or 0)
    if relations is not None and out.reverse:
        relations *= 2  # the reverse edges' relations t + R (symmetrize's rule; none added: R stays)
    _write_nodes(w, nodes, splits)
    meta = _base_meta(_edge_meta_view(nodes, load, relations), preprocessed=symmetrize and drop_self_loops,
                      feature_norm=feature_norm, source=source, splits=splits) | dict(extra or {})
    meta["counts"]["num_edges"] = stored
    return w.commit(meta)


def _edge_meta_view(nodes, load: _Payload, num_relations: int | None):
    """``nodes`` as :func:`_base_meta` reads a graph with edge data (its counts, version 3)."""
    class _View:
        def __getattr__(self, name):
            return getattr(nodes, name)

    view = _View()
    view.edge_kinds = load.kinds
    view.edge_attr = np.zeros((0, load.width)) if load.width else None
    view.edge_weight = np.zeros(0) if "weight" in load.kinds else None
    view.edge_type = np.zeros(0, dtype=np.int64) if "type" in load.kinds else None
    view.num_relations = num_relations
    return view
