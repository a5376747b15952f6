"""Shchur et al.'s ``.npz`` graphs (Amazon Computers/Photo, Coauthor CS/Physics).

Two key layouts hold the same matrices:

* GraphData's repackaging (the copies in ``shared/data``): ``adj_matrix`` and ``node_attr`` are
  pickled SciPy CSR matrices in 0-d object arrays, ``node_label`` an int array, ``metadata`` a dict;
* shchur/gnn-benchmark's original: ``adj_data/adj_indices/adj_indptr/adj_shape``,
  ``attr_data/attr_indices/attr_indptr/attr_shape`` (or a dense ``attr_matrix``), and ``labels``
  (or ``labels_data/labels_indices/labels_indptr/labels_shape`` as a sparse one-hot matrix).

The pickles go through :mod:`fullgraph.data.safe_pickle`. The files carry no split, so the graph
gets the seeded per-class split of :func:`fullgraph.data.splits.per_class_split` (20/30/rest).
Edges are returned as stored: the Amazon matrices are not symmetric; ``datasets`` symmetrizes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from fullgraph.data.formats._common import features_to_torch, labels_from_onehot
from fullgraph.data.graph import Graph
from fullgraph.data.safe_pickle import checked_csr, load_npz_with_objects
from fullgraph.data.splits import per_class_split
from fullgraph.errors import InputError

__all__ = ["load_npz_shchur"]


def _keys(path: Path) -> set[str]:
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            return {n[:-4] if n.endswith(".npy") else n for n in zf.namelist()}
    except FileNotFoundError:
        raise InputError(f"expected an .npz file at {path} (not found)") from None
    except (zipfile.BadZipFile, OSError) as e:
        raise InputError(f"expected {path} to be an .npz (zip) archive (got {type(e).__name__}: {e})") from None


def _item(arr: np.ndarray):
    """The object inside a 0-d object array (how GraphData stores each matrix)."""
    return arr.item() if arr.dtype == object and arr.shape == () else arr


def _split_csr(d: dict, prefix: str, what: str) -> sp.csr_matrix:
    try:
        m = sp.csr_matrix(
            (d[f"{prefix}_data"], d[f"{prefix}_indices"], d[f"{prefix}_indptr"]),
            shape=tuple(int(s) for s in d[f"{prefix}_shape"]),
        )
    except (ValueError, TypeError, IndexError) as e:
        raise InputError(
            f"expected the {prefix}_* arrays of {what} to form a CSR matrix (got {type(e).__name__}: {e})"
        ) from None
    return checked_csr(m, f"{prefix} matrix of {what}")


def _read(path: Path) -> tuple[sp.csr_matrix, object, np.ndarray, int | None]:
    """Adjacency, attributes, labels, and the class count where the file states it (the columns of
    one-hot labels: a column no node uses is still a class, so the count is not inferred)."""
    keys = _keys(path)
    if {"adj_matrix", "node_attr", "node_label"} <= keys:
        d = load_npz_with_objects(path, ["adj_matrix", "node_attr", "node_label"])
        adj = checked_csr(_item(d["adj_matrix"]), f"{path}[adj_matrix]")
        attr = _item(d["node_attr"])
        labels = np.asarray(_item(d["node_label"]))
        return adj, attr, labels, None
    adj_keys = {"adj_data", "adj_indices", "adj_indptr", "adj_shape"}
    if adj_keys <= keys:
        wanted = sorted(k for k in keys if k.startswith(("adj_", "attr_", "labels")))
        d = load_npz_with_objects(path, wanted)
        adj = _split_csr(d, "adj", str(path))
        if "attr_data" in d:
            attr = _split_csr(d, "attr", str(path))
        elif "attr_matrix" in d:
            attr = d["attr_matrix"]
        else:
            raise InputError(
                f"expected node attributes (attr_data/... or attr_matrix) in {path} (found keys {sorted(keys)})"
            )
        num_classes = None
        if "labels" in d:
            labels = d["labels"]
        elif "labels_data" in d:
            onehot = _split_csr(d, "labels", str(path))
            if (np.diff(onehot.indptr) > 1).any():
                raise InputError(
                    f"expected one label per node in {path} (got nodes with several: multi-label npz is unsupported)"
                )
            labels = labels_from_onehot(onehot.toarray(), f"{path}[labels_*]")
            num_classes = onehot.shape[1]
        else:
            raise InputError(f"expected labels (labels or labels_data/...) in {path} (found keys {sorted(keys)})")
        return adj, attr, labels, num_classes
    raise InputError(
        f"expected a Shchur npz in {path}: keys adj_matrix/node_attr/node_label (GraphData) or "
        f"adj_data/adj_indices/adj_indptr/adj_shape + attr_* + labels (gnn-benchmark) (found {sorted(keys)})"
    )


def load_npz_shchur(path: str | Path, name: str | None = None, *, seed: int = 0,
                    train_per_class: int = 20, val_per_class: int = 30) -> Graph:
    """The graph in a Shchur ``.npz`` file, with a per-class split drawn from ``seed``."""
    path = Path(path)
    adj, attr, labels, num_classes = _read(path)
    n = adj.shape[0]
    if adj.shape != (n, n):
        raise InputError(f"expected a square adjacency matrix in {path} (got shape {adj.shape})")
    labels = np.asarray(labels)
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
        raise InputError(f"expected integer labels of shape ({n},) in {path} (got {labels.dtype} {labels.shape})")
    x = features_to_torch(attr, f"node attributes in {path}")
    if x.shape[0] != n:
        raise InputError(f"expected {n} attribute rows (one per node) in {path} (got {x.shape[0]})")
    y = torch.from_numpy(labels.astype(np.int64))
    train, val, test = per_class_split(y, train_per_class, val_per_class, seed=seed)
    coo = adj.tocoo()  # row -> col is the stored direction
    return Graph.from_edges(
        torch.from_numpy(coo.row.astype(np.int64)), torch.from_numpy(coo.col.astype(np.int64)), n,
        x=x, y=y, train_mask=train, val_mask=val, test_mask=test, name=name or path.stem, num_classes=num_classes,
    )
