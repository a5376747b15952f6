"""The native dataset folder as the streaming partition writer (:mod:`.stream_store`) reads it.

:class:`_Folder` checks the folder as ``load_native`` checks it (headers, sizes, and the sha256 of
every array when asked), then reads any row range of an array by a plain read into a fresh buffer.
Nothing is memory-mapped, since pages of a map that were read count in the process's resident
memory; a second pass over a file finds it in the kernel's page cache instead. :func:`_positions`
turns a set of rows into the positions of their entries, as the readers of a part's rows need.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from fullgraph.data.formats.native import EDGE_FILES, MASKS
from fullgraph.data.formats.native_read import _check_files, edge_kinds, node_types, read_native_meta
from fullgraph.data.formats.native_stream import read_rows

_MASK_FILES = tuple(f"{m}.npy" for m in MASKS)


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
        self.kinds = edge_kinds(self.meta)  # the data the edges carry (EDGE_FIELDS order)
        self.relations = c.get("num_relations") if "type" in self.kinds else None
        self.types = node_types(self.meta)  # a typed graph's (checked against the counts by read_native_meta)

    def edge_file(self, kind: str) -> str:
        return EDGE_FILES[kind]

    def fingerprint_prefix(self) -> bytes:
        """What ``Graph.fingerprint()`` hashes before any array: the edge data's kinds and relation count,
        then a typed graph's node types record (nothing for a graph of one type without edge data, so
        such a graph keeps its fingerprint)."""
        text = "".join(f"edge_{k}" for k in self.kinds)
        text += f"relations={self.relations}" if self.relations is not None else ""
        return (text + (repr(self.types.record()) if self.types is not None else "")).encode()

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


def _positions(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``starts[j] + 0..counts[j]-1`` for every ``j``, concatenated: the entries of a set of rows."""
    ends = np.cumsum(counts)
    return np.repeat(starts - (ends - counts), counts) + np.arange(int(ends[-1]) if ends.size else 0)
