"""``fullgraph convert`` of a typed folder with its edge files streamed.

Why: :func:`~fullgraph.data.formats.typed_folder.load_typed_folder` reads every edge file whole (a
text file as its text, then its table), and :func:`~fullgraph.data.typed.typed_graph` concatenates
them with their reverses and sorts them: tens of bytes per edge, held at once, where the edge files
are what grows. ``convert`` is the one step that must read the folder's own files; here they go into
a native folder as OGB's heterogeneous layout does (:mod:`.ogb_hetero_convert`), and the folder
written is the one the in-memory road writes, ``write_native(preprocess(load_typed_folder(folder,
split=...)), splits=read_typed_splits(folder))`` (the splits where the folder has several sets of
split files), file for file:

* node counts: typed_folder's one rule (:func:`~.typed_folder.node_counts`): a type's feature rows
  (a ``.npy`` memory-mapped: its header says them), ``num_nodes.json``, else its largest id + 1, which
  a first pass finds over just the edge files that name the type, block by block (each file at most
  once). Ids run type after type in :func:`~.typed_folder.node_order` (the labelled type first);
* edges: relation by relation in the folder's order, block by block, never a whole file: a text file
  through :func:`~._common.read_table_blocks` (its optional header line and ``#`` comments taken as
  ``read_table`` takes them), a ``.npy`` memory-mapped and sliced (``[2, E]`` transposed block by
  block). Ids are checked per block against their type's count (:func:`~.typed_folder.check_ids`: the
  file, and the row in the file, a text file's line), put in global ids, and each block is followed
  by its reverse: the same relation within one type (symmetric in place), else ``rev_<name>``, numbered
  by :func:`~fullgraph.data.typed.typed_relations`, ``typed_graph``'s own rule. The blocks go through
  :func:`~.native_edges.write_native_edges`' on-disk sort with the relation as payload (no
  symmetrizing: the reverses are there): a pair listed twice in one relation, or in both directions
  within one type, is kept once, a pair in two relations is two edges, and self loops are dropped, as
  ``typed_graph`` and ``preprocess`` leave them. With ``--no-edge-data`` (bare edges) a pair in two
  relations is one edge, as ``Graph.without_edge_data`` makes it;
* features: ``typed_features``' layout. One featured type with a dense ``.npy`` is written as row
  blocks of its memory map (zero rows for the other types); a sparse ``.npz``, or several featured
  types (whose matrix ``typed_features`` makes sparse CSR), are read and held as in memory: the edge
  files are what is streamed, the features are per type;
* labels and splits: :func:`~.typed_folder.read_labels`; every set of split files as
  :func:`~.typed_folder.read_typed_splits` makes them (``--split k`` picks the same row of the
  converted folder), or, without split files, the per-class split ``--split`` seeds.
* a relation's labelled edges (an edge file with a header ``src dst label``:
  :func:`~.typed_folder.label_column`): its ids stream as any relation's (the file read whole: its labels
  are floats), and its labels go beside the graph as ``edge_labels.npz`` in global ids
  (``data.edge_sources``), so that an edge task trains on the converted folder as on this one.

Memory: the writer's two int64 arrays of N, the labels (8 N bytes) and masks (3 S N bytes for S
sets of split files), the features where they are sparse, and a few blocks (a text block of
``_common.TEXT_BLOCK_BYTES`` and its table; ``block_bytes`` of edges in the sort), whatever E.
Disk: the sort's spill, 16 bytes per stored edge (ends and relation), twice that while it is split
into buckets. Measured on a synthetic folder of 500k nodes and 3 M input edges (2 M as text with a
header, 1 M as a ``[2, E]`` ``.npy``; one dense featured type), on a busy 2-core machine: 624 MiB at
the peak in 8 s (the imports, the 64 MiB text block and its table), where the in-memory road took
1063 MiB and 25 s, for the same files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import scipy.sparse as sp

from fullgraph.data.formats._common import read_table_blocks
from fullgraph.data.formats.native import BLOCK_BYTES
from fullgraph.data.formats.native_edges import Rows, write_native_edges
from fullgraph.data.formats.typed_folder import (
    check_ids, edge_npy, edge_what, label_column, labelled_type, node_counts, node_order, read_features,
    read_labelled_edges, read_labels, required_files, split_ids, split_masks,
)
from fullgraph.errors import InputError
from fullgraph.ops.node_types import REVERSE_PREFIX, NodeTypes

__all__ = ["convert_typed_folder"]


@dataclass(frozen=True)
class _Folder:
    """What the passes read: the files by role, each type's features (dense ones memory-mapped), the
    counts in id order and what counted them, and the labelled type."""

    path: Path
    files: dict
    features: dict
    counts: dict
    source: dict
    labelled: str


def _relation_blocks(path: Path, rel: tuple, block_bytes: int) -> Iterator[tuple[np.ndarray, object]]:
    """``[k, 2]`` int64 blocks of one edge file, each with ``place(i)``: where its row ``i`` is in the file."""
    if label_column(path):  # a relation's labelled edges: the ids, not the label (an edge task's, never a layer's)
        e = read_labelled_edges(path, rel)[0]
        yield e, lambda i: f"row {i + 1}"
        return
    if path.suffix != ".npy":
        for table, line_of in read_table_blocks(path, dtype=np.int64, what=edge_what(rel), ncols=2, header=None,
                                                comments="#", lines=True):
            yield table, lambda i, line_of=line_of: f"line {line_of(i)}"
        return
    e = edge_npy(path, rel, mmap=True)
    step = max(1, block_bytes // 16)
    for a in range(0, e.shape[0], step):
        yield np.array(e[a:a + step], dtype=np.int64), lambda i, a=a: f"row {a + i + 1}"


def _largest(files: dict, block_bytes: int):
    """``node_counts``' ``largest``: one pass over each edge file that names a type it is asked of (both
    columns' largest ids kept, so that a file is read at most once)."""
    seen: dict = {}

    def top(rel: tuple) -> tuple[int, int]:
        if rel not in seen:
            best = [-1, -1]
            for block, _ in _relation_blocks(files["edges"][rel], rel, block_bytes):
                if block.size:
                    best = [max(best[0], int(block[:, 0].max())), max(best[1], int(block[:, 1].max()))]
            seen[rel] = tuple(best)
        return seen[rel]

    def largest(t: str) -> int:
        return max((top(rel)[col] for rel in files["edges"] for pos, col in ((0, 0), (2, 1)) if rel[pos] == t),
                   default=-1)
    return largest


def _open(folder: Path, block_bytes: int) -> _Folder:
    """The folder's files checked as ``load_typed_folder`` checks them, short of the edges' ids (checked
    as they stream) and without reading an edge file whole."""
    files = required_files(folder)
    features = {t: read_features(p, mmap=True) for t, p in files["features"].items()}
    for rel, path in files["edges"].items():
        if path.suffix == ".npy":
            edge_npy(path, rel, mmap=True)  # its shape and dtype, before any pass
    counts, source = node_counts(files, {t: f.shape[0] for t, f in features.items()}, _largest(files, block_bytes))
    lt = labelled_type(files, counts)
    return _Folder(folder, files, features, node_order(counts, lt), source, lt)


def _types(folder: _Folder) -> NodeTypes:
    """The node types and relations as ``typed_graph`` makes them (reverses added)."""
    from fullgraph.data.typed import typed_relations

    widths = tuple(int(folder.features[t].shape[1]) if t in folder.features else 0 for t in folder.counts)
    return NodeTypes(tuple(folder.counts), tuple(folder.counts.values()), widths,
                     typed_relations(folder.files["edges"]), (folder.labelled,))


def _edge_blocks(folder: _Folder, types: NodeTypes, typed: bool, block_bytes: int) -> Iterator[tuple]:
    """Every relation's blocks in global ids, ids checked, each followed by its reverse (module doc), with
    their relation ids as ``edge_type`` (``typed``), or bare (``--no-edge-data``)."""
    offset = dict(zip(types.names, types.offsets))
    for r, ((s, name, d), path) in enumerate(folder.files["edges"].items()):
        back = r if s == d else types.relations.index((d, REVERSE_PREFIX + name, s))
        for block, place in _relation_blocks(path, (s, name, d), block_bytes):
            for col, t in ((0, s), (1, d)):
                check_ids(block[:, col], folder.counts[t], t, f"column {col + 1} of {path}", folder.source[t], place)
            gs, gd = block[:, 0] + offset[s], block[:, 1] + offset[d]
            for a, b, k in ((gs, gd, r), (gd, gs, back)):
                yield (a, b, {"edge_type": np.full(a.size, k, np.int64)}) if typed else (a, b)


def _features(folder: _Folder, types: NodeTypes, block_bytes: int):
    """``typed_features``' matrix: :class:`Rows` of zeros and the one dense featured type's memory map,
    or, where ``typed_features`` makes it sparse, that matrix, read and held."""
    featured = [t for t, w in zip(types.names, types.widths) if w]
    if len(featured) > 1 or any(sp.issparse(folder.features[t]) for t in featured):
        from fullgraph.data.typed import typed_feature_blocks, typed_features

        held = {t: f if sp.issparse(f) else np.array(f) for t, f in folder.features.items()}  # off the map
        return typed_features(types, typed_feature_blocks(folder.counts, held))
    width = max(types.num_features, 1)
    step = max(1, block_bytes // (4 * width))

    def blocks() -> Iterator[np.ndarray]:
        for name, count in zip(types.names, types.counts):
            x = folder.features[name] if name in featured else None
            for a in range(0, count, step):
                rows = min(step, count - a)
                yield np.zeros((rows, width), np.float32) if x is None else np.asarray(x[a:a + rows], np.float32)
    where = folder.files["features"][featured[0]] if featured else folder.path
    return Rows((types.num_nodes, width), blocks, f"features in {where}", finite=True)


def _node_arrays(folder: _Folder, types: NodeTypes, split: int) -> tuple:
    """Labels over all nodes (-1 outside the labelled type), the ``--split`` masks, every split (each set of
    split files as ``read_typed_splits`` makes them, or the one chosen or drawn), and the class count."""
    from fullgraph.data.labels import check_inferred_classes, used_classes

    files, lt = folder.files, folder.labelled
    count = folder.counts[lt]  # the labelled type's ids come first
    y_t = read_labels(files["labels"][1], count, lt, folder.source[lt])
    used = used_classes(y_t)
    if not used.size:
        raise InputError(f"expected at least one labelled {lt} in {files['labels'][1]} (got none: every label is -1)")
    y = np.full(types.num_nodes, -1, np.int64)
    y[:count] = y_t
    masks = {}
    for key, ids in split_ids(files, split, count, lt, y_t).items():  # --split checked, as loading checks it
        masks[f"{key}_mask"] = np.zeros(types.num_nodes, bool)
        masks[f"{key}_mask"][ids] = True
    if len(files["splits"]) > 1:
        splits = split_masks(files, count, lt, y_t, types.num_nodes)
    else:  # one split, stored as the graph's masks are (and checked as write_native checks splits)
        splits = tuple(masks[f"{key}_mask"][None] for key in ("train", "val", "test"))
    return y, masks, splits, check_inferred_classes(used)


def convert_typed_folder(folder: str | os.PathLike, out: str | os.PathLike, *, split: int = 0,
                         name: str | None = None, edge_data: bool = True, feature_norm: str = "none",
                         source: str | None = None, block_bytes: int = BLOCK_BYTES) -> dict:
    """Write the typed folder at ``folder`` as a native folder at ``out``, its edge files streamed
    (module doc): the files ``fullgraph convert`` wrote from ``preprocess(load_typed_folder(folder,
    split=split))``.

    Args:
        folder: the typed folder (:mod:`.typed_folder`).
        out: the native folder to write (new, empty, or an earlier native folder).
        split: which set of split files is split 0 where there is one set (0: the smallest K; several
            sets are all kept), or the seed of the per-class split where there is none.
        name: the graph's name (default: the folder's).
        edge_data: False: bare edges, the node types kept without relations (``Graph.without_edge_data``).
        feature_norm: what ``auto`` feature normalization means for it (meta.json).
        source: where the folder came from, for meta.json's ``source`` (default: its path).
        block_bytes: the edges' block and the sort's memory (:func:`~.native_edges.write_native_edges`).

    Returns:
        What :func:`~fullgraph.data.formats.native.write_native` returns.
    """
    opened = _open(Path(folder), block_bytes)
    types = _types(opened)
    y, masks, splits, num_classes = _node_arrays(opened, types, split)
    kept = types if edge_data else NodeTypes(types.names, types.counts, types.widths, (), types.labelled)
    which = f"all {len(splits[0])} fixed splits" if len(splits[0]) > 1 else f"--split {split}"
    meta = write_native_edges(
        out, types.num_nodes, _edge_blocks(opened, types, edge_data, block_bytes),
        x=_features(opened, types, block_bytes), y=y, name=name or opened.path.name, num_classes=num_classes,
        symmetrize=False, drop_self_loops=True, feature_norm=feature_norm, block_bytes=block_bytes,
        source=f"{source or opened.path} (typed folder, edge files streamed; {which})",
        extra={**kept.record(), "preprocessed": True}, num_relations=types.num_relations if edge_data else None,
        splits=splits, **masks)
    if any(label_column(p) for p in opened.files["edges"].values()):  # an edge task's labels, beside the graph
        from fullgraph.data.edge_sources import typed_labelled_edges, write_labelled_edges

        write_labelled_edges(typed_labelled_edges(opened.path, opened.files, opened.counts, "edge"), out)
    return meta
