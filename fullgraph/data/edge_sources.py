"""Where an edge task's labelled edges come from (``--task edge`` and ``edge-regression``), whatever the folder.

:func:`labelled_edges` reads them as they are stored, before any split, as a :class:`LabelledEdges`: the
listed ``(src, dst)`` pairs in their direction, a label per pair (NaN: none), the edge's own features where
it has some, and the rows of a split the data gives (``None``: ``--edge-split`` draws one). Three sources:

* **a folder of plain files** (``data.formats.edgelist_folder``): the edges file's column named ``label``
  (``formats.edgelist.LABEL_NAMES``); its feature columns are the edge's features. The optional split files
  ``edge_train``, ``edge_val`` and ``edge_test`` (``.txt``, ``.csv``, ``.tsv`` or ``.npy``: all three or none)
  name rows of the edge list, counted from 0 over its edges as listed (a header line and comments are not
  rows), or are ``.npy`` boolean masks over those rows: the rows a split names must carry labels.
* **a folder with** ``edge_labels.npz`` (:data:`LABELS_FILE`): arrays ``pairs`` (int ``[M, 2]``), ``y``
  (``[M]``), optionally ``x`` (float ``[M, d]``) and ``train``, ``val``, ``test`` (row indices), as
  ``data.pyg.write_pyg`` writes them from a PyG ``Data``'s ``edge_label`` beside the native folder.
* **an OGB raw layout with** ``raw/edge_label.csv.gz`` (:data:`OGB_LABELS`): a label per line of
  ``raw/edge.csv.gz`` (``nan``: none), the name OGB's ``read_csv_graph_raw`` gives an additional edge file
  ``edge_label``; the edge's features are its row of ``raw/edge-feat.csv.gz`` where the folder has one.

Node ids are the graph's own: every loader keeps a folder's ids, so a pair means the same two nodes in
the graph the encoder sees.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fullgraph.errors import InputError

__all__ = ["LabelledEdges", "labelled_edges", "write_labelled_edges", "LABELS_FILE", "OGB_LABELS"]

LABELS_FILE = "edge_labels.npz"
"""The labelled edges of a folder that holds no edge list (a native folder written from PyG's ``edge_label``)."""
OGB_LABELS = "raw/edge_label.csv.gz"
"""An OGB raw layout's labels of its listed edges (module doc)."""
PARTS = ("train", "val", "test")


@dataclass(eq=False)
class LabelledEdges:
    """Edges with labels, as stored: ``pairs`` int64 ``[M, 2]`` (src, dst), ``y`` float64 ``[M]`` (NaN: no
    label), ``x`` float32 ``[M, d]`` (the edge's features) or ``None``, ``parts`` the row indices of a given
    split by part name (``None``: none given), ``where`` the file they came from (named in errors)."""

    pairs: np.ndarray
    y: np.ndarray
    where: str
    x: np.ndarray | None = None
    parts: dict[str, np.ndarray] | None = None


def labelled_edges(folder: str | Path, task: str) -> LabelledEdges:
    """The labelled edges of ``folder`` (module doc); ``task`` names the ``--task`` in errors. Read once per
    process while the folder's files are unchanged (a run asks for them where it cuts held-out edges from
    the graph and again where it builds its task); the arrays are shared, never written to."""
    folder = Path(folder)
    places = [f for f in (folder, folder / "raw") if f.is_dir()]
    stamp = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for f in places for p in sorted(f.iterdir())
                  if p.is_file())
    return _labelled_edges(str(folder.resolve()), stamp, task)


@functools.lru_cache(maxsize=4)
def _labelled_edges(folder: str, stamp: tuple, task: str) -> LabelledEdges:
    from fullgraph.data.formats.edgelist_folder import find_folder_files

    folder = Path(folder)
    if (folder / LABELS_FILE).is_file():
        return _read_npz(folder / LABELS_FILE)
    if (folder / OGB_LABELS).is_file():
        return _read_ogb(folder)
    from fullgraph.data.formats.typed_folder import is_typed_folder

    if is_typed_folder(folder):
        return _read_typed(folder, task)
    edges = find_folder_files(folder)["edges"] if folder.is_dir() else None
    if edges is None:
        raise InputError(f"expected a folder of plain files whose edge list names a label column, or one holding "
                         f"{LABELS_FILE} or {OGB_LABELS}, with --task {task} (got {folder}): see docs/data.md, "
                         f"edge labels")
    return _read_edge_list(edges, find_folder_files(folder), task)


def _given_parts(files: dict, rows: int, beside: Path) -> dict[str, np.ndarray] | None:
    """The rows each of the split files ``edge_train``, ``edge_val``, ``edge_test`` names (all three or none)."""
    from fullgraph.data.formats.edgelist import EDGE_SPLIT_STEMS, _mask

    given = [files[s] for s in EDGE_SPLIT_STEMS]
    if any(given) and not all(given):
        got = ", ".join(p.name for p in given if p is not None)
        raise InputError(f"expected all three edge split files ({', '.join(EDGE_SPLIT_STEMS)}) or none beside {beside} "
                         f"(got only {got})")
    if not all(given):
        return None
    return {p: np.flatnonzero(_mask(f, rows, f"{p} edge", "rows of the edge list").numpy()) for p, f in zip(PARTS, given)}


def _read_typed(folder: Path, task: str) -> LabelledEdges:
    """A typed folder's labelled relation (:func:`typed_labelled_edges`), in the node order its loader gives."""
    from fullgraph.data.formats.typed_folder import load_typed_folder, typed_folder_files

    types = load_typed_folder(folder).node_types
    return typed_labelled_edges(folder, typed_folder_files(folder), dict(zip(types.names, types.counts)), task)


def typed_labelled_edges(folder: Path, files: dict, order: dict, task: str) -> LabelledEdges:
    """The one relation of a typed folder whose edge file names a label column (``formats.typed_folder
    .label_column``), each end made a global id by its type's offset in ``order`` (node counts by type, in
    the graph's node order); ``files``: ``typed_folder_files``. What ``fullgraph convert`` keeps too."""
    from fullgraph.data.formats.edgelist_folder import find_folder_files
    from fullgraph.data.formats.typed_folder import SEP, label_column, read_labelled_edges

    labelled = {rel: p for rel, p in files["edges"].items() if label_column(p)}
    if len(labelled) != 1:
        got = ", ".join(p.name for p in labelled.values()) or "none"
        raise InputError(f"expected one edge file with a label column ('src dst label') in the typed folder {folder} "
                         f"with --task {task} (got {got}): an edge task learns the labels of one relation")
    (rel, path), = labelled.items()
    local, y = read_labelled_edges(path, rel)
    offsets = dict(zip(order, np.cumsum([0, *order.values()])))
    pairs = local + np.array([offsets[rel[0]], offsets[rel[2]]], dtype=np.int64)
    return LabelledEdges(pairs, y, f"{path} ({SEP.join(rel)})", None,
                         _given_parts(find_folder_files(folder), len(y), path))


def _read_edge_list(path: Path, files: dict, task: str) -> LabelledEdges:
    from fullgraph.data.formats.edgelist import LABEL_NAMES, read_edge_list

    pairs, data = read_edge_list(path)
    if "edge_label" not in data:
        raise InputError(f"expected a column named {' or '.join(LABEL_NAMES)} in the header line of {path} with "
                         f"--task {task} (got none): name the column of each edge's label")
    parts = _given_parts(files, pairs.shape[0], path)
    return LabelledEdges(pairs, data["edge_label"], str(path), data.get("edge_attr"), parts)


def _read_npz(path: Path) -> LabelledEdges:
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise InputError(f"expected {path} to be a .npz of plain arrays (got {type(e).__name__}: {e})") from None
    if "pairs" not in arrays or "y" not in arrays:
        raise InputError(f"expected arrays 'pairs' [M, 2] and 'y' [M] in {path} (got {', '.join(arrays) or 'none'})")
    pairs, y, x = arrays["pairs"], arrays["y"], arrays.get("x")
    m = pairs.shape[0] if pairs.ndim == 2 else -1
    if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.dtype.kind not in "iu":
        raise InputError(f"expected 'pairs' of integers of shape [M, 2] in {path} (got {pairs.dtype} {list(pairs.shape)})")
    if y.shape != (m,) or y.dtype.kind not in "iuf":
        raise InputError(f"expected 'y' of {m} numbers in {path}, one per pair (got {y.dtype} {list(y.shape)})")
    if x is not None and (x.ndim != 2 or x.shape[0] != m or not np.isfinite(x).all()):
        raise InputError(f"expected 'x' of finite features [{m}, d] in {path}, a row per pair (got {list(x.shape)})")
    named = [p for p in PARTS if p in arrays]
    if named and len(named) != 3:
        raise InputError(f"expected all three of 'train', 'val', 'test' or none in {path} (got only {', '.join(named)})")
    parts = {p: arrays[p].astype(np.int64).reshape(-1) for p in PARTS} if named else None
    return LabelledEdges(pairs.astype(np.int64), y.astype(np.float64), str(path),
                         None if x is None else x.astype(np.float32), parts)


def _read_ogb(folder: Path) -> LabelledEdges:
    from fullgraph.data.formats._common import read_table_blocks
    from fullgraph.data.formats.ogb_source import _columns

    def whole(path: Path, dtype, ncols: int) -> np.ndarray:
        if not path.is_file():
            raise InputError(f"expected {path} beside {folder / OGB_LABELS} (not found)")
        blocks = list(read_table_blocks(path, dtype=dtype, what=path.name, ncols=ncols))
        return np.concatenate(blocks) if blocks else np.zeros((0, ncols), dtype)

    raw = folder / "raw"
    pairs, y = whole(raw / "edge.csv.gz", np.int64, 2), whole(folder / OGB_LABELS, np.float64, 1)[:, 0]
    feat = raw / "edge-feat.csv.gz"
    x = whole(feat, np.float32, _columns(feat)) if feat.is_file() else None
    for name, rows in (("edge_label.csv.gz", y.shape[0]), ("edge-feat.csv.gz", None if x is None else x.shape[0])):
        if rows is not None and rows != pairs.shape[0]:
            raise InputError(f"expected a line of {raw / name} per edge of {raw / 'edge.csv.gz'}, {pairs.shape[0]} "
                             f"lines (got {rows})")
    return LabelledEdges(pairs, y, str(folder / OGB_LABELS), x)


def write_labelled_edges(edges: LabelledEdges, folder: str | Path) -> Path:
    """``folder/edge_labels.npz`` (:data:`LABELS_FILE`) of ``edges``, written whole or not at all."""
    path = Path(folder) / LABELS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    arrays = {"pairs": edges.pairs, "y": edges.y} | ({} if edges.x is None else {"x": edges.x}) | (edges.parts or {})
    np.savez(tmp, **arrays)
    tmp.replace(path)
    return path
