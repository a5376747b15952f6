"""Partition folders written straight from a native dataset folder, holding one part at a time.

Why. The in-memory road (``load_native``, then ``PartitionBook.build``, then ``save_partition``)
widens the edge ids to int64 (``8 E`` bytes), keeps several int64 ``[N]`` tables and every halo
pair, and only then writes a part. At 10^9 directed edges that is more than a 24 GiB machine has.
:func:`save_partition_streaming` makes the same folder (the same ``partition.json``, part files
equal byte for byte) from the dataset's files: the structure through
:class:`~fullgraph.data.formats.native_stream.CSRStream` row blocks, the node arrays by plain reads
of row ranges. Nothing is memory-mapped, since pages of a map that were read count in the
process's resident memory; a second pass over a file finds it in the kernel's page cache instead.

How. The structure is symmetric (the folder must say ``preprocessed``), so row ``u`` lists every
neighbour of ``u`` and part ``p`` can be made from its own rows alone: a node ``u`` of part ``q``
is in the halo of ``p`` iff ``u`` has a neighbour in ``p``, iff ``u``'s row holds a node of ``p``.
So one pass over the rows per part yields that part's local CSR, its halo (a bitmap over the
nodes) and its send lists (the distinct pairs *(peer, inner row)* of its rows), with no global
table of halo pairs. Before those passes, one pass checks the structure (ids in range, rows
strictly ascending, no self loops, symmetric by an order-free checksum) and hashes it as
``Graph.fingerprint()`` hashes the loaded graph (edge ids as int64); one pass hashes the node files.

Memory, at its peak (``benchmarks/partition_memory.py`` measures it), for a graph of N nodes whose
largest part has L local nodes (inner and halo) and E_p local edges:

* about 16 bytes per node of the graph: the row pointer :class:`CSRStream` keeps (8), the global
  -> local id map (4; 8 past 2^31 nodes), the halo bitmap (1), the assignment (1-2), a mask (1);
* 8 bytes per local edge of the largest part (its edge ids, int64, mapped to local ids in place),
  and 8 to 24 bytes per send pair (the distinct *(peer, inner row)* of its rows' cut edges: at
  most one per cut edge and P - 1 per inner node);
* per local node of that part, about 40 bytes (ids, halo owners, degrees, labels, masks) and its
  feature row (4 F bytes dense, 12 per stored entry sparse): the part file's own content;
* temporaries: about 40 bytes per entry of a structure block (160 MiB at the default ``max_edges``
  of 2^22) and two or three times ``block_bytes`` of node data, plus what the allocator keeps of
  freed blocks (tens of MiB).

On R-MAT scale 20 (10^7 directed edges, 100 features, 4 random parts) the peak was 579 MiB (234 of
them the interpreter and imports, 218 the largest part's file); the in-memory writer's, 1079 MiB.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np
import torch

from fullgraph.data.formats.native import INT32_MAX, MASKS
from fullgraph.data.formats.native_read import _check_files, read_native_meta
from fullgraph.data.formats.native_stream import CSRStream, read_rows
from fullgraph.errors import InputError
from fullgraph.ops.csr import BLOCK_ENTRIES, indptr_from_counts, row_spans
from fullgraph.partition.book import _part_dtype
from fullgraph.partition.part import Part
from fullgraph.partition.store import PartitionWriter, checked_meta, partition_doc

__all__ = ["BLOCK_BYTES", "save_partition_streaming"]

BLOCK_BYTES = 64 << 20
"""Bytes of node data (features, labels, masks) read at a time."""

_MASK_FILES = tuple(f"{m}.npy" for m in MASKS)
_K1, _K2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


class _Folder:
    """A native folder checked as ``load_native`` checks it (headers, sizes, and the sha256 of every
    array when ``verify`` asks), read by plain reads of row ranges."""

    def __init__(self, folder, verify: bool | None):
        self.path = Path(folder).expanduser()
        self.meta = read_native_meta(self.path)
        self.offsets = _check_files(self.path, self.meta, verify)
        c = self.meta["counts"]
        self.n, self.e, self.f, self.c = c["num_nodes"], c["num_edges"], c["num_features"], c["num_classes"]
        self.sparse = self.meta["features"] == "sparse_csr"
        self.name = self.meta.get("name") or self.path.name  # what load_native names the graph

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(s) for s in self.meta["files"][name]["shape"])

    def dtype(self, name: str) -> np.dtype:  # the header's: _check_files compared the two
        return np.dtype(self.meta["files"][name]["dtype"])

    def read(self, name: str, a: int, b: int) -> np.ndarray:
        """Rows ``a..b-1`` (first axis) of the array ``name``, in a fresh buffer."""
        shape = self.shape(name)
        width = math.prod(shape[1:])
        out = read_rows(self.path / name, self.offsets[name], self.dtype(name), a * width, (b - a) * width)
        return out.reshape((b - a, *shape[1:]))

    def spans(self, name: str, block_bytes: int) -> list[tuple[int, int]]:
        """Row ranges of the array ``name`` of about ``block_bytes`` each."""
        shape = self.shape(name)
        step = max(1, block_bytes // max(1, math.prod(shape[1:]) * self.dtype(name).itemsize))
        return [(a, min(a + step, shape[0])) for a in range(0, shape[0], step)]


def _checked_assignment(node_part, n: int, parts: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The assignment checked as ``check_node_part`` checks it, without its int64 copy: returned in
    the smallest integer type holding the part ids (a view when it already is), with the part sizes."""
    if isinstance(node_part, torch.Tensor):
        node_part = node_part.detach().cpu().numpy()
    if not isinstance(node_part, np.ndarray):
        raise InputError(f"expected node_part to be a numpy array or tensor (got {type(node_part).__name__})")
    if node_part.ndim != 1 or node_part.size != n:
        raise InputError(f"expected node_part of shape ({n},), one part id per node (got {node_part.shape})")
    if node_part.dtype.kind not in "iu":
        raise InputError(f"expected integer part ids in node_part (got dtype {node_part.dtype})")
    lo, hi = int(node_part.min()), int(node_part.max())
    parts = hi + 1 if parts is None else int(parts)
    if lo < 0 or hi >= parts:
        raise InputError(f"expected part ids in [0, {parts}) (got ids from {lo} to {hi})")
    part = node_part.astype(_part_dtype(parts), copy=False)
    sizes = np.zeros(parts, dtype=np.int64)
    for a in range(0, n, BLOCK_ENTRIES):
        sizes += np.bincount(part[a:a + BLOCK_ENTRIES], minlength=parts)
    empty = np.flatnonzero(sizes == 0).tolist()
    if empty:
        raise InputError(f"expected every one of the {parts} parts to own at least one node (got {len(empty)} "
                         f"empty: part {', '.join(map(str, empty[:10]))}{' ...' if len(empty) > 10 else ''})")
    return part, sizes


def _tensor(a: np.ndarray) -> torch.Tensor:
    """``a`` as a tensor sharing its memory; an empty one made by torch, with the strides the book's
    empty tensors have (``torch.save`` records strides, and numpy leaves some empty arrays' at 0)."""
    return torch.from_numpy(a) if a.size else torch.empty(a.shape, dtype=torch.from_numpy(a).dtype)


def _positions(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``starts[j] + 0..counts[j]-1`` for every ``j``, concatenated: the entries of a set of rows."""
    ends = np.cumsum(counts)
    return np.repeat(starts - (ends - counts), counts) + np.arange(int(ends[-1]) if ends.size else 0)


def _pair_hash(a: np.ndarray, b: np.ndarray) -> int:
    """Σ h(a_i, b_i) mod 2^64 over ordered pairs, h being splitmix64's finalizer of ``a K1 + b K2``.
    Summed over the edges it equals the sum over the reversed edges when the edge set is symmetric,
    and differs otherwise but with probability about 2^-64: a symmetry check that needs no sort."""
    x, t = a.astype(np.uint64), b.astype(np.uint64)  # two temporaries, reused in place
    x *= _K1
    t *= _K2
    x += t
    for shift, mul in ((30, _M1), (27, _M2), (31, None)):
        np.right_shift(x, np.uint64(shift), out=t)
        x ^= t
        if mul is not None:
            x *= mul
    return int(x.sum(dtype=np.uint64))


def _check_and_hash_structure(stream: CSRStream, indptr: np.ndarray, src: _Folder, h, max_edges: int) -> None:
    """One pass over the structure: refused unless it is what ``preprocessed`` promises, and fed to
    ``h`` as ``Graph.fingerprint()`` feeds the loaded graph's ``indptr`` and int64 ``indices``."""
    n, e, where = src.n, src.e, src.path
    if int(indptr[0]) != 0 or int(indptr[-1]) != e or bool((indptr[1:] < indptr[:-1]).any()):
        raise InputError(f"expected {where / 'indptr.npy'} to rise from 0 to {e} (got other values: damaged)")
    h.update(str((n + 1,)).encode())
    h.update(indptr.view(np.uint8))
    h.update(str((e,)).encode())
    balance = 0
    for blk in stream.blocks(max_edges, indptr):
        cols = blk.indices
        h.update(cols.view(np.uint8))
        if not cols.size:
            continue
        if int(cols.min()) < 0 or int(cols.max()) >= n:
            raise InputError(f"expected node ids in [0, {n}) in {where / 'indices.npy'} (got "
                             f"{int(cols.min())}..{int(cols.max())} in rows {blk.r0}..{blk.r1 - 1}: damaged)")
        rows = blk.row_ids()
        if ((cols[1:] <= cols[:-1]) & (rows[1:] == rows[:-1])).any() or (cols == rows).any():
            raise InputError(f"expected a preprocessed structure in {where} (each row strictly ascending: "
                             f"no repeats, no self loops) (got another in rows {blk.r0}..{blk.r1 - 1}: damaged, "
                             "or not preprocessed as meta.json says)")
        balance += _pair_hash(rows, cols) - _pair_hash(cols, rows)
        del blk, cols, rows  # before the next block is read
    if balance % 2**64:
        raise InputError(f"expected a symmetric structure in {where} as meta.json says it is preprocessed (got "
                         "edges without their reverse: damaged); write it again with `fullgraph convert`")


def _check_node_block(src: _Folder, name: str, blk: np.ndarray, state: dict) -> None:
    """What ``load_native`` and ``Graph`` check of node data, on one block of it."""
    problem = None
    if name in ("x.npy", "x_values.npy") and not np.isfinite(blk).all():
        problem = "NaN or infinite features"
    elif name == "y.npy" and blk.ndim == 1 and blk.size and (blk.min() < -1 or blk.max() >= src.c):
        problem = f"labels outside -1..{src.c - 1}"
    elif name == "y.npy" and blk.ndim == 2 and not ((blk == 0) | (blk == 1)).all():
        problem = "multi-label values other than 0 and 1"
    elif name == "x_indices.npy" and blk.size and (blk.min() < 0 or blk.max() >= src.f):
        problem = f"feature column ids outside [0, {src.f})"
    elif name == "x_indptr.npy" and blk.size:
        if blk[0] < state.get(name, 0) or (name not in state and blk[0] != 0) or (blk[1:] < blk[:-1]).any():
            problem = "a decreasing row pointer"
        state[name] = int(blk[-1])
    elif name in _MASK_FILES:
        state[name] = state.get(name, 0) + int(np.count_nonzero(blk))
    if problem:
        raise InputError(f"expected valid node data in {src.path / name} (got {problem})")


def _hash_nodes(src: _Folder, h, block_bytes: int) -> dict:
    """Labels, masks and features fed to ``h`` in ``Graph.fingerprint()``'s order (sparse column
    ids as int64, as the loaded graph holds them), checked on the way; the mask counts."""
    names = ["y.npy", *_MASK_FILES]
    names += ["x_indptr.npy", "x_indices.npy", "x_values.npy"] if src.sparse else ["x.npy"]
    state: dict = {}
    for name in names:
        h.update(str(src.shape(name)).encode())
        for a, b in src.spans(name, block_bytes):
            blk = src.read(name, a, b)
            if name == "x_indices.npy":
                blk = blk.astype(np.int64, copy=False)
            _check_node_block(src, name, blk, state)
            h.update(blk.reshape(-1).view(np.uint8))
            del blk  # before the next block is read: one block at a time
    if src.sparse and state.get("x_indptr.npy") != src.meta["counts"]["feature_nnz"]:
        raise InputError(f"expected x_indptr.npy in {src.path} to end at the {src.meta['counts']['feature_nnz']} "
                         f"stored features (got {state.get('x_indptr.npy')})")
    for m, split in zip(_MASK_FILES, ("train", "val", "test")):
        if state.get(m, 0) != src.meta["counts"]["split_sizes"][split]:
            raise InputError(f"expected {src.meta['counts']['split_sizes'][split]} nodes in {src.path / m} as "
                             f"meta.json says (got {state.get(m, 0)})")
    return state


def _part_rows(stream: CSRStream, indptr: np.ndarray, part: np.ndarray, p: int, halo_mark: np.ndarray,
               max_edges: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """One pass over the structure for part ``p``: its inner nodes, its local row pointer, its rows'
    edges (global ids, in row order), its sorted send keys ``peer * n_inner + inner row``, and its
    cut edges; its halo is marked in ``halo_mark``."""
    inner = np.flatnonzero(part == p)
    local_ptr = indptr_from_counts(indptr[inner + 1] - indptr[inner])
    cols_out = np.empty(int(local_ptr[-1]), dtype=np.int64)
    send, cut, k = [], 0, 0  # k: inner rows met so far
    for blk in stream.blocks(max_edges, indptr):
        sel = np.flatnonzero(part[blk.r0:blk.r1] == p)
        if not sel.size:
            continue
        counts = blk.indptr[sel + 1] - blk.indptr[sel]
        e0, e1 = int(local_ptr[k]), int(local_ptr[k + sel.size])
        cols = cols_out[e0:e1]
        cols[:] = blk.indices[_positions(blk.indptr[sel], counts)]
        owner = part[cols]
        cross = owner != p
        cut += int(np.count_nonzero(cross))
        halo_mark[cols[cross]] = True
        rows = np.repeat(np.arange(k, k + sel.size, dtype=np.int64), counts)[cross]
        send.append(np.unique(owner[cross].astype(np.int64) * inner.size + rows))  # rows end in their block
        k += sel.size
        del blk, owner, cross, rows  # before the next block is read
    send = np.concatenate(send) if send else np.zeros(0, dtype=np.int64)
    send.sort()  # by peer, then inner row: the order of PartitionBook's send lists
    return inner, local_ptr, cols_out, send, cut


def _to_local(cols: np.ndarray, local_ptr: np.ndarray, colmap: np.ndarray, n_local: int, max_edges: int) -> None:
    """The part's edges mapped in place from global to local ids and sorted within each row, block
    by block of whole rows (what ``PartitionBook._local_csr`` does)."""
    for j0, j1 in row_spans(local_ptr, max_edges):
        e0, e1 = int(local_ptr[j0]), int(local_ptr[j1])
        base = np.repeat(np.arange(j0, j1, dtype=np.int64) * n_local, np.diff(local_ptr[j0:j1 + 1]))
        key = colmap[cols[e0:e1]] + base
        key.sort()
        np.subtract(key, base, out=cols[e0:e1])


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


def _make_part(src: _Folder, stream: CSRStream, indptr, part, p: int, P: int, halo_mark, colmap, train: int,
               max_edges: int, block_bytes: int) -> tuple[Part, dict, int]:
    """Part ``p`` as ``PartitionBook.part(p)`` makes it, its row of statistics and its cut edges."""
    inner, local_ptr, cols, send, cut = _part_rows(stream, indptr, part, p, halo_mark, max_edges)
    halo = np.flatnonzero(halo_mark)
    halo = halo[np.argsort(part[halo], kind="stable")]  # grouped by owner, ascending ids within a group
    owner = part[halo].astype(np.int64)
    n_inner, n_local = inner.size, inner.size + halo.size
    colmap[inner] = np.arange(n_inner)
    colmap[halo] = np.arange(n_inner, n_local)
    _to_local(cols, local_ptr, colmap, n_local, max_edges)
    local = np.concatenate([inner, halo])
    x = (_sparse_x if src.sparse else _dense_x)(src, part, p, halo_mark, colmap, n_local, block_bytes)
    halo_mark[halo] = False  # cleared for the next part
    t = _tensor  # but ``cols`` is made as the book makes its indices, empty ones included
    obj = Part(part_id=p, num_parts=P, inner=t(inner), halo=t(halo), halo_owner=t(owner),
               recv_counts=t(np.bincount(owner, minlength=P)), send_idx=t(send % n_inner),
               send_counts=t(np.bincount(send // n_inner, minlength=P)), indptr=t(local_ptr),
               indices=torch.from_numpy(cols),
               degree=t(indptr[local + 1] - indptr[local]), x=x,
               **_inner_rows(src, part, p, n_inner, block_bytes), global_num_nodes=src.n,
               global_num_train=train, num_classes=src.c, name=src.name)
    row = {"part": p, "inner": n_inner, "halo": int(halo.size), "halo_ratio": halo.size / n_inner,
           "edges": int(local_ptr[-1]), "send": int(send.size)}
    return obj, row, cut


def save_partition_streaming(folder: str | os.PathLike, node_part, out_dir, meta: dict | None = None, *,
                             num_parts: int | None = None, verify: bool | None = None,
                             max_edges: int = BLOCK_ENTRIES, block_bytes: int = BLOCK_BYTES) -> Path:
    """Write the partition ``node_part`` of the native dataset ``folder`` to ``out_dir``: the folder
    ``save_partition(PartitionBook.build(load_native(folder), node_part), graph, out_dir, meta)``
    writes, without loading the graph (see the module doc for how, and for the memory).

    ``node_part``: one part id per node (numpy array or tensor; int8/int16 keep it small, since it
    is used in its own type); ``num_parts``: default ``max + 1``. ``verify``: the sha256 check of
    the dataset's files, as ``load_native``'s. ``max_edges`` (edges per structure block) and
    ``block_bytes`` (bytes per read of node data) bound the temporaries. The folder must be
    preprocessed (symmetric, no repeated edges, no self loops): its meta.json must say so, and the
    structure is checked. Returns ``out_dir`` as a path.
    """
    meta = checked_meta(meta)
    src = _Folder(folder, verify)
    if src.meta.get("preprocessed") is not True:
        raise InputError(f"expected a preprocessed dataset folder (symmetric, no repeated edges, no self loops) "
                         f"at {src.path} (got meta.json preprocessed={src.meta.get('preprocessed')!r}); write it "
                         "again with `fullgraph convert`, which preprocesses it")
    part, sizes = _checked_assignment(node_part, src.n, num_parts)
    writer = PartitionWriter(out_dir)  # a folder it may not replace is refused before the passes
    stream = CSRStream.of_folder(src.path)
    indptr = stream.indptr()
    h = hashlib.sha256()
    _check_and_hash_structure(stream, indptr, src, h, max_edges)
    train = _hash_nodes(src, h, block_bytes)["train_mask.npy"]
    facts = {"graph": src.name, "fingerprint": h.hexdigest(), "num_nodes": src.n, "num_edges": src.e,
             "num_features": src.f, "num_classes": src.c, "multilabel": bool(src.meta["counts"]["multilabel"]),
             "sparse_features": src.sparse, "global_num_train": train}
    halo_mark = np.zeros(src.n, dtype=bool)
    colmap = np.empty(src.n, dtype=np.int32 if src.n <= INT32_MAX else np.int64)
    stats, cut = [], 0
    with writer:
        for p in range(sizes.size):
            obj, row, cut_p = _make_part(src, stream, indptr, part, p, sizes.size, halo_mark, colmap, train,
                                         max_edges, block_bytes)
            writer.write_part(obj)
            del obj
            stats.append(row)
            cut += cut_p
        return writer.commit(partition_doc(facts, stats, cut, writer.files, meta))
