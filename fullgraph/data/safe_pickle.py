"""Load the pickles inside benchmark files without letting them run code.

Why: the Planetoid files are Python 2 pickles and the GraphData ``.npz`` files hold pickled SciPy
matrices. ``pickle.load`` on such a file can call any importable function (``os.system`` included)
the moment it is read. The unpickler here resolves names only from a short allowlist: numpy's array,
dtype and scalar reconstructors, SciPy's csr/csc/coo classes and plain containers. That is all the
real files need (checked with ``pickletools`` on every file in ``shared/data``); everything else is
refused with an :class:`InputError` naming the refused ``module.name``, before anything runs.

Two more jobs fall out of the same table:

* old module paths are mapped to where the objects live now: ``numpy.core.multiarray`` (numpy 1)
  to whatever numpy 2 uses, ``__builtin__`` (Python 2) to ``builtins``, and the private SciPy
  modules ``scipy.sparse.csr`` / ``scipy.sparse._csr`` (and csc/coo), which SciPy 2.0 removes, to
  ``scipy.sparse``;
* a matrix rebuilt from a pickle skips SciPy's constructor checks, so :func:`checked_csr` validates
  one before any kernel indexes memory with its arrays.
"""

from __future__ import annotations

import ast
import codecs
import io
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import numpy as np
import scipy.sparse as sp

from fullgraph.errors import InputError

__all__ = ["SafeUnpickler", "load_pickle", "loads", "load_npz_with_objects", "checked_csr"]

_SPARSE_MODULES = (
    "scipy.sparse", "scipy.sparse.csr", "scipy.sparse._csr", "scipy.sparse.csc", "scipy.sparse._csc",
    "scipy.sparse.coo", "scipy.sparse._coo",
)
_SPARSE_CLASSES = ("csr_matrix", "csc_matrix", "coo_matrix", "csr_array", "csc_array", "coo_array")
_BUILTINS = ("list", "dict", "set", "frozenset", "tuple", "int", "float", "complex", "bool", "str",
             "bytes", "bytearray")


def _latin1_encode(text: str, encoding: str = "latin1", errors: str = "strict") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it to carry ``bytes``; latin-1 only."""
    if codecs.lookup(encoding).name != "iso8859-1":
        raise InputError(f"expected pickled bytes in latin-1 (got a request to encode as {encoding!r})")
    return codecs.encode(text, "latin1", errors)


def _build_allowlist() -> dict[tuple[str, str], Any]:
    # Take numpy's reconstructors from numpy itself, so the table follows numpy's private module moves.
    reconstruct = np.zeros(1).__reduce__()[0]
    frombuffer = np.zeros(1).__reduce_ex__(5)[0]
    scalar = np.float32(0).__reduce__()[0]
    table: dict[tuple[str, str], Any] = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype}
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        table[(mod, "_reconstruct")] = reconstruct
        table[(mod, "scalar")] = scalar
    for mod in ("numpy.core.numeric", "numpy._core.numeric"):
        table[(mod, "_frombuffer")] = frombuffer
    for mod in _SPARSE_MODULES:
        for cls in _SPARSE_CLASSES:
            if hasattr(sp, cls):
                table[(mod, cls)] = getattr(sp, cls)
    import builtins
    import collections

    for mod in ("builtins", "__builtin__"):
        for name in _BUILTINS:
            table[(mod, name)] = getattr(builtins, name)
    table[("collections", "defaultdict")] = collections.defaultdict
    table[("collections", "OrderedDict")] = collections.OrderedDict
    table[("_codecs", "encode")] = _latin1_encode
    return table


_ALLOWED: dict[tuple[str, str], Any] | None = None


class SafeUnpickler(pickle.Unpickler):
    """An unpickler that resolves globals only from the allowlist above."""

    def __init__(self, file: BinaryIO, *, source: str = "<pickle>", encoding: str = "latin1"):
        super().__init__(file, encoding=encoding)
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        global _ALLOWED
        if _ALLOWED is None:
            _ALLOWED = _build_allowlist()
        obj = _ALLOWED.get((module, name))
        if obj is None:
            raise InputError(
                f"refused to unpickle {self.source}: it asks for '{module}.{name}', but only numpy "
                f"arrays, scipy sparse matrices and plain containers are allowed (a pickle can run code)"
            )
        return obj

    def persistent_load(self, pid: Any) -> Any:
        raise InputError(f"refused to unpickle {self.source}: it uses persistent ids, which data files never need")


def _unpickle(file: BinaryIO, source: str, encoding: str) -> Any:
    try:
        return SafeUnpickler(file, source=source, encoding=encoding).load()
    except InputError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, struct.error, UnicodeDecodeError, MemoryError) as e:
        raise InputError(f"expected {source} to be a pickle of numpy/scipy data (got an unreadable pickle: "
                         f"{type(e).__name__}: {e})") from None


def loads(data: bytes, *, source: str = "<bytes>", encoding: str = "latin1") -> Any:
    """Unpickle bytes with the allowlist; ``source`` names them in error messages."""
    return _unpickle(io.BytesIO(data), source, encoding)


def load_pickle(path: str | Path, encoding: str = "latin1") -> Any:
    """Unpickle a file with the allowlist (``latin1`` reads Python 2 numpy pickles correctly)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return _unpickle(f, str(path), encoding)
    except OSError as e:
        raise InputError(f"expected a readable pickle file at {path} (got {type(e).__name__}: {e.strerror})") from None


# ------------------------------------------------------------------------------------------- npz
def _read_header(f: BinaryIO, source: str) -> tuple[np.dtype, tuple[int, ...], bool]:
    """``(dtype, shape, fortran_order)`` of a ``.npy`` stream, for every format version (1, 2, 3)."""
    magic = f.read(8)
    if len(magic) != 8 or magic[:6] != b"\x93NUMPY":
        raise InputError(f"expected {source} to be a .npy array (got no NUMPY magic bytes)")
    major = magic[6]
    if major == 1:
        (hlen,) = struct.unpack("<H", f.read(2))
    elif major in (2, 3):
        (hlen,) = struct.unpack("<I", f.read(4))
    else:
        raise InputError(f"expected .npy format version 1, 2 or 3 in {source} (got {major}.{magic[7]})")
    raw = f.read(hlen)
    try:
        header = ast.literal_eval(raw.decode("utf8" if major == 3 else "latin1"))
        dtype = np.lib.format.descr_to_dtype(header["descr"])
        shape = tuple(int(s) for s in header["shape"])
        fortran = bool(header["fortran_order"])
    except Exception as e:  # any malformed header is the file's fault, whatever numpy raises
        raise InputError(f"expected a valid .npy header in {source} (got {type(e).__name__}: {e})") from None
    return dtype, shape, fortran


def load_npz_with_objects(path: str | Path, keys: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file, object arrays unpickled through the allowlist.

    Plain arrays go through ``numpy.lib.format.read_array(allow_pickle=False)``; an object array's
    payload (numpy stores the whole array as one pickle after the header) goes through
    :class:`SafeUnpickler`. ``keys`` restricts loading to those arrays (missing ones are an error).
    """
    path = Path(path)
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise InputError(f"expected an .npz file at {path} (got no such file)") from None
    except (zipfile.BadZipFile, OSError) as e:
        raise InputError(f"expected {path} to be an .npz (zip) archive (got {type(e).__name__}: {e})") from None
    with zf:
        members = {(n[:-4] if n.endswith(".npy") else n): n for n in zf.namelist()}
        wanted = list(members) if keys is None else list(keys)
        missing = [k for k in wanted if k not in members]
        if missing:
            raise InputError(f"expected arrays {missing} in {path} (it holds {sorted(members)})")
        out: dict[str, np.ndarray] = {}
        for key in wanted:
            source = f"{path}[{key}]"
            try:
                with zf.open(members[key]) as f:
                    dtype, shape, _ = _read_header(f, source)
                    if dtype.hasobject:
                        arr = _unpickle(f, source, "latin1")
                        if not isinstance(arr, np.ndarray) or arr.shape != shape:
                            raise InputError(
                                f"expected {source} to unpickle to an array of shape {shape} (got {type(arr).__name__})"
                            )
                        out[key] = arr
                        continue
                with zf.open(members[key]) as f:
                    out[key] = np.lib.format.read_array(f, allow_pickle=False)
            except InputError:
                raise
            except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
                raise InputError(f"expected a readable array {source} (got {type(e).__name__}: {e})") from None
    return out


def checked_csr(obj: Any, what: str) -> sp.csr_matrix:
    """``obj`` as a canonical-index CSR matrix, with its arrays validated.

    Pickled matrices bypass SciPy's constructor, so a corrupt or hostile file could carry indices
    past the end of the matrix; ``check_format(full_check=True)`` catches that before any use.
    """
    if not sp.issparse(obj):
        raise InputError(f"expected {what} to be a scipy sparse matrix (got {type(obj).__name__})")
    try:
        if obj.format in ("csr", "csc"):
            obj.check_format(full_check=True)
        elif obj.format == "coo":  # coo -> csr runs in C without bounds checks: check first
            n_rows, n_cols = (int(s) for s in obj.shape)
            row, col = np.asarray(obj.row), np.asarray(obj.col)
            if row.ndim != 1 or row.shape != col.shape or row.shape != np.asarray(obj.data).shape:
                raise ValueError("row, col and data differ in length")
            if row.size and (row.min() < 0 or row.max() >= n_rows or col.min() < 0 or col.max() >= n_cols):
                raise ValueError(f"an index lies outside the {n_rows}x{n_cols} shape")
        else:
            raise InputError(f"expected {what} in csr, csc or coo format (got {obj.format})")
        m = sp.csr_matrix(obj)
        m.check_format(full_check=True)
    except (ValueError, TypeError, AttributeError, IndexError) as e:
        raise InputError(f"expected {what} to be a well-formed sparse matrix (got {type(e).__name__}: {e})") from None
    return m
