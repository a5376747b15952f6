"""fullgraph's own dataset folder: memory-mappable ``.npy`` arrays and a ``meta.json`` that checks them.

Why a format of our own: the published formats are text, pickles or compressed archives, which must
be parsed into memory before training starts. A native folder is read with ``np.load(mmap_mode=...)``:
loading a 10^8-edge graph costs page-cache reads, not a parse and a second copy, and every rank of a
run on one machine shares the same pages.

The folder (version 2; a folder with one split is written as version 1, which is version 2 without
the ``*_masks.npy`` files, so that an older fullgraph still reads it)::

    meta.json          format name + version, counts, and one entry per array (see below)
    indptr.npy         int64 [N+1]  CSR row pointers over in-edges (row v = the edges u -> v)
    indices.npy        int32 [E]    the source u of each in-edge, sorted within each row
                                    (int64 only when N > 2^31 - 1)
    x.npy              float32 [N, F]  dense features, or, for sparse (CSR) features, instead:
      x_indptr.npy     int64 [N+1]
      x_indices.npy    int64 [nnz]  column ids, sorted within each row
      x_values.npy     float32 [nnz]
    y.npy              int64 [N] class ids (-1: unlabelled), float32 [N, C] of 0/1 (multi-label), or
                       float32 [N] numbers (counts.numeric_labels: true; node regression, NaN: none)
    train_mask.npy, val_mask.npy, test_mask.npy   bool [N]    split 0
    train_masks.npy, val_masks.npy, test_masks.npy    bool [S, N]  every split, S >= 2 (version 2
                                                      only; row 0 is split 0 again)

    edge_weight.npy    float32 [E]     each CSR entry's weight       } only for a graph with edge
    edge_attr.npy      float32 [E, d]  each CSR entry's features     } data (version 3), each in
    edge_type.npy      int64 [E]       each CSR entry's relation     } the order of indices.npy

A folder whose graph carries edge data (``Graph.edge_weight``, ``edge_attr``, ``edge_type``) is
written as version 3: version 2 plus those files, and ``counts`` adds ``"edge_data"`` (the kinds
present, of ``["weight", "attr", "type"]``), ``"edge_features": d`` and ``"num_relations": R``
where they apply. Its own version number makes an older fullgraph, which knows nothing of edge
files, refuse the folder rather than train without its edge data.

A typed (heterogeneous) graph (``Graph.node_types``, :mod:`fullgraph.ops.node_types`) adds one key
to ``meta.json``, ``"node_types"`` (``NodeTypes.record()``: type names, node counts, feature
widths, relations, labelled types), and no file and no version of its own: it is written in
whatever version the rest of the folder needs (3 when its edges carry their relations, as a typed
graph's do). Why no new version: the arrays are already a complete graph of one type (node ids
contiguous per type, features in column blocks, relations in ``edge_type.npy``, which version 3
guards), so an older fullgraph that ignores the key trains the same arrays as a one-type graph,
not a graph with data missing; what it lacks is the types' own treatment (learned embeddings of
a featureless type), and its fingerprint, without the types, keeps its caches apart. This fullgraph
checks the record against the counts when it reads ``meta.json`` (a damaged one is one line).

This is exactly the :class:`~fullgraph.data.graph.Graph` container on disk (same in-edge CSR
convention). Arrays are plain ``.npy`` files (format 1.0, little-endian, C order, never pickled
objects), so ``numpy.load`` reads each one on its own. ``meta.json`` holds::

    {"format": "fullgraph-native", "version": 1, "name": "cora",
     "counts": {"num_nodes": N, "num_edges": E, "num_features": F, "num_classes": C,
                "multilabel": false, "feature_nnz": nnz (sparse only),
                "split_sizes": {"train": ..., "val": ..., "test": ...},         # split 0
                "num_splits": S, "split_sizes_all": [{"train": ...}, ...]},   # version 2, S >= 2
     "features": "dense" | "sparse_csr",
     "node_types": {"names": [...], "counts": [...], "widths": [...], "relations": [...],
                    "labelled": [...]},                                 # a typed graph only
     "preprocessed": true,     # symmetric, no duplicate edges, no self loops (datasets.preprocess)
     "feature_norm": "none",   # what --feature-norm auto means for this graph ("row" for Planetoid)
     "source": "...", "created_by": "fullgraph 0.1.0",
     "files": {"indptr.npy": {"dtype": "<i8", "shape": [N+1], "bytes": ..., "sha256": "..."}, ...}}

Why several splits: the heterophilous graphs ship ten fixed splits, and results are reported as
the mean over them; a converted folder that kept one would refuse ``--split 3`` or, worse, train
another split than the one asked. Split 0 stays in ``*_mask.npy`` so that the readers of version 1
(the streaming partitioner among them, :mod:`fullgraph.partition.stream_store`) find it where they
always did; :func:`~fullgraph.data.formats.native_read.load_native` maps row ``k`` of the
``[S, N]`` arrays for split ``k`` (a contiguous row: still memory-mapped, no copy).

``bytes`` is the whole file's size; ``sha256`` is over the array's data bytes only (not the ``.npy``
header), so that it names the numbers whatever header padding a tool writes.

Writing (:func:`write_native`) goes into a temporary sibling folder that is renamed into place when
complete, so a reader never sees half a dataset. It writes each array in blocks of about
``block_bytes`` (hashing as it goes), so writing adds no second copy of the graph. It replaces an
earlier native folder, fills an empty one, and refuses anything else.
:func:`~fullgraph.data.formats.native_edges.write_native_edges` writes it from edges that arrive in
blocks, sorting them on disk (a graph larger than memory);
:func:`fullgraph.data.pyg.write_pyg` from a PyG ``Data``. Loading: :mod:`.native_read`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import shutil
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import torch

from fullgraph.data.graph import Graph
from fullgraph.data.preprocess import is_standard_structure
from fullgraph.errors import InputError

__all__ = ["NATIVE_FORMAT", "NATIVE_VERSION", "READ_VERSIONS", "VERIFY_AUTO_MAX_BYTES", "write_native",
           "is_preprocessed", "check_target", "checked_splits"]

NATIVE_FORMAT = "fullgraph-native"
NATIVE_VERSION = 2
EDGE_DATA_VERSION = 3
READ_VERSIONS = (1, 2, 3)
"""The versions this fullgraph reads; it writes 1 for a folder with one split, 2 for several, 3 for
a graph with edge data (one split or several)."""
EDGE_FILES = {"weight": "edge_weight.npy", "attr": "edge_attr.npy", "type": "edge_type.npy"}
"""The file of each kind of edge data (``Graph.edge_kinds``)."""
VERIFY_AUTO_MAX_BYTES = 512 << 20
BLOCK_BYTES = 64 << 20
META = "meta.json"
MASKS = ("train_mask", "val_mask", "test_mask")
SPLIT_MASKS = ("train_masks", "val_masks", "test_masks")
SPLITS = ("train", "val", "test")
ARRAY_FILES = ("indptr.npy", "indices.npy", "x.npy", "x_indptr.npy", "x_indices.npy", "x_values.npy", "y.npy",
               *(f"{m}.npy" for m in MASKS), *(f"{m}.npy" for m in SPLIT_MASKS), *EDGE_FILES.values())
INT32_MAX = np.iinfo(np.int32).max

_I8, _I4, _F4, _B1 = np.dtype("<i8"), np.dtype("<i4"), np.dtype("<f4"), np.dtype("|b1")


def _dtype_name(dt: np.dtype) -> str:
    return str(np.dtype(dt)) if np.dtype(dt).byteorder in "=|<" else np.dtype(dt).str


# --------------------------------------------------------------------------------------- writing
def _blocks(t, block_bytes: int) -> Iterator[np.ndarray]:
    """Row blocks of a tensor or array as numpy arrays, about ``block_bytes`` each."""
    itemsize = t.element_size() if isinstance(t, torch.Tensor) else t.itemsize
    n, row = t.shape[0], max(1, math.prod(t.shape[1:]) * itemsize)
    step = max(1, block_bytes // row)
    for i in range(0, n, step):
        b = t[i:i + step]
        yield b.detach().cpu().contiguous().numpy() if isinstance(b, torch.Tensor) else np.ascontiguousarray(b)


def _write_npy(path: Path, dtype: np.dtype, shape: tuple[int, ...], blocks: Iterable[np.ndarray]) -> dict:
    """Write a ``.npy`` file from blocks (converted to ``dtype``); return its meta.json entry."""
    dtype = np.dtype(dtype)
    h = hashlib.sha256()
    count = 0
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)})
        for b in blocks:
            b = np.ascontiguousarray(b, dtype=dtype)
            count += b.size
            view = memoryview(b).cast("B")
            h.update(view)
            f.write(view)
        f.flush()
        os.fsync(f.fileno())
    if count != math.prod(shape):
        raise InputError(f"expected {math.prod(shape)} values for {path.name} (got {count} from the writer)")
    return {"dtype": dtype.str, "shape": list(shape), "bytes": path.stat().st_size, "sha256": h.hexdigest()}


def _is_replaceable(folder: Path) -> bool:
    """An earlier native folder: a native meta.json and nothing that is not ours."""
    try:
        meta = json.loads((folder / META).read_text(encoding="utf8"))
    except (OSError, ValueError):
        return False
    if not isinstance(meta, dict) or meta.get("format") != NATIVE_FORMAT:
        return False
    return all(p.name in (META, *ARRAY_FILES) and p.is_file() for p in folder.iterdir())


def check_target(out: str | os.PathLike) -> None:
    """Raise unless ``write_native`` may write ``out``: call it before a long computation."""
    out = Path(out).expanduser()
    if out.exists() and not out.is_dir():
        raise InputError(f"expected the output {out} to be a folder (got an existing file); choose another path")
    if out.is_dir() and any(out.iterdir()) and not _is_replaceable(out):
        raise InputError(
            f"expected the output {out} to be a new or empty folder, or an earlier fullgraph dataset folder "
            f"(got a folder with other files; refusing to overwrite it)"
        )


class _FolderWriter:
    """A native folder being written: arrays go into a hidden sibling, renamed into place by ``commit``."""

    def __init__(self, out_dir, block_bytes: int = BLOCK_BYTES):
        self.out = Path(out_dir).expanduser()
        if self.out.name in ("", ".", ".."):
            self.out = self.out.resolve()
        check_target(self.out)
        self.block_bytes = int(block_bytes)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.out.parent / f".{self.out.name}.writing-{os.getpid()}-{secrets.token_hex(4)}"
        self.tmp.mkdir()
        self.files: dict[str, dict] = {}

    def array(self, name: str, dtype, shape, blocks: Iterable[np.ndarray]) -> None:
        self.files[name] = _write_npy(self.tmp / name, dtype, tuple(int(s) for s in shape), blocks)

    def tensor(self, name: str, dtype, t) -> None:
        """A tensor, an array, or rows that arrive in blocks (``native_edges.Rows``)."""
        rows = t.row_blocks(self.block_bytes) if hasattr(t, "row_blocks") else _blocks(t, self.block_bytes)
        self.array(name, dtype, tuple(t.shape), rows)

    def commit(self, meta: dict) -> dict:
        meta = {**meta, "files": self.files}
        text = json.dumps(meta, indent=1) + "\n"
        with open(self.tmp / META, "w", encoding="utf8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        check_target(self.out)  # still ours to replace?
        old = None
        if self.out.is_dir():
            if any(self.out.iterdir()):
                old = self.out.parent / f".{self.out.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
                os.rename(self.out, old)
            else:
                self.out.rmdir()
        os.rename(self.tmp, self.out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        meta["total_bytes"] = sum(f["bytes"] for f in self.files.values()) + len(text.encode("utf8"))
        return meta

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def is_preprocessed(graph: Graph) -> bool:
    """Whether the structure is what :func:`fullgraph.data.datasets.preprocess` leaves: symmetric,
    no duplicate edges, no self loops (:func:`fullgraph.data.preprocess.is_standard_structure`)."""
    return is_standard_structure(graph.indptr, graph.indices, graph.edge_type)


def checked_splits(splits, y) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``splits`` (``(train, val, test)``, each bool ``[S, N]``, numpy or torch) as three C-ordered bool
    arrays, with each split checked as :class:`Graph` checks its masks (non-empty, disjoint, labelled
    nodes only): a bad split ``k`` is refused when written, not when a later run asks for it."""
    if splits is None:
        return None
    if not isinstance(splits, (tuple, list)) or len(splits) != 3:
        raise InputError(f"expected splits as (train, val, test) masks of shape [S, N] (got {type(splits).__name__})")
    y = y.numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    n = y.shape[0]
    out = []
    for what, m in zip(SPLITS, splits):
        m = m.detach().cpu().numpy() if isinstance(m, torch.Tensor) else np.asarray(m)
        if m.dtype != np.bool_ or m.ndim != 2 or m.shape[1] != n or m.shape[0] < 1:
            raise InputError(f"expected the {what} masks of the splits to be bool [S, {n}] (got {m.dtype} "
                             f"{list(m.shape)})")
        out.append(np.ascontiguousarray(m))
    if len({m.shape[0] for m in out}) != 1:
        raise InputError(f"expected as many train, val and test masks (got {', '.join(str(len(m)) for m in out)})")
    train, val, test = out
    labelled = y >= 0 if y.ndim == 1 else np.ones(n, dtype=bool)
    bad = [(k, why) for k in range(len(train)) for why, ok in (
        ("an empty split", train[k].any() and val[k].any() and test[k].any()),
        ("a node in two splits", not ((train[k] & val[k]) | (train[k] & test[k]) | (val[k] & test[k])).any()),
        ("an unlabelled node in a split", labelled[train[k] | val[k] | test[k]].all())) if not ok]
    if bad:
        raise InputError(f"expected {len(train)} valid splits (got {bad[0][1]} in split {bad[0][0]})")
    return train, val, test


def _split_sizes(masks) -> dict:
    return {s: int(m.sum()) for s, m in zip(SPLITS, masks)}


def _base_meta(graph: Graph, *, preprocessed: bool, feature_norm: str, source: str | None, splits=None) -> dict:
    """meta.json short of ``files``; ``splits``: :func:`checked_splits`' arrays (``None``: the graph's masks)."""
    if feature_norm not in ("row", "none"):
        raise InputError(f"expected feature_norm 'row' or 'none' (got {feature_norm!r})")
    from fullgraph import __version__

    first = [m[0] for m in splits] if splits is not None else [getattr(graph, m) for m in MASKS]
    counts = {"num_nodes": graph.num_nodes, "num_edges": graph.num_edges, "num_features": graph.num_features,
              "num_classes": int(graph.num_classes), "multilabel": graph.multilabel,
              **({"numeric_labels": True} if getattr(graph, "numeric", False) else {})}
    sparse = graph.x.layout == torch.sparse_csr
    if sparse:
        counts["feature_nnz"] = int(graph.x.values().numel())
    counts["split_sizes"] = _split_sizes(first)
    several = splits is not None and len(splits[0]) > 1
    if several:
        counts["num_splits"] = len(splits[0])
        counts["split_sizes_all"] = [_split_sizes(row) for row in zip(*splits)]
    kinds = tuple(getattr(graph, "edge_kinds", ()))
    if kinds:
        counts["edge_data"] = list(kinds)
        if graph.edge_attr is not None:
            counts["edge_features"] = int(graph.edge_attr.shape[1])
        if graph.edge_type is not None:
            counts["num_relations"] = int(graph.num_relations)
    version = EDGE_DATA_VERSION if kinds else NATIVE_VERSION if several else 1
    types = getattr(graph, "node_types", None)  # a typed graph's record: no version of its own (module doc)
    return {"format": NATIVE_FORMAT, "version": version, "name": graph.name,
            "counts": counts, "features": "sparse_csr" if sparse else "dense",
            **(types.record() if types is not None else {}), "preprocessed": bool(preprocessed),
            "feature_norm": feature_norm, "source": source, "created_by": f"fullgraph {__version__}"}


def write_native(graph: Graph, out_dir: str | os.PathLike, *, preprocessed: bool | None = None,
                 feature_norm: str = "none", source: str | None = None, block_bytes: int = BLOCK_BYTES,
                 splits=None) -> dict:
    """Write ``graph`` as a native folder at ``out_dir`` (see the module doc); return its meta.json
    content plus ``total_bytes``, the bytes written.

    ``preprocessed``: whether the structure is symmetric without duplicates or self loops (what
    ``fullgraph train --dataset FOLDER`` then trains on as stored; otherwise it preprocesses on
    every load); ``None`` checks (:func:`is_preprocessed`). ``feature_norm``: what ``auto`` feature
    normalization means for this graph. ``source``: a free-form note of where the graph came from.
    ``splits``: every fixed split of the dataset, ``(train, val, test)`` bool ``[S, N]`` each, stored
    instead of the graph's own masks (split ``k`` is row ``k``; see :func:`checked_splits`).
    """
    if not isinstance(graph, Graph):
        raise InputError(f"expected a fullgraph Graph to write (got {type(graph).__name__})")
    if preprocessed is None:
        preprocessed = is_preprocessed(graph)
    splits = checked_splits(splits, graph.y)
    meta = _base_meta(graph, preprocessed=preprocessed, feature_norm=feature_norm, source=source, splits=splits)
    w = _FolderWriter(out_dir, block_bytes)
    try:
        w.tensor("indptr.npy", _I8, graph.indptr)
        w.tensor("indices.npy", _I4 if graph.num_nodes - 1 <= INT32_MAX else _I8, graph.indices)
        _write_edge_data(w, graph)
        _write_nodes(w, graph, splits)
        return w.commit(meta)
    except BaseException:
        w.abort()
        raise


def _write_edge_data(w: _FolderWriter, graph: Graph) -> None:
    """The edge data files, in CSR order (a graph without edge data writes none)."""
    for kind, dtype in (("weight", _F4), ("attr", _F4), ("type", _I8)):
        t = getattr(graph, f"edge_{kind}")
        if t is not None:
            w.tensor(EDGE_FILES[kind], dtype, t)


def _write_nodes(w: _FolderWriter, graph: Graph, splits=None) -> None:
    """Features, labels and masks: everything but the structure (``splits``: as for :func:`_base_meta`)."""
    x = graph.x
    if x.layout == torch.sparse_csr:
        w.tensor("x_indptr.npy", _I8, x.crow_indices())
        w.tensor("x_indices.npy", _I8, x.col_indices())
        w.tensor("x_values.npy", _F4, x.values())
    else:
        w.tensor("x.npy", _F4, x)
    w.tensor("y.npy", _F4 if graph.multilabel or getattr(graph, "numeric", False) else _I8, graph.y)
    for i, m in enumerate(MASKS):
        w.tensor(f"{m}.npy", _B1, getattr(graph, m) if splits is None else splits[i][0])
    if splits is not None and len(splits[0]) > 1:
        for i, m in enumerate(SPLIT_MASKS):
            w.tensor(f"{m}.npy", _B1, splits[i])
