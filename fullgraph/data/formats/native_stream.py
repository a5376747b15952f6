"""A native folder's structure read as a stream of row blocks, with bounded memory.

:func:`~fullgraph.data.formats.native_read.load_native` maps the arrays and converts ``indices`` to
int64, an ``8 E``-byte copy; and pages of a map that have been read count in the process's
resident memory until it ends. A pass that only needs each row once (a streaming partitioner,
the writer of part folders) reads the files instead, block after block, into buffers it drops:
its memory is one block, whatever ``E``, and the file's pages stay in the kernel's cache where
the next pass finds them.

:class:`CSRStream` gives the same blocks from arrays already in memory (a loaded graph, a test's
tiny graph), so the passes have one code path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from fullgraph.data.formats.native_read import _read_header, edge_kinds, node_types, read_native_meta
from fullgraph.errors import InputError
from fullgraph.ops.csr import BLOCK_ENTRIES
from fullgraph.ops.node_types import NodeTypes

__all__ = ["CSRStream", "RowBlock", "read_rows"]


@dataclass(frozen=True)
class RowBlock:
    """Rows ``r0..r1-1`` of an in-edge CSR: ``indptr`` (``r1 - r0 + 1`` entries, rebased to start at 0)
    and their ``indices`` (int64)."""

    r0: int
    r1: int
    indptr: np.ndarray
    indices: np.ndarray

    def row_ids(self) -> np.ndarray:
        """The row (global id) of each entry."""
        return np.repeat(np.arange(self.r0, self.r1, dtype=np.int64), np.diff(self.indptr))

    def degrees(self) -> np.ndarray:
        return np.diff(self.indptr)


def read_rows(path: Path, offset: int, dtype: np.dtype, start: int, count: int) -> np.ndarray:
    """``count`` values of ``dtype`` from position ``start`` of the ``.npy`` data at ``offset``: one
    read into a fresh buffer (no map)."""
    out = np.empty(count, dtype=dtype)
    with open(path, "rb") as f:
        f.seek(offset + start * dtype.itemsize)
        got = f.readinto(memoryview(out).cast("B"))
    if got != out.nbytes:
        raise InputError(f"expected {out.nbytes} bytes at position {start} of {path} (got {got}: truncated)")
    return out


class CSRStream:
    """Row blocks of an in-edge CSR, from a native folder's files or from arrays.

    ``num_nodes``, ``num_edges``; :meth:`blocks` yields :class:`RowBlock` of whole rows holding at
    most ``max_edges`` entries each (a single row when it alone holds more), in row order.
    ``indptr`` is the one array kept in memory for a folder (``8 (N + 1)`` bytes) unless
    ``keep_indptr=False``, which reads it block by block too.
    """

    edge_kinds: tuple[str, ...] = ()
    """The kinds of data the edges carry where they come from (a folder's ``meta.json``); the blocks
    never hold it."""
    node_types: NodeTypes | None = None
    """A typed graph's node types (a folder's ``meta.json`` record): a node's type follows from its
    global id (``NodeTypes.type_of``), so the blocks need no array of their own for it."""

    def __init__(self, indptr, indices, num_nodes: int, num_edges: int, where: str = "graph"):
        self._indptr, self._indices = indptr, indices
        self.num_nodes, self.num_edges, self.where = int(num_nodes), int(num_edges), where

    @classmethod
    def of_arrays(cls, indptr, indices, where: str = "graph") -> "CSRStream":
        """Over arrays (numpy or torch) held by the caller."""
        ip = indptr.numpy() if hasattr(indptr, "numpy") else np.asarray(indptr)
        ix = indices.numpy() if hasattr(indices, "numpy") else np.asarray(indices)
        return cls(ip, ix, ip.shape[0] - 1, int(ip[-1]), where)

    @classmethod
    def of_folder(cls, folder: str | os.PathLike, *, structure_only: bool = True) -> "CSRStream":
        """Over the ``indptr.npy`` and ``indices.npy`` of a native folder (their headers checked against
        ``meta.json``; the data is read only as blocks are asked for).

        The blocks are the structure alone. A folder whose edges carry data (version 3) is read as
        any other: its kinds are in :attr:`edge_kinds`, and a pass that writes the graph's edges
        elsewhere reads the data by the entries' positions in ``indices.npy`` (the streamed part
        writer, :mod:`fullgraph.partition.stream_store`, does). ``structure_only=False`` refuses
        such a folder, for a pass that would lose the data."""
        folder = Path(folder)
        meta = read_native_meta(folder)
        kinds = edge_kinds(meta)
        if kinds and not structure_only:
            raise InputError(f"expected a dataset folder without edge data for this pass (got edge "
                             f"{', '.join(kinds)} in {folder}, which it would not carry)")
        n, e = int(meta["counts"]["num_nodes"]), int(meta["counts"]["num_edges"])
        files = {}
        for name, length in (("indptr.npy", n + 1), ("indices.npy", e)):
            dtype, shape, offset = _read_header(folder / name)
            if shape != (length,) or dtype.kind != "i":
                raise InputError(f"expected {folder / name} to hold {length} integers as meta.json says "
                                 f"(got {dtype} of shape {list(shape)})")
            size = (folder / name).stat().st_size
            if size < offset + length * dtype.itemsize:
                raise InputError(f"expected {folder / name} to hold {offset + length * dtype.itemsize} bytes "
                                 f"(got {size}: the file is truncated)")
            files[name] = (folder / name, offset, dtype)
        stream = cls(_FileArray(*files["indptr.npy"]), _FileArray(*files["indices.npy"]), n, e, str(folder))
        stream.edge_kinds, stream.node_types = kinds, node_types(meta)
        return stream

    def indptr(self) -> np.ndarray:
        """The whole row pointer (int64 ``[N + 1]``)."""
        ip = self._indptr
        return ip.read(0, self.num_nodes + 1).astype(np.int64, copy=False) if isinstance(ip, _FileArray) \
            else np.asarray(ip, dtype=np.int64)

    def blocks(self, max_edges: int = BLOCK_ENTRIES, indptr: np.ndarray | None = None) -> Iterator[RowBlock]:
        """Row blocks in order; ``indptr``: the whole row pointer if the caller has it already."""
        from fullgraph.ops.csr import row_spans

        ip = self.indptr() if indptr is None else indptr
        for r0, r1 in row_spans(ip, max_edges):
            a, b = int(ip[r0]), int(ip[r1])
            ix = self._indices
            cols = ix.read(a, b - a) if isinstance(ix, _FileArray) else ix[a:b]
            yield RowBlock(r0, r1, ip[r0:r1 + 1] - a, np.asarray(cols, dtype=np.int64))


@dataclass(frozen=True)
class _FileArray:
    path: Path
    offset: int
    dtype: np.dtype

    def read(self, start: int, count: int) -> np.ndarray:
        return read_rows(self.path, self.offset, self.dtype, start, count)
