"""Partition folders written straight from a native dataset folder, holding one part at a time.

Why. The in-memory road (``load_native``, then ``PartitionBook.build``, then ``save_partition``)
widens the edge ids to int64 (``8 E`` bytes), keeps several int64 ``[N]`` tables and every halo
pair, and only then writes a part. At 10^9 directed edges that is more than a 24 GiB machine has.
:func:`save_partition_streaming` makes the same folder (the same ``partition.json``, part files
equal byte for byte) from the dataset's files: the structure through
:class:`~fullgraph.data.formats.native_stream.CSRStream` row blocks, the node arrays by plain reads
of row ranges (:mod:`.stream_folder`: nothing is memory-mapped).

How. The structure is symmetric (the folder must say ``preprocessed``), so row ``u`` lists every
neighbour of ``u`` and part ``p`` can be made from its own rows alone: a node ``u`` of part ``q``
is in the halo of ``p`` iff ``u`` has a neighbour in ``p``, iff ``u``'s row holds a node of ``p``.
So one pass over the rows per part yields that part's local CSR, its halo (a bitmap over the
nodes) and its send lists (the distinct pairs *(peer, inner row)* of its rows), with no global
table of halo pairs (this module). Before those passes, one pass checks the structure and hashes
it as ``Graph.fingerprint()`` hashes the loaded graph, and one pass checks and hashes the node and
edge files (:mod:`.stream_check`). A part's labels, masks and features are read block by block
(:mod:`.stream_nodes`).

Edge data (a version-3 folder: ``edge_weight.npy``, ``edge_attr.npy``, ``edge_type.npy``) goes into
the parts as the in-memory writer puts it (``Part.edata``): read by position in the same pass that
reads a part's rows, it follows the entries through the sort of each row by local column id; with
weights the parts' ``degree`` is the weighted in-degree (:mod:`.stream_edges`). A typed graph's
``node_types`` record goes from the folder's ``meta.json`` into ``partition.json`` and into the
fingerprint, as ``save_partition`` writes them from ``Graph.node_types``; the checking pass checks
the edges, features and splits against the types as ``Graph`` does (:mod:`.stream_check`).

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
  freed blocks (tens of MiB);
* with edge data: 4 bytes per node of the graph (the weighted degrees, with weights), and per local
  edge of the largest part 16 bytes (its global id and its place in the sorted rows) and twice its
  data's bytes (read in row order, then put in the local order), plus a structure block's worth of
  each edge file as it is read;
* for a typed graph with relations, in the checking pass, about 32 bytes per entry of a structure
  block (its relations, read again, and its ends' types).

On R-MAT scale 20 (10^7 directed edges, 100 features, 4 random parts) the peak was 579 MiB (234 of
them the interpreter and imports, 218 the largest part's file); the in-memory writer's, 1079 MiB.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import torch

from fullgraph.data.formats.native import INT32_MAX
from fullgraph.data.formats.native_stream import CSRStream
from fullgraph.errors import InputError
from fullgraph.ops.csr import BLOCK_ENTRIES, indptr_from_counts, row_spans
from fullgraph.ops.edge_data import EdgeFacts
from fullgraph.partition.book import _part_dtype
from fullgraph.partition.part import Part
from fullgraph.partition.store import PartitionWriter, checked_meta, partition_doc
from fullgraph.partition.stream_check import _check_and_hash_structure, _hash_nodes
from fullgraph.partition.stream_edges import _PartEdges
from fullgraph.partition.stream_folder import _Folder, _positions
from fullgraph.partition.stream_nodes import _dense_x, _inner_rows, _sparse_x, _tensor

__all__ = ["BLOCK_BYTES", "save_partition_streaming"]

BLOCK_BYTES = 64 << 20
"""Bytes of node data (features, labels, masks) read at a time."""


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


def _part_rows(stream: CSRStream, indptr: np.ndarray, part: np.ndarray, p: int, halo_mark: np.ndarray,
               max_edges: int, edges: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """One pass over the structure for part ``p``: its inner nodes, its local row pointer, its rows'
    edges (global ids, in row order), its sorted send keys ``peer * n_inner + inner row``, and its
    cut edges; its halo is marked in ``halo_mark``. ``edges`` (:class:`_PartEdges`): also the rows'
    entries' global positions and edge data, in row order, read with the blocks that hold them."""
    inner = np.flatnonzero(part == p)
    local_ptr = indptr_from_counts(indptr[inner + 1] - indptr[inner])
    cols_out = np.empty(int(local_ptr[-1]), dtype=np.int64)
    if edges is not None:
        edges.start(int(local_ptr[-1]))
    send, cut, k = [], 0, 0  # k: inner rows met so far
    for blk in stream.blocks(max_edges, indptr):
        sel = np.flatnonzero(part[blk.r0:blk.r1] == p)
        if not sel.size:
            continue
        counts = blk.indptr[sel + 1] - blk.indptr[sel]
        e0, e1 = int(local_ptr[k]), int(local_ptr[k + sel.size])
        cols = cols_out[e0:e1]
        take = _positions(blk.indptr[sel], counts)
        cols[:] = blk.indices[take]
        if edges is not None:
            edges.read(int(indptr[blk.r0]), take, e0, e1)
        del take
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


def _to_local(cols: np.ndarray, local_ptr: np.ndarray, colmap: np.ndarray, n_local: int, max_edges: int,
              carry: bool = False) -> np.ndarray | None:
    """The part's edges mapped in place from global to local ids and sorted within each row, block
    by block of whole rows (what ``PartitionBook._local_csr`` does). ``carry``: returns the order
    the entries were put in (positions in row order), by which their edge data follows them."""
    perm = np.empty(cols.size, dtype=np.int64) if carry else None
    for j0, j1 in row_spans(local_ptr, max_edges):
        e0, e1 = int(local_ptr[j0]), int(local_ptr[j1])
        base = np.repeat(np.arange(j0, j1, dtype=np.int64) * n_local, np.diff(local_ptr[j0:j1 + 1]))
        key = colmap[cols[e0:e1]] + base
        if carry:  # stable: one pair in two relations keeps the graph's (column, type) order
            order = np.argsort(key, kind="stable")
            key = key[order]
            np.add(order, e0, out=perm[e0:e1])
            del order
        else:
            key.sort()
        np.subtract(key, base, out=cols[e0:e1])
    return perm


def _make_part(src: _Folder, stream: CSRStream, indptr, part, p: int, P: int, halo_mark, colmap, train: int,
               max_edges: int, block_bytes: int, degree: np.ndarray | None = None) -> tuple[Part, dict, int]:
    """Part ``p`` as ``PartitionBook.part(p)`` makes it, its row of statistics and its cut edges.
    ``degree``: every node's weighted in-degree, for a graph with edge weights."""
    edges = _PartEdges(src) if src.kinds else None
    inner, local_ptr, cols, send, cut = _part_rows(stream, indptr, part, p, halo_mark, max_edges, edges)
    halo = np.flatnonzero(halo_mark)
    halo = halo[np.argsort(part[halo], kind="stable")]  # grouped by owner, ascending ids within a group
    owner = part[halo].astype(np.int64)
    n_inner, n_local = inner.size, inner.size + halo.size
    colmap[inner] = np.arange(n_inner)
    colmap[halo] = np.arange(n_inner, n_local)
    perm = _to_local(cols, local_ptr, colmap, n_local, max_edges, carry=edges is not None)
    edata = None if edges is None else edges.edata(perm)
    del perm
    local = np.concatenate([inner, halo])
    x = (_sparse_x if src.sparse else _dense_x)(src, part, p, halo_mark, colmap, n_local, block_bytes)
    halo_mark[halo] = False  # cleared for the next part
    t = _tensor  # but ``cols`` is made as the book makes its indices, empty ones included
    obj = Part(part_id=p, num_parts=P, inner=t(inner), halo=t(halo), halo_owner=t(owner),
               recv_counts=t(np.bincount(owner, minlength=P)), send_idx=t(send % n_inner),
               send_counts=t(np.bincount(send // n_inner, minlength=P)), indptr=t(local_ptr),
               indices=torch.from_numpy(cols),
               degree=t(indptr[local + 1] - indptr[local] if degree is None else degree[local]), x=x, edata=edata,
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
    h.update(src.fingerprint_prefix())
    degree = _check_and_hash_structure(stream, indptr, src, h, max_edges)
    train = _hash_nodes(src, h, block_bytes)["train_mask.npy"]
    facts = {"graph": src.name, "fingerprint": h.hexdigest(), "num_nodes": src.n, "num_edges": src.e,
             "num_features": src.f, "num_classes": src.c, "multilabel": bool(src.meta["counts"]["multilabel"]),
             "sparse_features": src.sparse, "global_num_train": train,
             **EdgeFacts.of_record(src.meta["counts"]).record(), **(src.types.record() if src.types else {})}
    halo_mark = np.zeros(src.n, dtype=bool)
    colmap = np.empty(src.n, dtype=np.int32 if src.n <= INT32_MAX else np.int64)
    stats, cut = [], 0
    with writer:
        for p in range(sizes.size):
            obj, row, cut_p = _make_part(src, stream, indptr, part, p, sizes.size, halo_mark, colmap, train,
                                         max_edges, block_bytes, degree)
            writer.write_part(obj)
            del obj
            stats.append(row)
            cut += cut_p
        return writer.commit(partition_doc(facts, stats, cut, writer.files, meta))
