"""The checking pass of the streaming partition writer (:mod:`.stream_store`): the dataset folder
checked and fingerprinted before any part is written.

One pass over the structure refuses it unless it is what ``preprocessed`` promises (ids in range,
rows strictly ascending, by relation too where edges carry one, no self loops, symmetric by an order-free checksum, :func:`_pair_hash`)
and hashes it as ``Graph.fingerprint()`` hashes the loaded graph (edge ids as int64); with edge
weights it also sums every node's weighted in-degree (:func:`.stream_edges._row_weight_sums`). One
pass over the node files and the edge files checks them as ``load_native`` and ``Graph`` do (finite
features and edge data, labels and edge types in range, mask counts as meta.json says) and hashes
them in ``Graph.fingerprint()``'s order. Each pass holds one block at a time.

A typed graph (a ``node_types`` record in ``meta.json``) is checked as ``data.checks.check_node_types``
checks the loaded one (:class:`_TypeCheck`), in the same passes: each edge's ends against its
relation's types (its type read by position beside the structure block), sparse feature columns
within their row's type's block, and splits on the labelled types only. A node's type follows from
its id (ids are contiguous per type), so no pass holds more than its block for it.
"""

from __future__ import annotations

import numpy as np

from fullgraph.data.formats.native import EDGE_FILES
from fullgraph.data.formats.native_stream import CSRStream
from fullgraph.errors import InputError
from fullgraph.partition.stream_edges import _row_weight_sums
from fullgraph.partition.stream_folder import _MASK_FILES, _Folder

_K1, _K2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


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


def _check_and_hash_structure(stream: CSRStream, indptr: np.ndarray, src: _Folder, h,
                              max_edges: int) -> np.ndarray | None:
    """One pass over the structure: refused unless it is what ``preprocessed`` promises, and fed to
    ``h`` as ``Graph.fingerprint()`` feeds the loaded graph's ``indptr`` and int64 ``indices``. With
    edge weights, also every node's weighted in-degree (float32 ``[N]``): each row's weights summed
    in float64 in entry order, the bits of ``ops.adjacency.weighted_in_degree`` on the loaded graph."""
    n, e, where = src.n, src.e, src.path
    degree = np.zeros(n, dtype=np.float32) if "weight" in src.kinds else None  # a row without entries: 0
    if int(indptr[0]) != 0 or int(indptr[-1]) != e or bool((indptr[1:] < indptr[:-1]).any()):
        raise InputError(f"expected {where / 'indptr.npy'} to rise from 0 to {e} (got other values: damaged)")
    h.update(str((n + 1,)).encode())
    h.update(indptr.view(np.uint8))
    h.update(str((e,)).encode())
    balance = 0
    typed = _TypeCheck(src) if src.types is not None and src.types.relations else None
    for blk in stream.blocks(max_edges, indptr):
        cols = blk.indices
        h.update(cols.view(np.uint8))
        if not cols.size:
            continue
        if int(cols.min()) < 0 or int(cols.max()) >= n:
            raise InputError(f"expected node ids in [0, {n}) in {where / 'indices.npy'} (got "
                             f"{int(cols.min())}..{int(cols.max())} in rows {blk.r0}..{blk.r1 - 1}: damaged)")
        rows = blk.row_ids()
        falls = cols[1:] <= cols[:-1]
        if "type" in src.kinds:  # an edge is (src, dst, relation): a row ascends by column, then relation
            kind = src.read(EDGE_FILES["type"], int(indptr[blk.r0]), int(indptr[blk.r0]) + rows.size)
            falls = (cols[1:] < cols[:-1]) | ((cols[1:] == cols[:-1]) & (kind[1:] <= kind[:-1]))
            del kind
        if (falls & (rows[1:] == rows[:-1])).any() or (cols == rows).any():
            raise InputError(f"expected a preprocessed structure in {where} (each row strictly ascending: "
                             f"no repeats, no self loops) (got another in rows {blk.r0}..{blk.r1 - 1}: damaged, "
                             "or not preprocessed as meta.json says)")
        balance += _pair_hash(rows, cols) - _pair_hash(cols, rows)
        if typed is not None:
            typed.edges(int(indptr[blk.r0]), rows, cols)
        if degree is not None:  # whole rows: a row's sum is the one bincount over all entries gives it
            degree[blk.r0:blk.r1] = _row_weight_sums(src, int(indptr[blk.r0]), rows, blk.r0, blk.r1)
        del blk, cols, rows  # before the next block is read
    if balance % 2**64:
        raise InputError(f"expected a symmetric structure in {where} as meta.json says it is preprocessed (got "
                         "edges without their reverse: damaged); write it again with `fullgraph convert`")
    return degree


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
    elif name in (EDGE_FILES["weight"], EDGE_FILES["attr"]) and not np.isfinite(blk).all():
        problem = "NaN or infinite values"
    elif name == EDGE_FILES["type"] and blk.size and (blk.min() < 0 or blk.max() >= src.relations):
        problem = f"types outside 0..{src.relations - 1}"
    if problem:
        what = "edge" if name in EDGE_FILES.values() else "node"
        raise InputError(f"expected valid {what} data in {src.path / name} (got {problem})")


def _hash_nodes(src: _Folder, h, block_bytes: int) -> dict:
    """Labels, masks, edge data and features fed to ``h`` in ``Graph.fingerprint()``'s order (sparse
    column ids as int64, as the loaded graph holds them), checked on the way; the mask counts."""
    names = ["y.npy", *_MASK_FILES, *(src.edge_file(k) for k in src.kinds)]
    names += ["x_indptr.npy", "x_indices.npy", "x_values.npy"] if src.sparse else ["x.npy"]
    state: dict = {}
    typed = _TypeCheck(src) if src.types is not None else None
    for name in names:
        h.update(str(src.shape(name)).encode())
        for a, b in src.spans(name, block_bytes):
            blk = src.read(name, a, b)
            if name == "x_indices.npy":
                blk = blk.astype(np.int64, copy=False)
            _check_node_block(src, name, blk, state)
            if typed is not None:
                typed.node_block(name, blk, a)
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


class _TypeCheck:
    """What ``data.checks.check_node_types`` checks of a typed graph, on the blocks the passes read (the
    module doc); the sizes were checked against the counts with ``meta.json``."""

    def __init__(self, src: _Folder):
        t, self.src = src.types, src
        self.types = t
        self.offsets = np.asarray(t.offsets, dtype=np.int64)
        self.columns = np.asarray(t.column_offsets, dtype=np.int64)
        self.ends = np.array([[t.index(s), t.index(d)] for s, _, d in t.relations], dtype=np.int64).reshape(-1, 2)
        self.labelled = np.isin(np.arange(t.num_types), [t.index(n) for n in t.labelled])
        self.entry_starts: np.ndarray | None = None  # sparse features: the first entry of each type's rows

    def type_of(self, ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.offsets[1:-1], ids, side="right")

    def edges(self, first: int, rows: np.ndarray, cols: np.ndarray) -> None:
        """A structure block's entries (``first``: the position of its first) against their relations."""
        path = self.src.path / EDGE_FILES["type"]
        kind = self.src.read(EDGE_FILES["type"], first, first + rows.size)
        if kind.size and (kind.min() < 0 or kind.max() >= len(self.ends)):
            raise InputError(f"expected valid edge data in {path} (got types outside 0..{len(self.ends) - 1})")
        for ids, side, what in ((cols, 0, "source"), (rows, 1, "destination")):
            got = self.type_of(ids)
            bad = np.flatnonzero(got != self.ends[kind, side])
            if bad.size:
                e, t = int(bad[0]), self.types
                r = int(kind[e])
                raise InputError(f"expected every edge of relation {t.relation_name(r)} to have a "
                                 f"{t.relations[r][2 * side]} {what} (got node {int(ids[e])} of type "
                                 f"{t.names[int(got[e])]} in {path})")

    def node_block(self, name: str, blk: np.ndarray, start: int) -> None:
        """Splits on the labelled types, sparse feature columns within their type's (rows or entries
        ``start..``)."""
        if name in _MASK_FILES:
            outside = blk & ~self.labelled[self.type_of(np.arange(start, start + blk.size))]
            if outside.any():
                raise InputError(f"expected splits on the labelled node types ({', '.join(self.types.labelled)}) "
                                 f"only (got {int(outside.sum())} nodes of other types in {self.src.path / name})")
        elif name == "x_indices.npy" and self.types.num_features and blk.size:
            if self.entry_starts is None:  # x_indptr.npy, read and checked before, at the types' first rows
                self.entry_starts = np.array([int(self.src.read("x_indptr.npy", o, o + 1)[0])
                                              for o in self.offsets[1:-1]], dtype=np.int64)
            t = np.searchsorted(self.entry_starts, np.arange(start, start + blk.size), side="right")
            if ((blk < self.columns[t]) | (blk >= self.columns[t + 1])).any():
                raise InputError(f"expected each node's features within its type's columns in "
                                 f"{self.src.path / name} (got a value in another type's columns)")
