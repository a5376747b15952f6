"""Your own graph from plain files: an edge list, a feature matrix, labels, and optionally a split.

This is the way in for data that no benchmark loader knows. The files:

* edges: text, one ``src dst`` pair per line (whitespace or comma separated; a third column, e.g.
  a weight, is refused: every edge weighs 1 in Â, and a weight silently dropped would train
  another graph than the user's), ``#`` starts a comment, a non-numeric first line (a header
  such as ``node_id<TAB>node_id``) is skipped; or a ``.npy`` int array [E, 2];
* features: ``.npy`` [N, F], ``.npz`` as written by ``scipy.sparse.save_npz`` (stays sparse), or
  text with one row of numbers per node;
* labels: ``.npy`` or text; one value per node (a class id, ``-1`` for unlabelled) or one 0/1 row
  per node (multi-label);
* splits (optional, all three or none): ``.npy`` bool masks or id arrays, or text with one node id
  per line. Without them a single-label graph gets the seeded per-class split
  (:func:`fullgraph.data.splits.per_class_split`).

Class ids run from 0 to C-1: without ``num_classes``, C is the largest label + 1, and labels that
leave most of those classes without a node (a typo such as ``1000`` among 0..3) are refused
(:func:`fullgraph.data.graph.check_inferred_classes`).

Node ids run from 0 to N-1 with N = the number of label rows. Edges are kept as given (directed);
``datasets.preprocess`` symmetrizes. Every malformed line is reported with its file and line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from fullgraph.data.formats._common import features_to_torch, load_array, mask_from_ids, read_table
from fullgraph.data.graph import Graph, check_inferred_classes, used_classes
from fullgraph.data.splits import per_class_split
from fullgraph.errors import InputError

__all__ = ["load_edgelist", "read_edges"]


def _exists(path: Path, what: str) -> Path:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"expected the {what} file {path} (not found)")
    return path


def read_edges(path: str | Path, *, header: bool | None = None) -> np.ndarray:
    """Edges ``[E, 2]`` (int64) from a text edge list or a ``.npy`` array."""
    path = _exists(Path(path), "edge list")
    if path.suffix == ".npy":
        edges = load_array(path, "edge list")
        if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
            raise InputError(f"expected an integer [E, 2] array in {path} (got {edges.dtype} {edges.shape})")
        return edges.astype(np.int64)
    try:
        edges = read_table(path, dtype=np.int64, what="edge list", header=header)
    except InputError:  # perhaps a float weight column: read as floats, ids still checked as integers
        edges = read_table(path, dtype=np.float64, what="edge list", header=header, int_columns=2)
    if edges.shape[0] and edges.shape[1] == 3:
        raise InputError(f"expected 'src dst' per line in {path} (got a third column, e.g. {edges[0, 2]:g} on the first "
                         f"edge: fullgraph trains every edge with weight 1, so edge weights are not read); drop the "
                         f"column to train the unweighted graph, e.g. cut -d' ' -f1,2")
    if edges.shape[0] and edges.shape[1] != 2:
        raise InputError(f"expected 'src dst' per line in {path} (got {edges.shape[1]} values per line)")
    if edges.shape[0] == 0:
        raise InputError(f"expected at least one edge in {path} (got none)")
    edges = edges.astype(np.int64)
    return np.ascontiguousarray(edges[:, :2])


def _features(path: Path):
    path = _exists(path, "features")
    if path.suffix == ".npy":
        return load_array(path, "features")
    if path.suffix == ".npz":
        try:
            return sp.load_npz(path)
        except (ValueError, OSError, KeyError) as e:
            raise InputError(
                f"expected {path} to be a scipy.sparse.save_npz file (got {type(e).__name__}: {e})"
            ) from None
    return read_table(path, dtype=np.float32, what="features", header=False)


def _labels(path: Path) -> torch.Tensor:
    path = _exists(path, "labels")
    if path.suffix == ".npy":
        arr = load_array(path, "labels")
    else:
        arr = read_table(path, dtype=np.int64, what="labels", header=False)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim == 1:
        if not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"expected integer class ids in {path} (got {arr.dtype})")
        return torch.from_numpy(arr.astype(np.int64))
    if arr.ndim == 2:
        if not np.isin(arr, (0, 1)).all():
            raise InputError(f"expected 0/1 entries in the multi-label rows of {path}")
        return torch.from_numpy(arr.astype(np.float32))
    raise InputError(f"expected labels [N] or [N, C] in {path} (got shape {arr.shape})")


def _mask(path: Path, n: int, what: str) -> torch.Tensor:
    path = _exists(path, f"{what} split")
    if path.suffix == ".npy":
        arr = load_array(path, f"{what} split")
        if arr.dtype == np.bool_:
            if arr.shape != (n,):
                raise InputError(f"expected a boolean mask of shape ({n},) in {path} (got {arr.shape})")
            return torch.from_numpy(arr.copy())
    else:
        arr = read_table(path, dtype=np.int64, what=f"{what} split", ncols=1, header=False)
    return torch.from_numpy(mask_from_ids(arr, n, str(path)))


def load_edgelist(edges: str | Path, features: str | Path, labels: str | Path, *,
                  train: str | Path | None = None, val: str | Path | None = None, test: str | Path | None = None,
                  name: str | None = None, seed: int = 0, header: bool | None = None,
                  train_per_class: int = 20, val_per_class: int = 30, num_classes: int | None = None) -> Graph:
    """A graph from an edge list, features, labels and (optionally) split files; see the module doc.
    ``num_classes``: the class count, when the labels leave some classes without a node on purpose."""
    e = read_edges(edges, header=header)
    y = _labels(Path(labels))
    if num_classes is None and y.dim() == 1 and bool((y >= 0).any()):  # refused before the features are read
        check_inferred_classes(used_classes(y.numpy()), f" in {labels}")
    n = y.shape[0]
    x = features_to_torch(_features(Path(features)), f"features {features}")
    if x.shape[0] != n:
        raise InputError(f"expected one feature row per labelled node, {n} rows, in {features} (got {x.shape[0]})")
    if e.size and (e.min() < 0 or e.max() >= n):
        bad = e[(e < 0) | (e >= n)]
        raise InputError(
            f"expected node ids in [0, {n}) (one per label row) in {edges} (got {bad.size} outside, e.g. {bad[0]})"
        )
    given = [p is not None for p in (train, val, test)]
    if any(given) and not all(given):
        raise InputError("expected all three split files (train, val, test) or none (got only some)")
    if all(given):
        masks = [_mask(Path(p), n, w) for p, w in ((train, "train"), (val, "val"), (test, "test"))]
    elif y.dim() == 1:
        masks = list(per_class_split(y, train_per_class, val_per_class, seed=seed))
    else:
        raise InputError("expected split files for a multi-label graph (a per-class split needs single labels)")
    return Graph.from_edges(
        torch.from_numpy(e[:, 0].copy()), torch.from_numpy(e[:, 1].copy()), n,
        x=x, y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2], name=name or Path(edges).stem,
        num_classes=num_classes,
    )


def _find(folder: Path, stem: str, exts: tuple[str, ...], required: bool = True) -> Path | None:
    for ext in exts:
        p = folder / f"{stem}{ext}"
        if p.is_file():
            return p
    if required:
        names = ", ".join(f"{stem}{e}" for e in exts)
        raise InputError(f"expected one of {names} in {folder} (got none)")
    return None


def load_edgelist_folder(folder: str | Path, *, seed: int = 0, num_classes: int | None = None) -> Graph:
    """A graph from a folder laid out as ``edges.{txt,csv,tsv}``, ``features.{npy,txt}``,
    ``labels.{npy,txt}`` and optionally ``train``/``val``/``test`` split files (``.txt`` or ``.npy``):
    what ``fullgraph train --dataset edgelist --root FOLDER`` reads. ``num_classes``: as for
    :func:`load_edgelist`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"expected --root to be a folder holding edges.txt, features.npy and labels.txt "
                         f"(got {folder}, which is not a folder)")
    edges = _find(folder, "edges", (".txt", ".csv", ".tsv"))
    features = _find(folder, "features", (".npy", ".txt"))
    labels = _find(folder, "labels", (".npy", ".txt"))
    splits = [_find(folder, s, (".txt", ".npy"), required=False) for s in ("train", "val", "test")]
    return load_edgelist(edges, features, labels, train=splits[0], val=splits[1], test=splits[2],
                         name=folder.name, seed=seed, num_classes=num_classes)
