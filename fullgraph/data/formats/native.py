"""fullgraph's own dataset folder: memory-mappable ``.npy`` arrays and a ``meta.json`` that checks them.

Why a format of our own: the published formats are text, pickles or compressed archives, which must
be parsed into memory before training starts. A native folder is read with ``np.load(mmap_mode=...)``:
loading a 10^8-edge graph costs page-cache reads, not a parse and a second copy, and every rank of a
run on one machine shares the same pages.

The folder (version 1)::

    meta.json          format name + version, counts, and one entry per array (see below)
    indptr.npy         int64 [N+1]  CSR row pointers over in-edges (row v = the edges u -> v)
    indices.npy        int32 [E]    the source u of each in-edge, sorted within each row
                                    (int64 only when N > 2^31 - 1)
    x.npy              float32 [N, F]  dense features, or, for sparse (CSR) features, instead:
      x_indptr.npy     int64 [N+1]
      x_indices.npy    int64 [nnz]  column ids, sorted within each row
      x_values.npy     float32 [nnz]
    y.npy              int64 [N] class ids (-1: unlabelled), or float32 [N, C] of 0/1 (multi-label)
    train_mask.npy, val_mask.npy, test_mask.npy   bool [N]

This is exactly the :class:`~fullgraph.data.graph.Graph` container on disk (same in-edge CSR
convention). Arrays are plain ``.npy`` files (format 1.0, little-endian, C order, never pickled
objects), so ``numpy.load`` reads each one on its own. ``meta.json`` holds::

    {"format": "fullgraph-native", "version": 1, "name": "cora",
     "counts": {"num_nodes": N, "num_edges": E, "num_features": F, "num_classes": C,
                "multilabel": false, "feature_nnz": nnz (sparse only),
                "split_sizes": {"train": ..., "val": ..., "test": ...}},
     "features": "dense" | "sparse_csr",
     "preprocessed": true,     # symmetric, no duplicate edges, no self loops (datasets.preprocess)
     "feature_norm": "none",   # what --feature-norm auto means for this graph ("row" for Planetoid)
     "source": "...", "created_by": "fullgraph 0.1.0",
     "files": {"indptr.npy": {"dtype": "<i8", "shape": [N+1], "bytes": ..., "sha256": "..."}, ...}}

``bytes`` is the whole file's size; ``sha256`` is over the array's data bytes only (not the ``.npy``
header), so that it names the numbers whatever header padding a tool writes.

Writing (:func:`write_native`) goes into a temporary sibling folder that is renamed into place when
complete, so a reader never sees half a dataset. It writes each array in blocks of about
``block_bytes`` (hashing as it goes), so writing adds no second copy of the graph. It replaces an
earlier native folder, fills an empty one, and refuses anything else. :func:`write_native_edges`
writes it from edges that arrive in blocks, sorting them on disk (a graph larger than memory);
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
from fullgraph.ops.csr import indptr_from_counts, row_spans

__all__ = ["NATIVE_FORMAT", "NATIVE_VERSION", "VERIFY_AUTO_MAX_BYTES", "write_native", "write_native_edges",
           "is_preprocessed", "check_target"]

NATIVE_FORMAT = "fullgraph-native"
NATIVE_VERSION = 1
VERIFY_AUTO_MAX_BYTES = 512 << 20
BLOCK_BYTES = 64 << 20
META = "meta.json"
MASKS = ("train_mask", "val_mask", "test_mask")
SPLITS = ("train", "val", "test")
ARRAY_FILES = ("indptr.npy", "indices.npy", "x.npy", "x_indptr.npy", "x_indices.npy", "x_values.npy", "y.npy",
               *(f"{m}.npy" for m in MASKS))
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
        self.array(name, dtype, tuple(t.shape), _blocks(t, self.block_bytes))

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
    return is_standard_structure(graph.indptr, graph.indices)


def _base_meta(graph: Graph, *, preprocessed: bool, feature_norm: str, source: str | None) -> dict:
    if feature_norm not in ("row", "none"):
        raise InputError(f"expected feature_norm 'row' or 'none' (got {feature_norm!r})")
    from fullgraph import __version__

    sizes = {s: int(getattr(graph, f"{s}_mask").sum()) for s in SPLITS}
    counts = {"num_nodes": graph.num_nodes, "num_edges": graph.num_edges, "num_features": graph.num_features,
              "num_classes": int(graph.num_classes), "multilabel": graph.multilabel}
    sparse = graph.x.layout == torch.sparse_csr
    if sparse:
        counts["feature_nnz"] = int(graph.x.values().numel())
    counts["split_sizes"] = sizes
    return {"format": NATIVE_FORMAT, "version": NATIVE_VERSION, "name": graph.name, "counts": counts,
            "features": "sparse_csr" if sparse else "dense", "preprocessed": bool(preprocessed),
            "feature_norm": feature_norm, "source": source, "created_by": f"fullgraph {__version__}"}


def write_native(graph: Graph, out_dir: str | os.PathLike, *, preprocessed: bool | None = None,
                 feature_norm: str = "none", source: str | None = None, block_bytes: int = BLOCK_BYTES) -> dict:
    """Write ``graph`` as a native folder at ``out_dir`` (see the module doc); return its meta.json
    content plus ``total_bytes``, the bytes written.

    ``preprocessed``: whether the structure is symmetric without duplicates or self loops (what
    ``fullgraph train --dataset FOLDER`` then trains on as stored; otherwise it preprocesses on
    every load); ``None`` checks (:func:`is_preprocessed`). ``feature_norm``: what ``auto`` feature
    normalization means for this graph. ``source``: a free-form note of where the graph came from.
    """
    if not isinstance(graph, Graph):
        raise InputError(f"expected a fullgraph Graph to write (got {type(graph).__name__})")
    if preprocessed is None:
        preprocessed = is_preprocessed(graph)
    meta = _base_meta(graph, preprocessed=preprocessed, feature_norm=feature_norm, source=source)
    w = _FolderWriter(out_dir, block_bytes)
    try:
        w.tensor("indptr.npy", _I8, graph.indptr)
        w.tensor("indices.npy", _I4 if graph.num_nodes - 1 <= INT32_MAX else _I8, graph.indices)
        _write_nodes(w, graph)
        return w.commit(meta)
    except BaseException:
        w.abort()
        raise


def _write_nodes(w: _FolderWriter, graph: Graph) -> None:
    """Features, labels and masks: everything but the structure."""
    x = graph.x
    if x.layout == torch.sparse_csr:
        w.tensor("x_indptr.npy", _I8, x.crow_indices())
        w.tensor("x_indices.npy", _I8, x.col_indices())
        w.tensor("x_values.npy", _F4, x.values())
    else:
        w.tensor("x.npy", _F4, x)
    w.tensor("y.npy", _F4 if graph.multilabel else _I8, graph.y)
    for m in MASKS:
        w.tensor(f"{m}.npy", _B1, getattr(graph, m))


def _edge_pairs(edge_blocks, n: int, idx: np.dtype) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for i, block in enumerate(edge_blocks):
        try:
            src, dst = block
        except (TypeError, ValueError):
            raise InputError(f"expected each edge block to be a (src, dst) pair (got {type(block).__name__} "
                             f"as block {i})") from None
        src = src.numpy() if isinstance(src, torch.Tensor) else np.asarray(src)
        dst = dst.numpy() if isinstance(dst, torch.Tensor) else np.asarray(dst)
        if src.shape != dst.shape or src.ndim != 1 or not (np.issubdtype(src.dtype, np.integer)
                                                           and np.issubdtype(dst.dtype, np.integer)):
            raise InputError(f"expected edge block {i} to be two equally long 1-D integer arrays "
                             f"(got {src.dtype} {src.shape} and {dst.dtype} {dst.shape})")
        for what, ids in (("source", src), ("destination", dst)):
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
                raise InputError(f"expected edge {what} ids in [0, {n}) in edge block {i} "
                                 f"(got {int(ids.min())}..{int(ids.max())})")
        yield src.astype(idx, copy=False), dst.astype(idx, copy=False)


def _spill_edges(path, edge_blocks, n: int, idx: np.dtype, pair: np.dtype, symmetrize: bool,
                 drop_self_loops: bool) -> tuple[np.ndarray, int]:
    """Pass 1 of :func:`write_native_edges`: ``(dst, src)`` pairs appended to ``path`` as they come (both
    directions when symmetrizing); each row's edge count and the number of pairs written."""
    counts = np.zeros(n, dtype=np.int64)
    spilled = 0
    with open(path, "wb") as f:
        for src, dst in _edge_pairs(edge_blocks, n, idx):
            if drop_self_loops:
                keep = src != dst
                src, dst = src[keep], dst[keep]
            if symmetrize:
                src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
            block = np.empty(src.size, dtype=pair)
            block["dst"], block["src"] = dst, src
            f.write(memoryview(block).cast("B"))
            counts += np.bincount(dst, minlength=n)
            spilled += src.size
    return counts, spilled


def _bucket_edges(w: _FolderWriter, indptr: np.ndarray, spilled: int, pair: np.dtype, step: int) -> list[int]:
    """Pass 2: the spill split by destination into ``bucket-i.spill`` files of whole rows, each small
    enough to sort in memory (~32 bytes per edge; at most ~512 files); the buckets' row bounds."""
    per_bucket = max(w.block_bytes // 32, -(-spilled // 512), 1)
    bounds = [0] + [r1 for _, r1 in row_spans(indptr, per_bucket)]
    bounds_arr = np.asarray(bounds[1:-1], dtype=np.int64)
    outs = [open(w.tmp / f"bucket-{i}.spill", "wb") for i in range(len(bounds) - 1)]
    try:
        for a in range(0, spilled, step):
            block = np.fromfile(w.tmp / "edges.spill", dtype=pair, count=min(step, spilled - a),
                                offset=a * pair.itemsize)
            which = np.searchsorted(bounds_arr, block["dst"], side="right")
            order = np.argsort(which, kind="stable")
            block, cuts = block[order], np.searchsorted(which[order], np.arange(1, len(outs)))
            for out, part in zip(outs, np.split(block, cuts)):
                if part.size:
                    out.write(memoryview(part).cast("B"))
    finally:
        for out in outs:
            out.close()
    (w.tmp / "edges.spill").unlink()
    return bounds


def _sort_buckets(w: _FolderWriter, bounds: list[int], counts: np.ndarray, n: int, idx: np.dtype, pair: np.dtype,
                  dedupe: bool) -> int:
    """Pass 3: each bucket's rows sorted (and deduplicated, recounting ``counts`` in place) into
    ``sorted.spill``; the number of edges stored."""
    stored = 0
    with open(w.tmp / "sorted.spill", "wb") as f:
        for i, (r0, r1) in enumerate(zip(bounds[:-1], bounds[1:])):
            path = w.tmp / f"bucket-{i}.spill"
            part = np.fromfile(path, dtype=pair)
            path.unlink()
            key = (part["dst"].astype(np.int64) - r0) * n + part["src"]
            del part
            key.sort()
            if dedupe and key.size:
                key = key[np.concatenate(([True], key[1:] != key[:-1]))]
                counts[r0:r1] = np.bincount(key // n, minlength=r1 - r0)
            out = (key % n).astype(idx)
            f.write(memoryview(out).cast("B"))
            stored += out.size
    return stored


def write_native_edges(out_dir: str | os.PathLike, num_nodes: int, edge_blocks: Iterable, *, x, y, train_mask,
                       val_mask, test_mask, name: str = "graph", num_classes: int | None = None,
                       symmetrize: bool = True, dedupe: bool = True, drop_self_loops: bool = True,
                       feature_norm: str = "none", source: str | None = None, block_bytes: int = BLOCK_BYTES) -> dict:
    """Write a native folder from edges that arrive in blocks, without holding them all in memory.

    ``edge_blocks`` yields ``(src, dst)`` pairs of integer arrays (edges ``src -> dst``, any order,
    any block size); a generator producing a graph too large for memory writes it this way. With
    the defaults the stored structure is what :func:`fullgraph.data.datasets.preprocess` would make
    of the same edges (the reverse of each edge added, duplicates merged, self loops dropped), and
    meta.json says so. ``x``, ``y`` and the masks are as :class:`Graph` takes them (an ``np.memmap``
    of features is read block by block). Returns what :func:`write_native` returns.

    Memory: two ``int64 [N]`` arrays plus a few times ``block_bytes``, whatever the edge count. Disk:
    the edges are spilled into the temporary folder (8 or 16 bytes per edge, both directions when
    symmetrizing), split by destination into row-range buckets small enough to sort in memory, and
    each bucket is sorted (and deduplicated) on its way into ``indices.npy``: three sequential
    passes over the spill, never a random write.
    """
    n = int(num_nodes)
    if n < 1:
        raise InputError(f"expected num_nodes >= 1 (got {num_nodes})")
    # the node data is checked by Graph itself, over an edgeless structure (no copy of x or y)
    nodes = Graph(indptr=torch.zeros(n + 1, dtype=torch.int64), indices=torch.zeros(0, dtype=torch.int64), x=x,
                  y=y, train_mask=train_mask, val_mask=val_mask, test_mask=test_mask, name=name,
                  num_classes=num_classes)
    idx = _I4 if n - 1 <= INT32_MAX else _I8
    pair = np.dtype([("dst", idx), ("src", idx)])
    meta = _base_meta(nodes, preprocessed=symmetrize and dedupe and drop_self_loops, feature_norm=feature_norm,
                      source=source)
    w = _FolderWriter(out_dir, block_bytes)
    step = max(1, w.block_bytes // pair.itemsize)  # edges per block read back from a spill
    try:
        counts, spilled = _spill_edges(w.tmp / "edges.spill", edge_blocks, n, idx, pair, symmetrize, drop_self_loops)
        bounds = _bucket_edges(w, indptr_from_counts(counts), spilled, pair, step)
        stored = _sort_buckets(w, bounds, counts, n, idx, pair, dedupe)
        indptr = indptr_from_counts(counts)  # of the rows as stored (deduplicated)
        w.array("indptr.npy", _I8, (n + 1,), (indptr[i:i + step] for i in range(0, n + 1, step)))
        w.array("indices.npy", idx, (stored,), (
            np.fromfile(w.tmp / "sorted.spill", dtype=idx, count=min(step, stored - i), offset=i * idx.itemsize)
            for i in range(0, stored, step)))
        (w.tmp / "sorted.spill").unlink()
        _write_nodes(w, nodes)
        meta["counts"]["num_edges"] = stored
        return w.commit(meta)
    except BaseException:
        w.abort()
        raise
