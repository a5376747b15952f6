"""The yandex-research heterophilous-graphs ``.npz`` files (Platonov et al. 2023).

Plain arrays, no pickles: ``node_features`` [N, F], ``node_labels`` [N], ``edges`` [E, 2] and
``train_masks``/``val_masks``/``test_masks`` [S, N] (S = 10 fixed splits). Each undirected edge is
stored once, so the loader adds the reverse direction itself: the published graph is undirected,
and returning half of it would silently halve every neighbourhood. (The ``*_directed`` variants
of that repository are not undirected; load them with ``directed=True``.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from fullgraph.data.formats._common import features_to_torch
from fullgraph.data.graph import Graph
from fullgraph.data.safe_pickle import load_npz_with_objects
from fullgraph.errors import InputError

__all__ = ["load_npz_hetero", "read_hetero_splits"]

_KEYS = ["node_features", "node_labels", "edges", "train_masks", "val_masks", "test_masks"]


def _mask_rows(arr: np.ndarray, key: str, n: int, path: Path) -> np.ndarray:
    if arr.ndim == 1:  # a file with a single split
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != n:
        raise InputError(f"expected {key} of shape [splits, {n}] in {path} (got {arr.shape})")
    return arr


def read_hetero_splits(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every fixed split of the file, as ``(train, val, test)`` bool arrays ``[S, N]``, read without the
    graph: what ``fullgraph convert`` keeps beside the split it loaded."""
    path = Path(path)
    d = load_npz_with_objects(path, ["node_labels", *_KEYS[3:]])
    n = d["node_labels"].shape[0]
    rows = [np.ascontiguousarray(_mask_rows(d[k], k, n, path)).astype(bool) for k in _KEYS[3:]]
    if len({r.shape[0] for r in rows}) != 1:
        raise InputError(f"expected as many train, val and test masks in {path} (got "
                         f"{', '.join(str(r.shape[0]) for r in rows)})")
    return rows[0], rows[1], rows[2]


def _masks(arr: np.ndarray, key: str, n: int, split: int, path: Path) -> torch.Tensor:
    arr = _mask_rows(arr, key, n, path)
    if not 0 <= split < arr.shape[0]:
        raise InputError(f"expected a split index in 0..{arr.shape[0] - 1} for {path} (got {split})")
    return torch.from_numpy(np.ascontiguousarray(arr[split]).astype(bool))


def load_npz_hetero(path: str | Path, name: str | None = None, *, split: int = 0, directed: bool = False) -> Graph:
    """The graph in a heterophilous-graphs ``.npz``, with fixed split number ``split``."""
    path = Path(path)
    d = load_npz_with_objects(path, _KEYS)
    x, y, edges = d["node_features"], d["node_labels"], d["edges"]
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise InputError(f"expected integer node_labels of shape [N] in {path} (got {y.dtype} {y.shape})")
    n = y.shape[0]
    if x.ndim != 2 or x.shape[0] != n:
        raise InputError(f"expected node_features of shape [{n}, F] in {path} (got {x.shape})")
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise InputError(f"expected integer edges of shape [E, 2] in {path} (got {edges.dtype} {edges.shape})")
    src, dst = edges[:, 0].astype(np.int64), edges[:, 1].astype(np.int64)
    if not directed:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    masks = [_masks(d[k], k, n, split, path) for k in ("train_masks", "val_masks", "test_masks")]
    return Graph.from_edges(
        torch.from_numpy(src), torch.from_numpy(dst), n,
        x=features_to_torch(x, f"node_features in {path}"), y=torch.from_numpy(y.astype(np.int64)),
        train_mask=masks[0], val_mask=masks[1], test_mask=masks[2], name=name or path.stem,
    )
