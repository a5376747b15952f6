"""A native folder written from edges that arrive in blocks: a graph larger than memory.

The edges are spilled to disk as they come, split by destination into row ranges small enough to
sort in memory, and each range is sorted (and deduplicated) on its way into ``indices.npy``: three
sequential passes over the spill, never a random write (the folder: :mod:`.native`). Node data
comes as arrays, or as :class:`Rows`, an array that arrives in row blocks (a converter reading a
compressed archive), so that neither the edges nor the features are ever held whole.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np
import torch

from fullgraph.data.formats.native import (
    _I4, _I8, BLOCK_BYTES, INT32_MAX, _base_meta, _FolderWriter, _write_nodes,
)
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError
from fullgraph.ops.csr import indptr_from_counts, row_spans

__all__ = ["write_native_edges", "Rows"]


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


def write_native_edges(out_dir: str | os.PathLike, num_nodes: int, edge_blocks: Iterable, *, x, y, train_mask,
                       val_mask, test_mask, name: str = "graph", num_classes: int | None = None,
                       symmetrize: bool = True, dedupe: bool = True, drop_self_loops: bool = True,
                       feature_norm: str = "none", source: str | None = None, block_bytes: int = BLOCK_BYTES,
                       extra: dict | None = None) -> dict:
    """Write a native folder from edges that arrive in blocks, without holding them all in memory.

    ``edge_blocks`` yields ``(src, dst)`` pairs of integer arrays (edges ``src -> dst``, any order,
    any block size); a generator producing a graph too large for memory writes it this way. With
    the defaults the stored structure is what :func:`fullgraph.data.datasets.preprocess` would make
    of the same edges (the reverse of each edge added, duplicates merged, self loops dropped), and
    meta.json says so. ``x``, ``y`` and the masks are as :class:`Graph` takes them (an ``np.memmap``
    of features is read block by block), or ``x`` and ``y`` are :class:`Rows` (then ``num_classes``
    is required and the masks are bool arrays). ``extra``: further meta.json entries (what a
    converter records of the source). Returns what :func:`write_native` returns.

    Memory: two ``int64 [N]`` arrays plus a few times ``block_bytes``, whatever the edge count. Disk:
    the edges are spilled into the temporary folder (8 or 16 bytes per edge, both directions when
    symmetrizing), split by destination into row-range buckets small enough to sort in memory, and
    each bucket is sorted (and deduplicated) on its way into ``indices.npy``: three sequential
    passes over the spill, never a random write.
    """
    n = int(num_nodes)
    if n < 1:
        raise InputError(f"expected num_nodes >= 1 (got {num_nodes})")
    nodes = _node_data(n, x, y, {"train_mask": train_mask, "val_mask": val_mask, "test_mask": test_mask}, name,
                       num_classes)
    idx = _I4 if n - 1 <= INT32_MAX else _I8
    pair = np.dtype([("dst", idx), ("src", idx)])
    meta = _base_meta(nodes, preprocessed=symmetrize and dedupe and drop_self_loops, feature_norm=feature_norm,
                      source=source) | dict(extra or {})
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
