"""The on-disk sort of :func:`~fullgraph.data.formats.native_edges.write_native_edges`: edges that
arrive in blocks put in CSR order without ever being held whole.

The edges are spilled to disk as they come (pass 1), split by destination into row ranges small
enough to sort in memory (pass 2: ``bucket-i.spill`` files of whole rows), and each range is sorted
(and deduplicated) on its way into ``sorted.spill`` (pass 3), which is copied into ``indices.npy``:
sequential passes over the spill, never a random write. All the spills live in the folder writer's
temporary folder (:class:`~fullgraph.data.formats.native._FolderWriter`).

Without edge data a spilled edge is a ``(dst, src)`` pair (8 or 16 bytes, both directions when
symmetrizing). With edge data (:class:`_Payload`) it is a record of its ends, the flag of a reverse
edge added by symmetrizing, and its data; the sort keeps one record per edge (weights of repeated
edges summed, a repeated (edge, relation) kept once, features refused when repeated: the module doc of :mod:`.native_edges`
says what is stored) and writes the data in CSR order to one spill per kind beside
``sorted.spill`` (:class:`_DataSpills`), copied into ``edge_weight.npy``, ``edge_attr.npy`` and
``edge_type.npy`` at the end. Memory: the row counts (``int64 [N]``) and a few times the writer's
``block_bytes``, the buckets being sized to fit them.
"""

from __future__ import annotations

import numpy as np

from fullgraph.data.formats.native import _F4, _I8, EDGE_FILES, _FolderWriter
from fullgraph.errors import InputError
from fullgraph.ops.csr import row_spans


def _spill_edges(path, pairs, n: int, pair: np.dtype, symmetrize: bool,
                 drop_self_loops: bool) -> tuple[np.ndarray, int]:
    """Pass 1: ``(dst, src)`` pairs appended to ``path`` as they come (both directions when
    symmetrizing); each row's edge count and the number of pairs written."""
    counts = np.zeros(n, dtype=np.int64)
    spilled = 0
    with open(path, "wb") as f:
        for src, dst, edge in pairs:
            if edge is not None:
                raise InputError("expected every edge block to carry the same edge data (got a block with "
                                 f"{', '.join(edge) or 'none'} after blocks without)")
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


def _bucket_edges(w: _FolderWriter, indptr: np.ndarray, spilled: int, pair: np.dtype, step: int,
                  edge_bytes: int = 32) -> list[int]:
    """Pass 2: the spill split by destination into ``bucket-i.spill`` files of whole rows, each small
    enough to sort in memory (``edge_bytes`` per edge: ~32 for the ends alone; at most ~512 files);
    the buckets' row bounds."""
    per_bucket = max(w.block_bytes // edge_bytes, -(-spilled // 512), 1)
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


class _Payload:
    """The data every spilled edge carries (the kinds of the first block, which every block must
    match) and the record each is spilled as: its ends, ``rev`` (a reverse edge added by
    symmetrizing), then its weight, features and type. Tracks the largest type seen (``R``)."""

    def __init__(self, first: dict, idx: np.dtype, symmetrize: bool):
        self.kinds = tuple(k for k in ("weight", "attr", "type") if k in first)
        self.width = int(first["attr"].shape[1]) if "attr" in first else None
        fields = [("dst", idx), ("src", idx)] + ([("rev", np.uint8)] if symmetrize else [])
        fields += [("weight", _F4)] * ("weight" in self.kinds) + [("attr", _F4, (self.width,))] * ("attr" in self.kinds)
        fields += [("type", _I8)] * ("type" in self.kinds)
        self.record = np.dtype(fields)
        self.max_type = -1

    def check(self, edge: dict | None, i: int) -> dict:
        kinds = () if edge is None else tuple(k for k in ("weight", "attr", "type") if k in edge)
        width = int(edge["attr"].shape[1]) if edge is not None and "attr" in edge else None
        if kinds != self.kinds or width != self.width:
            def what(k, d):
                return ", ".join(f"{x}{f' ({d} features)' if x == 'attr' else ''}" for x in k) or "none"
            raise InputError(f"expected every edge block to carry the same edge data (got {what(kinds, width)} in "
                             f"edge block {i}, {what(self.kinds, self.width)} in the first)")
        if "type" in edge and edge["type"].size:
            self.max_type = max(self.max_type, int(edge["type"].max()))
        return edge

    @property
    def sort_bytes(self) -> int:
        """Bytes per edge of a bucket being sorted: the record, and about five int64 per edge."""
        return self.record.itemsize + 48


def _spill_records(path, pairs, first, n: int, load: _Payload, symmetrize: bool,
                   chunk_bytes: int) -> tuple[np.ndarray, int]:
    """Pass 1 with edge data: a record per edge appended to ``path`` as it comes; when symmetrizing
    also one per reverse edge (``rev`` 1, the edge's data), but none for a self loop (its own
    reverse). Loops stay in the spill until the sort, which sees repeats among them too (as
    ``Graph.from_edges`` does) before dropping them. Each row's record count, and how many."""
    counts = np.zeros(n, dtype=np.int64)
    spilled = 0
    step = max(1, chunk_bytes // (2 * load.record.itemsize))  # records of a piece of a block: both directions
    with open(path, "wb") as f:
        for i, (src_all, dst_all, edge_all) in enumerate(_then_first(first, pairs)):
            edge_all = load.check(edge_all, i)
            for a in range(0, src_all.size, step):  # a block as it came may be far larger than a record block
                src, dst = src_all[a:a + step], dst_all[a:a + step]
                edge = {kind: v[a:a + step] for kind, v in edge_all.items()}
                back = np.flatnonzero(src != dst) if symmetrize else np.zeros(0, dtype=np.int64)
                k = src.size
                block = np.empty(k + back.size, dtype=load.record)
                block["dst"][:k], block["src"][:k] = dst, src
                block["dst"][k:], block["src"][k:] = src[back], dst[back]
                if symmetrize:
                    block["rev"][:k], block["rev"][k:] = 0, 1
                for kind in load.kinds:
                    block[kind][:k] = edge[kind]
                    block[kind][k:] = edge[kind][back]
                f.write(memoryview(block).cast("B"))
                spilled += block.size
                del block, back, edge
            counts += np.bincount(dst_all, minlength=n)  # per block as it came: a pass over N each time
            if symmetrize:
                counts += np.bincount(src_all[src_all != dst_all], minlength=n)
            del src_all, dst_all, edge_all
    return counts, spilled


def _then_first(first, rest):
    yield first
    yield from rest


class _DataSpills:
    """Pass 3's outputs with edge data: ``sorted.spill`` (the source ids) and one spill per kind, in
    CSR order. A type spilled for a reverse edge is stored as ``-1 - t`` until ``R`` is known."""

    def __init__(self, tmp, load: _Payload):
        self.tmp, self.load = tmp, load
        self.files = {"src": open(tmp / "sorted.spill", "wb")}
        self.files |= {k: open(tmp / f"{k}.spill", "wb") for k in load.kinds}
        self.reverse = False  # whether any reverse edge was stored (then R relations become 2R)

    def write(self, name: str, a: np.ndarray) -> None:
        if a.size:
            self.files[name].write(memoryview(np.ascontiguousarray(a).reshape(-1)).cast("B"))

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def _repeat_error(part: np.ndarray, at: int, times: int) -> InputError:
    """The refusal of a repeated edge with features or types, naming it as listed (record ``at``)."""
    u, v = int(part["src"][at]), int(part["dst"][at])
    if "rev" in part.dtype.names and part["rev"][at]:
        u, v = v, u
    what = "edge (and relation)" if "type" in part.dtype.names else "edge"
    return InputError(f"expected each {what} once when edges carry features (got a repeated edge, e.g. "
                      f"{u} -> {v} listed {times} times): merge them first (weights alone are summed)")


def paired_relations(w: _FolderWriter, bounds: list[int], n: int, load: _Payload, relations: int) -> np.ndarray | None:
    """When symmetrizing typed edges with reverse relations: the first pairing of relations
    (``data.typed.relations.pairings``: each with itself, then ``r <-> (r + R/2) mod R``) in which every edge's
    reverse is already there (then no reverse is added and ``R`` stays, as ``preprocess.symmetrize``
    leaves such a graph), else ``None``. At most one read of the buckets per pairing."""
    from fullgraph.data.typed.relations import pairings

    for pair in pairings(relations, True):
        if all(_bucket_paired(np.fromfile(w.tmp / f"bucket-{i}.spill", dtype=load.record), r0, n, pair, relations)
               for i, r0 in enumerate(bounds[:-1])):
            return pair
    return None


def _bucket_paired(part: np.ndarray, r0: int, n: int, pair: np.ndarray, relations: int) -> bool:
    """Whether every reverse record of a bucket has its forward edge in the paired relation."""
    key = part["dst"].astype(np.int64)
    key -= r0
    key *= n
    key += part["src"]
    t = part["type"].astype(np.int64)
    fwd = part["rev"] == 0
    return bool(np.isin(key[~fwd] * relations + pair[t[~fwd]], key[fwd] * relations + t[fwd]).all())


def _sort_records(w: _FolderWriter, bounds: list[int], counts: np.ndarray, n: int, idx: np.dtype, load: _Payload,
                  symmetrize: bool, drop_self_loops: bool, reverse_relations: bool,
                  pairing: np.ndarray | None = None) -> tuple[int, _DataSpills]:
    """Pass 3 with edge data: each bucket's records sorted by ``(row, column)`` (and relation, where
    edges carry types: an edge is ``(src, dst, relation)``, so one pair in two relations is two
    edges, and a reverse record stands in its reverse relation), forward edges before reverse ones
    and in the order listed among equal edges (stable sorts), and one record kept per edge: the
    first, which is the edge as listed where it was (its reverse's data otherwise); a repeated
    edge's weights summed in float64 in the order listed, as ``Graph.from_edges`` sums them, or
    refused with features; loops dropped after that check. ``pairing`` (:func:`paired_relations`):
    a reverse record stands in its paired relation, where the forward edge is already. ``counts``
    recounted in place; the number of edges stored and the spills."""
    out = _DataSpills(w.tmp, load)
    stored = 0
    try:
        for i, (r0, r1) in enumerate(zip(bounds[:-1], bounds[1:])):
            path = w.tmp / f"bucket-{i}.spill"
            part = np.fromfile(path, dtype=load.record)
            path.unlink()
            kept, weight = _kept_records(part, r0, n, load, symmetrize, reverse_relations, pairing)
            if drop_self_loops:
                keep = np.flatnonzero(part["src"][kept] != part["dst"][kept])
                kept = kept[keep]
                weight = None if weight is None else weight[keep]
            rows = part["dst"][kept].astype(np.int64)
            counts[r0:r1] = np.bincount(rows - r0, minlength=r1 - r0)
            del rows
            _write_kept(out, part, kept, weight, idx, symmetrize and reverse_relations)
            stored += kept.size
            del part, kept, weight
    finally:
        out.close()
    return stored, out


_REVERSE_RANK = 1 << 40
"""Added to a reverse record's type in the sort key while ``R`` is unknown: relation ``t + R`` sorts
after every forward relation, as it will stand in the CSR."""


def _sorted_records(part: np.ndarray, r0: int, n: int, symmetrize: bool,
                    rel: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The order that sorts a bucket's records (its first row ``r0``) by ``(row, column)`` (then by
    ``rel``, each record's relation rank, where given), forward records first and each side in
    spill (= listed) order among equal edges, and the flag of each sorted record that starts an
    edge (ends, or relation, unlike the previous record's)."""
    key = part["dst"].astype(np.int64)
    key -= r0
    key *= n
    key += part["src"]
    if symmetrize:  # forward records first, each side in spill (= listed) order: then a stable sort
        order = np.concatenate([np.flatnonzero(part["rev"] == 0), np.flatnonzero(part["rev"] != 0)])
    else:
        order = np.arange(key.size)
    key = key[order]
    o = np.argsort(key, kind="stable") if rel is None else np.lexsort((rel[order], key))
    order, key = order[o], key[o]
    del o
    start = np.ones(key.size, dtype=bool)
    np.not_equal(key[1:], key[:-1], out=start[1:])
    if rel is not None and key.size:
        r = rel[order]
        start[1:] |= r[1:] != r[:-1]
    return order, start


def _kept_records(part: np.ndarray, r0: int, n: int, load: _Payload, symmetrize: bool,
                  reverse_relations: bool = True,
                  pairing: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The record each edge of a bucket keeps (the first of its sorted records), in CSR order, and
    the kept edges' weights (None without): a repeated edge's summed in float64 in the order listed,
    over the records of its kept side; a repeated edge refused when edges carry features. With
    types an edge is ``(src, dst, relation)``: a pair listed twice in one relation is kept once, a
    pair in two relations is two edges."""
    rel = None
    if "type" in load.kinds:
        rel = part["type"].astype(np.int64)
        if symmetrize and reverse_relations:
            rel = np.where(part["rev"] != 0, rel + _REVERSE_RANK if pairing is None else pairing[rel], rel)
    order, start = _sorted_records(part, r0, n, symmetrize, rel)
    del rel
    kept = order[start]  # the record each edge keeps
    group = np.cumsum(start) - 1  # the edge of each sorted record
    del start
    same = part["rev"][order] == part["rev"][kept][group] if symmetrize else None  # its kept side's
    listed = np.bincount(group if same is None else group[same], minlength=kept.size)
    repeated = np.flatnonzero(listed > 1)
    if repeated.size and "attr" in load.kinds:
        raise _repeat_error(part, int(kept[repeated[0]]), int(listed[repeated[0]]))
    weight = part["weight"][kept] if "weight" in load.kinds else None
    if repeated.size and weight is not None:
        pick = np.ones(order.size, dtype=bool) if same is None else same
        sums = np.bincount(group[pick], weights=part["weight"][order[pick]].astype(np.float64),
                           minlength=kept.size)
        weight[repeated] = sums[repeated].astype(np.float32)
    return kept, weight


def _write_kept(out: _DataSpills, part: np.ndarray, kept: np.ndarray, weight: np.ndarray | None, idx: np.dtype,
                reverse: bool) -> None:
    """The kept records' source ids and data appended to the spills; ``reverse`` (symmetrizing with
    reverse relations): a reverse edge's type spilled as ``-1 - t``, made ``t + R`` at the end."""
    out.write("src", part["src"][kept].astype(idx, copy=False))
    if weight is not None:
        out.write("weight", weight)
    if "attr" in out.load.kinds:
        out.write("attr", part["attr"][kept])
    if "type" in out.load.kinds:
        t = part["type"][kept]
        if reverse:
            back = part["rev"][kept] != 0
            out.reverse |= bool(back.any())
            t[back] = -1 - t[back]
        out.write("type", t)


def _write_edge_files(w: _FolderWriter, load: _Payload, stored: int, step_bytes: int, relations: int) -> None:
    """The kinds' spills copied into their ``.npy`` files (types of reverse edges become ``t + R``)."""
    for kind in load.kinds:
        path = w.tmp / f"{kind}.spill"
        dtype, shape = (_F4, (stored, load.width)) if kind == "attr" else (_F4, (stored,)) if kind == "weight" \
            else (_I8, (stored,))
        row = dtype.itemsize * (load.width if kind == "attr" else 1)
        step = max(1, step_bytes // row)

        def blocks(path=path, dtype=dtype, row=row, step=step, kind=kind):
            for a in range(0, stored, step):
                b = np.fromfile(path, dtype=dtype, count=min(step, stored - a) * (row // dtype.itemsize),
                                offset=a * row)
                if kind == "type":
                    back = b < 0
                    b[back] = -1 - b[back] + relations
                yield b.reshape(-1, load.width) if kind == "attr" else b

        w.array(EDGE_FILES[kind], dtype, shape, blocks())
        path.unlink()


def _write_structure(w: _FolderWriter, indptr: np.ndarray, n: int, idx: np.dtype, stored: int, step: int) -> None:
    """``indptr.npy``, and ``indices.npy`` copied from ``sorted.spill`` ``step`` entries at a time."""
    w.array("indptr.npy", _I8, (n + 1,), (indptr[i:i + step] for i in range(0, n + 1, step)))
    w.array("indices.npy", idx, (stored,), (
        np.fromfile(w.tmp / "sorted.spill", dtype=idx, count=min(step, stored - i), offset=i * idx.itemsize)
        for i in range(0, stored, step)))
    (w.tmp / "sorted.spill").unlink()
