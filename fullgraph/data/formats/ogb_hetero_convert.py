"""``fullgraph convert`` of OGB's heterogeneous layout (ogbn-mag) in bounded memory.

Why: :func:`~fullgraph.data.formats.ogb_hetero.load_ogb_hetero` builds the typed edge list in memory
(6 to 7 GB at ogbn-mag's full size), and ``convert`` is the one step that must read the raw folder.
Here the folder goes into a native folder as papers100M's layout does (:mod:`.ogb_convert`), and the
folder written is the one the in-memory road writes, ``write_native(preprocess(load_ogb_hetero(...)))``,
file for file:

* edges: relation by relation, block by block as ``edge.csv.gz`` holds them (checked as the loader
  checks them), in global ids (type offset + local id), each block followed by its reverse: type
  ``r`` again for a relation within one type (symmetric in place), else the relation that
  :func:`~fullgraph.data.typed.typed_graph` gives ``rev_<name>``. Its numbering (every relation in
  sorted order, then the reverses of those between two types) is asked of ``typed_graph``'s own edge
  builder over no edges, so the two roads cannot number them apart. The blocks go through
  :func:`~fullgraph.data.formats.native_edges.write_native_edges`'s on-disk sort with the type as
  payload (no symmetrizing: the reverses are already there); an edge is ``(src, dst, relation)``,
  as in ``Graph.from_edges``: a pair listed twice in one relation is kept once, a pair in two
  relations is two edges, and self loops are dropped, as ``preprocess`` drops them;
* features: ``typed_features``' dense layout (at most one type with features, as ogbn-mag's papers),
  written block by block: zero rows for the types without features, then the featured type's file
  read in blocks. Several featured types make a sparse matrix, which this road does not stream
  (:func:`streamable` says no, and ``convert`` takes the in-memory road);
* labels, splits: the labelled type's, held as int64 and bool arrays of N (``19 N`` bytes, as the
  papers100M converter holds), and ``meta.json`` with the ``node_types`` record.

Memory: the writer's two int64 arrays of N, the labels and masks (``27 N`` bytes together: 50 MiB
for ogbn-mag's 1.94 M nodes), and a few blocks of text and edges (the reader's 64 MiB of text, whose
parse into a feature block is the peak, and the sort's ``block_bytes``), whatever E. Measured on
synthetic ogbn-mag folders (``write_synthetic_mag``, ``fullgraph convert`` in a subprocess, its
``VmHWM``): 345 / 508 / 854 / 971 MiB at ``scale`` 0.02 / 0.05 / 0.2 / 1 (the blocks fill up to
0.2, then only the arrays of N grow), where the in-memory road took 371 / 527 / 1274 MiB up to 0.2,
247 bytes per input edge more (about 5.5 GB at ``scale=1``). Disk: the spill, 16 bytes per stored
edge (ends and type), twice that while it is split into buckets.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import numpy as np

from fullgraph.data.formats.native import BLOCK_BYTES
from fullgraph.data.formats.native_edges import Rows, write_native_edges
from fullgraph.data.formats.ogb_hetero import (
    OgbHetero, _labels, _splits, feature_blocks, feature_width, open_ogb_hetero, relation_blocks,
)
from fullgraph.ops.node_types import REVERSE_PREFIX, NodeTypes

__all__ = ["convert_ogb_hetero", "streamable", "typed_types"]


def typed_types(layout: OgbHetero, widths: tuple) -> NodeTypes:
    """The node types and relations exactly as :func:`~fullgraph.data.typed.typed_graph` numbers them
    for this folder (reverses added): :func:`~fullgraph.data.typed.typed_relations`, one rule."""
    from fullgraph.data.typed import typed_relations

    return NodeTypes(tuple(layout.counts), tuple(layout.counts.values()), widths, typed_relations(layout.relations),
                     (layout.labelled,))


def _widths(layout: OgbHetero) -> tuple:
    return tuple(feature_width(layout, t) if t in layout.featured else 0 for t in layout.counts)


def streamable(folder: str | os.PathLike, *, split_name: str | None = None) -> bool:
    """Whether :func:`convert_ogb_hetero` streams this folder: at most one type has features (a dense
    matrix; several make ``typed_features`` sparse, which is converted in memory)."""
    return len(open_ogb_hetero(folder, split_name=split_name).featured) <= 1


def _edge_blocks(layout: OgbHetero, types: NodeTypes, typed: bool) -> Iterator[tuple]:
    """Every relation's blocks in global ids, each followed by its reverse (module doc), with their
    relation ids as ``edge_type`` (``typed``), or bare (``--no-edge-data``: no relations kept)."""
    offset = dict(zip(types.names, types.offsets))
    for r, (s, name, d) in enumerate(layout.relations):
        back = r if s == d else types.relations.index((d, REVERSE_PREFIX + name, s))
        for src, dst in relation_blocks(layout, (s, name, d)):
            gs, gd = src + offset[s], dst + offset[d]
            for a, b, t in ((gs, gd, r), (gd, gs, back)):
                yield (a, b, {"edge_type": np.full(a.size, t, np.int64)}) if typed else (a, b)


def _feature_rows(layout: OgbHetero, types: NodeTypes, block_bytes: int) -> Rows:
    """``typed_features``' dense matrix (zeros, then the one featured type's columns on its rows; one
    zero column where no type has features) as row blocks: the featured file read in blocks."""
    width = max(types.num_features, 1)
    step = max(1, block_bytes // (4 * width))

    def blocks() -> Iterator[np.ndarray]:
        for name, count, w in zip(types.names, types.counts, types.widths):
            if w:
                yield from feature_blocks(layout, name, w)
                continue
            for a in range(0, count, step):
                yield np.zeros((min(step, count - a), width), np.float32)
    return Rows((types.num_nodes, width), blocks, "node features")


def _node_arrays(layout: OgbHetero, types: NodeTypes) -> tuple[np.ndarray, dict, int]:
    """Labels over all nodes (-1 outside the labelled type), the three masks, and the class count, as
    ``typed_graph`` makes them (checked by the loader's own readers)."""
    y_t = _labels(layout)
    splits = _splits(layout, y_t)
    lo = types.offsets[types.index(layout.labelled)]
    y = np.full(types.num_nodes, -1, np.int64)
    y[lo:lo + y_t.size] = y_t
    masks = {}
    for key, ids in splits.items():
        m = np.zeros(types.num_nodes, bool)
        m[ids + lo] = True
        masks[f"{key}_mask"] = m
    return y, masks, max(int(y_t.max(initial=-1)) + 1, 1)


def convert_ogb_hetero(folder: str | os.PathLike, out: str | os.PathLike, *, name: str | None = None,
                       split_name: str | None = None, edge_data: bool = True, source: str | None = None,
                       block_bytes: int = BLOCK_BYTES) -> dict:
    """Write the OGB heterogeneous dataset in ``folder`` as a native folder at ``out`` in bounded memory
    (module doc): the files ``write_native(preprocess(load_ogb_hetero(folder)))`` writes. ``edge_data``
    False: bare edges, the node types kept without relations (``Graph.without_edge_data``). Returns
    what :func:`~fullgraph.data.formats.native.write_native` returns."""
    from fullgraph.errors import InputError

    layout = open_ogb_hetero(folder, split_name=split_name)
    if len(layout.featured) > 1:
        raise InputError(f"expected features on at most one node type to stream {layout.folder} (got "
                         f"{', '.join(layout.featured)}: a sparse matrix; load it with load_ogb_hetero)")
    types = typed_types(layout, _widths(layout))
    y, masks, num_classes = _node_arrays(layout, types)
    kept = types if edge_data else NodeTypes(types.names, types.counts, types.widths, (), types.labelled)
    extra = {**kept.record(), "preprocessed": True}  # the reverses are streamed: symmetric, loops dropped
    return write_native_edges(
        out, types.num_nodes, _edge_blocks(layout, types, edge_data), x=_feature_rows(layout, types, block_bytes),
        y=y, name=name or Path(layout.folder).name, num_classes=num_classes, symmetrize=False, drop_self_loops=True,
        source=source or f"OGB heterogeneous layout in {layout.folder}", block_bytes=block_bytes, extra=extra,
        num_relations=types.num_relations if edge_data else None, **masks)
