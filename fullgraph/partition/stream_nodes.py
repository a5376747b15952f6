"""The node data of one part as the streaming partition writer (:mod:`.stream_store`) reads it.

Labels and masks of the part's inner nodes, and the feature rows (dense, or sparse CSR) of its
local nodes (inner and halo), each read block by block of rows from the dataset folder
(:class:`.stream_folder._Folder`) and kept only where the part holds the node: a part's own arrays
and one block of the files at a time. :func:`_tensor` makes the part's tensors as
``PartitionBook`` makes them, so that the part files are equal byte for byte.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.ops.csr import indptr_from_counts, row_spans
from fullgraph.partition.stream_folder import _MASK_FILES, _Folder, _positions


def _tensor(a: np.ndarray) -> torch.Tensor:
    """``a`` as a tensor sharing its memory; an empty one made by torch, with the strides the book's
    empty tensors have (``torch.save`` records strides, and numpy leaves some empty arrays' at 0)."""
    return torch.from_numpy(a) if a.size else torch.empty(a.shape, dtype=torch.from_numpy(a).dtype)


def _inner_rows(src: _Folder, part: np.ndarray, p: int, n_inner: int, block_bytes: int) -> dict:
    """Labels and masks of part ``p``'s inner nodes (ascending ids), read block by block."""
    out = {f: np.empty((n_inner, *src.shape(f)[1:]), dtype=src.dtype(f)) for f in ("y.npy", *_MASK_FILES)}
    k = 0
    for a, b in src.spans("y.npy", block_bytes):
        sel = np.flatnonzero(part[a:b] == p)
        if sel.size:
            for f, arr in out.items():
                arr[k:k + sel.size] = src.read(f, a, b)[sel]
            k += sel.size
    return {f[:-4]: _tensor(arr) for f, arr in out.items()}


def _local_in(part: np.ndarray, p: int, halo_mark: np.ndarray, a: int, b: int) -> np.ndarray:
    """The local nodes (inner or halo of part ``p``) among ``a..b-1``, as global ids."""
    return a + np.flatnonzero((part[a:b] == p) | halo_mark[a:b])


def _dense_x(src: _Folder, part, p: int, halo_mark, colmap, n_local: int, block_bytes: int) -> torch.Tensor:
    """Feature rows of the local nodes, in local order, from the blocks of ``x.npy`` that hold any."""
    x = np.empty((n_local, src.f), dtype=np.float32)
    for a, b in src.spans("x.npy", block_bytes):
        ids = _local_in(part, p, halo_mark, a, b)
        if ids.size:
            x[colmap[ids]] = src.read("x.npy", a, b)[ids - a]
    return _tensor(x)


def _sparse_spans(src: _Folder, block_bytes: int):
    """Row ranges of the sparse features with their row pointer, at most about ``block_bytes`` of
    stored entries each (a single row when it alone holds more)."""
    step = max(1, block_bytes // 8)
    for a in range(0, src.n, step):
        ip = src.read("x_indptr.npy", a, min(a + step, src.n) + 1)
        for r0, r1 in row_spans(ip, max(1, block_bytes // 12)):
            yield a + r0, a + r1, ip[r0:r1 + 1]


def _sparse_x(src: _Folder, part, p: int, halo_mark, colmap, n_local: int, block_bytes: int) -> torch.Tensor:
    """Sparse feature rows of the local nodes (entries in the stored order, int64 column ids: what
    ``take_rows`` gives), in two passes: the rows' lengths, then their entries."""
    counts = np.zeros(n_local, dtype=np.int64)
    for a, b, ip in _sparse_spans(src, block_bytes):
        ids = _local_in(part, p, halo_mark, a, b)
        counts[colmap[ids]] = ip[ids - a + 1] - ip[ids - a]
    crow = indptr_from_counts(counts)
    col, val = np.empty(int(crow[-1]), dtype=np.int64), np.empty(int(crow[-1]), dtype=np.float32)
    for a, b, ip in _sparse_spans(src, block_bytes):
        ids = _local_in(part, p, halo_mark, a, b)
        c = ip[ids - a + 1] - ip[ids - a]
        if not c.sum():
            continue
        take = _positions(ip[ids - a] - ip[0], c)
        put = _positions(crow[colmap[ids]], c)
        col[put] = src.read("x_indices.npy", int(ip[0]), int(ip[-1]))[take]
        val[put] = src.read("x_values.npy", int(ip[0]), int(ip[-1]))[take]
    return torch.sparse_csr_tensor(_tensor(crow), _tensor(col), _tensor(val),
                                   size=(n_local, src.f), check_invariants=False)
