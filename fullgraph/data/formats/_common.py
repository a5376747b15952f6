"""Helpers shared by the format loaders: file checks, array conversion, and a strict text reader.

The text reader exists because every text format here (edge lists, OGB's ``.csv.gz``) needs the
same two things: speed on millions of lines, and an error that names the file and line when a
line is malformed. It parses the whole file with numpy in one pass and, only when that fails,
walks the lines in Python to find and report the first bad one.
"""

from __future__ import annotations

import gzip
import re
import warnings
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import scipy.sparse as sp
import torch

from fullgraph.errors import InputError

__all__ = [
    "require_files", "features_to_torch", "labels_from_onehot", "mask_from_ids", "read_table",
    "load_array", "read_table_blocks", "parse_table", "TEXT_BLOCK_BYTES",
]


def require_files(paths: Iterable[Path], what: str) -> None:
    """Raise one error listing every missing file, so a user fetches them all in one go."""
    missing = [str(p) for p in paths if not Path(p).is_file()]
    if missing:
        raise InputError(f"expected the {what} file(s) {', '.join(missing)} (not found)")


def features_to_torch(x, what: str) -> torch.Tensor:
    """Float32 features: sparse stays sparse (torch CSR, int64 indices), dense stays dense."""
    if sp.issparse(x):
        from fullgraph.data.safe_pickle import checked_csr

        m = checked_csr(x, what)
        m.sum_duplicates()
        m.sort_indices()
        with warnings.catch_warnings():  # torch's one-time "sparse CSR is in beta" notice
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return torch.sparse_csr_tensor(
                torch.from_numpy(m.indptr.astype(np.int64)),
                torch.from_numpy(m.indices.astype(np.int64)),
                torch.from_numpy(m.data.astype(np.float32)),
                size=m.shape,
                check_invariants=False,  # checked_csr has just validated the same arrays
            )
    x = np.asarray(x)
    if x.ndim != 2 or not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)
                           or x.dtype == np.bool_):
        raise InputError(f"expected {what} to be a numeric [N, F] matrix (got {x.dtype} array of shape {x.shape})")
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def labels_from_onehot(onehot: np.ndarray, what: str) -> np.ndarray:
    """Class ids of one-hot rows; an all-zero row (a node without a label) becomes ``-1``."""
    onehot = np.asarray(onehot)
    if onehot.ndim != 2:
        raise InputError(f"expected {what} to be one-hot [N, C] (got shape {onehot.shape})")
    y = onehot.argmax(axis=1).astype(np.int64)
    y[onehot.sum(axis=1) == 0] = -1
    return y


def mask_from_ids(ids, num_nodes: int, what: str, unit: str = "node ids") -> np.ndarray:
    """A boolean mask of ``num_nodes`` entries set at ``ids`` (``unit``: what the ids count, in errors)."""
    ids = np.asarray(ids).reshape(-1)
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise InputError(f"expected integer {unit} in {what} (got {ids.dtype})")
    ids = ids.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        bad = ids[(ids < 0) | (ids >= num_nodes)]
        raise InputError(f"expected {unit} in [0, {num_nodes}) in {what} (got {bad.size} outside, e.g. {bad[0]})")
    mask = np.zeros(num_nodes, dtype=bool)
    mask[ids] = True
    return mask


def load_array(path: Path, what: str, mmap_mode: str | None = None) -> np.ndarray:
    """A plain ``.npy`` array (never pickled objects); ``mmap_mode``: as ``np.load`` takes it."""
    try:
        return np.load(path, allow_pickle=False, mmap_mode=mmap_mode)
    except FileNotFoundError:
        raise InputError(f"expected the {what} file {path} (not found)") from None
    except (ValueError, OSError, EOFError) as e:
        raise InputError(
            f"expected {path} to be a plain .npy array for the {what} (got {type(e).__name__}: {e})"
        ) from None


# ------------------------------------------------------------------------------------ text tables
def _read_text(path: Path) -> str:
    try:
        if str(path).endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf8") as f:
                return f.read()
        return Path(path).read_text(encoding="utf8")
    except FileNotFoundError:
        raise InputError(f"expected a file at {path} (not found)") from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputError(f"expected {path} to be a readable text file (got {type(e).__name__}: {e})") from None


def _is_number_row(line: str) -> bool:
    toks = line.replace(",", " ").split()
    try:
        [float(t) for t in toks]
    except ValueError:
        return False
    return bool(toks)


_SEPARATORS = np.array([ord(c) for c in " \t\r\v\f,"], dtype=np.uint8)
_CHUNK = 1 << 26  # bytes per vectorized pass: bounds the temporaries on multi-GB files


def _tokens_per_line(data: bytes) -> np.ndarray:
    """How many values each non-blank line holds (a run of non-separator bytes is one value)."""
    counts = []
    begin, total = 0, len(data)
    while begin < total:
        end = total
        if begin + _CHUNK < total:  # cut at a newline so that no line spans two chunks
            end = data.rfind(b"\n", begin, begin + _CHUNK) + 1
            if end <= begin:
                end = data.find(b"\n", begin + _CHUNK) + 1 or total
        b = np.frombuffer(data, dtype=np.uint8, count=end - begin, offset=begin)
        newline = b == 10
        token = ~(np.isin(b, _SEPARATORS) | newline)
        starts = np.flatnonzero(token & ~np.concatenate(([False], token[:-1])))
        per_line = np.bincount(np.searchsorted(np.flatnonzero(newline), starts))
        counts.append(per_line[per_line > 0])
        begin = end
    return np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)


def _bad_line_error(text: str, path: Path, ncols: int, dtype, what: str, int_columns: int,
                    first_line: int = 1) -> InputError:
    all_int = np.issubdtype(dtype, np.integer)
    for lineno, line in enumerate(text.split("\n"), first_line):
        toks = line.replace(",", " ").split()
        if not toks:
            continue
        if len(toks) != ncols:
            return InputError(
                f"expected {ncols} value(s) per line in the {what} {path} "
                f"(got {len(toks)} on line {lineno}: {line.strip()[:80]!r})"
            )
        for j, t in enumerate(toks):
            conv = int if all_int or j < int_columns else float
            try:
                conv(t)
            except ValueError:
                kind = "an integer" if conv is int else "a number"
                return InputError(f"expected {kind} in the {what} {path} (got {t[:40]!r} on line {lineno})")
    return InputError(f"expected a numeric table in the {what} {path} (could not parse it)")


def read_table(path: str | Path, *, dtype, what: str, ncols: int | None = None, header: bool | None = None,
               comments: str | None = "#", int_columns: int = 0) -> np.ndarray:
    """A whitespace- or comma-separated numeric table as a ``[rows, cols]`` array.

    ``comments``: text from this character to the end of its line is ignored. ``header``: skip the
    first non-blank line (``None``: skip it only when it is not numeric). Blank lines are ignored.
    Every other line must hold the same number of values (``ncols`` when given, else as many as
    the first); a violation, or a value that does not parse, is reported with its line number.
    ``int_columns``: with a float ``dtype``, the first this many columns must still be integers
    (an edge list with a weight column).
    """
    path = Path(path)
    return parse_table(_read_text(path), path, dtype=dtype, what=what, ncols=ncols, header=header,
                       comments=comments, int_columns=int_columns)


TEXT_BLOCK_BYTES = 64 << 20
"""Bytes of text :func:`read_table_blocks` parses at a time (its temporaries: a few times this)."""


def _text_blocks(path: Path, block_bytes: int) -> Iterator[tuple[str, int]]:
    """The text of ``path`` (plain or ``.gz``) in blocks of whole lines, about ``block_bytes`` each,
    with the line of the file each block begins at."""
    opener = gzip.open if str(path).endswith(".gz") else open
    line = 1
    try:
        with opener(path, "rb") as f:
            rest = b""
            while True:
                chunk = f.read(block_bytes)
                data = rest + chunk
                cut = len(data) if not chunk else data.rfind(b"\n") + 1
                if chunk and cut == 0:  # one line longer than a block: read on
                    rest = data
                    continue
                text, rest = data[:cut].decode("utf8"), data[cut:]
                yield text, line
                line += text.count("\n")
                if not chunk:
                    return
    except FileNotFoundError:
        raise InputError(f"expected a file at {path} (not found)") from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputError(f"expected {path} to be a readable text file (got {type(e).__name__}: {e})") from None


def _strip_comments(text: str, comments: str | None) -> str:
    """``text`` without its comments (each from ``comments`` to the end of its line), newlines kept:
    line numbers hold."""
    if comments and comments in text:
        return re.sub(re.escape(comments) + r"[^\n]*", "", text)
    return text


def _line_of(text: str, first_line: int, header: bool):
    """The file line of each row of a block (``text`` without its comments, starting at ``first_line``;
    ``header``: its first non-blank line is the header, no row): asked on the way to an error only."""
    def line_of(row: int) -> int:
        k = row + int(header)
        for lineno, line in enumerate(text.split("\n"), first_line):
            if line.strip():
                if k == 0:
                    return lineno
                k -= 1
        raise IndexError(f"no row {row} in the block at line {first_line}")
    return line_of


def read_table_blocks(path: str | Path, *, dtype, what: str, ncols: int, block_bytes: int | None = None,
                      header: bool | None = False, comments: str | None = None,
                      lines: bool = False) -> Iterator:
    """The table of ``path`` (plain or ``.gz``) as ``[rows, ncols]`` blocks of whole lines, about
    ``block_bytes`` of text each: a multi-GB table is parsed without holding it. ``header`` and
    ``comments`` as :func:`read_table` takes them (the header is asked of the file's first non-blank
    line only, whichever block holds it). ``lines``: yield ``(block, line_of)`` pairs instead, where
    ``line_of(i)`` is the file line of the block's row ``i`` (an error's line). Errors name the file
    and the line, as :func:`read_table`'s do."""
    path = Path(path)
    block_bytes = block_bytes or TEXT_BLOCK_BYTES  # read at each call: the tests shrink it
    pending = header  # the header question, open until the first non-blank line
    for text, first in _text_blocks(path, block_bytes):
        text = _strip_comments(text, comments)
        found = re.search(r"\S[^\n]*", text)
        if found is None:
            continue
        head = False
        if pending is not False:
            head = bool(pending) or not _is_number_row(found.group())
            pending = False
        table = parse_table(text, path, dtype=dtype, what=what, ncols=ncols, header=head, comments=None,
                            first_line=first)
        yield (table, _line_of(text, first, head)) if lines else table


def parse_table(text: str, path: Path, *, dtype, what: str, ncols: int | None = None, header: bool | None = None,
                comments: str | None = "#", int_columns: int = 0, first_line: int = 1) -> np.ndarray:
    """:func:`read_table` of ``text`` already read from ``path`` (whose line ``first_line`` it starts at)."""
    text = _strip_comments(text, comments)
    pos = 0
    while pos < len(text):  # the first non-blank line: a header, and the column count
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        if text[pos:end].strip():
            break
        pos = end + 1
    else:
        return np.zeros((0, ncols or 0), dtype=dtype)
    first = text[pos:end]
    if header or (header is None and not _is_number_row(first)):
        text = text[:pos] + text[end:]
        rest = text[pos:].lstrip()
        if not rest:
            return np.zeros((0, ncols or 0), dtype=dtype)
        first = rest.split("\n", 1)[0]
    ncols = ncols or len(first.replace(",", " ").split())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            flat = np.fromstring(text.replace(",", " "), dtype=dtype, sep=" ")
        except (ValueError, DeprecationWarning):
            flat = None
    if flat is not None:
        per_line = _tokens_per_line(text.encode("utf8"))
        if bool((per_line == ncols).all()) and flat.size == per_line.size * ncols:
            table = flat.reshape(per_line.size, ncols)
            ids = table[:, :int_columns]
            if not int_columns or bool((ids == np.round(ids)).all()):
                return table
    raise _bad_line_error(text, path, ncols, np.dtype(dtype), what, int_columns, first_line)
