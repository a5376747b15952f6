"""The CSR toolkit: the few structure operations every layer of the package needs.

A CSR matrix here is a pair ``(indptr, indices)``: row ``r`` holds the entries
``indptr[r]:indptr[r+1]`` of ``indices`` (and of a values array beside it). Data loaders, partitions,
chunks and block rows all build and cut such pairs; they do it through these functions so that a
row pointer is computed one way and a row is cut one way everywhere, and a fix lands once.

Most functions accept either numpy arrays or torch tensors and answer in the kind they were given:
the data layer works in numpy (memory-mapped arrays, SciPy), the layouts in torch, and converting
between the two would cost a copy on one side or the other. Row pointers and positions are int64;
column ids keep the dtype they came in.

Memory: the row pointers are row-sized and the slicers' results entry-sized; passes over graphs too
large for entry-sized temporaries walk :func:`row_spans`, blocks of whole rows with a bounded number
of entries.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["BLOCK_ENTRIES", "indptr_from_counts", "indptr_from_rows", "row_ids", "row_spans", "csr_rows",
           "take_rows", "canonical"]

BLOCK_ENTRIES = 1 << 22
"""Entries per block of a pass over a CSR (:func:`row_spans`): a block's temporaries stay at tens of
MiB, whatever the size of the graph."""


def indptr_from_counts(counts, dtype=None):
    """The row pointer ``[0, c0, c0 + c1, ...]`` of rows holding ``counts`` entries each.

    Numpy counts give a numpy pointer, a tensor a tensor on its device; int64 unless ``dtype`` says
    otherwise (a CSR handed to METIS wants its ``idx_t``). Bool counts count ones."""
    if isinstance(counts, torch.Tensor):
        out = torch.zeros(counts.numel() + 1, dtype=dtype or torch.int64, device=counts.device)
        torch.cumsum(counts, 0, out=out[1:])
        return out
    counts = np.asarray(counts)
    out = np.zeros(counts.size + 1, dtype=dtype or np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def indptr_from_rows(rows, num_rows: int):
    """The row pointer of entries listed by ascending row id ``rows`` (the COO → CSR step)."""
    if isinstance(rows, torch.Tensor):
        return indptr_from_counts(torch.bincount(rows, minlength=num_rows))
    return indptr_from_counts(np.bincount(rows, minlength=num_rows))


def row_ids(indptr, r0: int = 0, r1: int | None = None, dtype=None):
    """The row of every entry of rows ``r0..r1-1`` (default: all rows), i.e. of the entries
    ``indptr[r0]:indptr[r1]``: the slicer for a contiguous range of rows. ``dtype`` defaults to
    int64 (a pass that only compares rows may ask for less)."""
    r1 = len(indptr) - 1 if r1 is None else r1
    if isinstance(indptr, torch.Tensor):
        ids = torch.arange(r0, r1, dtype=dtype or torch.int64, device=indptr.device)
        return torch.repeat_interleave(ids, indptr[r0 : r1 + 1].diff().to(torch.int64))
    return np.repeat(np.arange(r0, r1, dtype=dtype or np.int64), np.diff(indptr[r0 : r1 + 1]))


def row_spans(indptr, max_entries: int = BLOCK_ENTRIES):
    """Row ranges ``(r0, r1)`` covering all rows in order, each holding at most ``max_entries``
    entries, or a single row when that row alone holds more: how a pass over a huge CSR bounds its
    temporaries while still seeing whole rows."""
    n = len(indptr) - 1
    r0 = 0
    while r0 < n:
        r1 = int(np.searchsorted(indptr, int(indptr[r0]) + max_entries, side="right")) - 1
        r1 = min(max(r1, r0 + 1), n)
        yield r0, r1
        r0 = r1


def csr_rows(indptr: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows ``rows`` (any order, repeats allowed) of a CSR: ``(sub_indptr, pos)``, where
    ``pos`` are the positions of their entries in ``indices`` / ``values``, row after row, and
    ``sub_indptr`` the row pointer of that selection. The slicer for a set of rows: gather
    ``indices[pos]`` and ``values[pos]`` to get the sub-matrix."""
    starts = indptr[rows].to(torch.int64)
    counts = indptr[rows + 1].to(torch.int64) - starts
    sub = indptr_from_counts(counts)
    pos = torch.repeat_interleave(starts - sub[:-1], counts) + torch.arange(int(sub[-1]), device=rows.device)
    return sub, pos


def take_rows(x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Rows ``ids`` of a dense or sparse-CSR matrix, in the same layout (a part's or a block row's
    share of the features). Sparse rows keep their entries in the matrix's order, with int64 index
    arrays."""
    if x.layout != torch.sparse_csr:
        return x[ids]
    sub, pos = csr_rows(x.crow_indices(), ids)
    return torch.sparse_csr_tensor(sub, x.col_indices()[pos].to(torch.int64), x.values()[pos],
                                   size=(ids.numel(), x.shape[1]), check_invariants=False)


def _sorted_unique_rows(indptr: torch.Tensor, indices: torch.Tensor) -> bool:
    """Whether every row lists its columns strictly ascending (sorted, no repeats)."""
    if indices.numel() < 2:
        return True
    rising = indices[1:] > indices[:-1]
    starts = indptr[1:-1]
    starts = starts[(starts > 0) & (starts < indices.numel())]
    rising[starts - 1] = True  # a row's first entry need not exceed the last one of the row before
    return bool(rising.all())


def _sorted_unique_entries(indptr: torch.Tensor, indices: torch.Tensor, types: torch.Tensor | None) -> bool:
    """Whether every row lists its entries strictly ascending by ``(column, type)``: the order of a
    graph whose edges carry relations, where one pair may be two edges of two relations (``types``
    ``None``: by column alone, :func:`_sorted_unique_rows`)."""
    if types is None or indices.numel() < 2:
        return _sorted_unique_rows(indptr, indices)
    rising = (indices[1:] > indices[:-1]) | ((indices[1:] == indices[:-1]) & (types[1:] > types[:-1]))
    starts = indptr[1:-1]
    starts = starts[(starts > 0) & (starts < indices.numel())]
    rising[starts - 1] = True
    return bool(rising.all())


def canonical(indptr: torch.Tensor, indices: torch.Tensor, num_cols: int | None = None,
              drop_loops: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The structure with each row sorted and repeats merged (``drop_loops``: without the entries
    ``(r, r)``), int64. A CSR that already is so comes back as it is, without a copy (the loaders'
    graphs are), so callers must treat the result as read-only."""
    n = indptr.numel() - 1
    num_cols = n if num_cols is None else num_cols
    rows = row_ids(indptr) if drop_loops else None
    loops = drop_loops and bool((indices == rows).any())
    if not loops and _sorted_unique_rows(indptr, indices):
        return indptr.to(torch.int64), indices.to(torch.int64)
    rows = row_ids(indptr) if rows is None else rows
    keep = indices != rows if drop_loops else slice(None)
    keys = torch.unique(rows[keep] * num_cols + indices[keep])  # sorted: by row, then column
    return indptr_from_rows(keys // num_cols, n), keys % num_cols
