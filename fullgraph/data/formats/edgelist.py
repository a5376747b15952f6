"""Your own graph from plain files: an edge list, a feature matrix, labels, and optionally a split.

This is the way in for data that no benchmark loader knows. The files (text: ``.txt``, ``.csv`` or
``.tsv``, values separated by whitespace or commas):

* edges: text, one ``src dst`` pair per line, ``#`` starts a comment, a non-numeric first line (a
  header such as ``node_id<TAB>node_id``) is skipped; or a ``.npy`` array [E, 2] of integers, or a
  float one [E, k > 2] whose first two columns hold integers (the ids). Columns past the two ids are edge
  data (:func:`read_edge_list`): without a header, the third is the edge's weight and any further
  ones its features (``src dst weight f1 .. fk``); with a header, the names say: ``weight`` (or
  ``edge_weight``, ``w``) is the weight, ``type`` (or ``edge_type``, ``relation``, ``rel``,
  ``etype``) the edge's relation (an integer >= 0), and any other name a feature column, so a file
  of features without a weight is ``src dst f1 f2`` with that header. A value that is not a number
  (or not an integer for a type), NaN or infinity is refused with its file and line. An edge listed
  twice has its weights summed; listed twice with features or a type it is refused. A ``#`` line just
  before the data whose words are as many as the columns and none a number (SNAP's ``# FromNodeId
  ToNodeId``, or ``# src dst type``) is read as the header; how each column past the ids was taken is
  logged in one line;
* features: ``.npy`` [N, F]; ``.npz``, either a scipy sparse matrix (``scipy.sparse.save_npz``,
  which stays sparse: a bag-of-words matrix densified can cost 20 times the memory and time) or one
  dense array (``numpy.savez``); or text with one row of numbers per node;
* labels: ``.npy`` or text; one value per node (a class id, ``-1`` for unlabelled) or one 0/1 row
  per node (multi-label);
* splits (optional, all three or none): ``.npy`` bool masks or id arrays, or text with one node id
  per line. Without them a single-label graph gets the seeded per-class split
  (:func:`fullgraph.data.splits.per_class_split`).

A folder (:func:`.edgelist_folder.load_edgelist_folder`) names them ``edges``, ``features``, ``labels``, ``train``,
``val`` and ``test`` with the extensions of :data:`FOLDER_FILES`: the one table that the folder scan
and the format detection (:mod:`fullgraph.data.detect`) both read, so that every form the reader
takes is also found in a folder. Two files of one name (``features.npy`` and ``features.npz``) are
refused rather than one picked silently.

Class ids run from 0 to C-1: without ``num_classes``, C is the largest label + 1, and labels that
leave most of those classes without a node (a typo such as ``1000`` among 0..3) are refused
(:func:`fullgraph.data.labels.check_inferred_classes`).

Node ids run from 0 to N-1 with N = the number of label rows (of feature rows where a link task reads a
graph without labels). Edges are kept as given (directed);
``datasets.preprocess`` symmetrizes. Every malformed line is reported with its file and line.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from fullgraph.data.formats._common import _is_number_row, features_to_torch, load_array, mask_from_ids, read_table
from fullgraph.data.edge_list import csr_with_edge_data
from fullgraph.data.graph import Graph
from fullgraph.data.labels import check_inferred_classes, used_classes
from fullgraph.data.splits import per_class_split, placeholder_labels, random_split
from fullgraph.errors import InputError

__all__ = ["load_edgelist", "read_edges", "read_edge_list", "FOLDER_FILES", "SPLIT_STEMS", "EDGE_SPLIT_STEMS", "WEIGHT_NAMES", "TYPE_NAMES",
           "LABEL_NAMES"]

log = logging.getLogger("fullgraph")

TEXT = (".txt", ".csv", ".tsv")
SPLIT_STEMS = ("train", "val", "test")
EDGE_SPLIT_STEMS = tuple(f"edge_{s}" for s in SPLIT_STEMS)
"""The stems of the split files of an edge task's labelled edges (``data.edge_sources``)."""
FOLDER_FILES: dict[str, tuple[str, ...]] = {
    "edges": (*TEXT, ".npy"),
    "features": (".npy", ".npz", *TEXT),
    "labels": (".npy", *TEXT),
    **{s: (".npy", *TEXT) for s in SPLIT_STEMS},
    **{s: (".npy", *TEXT) for s in EDGE_SPLIT_STEMS},
}
"""The file names of a folder, by stem: the extensions each reader below takes."""
WEIGHT_NAMES = ("weight", "edge_weight", "w")
"""Header names of an edge list's weight column (any case)."""
TYPE_NAMES = ("type", "edge_type", "relation", "rel", "etype")
"""Header names of an edge list's relation column (any case); any other name past the ids is a feature."""
LABEL_NAMES = ("label", "edge_label")
"""Header names of an edge list's label column (any case): what ``--task edge`` (a class id) or ``edge-regression``
(a number) learns of each edge (``data.edge_labels``; NaN: none); no layer reads it."""


def _exists(path: Path, what: str) -> Path:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"expected the {what} file {path} (not found)")
    return path


def read_edges(path: str | Path, *, header: bool | None = None) -> np.ndarray:
    """Edges ``[E, 2]`` (int64) from a text edge list or a ``.npy`` array that holds no edge data
    (a file with a weight or feature column is refused here, never cut: :func:`read_edge_list`)."""
    edges, data = read_edge_list(path, header=header)
    if data:
        raise InputError(f"expected 'src dst' per line in {path} (got edge data: {', '.join(data)}); read it "
                         f"with read_edge_list, which keeps them")
    return edges


def _first_line(path: Path) -> str | None:
    """The first line of ``path`` with something in it besides a ``#`` comment (``None``: none)."""
    try:
        with open(path, encoding="utf8") as f:
            for line in f:
                line = line.split("#", 1)[0]
                if line.strip():
                    return line
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"expected {path} to be a readable text file (got {type(e).__name__}: {e})") from None
    return None


def _commented_header(path: Path, first: str) -> list[str] | None:
    """The column names of a ``#`` line just before the data (SNAP writes ``# FromNodeId ToNodeId``): the
    last comment line before the first data line ``first``, when it holds as many words as ``first``
    holds values and none of them is a number."""
    names = None
    with open(path, encoding="utf8") as f:
        for line in f:
            body, _, comment = line.partition("#")
            if body.strip():
                break
            words = comment.replace(",", " ").split()
            names = words if words and not any(_is_number_row(w) for w in words) else None
    return names if names and len(names) == len(first.replace(",", " ").split()) else None


def _say_columns(path: Path, names: list[str] | None, roles: tuple, source: str) -> None:
    """How each column past the two ids was taken, in one line, where there are any."""
    weight, kind, features, label = roles
    taken = {weight: "the weight", kind: "the relation type", label: "the label", **{j: "a feature" for j in features}}
    taken.pop(None, None)
    if taken:
        log.info("%s: columns 1-2 taken as the edge's ends, %s (%s)", path.name, ", ".join(
            f"{j + 1}{f' {names[j]!r}' if names else ''} as {taken[j]}" for j in sorted(taken)), source)


def _line_of_row(path: Path, row: int, skip_header: bool) -> int:
    """The line number (from 1) of data row ``row`` of the table in ``path``: what an error names."""
    seen, header = -1, skip_header
    with open(path, encoding="utf8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.split("#", 1)[0].strip():
                continue
            if header:
                header = False
                continue
            seen += 1
            if seen == row:
                return lineno
    return -1


def _roles(names: list[str] | None, ncols: int, path: Path) -> tuple:
    """The weight column, the type column, the feature columns and the label column of an edge table of
    ``ncols`` columns (the module doc's rule: by header ``names``, else ``src dst weight f1 .. fk``)."""
    if names is None:
        return (2 if ncols > 2 else None), None, list(range(3, ncols)), None
    found: dict[str, int] = {}
    features = []
    for j, name in enumerate(names[2:], 2):
        low = name.strip().lower()
        role = next((r for r, known in (("weight", WEIGHT_NAMES), ("type", TYPE_NAMES), ("label", LABEL_NAMES))
                     if low in known), None)
        if role in found:
            raise InputError(f"expected one {role} column in the header of {path} (got {names[found[role]]!r} and "
                             f"{name!r})")
        if role:
            found[role] = j
        else:
            features.append(j)
    return found.get("weight"), found.get("type"), features, found.get("label")


def read_edge_list(path: str | Path, *, header: bool | None = None) -> tuple[np.ndarray, dict]:
    """Edges ``[E, 2]`` (int64) and their data, ``{"edge_weight": float32 [E], "edge_attr": float32
    [E, k], "edge_type": int64 [E]}`` with the fields the file holds (none for ``src dst``), from a
    text edge list or a ``.npy`` array; the columns as the module doc says. Each edge's data is on
    its own row (:meth:`Graph.from_edges` puts both in CSR order)."""
    path = _exists(Path(path), "edge list")
    names = None
    if path.suffix == ".npy":
        table = load_array(path, "edge list")
        integer, floating = np.issubdtype(table.dtype, np.integer), np.issubdtype(table.dtype, np.floating)
        if table.ndim != 2 or not ((integer and table.shape[1] == 2) or (floating and table.shape[1] > 2)):
            hint = "; a PyG edge_index is [2, E]: save its transpose" if table.shape[:1] == (2,) else ""
            raise InputError(f"expected an integer [E, 2] array (or a float [E, k > 2] one, ids first, then edge "
                             f"data) in {path} (got {table.dtype} {table.shape}{hint})")
        if not np.issubdtype(table.dtype, np.integer):
            ids = table[:, :2]
            bad = np.flatnonzero(~(ids == np.round(ids)).all(axis=1))
            if bad.size:
                raise InputError(f"expected integer node ids in the first two columns of {path} (got "
                                 f"{table[bad[0], :2].tolist()} in row {int(bad[0])})")
        where = lambda r: f"row {r}"  # noqa: E731
    else:
        first = _first_line(path)
        skip = bool(first is not None and (header or (header is None and not _is_number_row(first))))
        source = "by position: src dst weight features; a header line names them otherwise"
        if skip:
            names, source = first.replace(",", " ").split(), "by the header line"
        elif first is not None and header is None:
            names = _commented_header(path, first)
            source = "by the commented header line" if names else source
        ncols = len(names) if names else None
        try:
            table = read_table(path, dtype=np.int64, what="edge list", header=header, ncols=ncols)
        except InputError:  # perhaps float edge data: read as floats, ids still checked as integers
            table = read_table(path, dtype=np.float64, what="edge list", header=header, int_columns=2, ncols=ncols)
        where = lambda r: f"line {_line_of_row(path, r, skip)}"  # noqa: E731
    if table.shape[0] == 0:
        raise InputError(f"expected at least one edge in {path} (got none)")
    if table.shape[1] < 2:
        raise InputError(f"expected 'src dst' per line in {path} (got {table.shape[1]} value per line)")
    roles = _roles(names, table.shape[1], path)
    if path.suffix != ".npy":
        _say_columns(path, names, roles, source)
    return np.ascontiguousarray(table[:, :2], dtype=np.int64), _edge_data(table, roles, names, path, where)


def _edge_data(table: np.ndarray, roles: tuple, names: list[str] | None, path: Path, where) -> dict:
    """The weight, feature and type columns of ``table`` (``roles``: their indices), checked: finite within
    float32, types integers numbered from 0 below the edge count; ``where(row)`` names a row's line. The label
    column (``edge_label``, float64, NaN where an edge has none) is for ``data.edge_labels``: no graph holds it."""
    weight, kind, features, label = roles
    data = {} if label is None else {"edge_label": table[:, label].astype(np.float64)}
    for name, cols in (("edge_weight", [weight] if weight is not None else []), ("edge_attr", features)):
        if not cols:
            continue
        values = table[:, cols] if name == "edge_attr" else table[:, cols[0]]
        with np.errstate(over="ignore"):  # a value past float32's range becomes inf, refused below by its line
            kept = np.ascontiguousarray(values, dtype=np.float32)
        finite = np.isfinite(kept) if kept.ndim == 1 else np.isfinite(kept).all(axis=1)
        if not finite.all():
            r = int(np.flatnonzero(~finite)[0])
            what = "weights" if name == "edge_weight" else "features"
            raise InputError(f"expected finite edge {what} within float32's range in {path} (got "
                             f"{table[r, 2:].tolist()} on {where(r)})")
        data[name] = kept
    if kind is not None:
        t = table[:, kind]
        bad = np.flatnonzero((t != np.round(t)) | (t < 0) | ~np.isfinite(t))
        if bad.size:
            r = int(bad[0])
            raise InputError(f"expected integer edge types >= 0 in the column {names[kind]!r} of {path} "
                             f"(got {t[r]:g} on {where(r)})")
        if t.size and t.max() >= t.size:  # R relations need ids 0..R-1, and R is at most the edge count
            r = int(np.argmax(t))
            raise InputError(f"expected edge types numbered from 0, each below the edge count {t.size}, in the column "
                             f"{names[kind]!r} of {path} (got {t[r]:.0f} on {where(r)}): number the relations 0..R-1")
        data["edge_type"] = t.astype(np.int64)
    return data


def _npz_features(path: Path):
    """A scipy sparse matrix (kept sparse) or the one dense array of an ``np.savez`` file; never pickles."""
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = sorted(z.files)
            if {"format", "shape", "data"} <= set(keys):
                return sp.load_npz(path)
            if len(keys) == 1:
                return z[keys[0]]
    except (ValueError, OSError, KeyError, EOFError) as e:
        raise InputError(f"expected {path} to be a scipy.sparse.save_npz file or one numpy.savez array "
                         f"(got {type(e).__name__}: {e})") from None
    raise InputError(f"expected {path} to be a scipy.sparse.save_npz file or one numpy.savez array "
                     f"(got the arrays {', '.join(keys[:8]) or 'none'})")


def _features(path: Path):
    path = _exists(path, "features")
    if path.suffix == ".npy":
        return load_array(path, "features")
    if path.suffix == ".npz":
        return _npz_features(path)
    return read_table(path, dtype=np.float32, what="features", header=False)


def _labels(path: Path, numeric: bool = False) -> torch.Tensor:
    """Class ids ``[N]`` or multi-label rows; ``numeric`` (node regression): a number per node, float32."""
    path = _exists(path, "labels")
    if path.suffix == ".npy":
        arr = load_array(path, "labels")
    else:
        arr = read_table(path, dtype=np.float64 if numeric else np.int64, what="labels", header=False)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if numeric:
        if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            raise InputError(f"expected one number per node in {path} (got {arr.dtype} of shape {arr.shape})")
        return torch.from_numpy(arr.astype(np.float32))
    if arr.ndim == 1 and np.issubdtype(arr.dtype, np.floating) and not np.array_equal(arr, np.round(arr)):
        raise InputError(f"expected integer class ids in {path} (got numbers with fractions, {arr.dtype}): a number "
                         f"per node trains --task node-regression")
    if arr.ndim == 1:
        if not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"expected integer class ids in {path} (got {arr.dtype})")
        return torch.from_numpy(arr.astype(np.int64))
    if arr.ndim == 2:
        if not np.isin(arr, (0, 1)).all():
            raise InputError(f"expected 0/1 entries in the multi-label rows of {path}")
        return torch.from_numpy(arr.astype(np.float32))
    raise InputError(f"expected labels [N] or [N, C] in {path} (got shape {arr.shape})")


def _mask(path: Path, n: int, what: str, unit: str = "node ids") -> torch.Tensor:
    path = _exists(path, f"{what} split")
    if path.suffix == ".npy":
        arr = load_array(path, f"{what} split")
        if arr.dtype == np.bool_:
            if arr.shape != (n,):
                raise InputError(f"expected a boolean mask of shape ({n},) in {path} (got {arr.shape})")
            return torch.from_numpy(arr.copy())
    else:
        arr = read_table(path, dtype=np.int64, what=f"{what} split", ncols=1, header=False)
    return torch.from_numpy(mask_from_ids(arr, n, str(path), unit))


def load_edgelist(edges: str | Path, features: str | Path, labels: str | Path | None, *,
                  train: str | Path | None = None, val: str | Path | None = None, test: str | Path | None = None,
                  name: str | None = None, seed: int = 0, header: bool | None = None,
                  train_per_class: int = 20, val_per_class: int = 30, num_classes: int | None = None,
                  numeric: bool = False) -> Graph:
    """A graph from an edge list, features, labels and (optionally) split files; see the module doc.
    ``num_classes``: the class count, when the labels leave some classes without a node on purpose.
    ``labels`` ``None``: a graph trained on its links only, one node per feature row, with placeholder
    labels and splits (``data.splits.placeholder_labels``). ``numeric`` (node regression): the labels are a
    number per node, and a folder without split files is split at random (``data.splits.random_split``)."""
    e, edge_data = read_edge_list(edges, header=header)
    edge_data.pop("edge_label", None)  # what an edge task learns (data.edge_labels) is no layer's input
    if labels is None:
        return _unlabelled(e, edge_data, features, name or Path(edges).stem, edges)
    y = _labels(Path(labels), numeric)
    if num_classes is None and not numeric and y.dim() == 1 and bool((y >= 0).any()):  # refused before the features are read
        num_classes = check_inferred_classes(used_classes(y.numpy()), f" in {labels}")  # checked (and said) once
    n = y.shape[0]
    x = features_to_torch(_features(Path(features)), f"features {features}")
    if x.shape[0] != n:
        raise InputError(f"expected one feature row per labelled node, {n} rows, in {features} (got {x.shape[0]})")
    _check_ids(e, n, edges, "one per label row")
    given = [p is not None for p in (train, val, test)]
    if any(given) and not all(given):
        raise InputError("expected all three split files (train, val, test) or none (got only some)")
    if all(given):
        masks = [_mask(Path(p), n, w) for p, w in ((train, "train"), (val, "val"), (test, "test"))]
    elif numeric:
        masks = list(random_split(y, seed=seed))
    elif y.dim() == 1:
        masks = list(per_class_split(y, train_per_class, val_per_class, seed=seed))
    else:
        raise InputError("expected split files for a multi-label graph (a per-class split needs single labels)")
    fields = dict(x=x, y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2],
                  name=name or Path(edges).stem, num_classes=num_classes)
    return _graph(e, edge_data, n, fields, edges)


def _check_ids(e: np.ndarray, n: int, edges, rows: str) -> None:
    if e.size and (e.min() < 0 or e.max() >= n):
        bad = e[(e < 0) | (e >= n)]
        raise InputError(f"expected node ids in [0, {n}) ({rows}) in {edges} (got {bad.size} outside, e.g. {bad[0]})")


def _unlabelled(e: np.ndarray, edge_data: dict, features, name: str, edges) -> Graph:
    """A folder without labels, for link prediction: as many nodes as feature rows."""
    x = features_to_torch(_features(Path(features)), f"features {features}")
    _check_ids(e, x.shape[0], edges, "one per feature row")
    return _graph(e, edge_data, x.shape[0], dict(x=x, name=name, **placeholder_labels(x.shape[0])), edges)


def _graph(e: np.ndarray, edge_data: dict, n: int, fields: dict, edges) -> Graph:
    """The graph of edges ``e`` (and their data) over ``n`` nodes, with ``fields``."""
    src, dst = torch.from_numpy(e[:, 0].copy()), torch.from_numpy(e[:, 1].copy())
    if not edge_data:
        return Graph.from_edges(src, dst, n, **fields)
    try:  # a repeated edge with features or a type: the error names the file
        indptr, indices, data = csr_with_edge_data(src, dst, n, {k: torch.from_numpy(v) for k, v in edge_data.items()})
    except InputError as err:
        raise InputError(f"{err} (in {edges})") from None
    return Graph(indptr=indptr, indices=indices, **data, **fields)
