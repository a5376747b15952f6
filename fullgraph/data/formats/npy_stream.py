"""``.npy`` arrays inside an ``.npz`` archive, read in row blocks, never whole.

ogbn-papers100M's ``raw/data.npz`` holds a 13 GB edge list and 57 GB of features, usually
deflate-compressed (``np.savez_compressed``). ``np.load(...)["edge_index"]`` inflates a member
into memory in one piece. Here a member is a stream instead: the zip member is opened as a file
(Python's ``zipfile`` inflates as it is read), its ``.npy`` header is parsed from the first bytes,
and rows follow in blocks of about ``block_bytes``. A member can be opened more than once at a
time (each open inflates on its own), which is how the two rows of a ``(2, E)`` edge list are read
side by side (:meth:`NpyMember.column_pairs`).

Damage is one :class:`~fullgraph.errors.InputError` naming the archive and the member: a missing
member, a header that does not parse, pickled objects, a member shorter than its header says
(``zipfile`` reports a truncated or corrupt deflate stream, or its CRC, as it reads).
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from pathlib import Path
from typing import Iterator

import numpy as np

from fullgraph.errors import InputError

__all__ = ["NpyMember", "npz_members", "BLOCK_BYTES"]

BLOCK_BYTES = 64 << 20
"""Bytes per block read from a member (the temporaries of a pass are a few times this)."""

_ERRORS = (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError)


def npz_members(path: str | os.PathLike) -> list[str]:
    """The array names in an ``.npz`` archive (member names without ``.npy``)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return [n[:-4] for n in zf.namelist() if n.endswith(".npy")]
    except FileNotFoundError:
        raise InputError(f"expected the archive {path} (not found)") from None
    except _ERRORS as e:
        raise InputError(f"expected {path} to be an .npz (zip) archive (got {type(e).__name__}: {e})") from None


class NpyMember:
    """One array of an ``.npz`` archive: ``dtype``, ``shape``, ``fortran_order`` from its header;
    the data read as a stream by :meth:`rows` / :meth:`column_pairs`."""

    def __init__(self, archive: str | os.PathLike, name: str):
        self.archive, self.name = Path(archive), name
        self.where = f"member {name!r} of {self.archive}"
        with self._open() as f:
            self.dtype, self.shape, self.fortran_order, self._offset = self._header(f)

    def _open(self):
        try:
            zf = zipfile.ZipFile(self.archive)
        except FileNotFoundError:
            raise InputError(f"expected the archive {self.archive} (not found)") from None
        except _ERRORS as e:
            raise InputError(f"expected {self.archive} to be an .npz (zip) archive "
                             f"(got {type(e).__name__}: {e})") from None
        try:
            f = zf.open(self.name + ".npy")
        except KeyError:
            zf.close()
            raise InputError(f"expected an array {self.name!r} in {self.archive} (found "
                             f"{', '.join(npz_members(self.archive)) or 'none'})") from None
        return _Closing(f, zf)

    def _header(self, f) -> tuple[np.dtype, tuple[int, ...], bool, int]:
        try:
            version = np.lib.format.read_magic(f)
            reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0,
                      (3, 0): getattr(np.lib.format, "_read_array_header", None)}.get(version)
            if reader is None:
                raise ValueError(f"unsupported .npy version {version}")
            shape, fortran, dtype = reader(f) if version != (3, 0) else reader(f, version)
        except _ERRORS + (SyntaxError,) as e:
            raise InputError(f"expected a .npy array in the {self.where} (got an unreadable header: {e})") from None
        if dtype.hasobject:
            raise InputError(f"expected plain numbers in the {self.where} (got Python objects, dtype {dtype})")
        return np.dtype(dtype), tuple(int(s) for s in shape), bool(fortran), f.tell()

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def expect(self, *, kind: str, ndim: tuple[int, ...], what: str) -> "NpyMember":
        """Refuse, in one line, a member whose dtype kind (``"i"``, ``"f"``, ``"if"``...) or number of
        dimensions is not the layout's."""
        if self.dtype.kind not in kind or len(self.shape) not in ndim:
            kinds = {"i": "integers", "f": "floats", "u": "unsigned integers", "b": "booleans"}
            want = " or ".join(kinds.get(k, k) for k in kind)
            raise InputError(f"expected the {what} in the {self.where} to be {want} of {' or '.join(map(str, ndim))} "
                             f"dimension(s) (got {self.dtype} of shape {list(self.shape)})")
        return self

    def _stream(self, f, start_byte: int, count_bytes: int, block_bytes: int) -> Iterator[bytes]:
        """Raw bytes ``[start, start + count)`` of the data, in pieces of about ``block_bytes``."""
        try:
            f.seek(self._offset + start_byte)  # forward seeks inflate and drop
            left = count_bytes
            while left:
                data = f.read(min(left, block_bytes))
                if not data:
                    raise InputError(f"expected {self.nbytes} data bytes in the {self.where} as its header says "
                                     f"(got {start_byte + count_bytes - left}: the member is truncated)")
                left -= len(data)
                yield data
        except _ERRORS as e:
            raise InputError(f"expected a readable {self.where} (got {type(e).__name__}: {e}; the archive "
                             "is truncated or damaged)") from None

    def rows(self, block_bytes: int | None = None) -> Iterator[np.ndarray]:
        """The array in blocks of whole rows (the first axis), each a fresh array in native byte
        order; a 1-D array comes in blocks of values. C order only (a Fortran-ordered member of more
        than one dimension has no row blocks: use :meth:`column_pairs` for ``(2, E)``)."""
        block_bytes = block_bytes or BLOCK_BYTES  # read at each call: the tests shrink it
        if self.fortran_order and len(self.shape) > 1:
            raise InputError(f"expected the {self.where} in C order (got a Fortran-ordered array)")
        row = max(1, math.prod(self.shape[1:]) * self.dtype.itemsize)
        step = max(1, block_bytes // row) * row
        with self._open() as f:
            yield from self._blocks(self._stream(f, 0, self.nbytes, step), self.shape[1:])

    def _blocks(self, pieces: Iterator[bytes], row_shape: tuple[int, ...]) -> Iterator[np.ndarray]:
        """Arrays of whole rows of ``row_shape`` from a stream of byte pieces."""
        row = max(1, math.prod(row_shape)) * self.dtype.itemsize
        rest = b""
        for data in pieces:
            data = rest + data if rest else data
            cut = len(data) - len(data) % row
            rest = data[cut:]
            if cut:
                block = np.frombuffer(data, dtype=self.dtype, count=cut // self.dtype.itemsize)
                yield block.reshape(-1, *row_shape).astype(self.dtype.newbyteorder("="), copy=True)

    def column_pairs(self, block_bytes: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """A ``(2, E)`` array as blocks ``(a[0, i:j], a[1, i:j])``. In C order the two rows are read
        by two streams of the same member side by side; in Fortran order the pairs are interleaved
        and read by one."""
        if len(self.shape) != 2 or self.shape[0] != 2:
            raise InputError(f"expected the {self.where} to have shape (2, E) (got {list(self.shape)})")
        e, size = self.shape[1], self.dtype.itemsize
        block_bytes = block_bytes or BLOCK_BYTES
        if self.fortran_order:
            with self._open() as f:
                for block in self._blocks(self._stream(f, 0, self.nbytes, block_bytes // 2), (2,)):
                    pairs = block.reshape(-1, 2)
                    yield pairs[:, 0].copy(), pairs[:, 1].copy()
            return
        half = max(size, block_bytes // 2 // size * size)
        with self._open() as a, self._open() as b:
            first = self._blocks(self._stream(a, 0, e * size, half), ())
            second = self._blocks(self._stream(b, e * size, e * size, half), ())
            for src, dst in zip(first, second, strict=True):
                yield src, dst


class _Closing:
    """A zip member's stream that closes its archive too."""

    def __init__(self, f, zf):
        self._f, self._zf = f, zf

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self._f

    def __exit__(self, *exc):
        self._f.close()
        self._zf.close()
