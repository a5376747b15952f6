"""GraphSAINT's folder format (Zeng et al. 2020): Flickr, Reddit, Yelp, PPI, Amazon.

A dataset folder holds:

* ``adj_full.npz``: the whole graph as ``scipy.sparse.save_npz`` writes it (plain arrays; row ``u``
  lists ``u``'s neighbours, read here as edges ``u -> v``);
* ``feats.npy``: dense features [N, F];
* ``class_map.json``: ``{"node id": label}`` with an int (single-label: Flickr, Reddit) or a 0/1 list
  (multi-label: Yelp, PPI, Amazon, which become a float32 [N, C] ``y``);
* ``role.json``: ``{"tr": [...], "va": [...], "te": [...]}`` node ids of the fixed split.

``adj_train.npz`` (the training subgraph for inductive runs) is not needed for full-graph training.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from fullgraph.data.formats._common import features_to_torch, load_array, mask_from_ids, require_files
from fullgraph.data.graph import Graph
from fullgraph.data.safe_pickle import checked_csr
from fullgraph.errors import InputError

__all__ = ["load_graphsaint", "GRAPHSAINT_FILES"]

GRAPHSAINT_FILES = ("adj_full.npz", "feats.npy", "class_map.json", "role.json")


def _json(path: Path, what: str):
    try:
        with open(path, encoding="utf8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise InputError(
            f"expected {path} to be JSON ({what}) (got a syntax error at line {e.lineno}: {e.msg})"
        ) from None


def _labels(class_map, n: int, path: Path) -> tuple[torch.Tensor, int | None]:
    if not isinstance(class_map, dict) or not class_map:
        raise InputError(f"expected {path} to map node ids to labels (got {type(class_map).__name__})")
    try:
        ids = np.fromiter((int(k) for k in class_map), dtype=np.int64, count=len(class_map))
    except ValueError:
        raise InputError(f"expected integer node ids as keys of {path}") from None
    if ids.min() < 0 or ids.max() >= n:
        raise InputError(f"expected node ids in [0, {n}) in {path} (got {ids.min()}..{ids.max()})")
    values = list(class_map.values())
    if all(isinstance(v, list) for v in values):
        widths = {len(v) for v in values}
        if len(widths) != 1:
            raise InputError(f"expected equally long label lists in {path} (got lengths {sorted(widths)[:5]})")
        rows = np.asarray(values, dtype=np.float32)
        if not np.isin(rows, (0.0, 1.0)).all():
            raise InputError(f"expected 0/1 entries in the multi-label lists of {path}")
        y = np.zeros((n, rows.shape[1]), dtype=np.float32)
        y[ids] = rows
        return torch.from_numpy(y), rows.shape[1]
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        y = np.full(n, -1, dtype=np.int64)
        y[ids] = np.asarray(values, dtype=np.int64)
        if y[ids].min() < 0:
            raise InputError(f"expected labels >= 0 in {path} (got {y[ids].min()})")
        return torch.from_numpy(y), None
    raise InputError(
        f"expected every label in {path} to be an int (single-label) or every one a 0/1 list (multi-label)"
    )


def load_graphsaint(folder: str | Path, name: str | None = None) -> Graph:
    """The GraphSAINT dataset in ``folder`` with its fixed split."""
    folder = Path(folder)
    require_files([folder / f for f in GRAPHSAINT_FILES], f"GraphSAINT dataset in {folder}")
    try:
        adj = sp.load_npz(folder / "adj_full.npz")  # save_npz output: plain arrays, no pickle
    except (ValueError, OSError, KeyError) as e:
        raise InputError(
            f"expected {folder / 'adj_full.npz'} to be a scipy.sparse.save_npz file (got {type(e).__name__}: {e})"
        ) from None
    adj = checked_csr(adj, str(folder / "adj_full.npz"))
    n = adj.shape[0]
    if adj.shape != (n, n):
        raise InputError(f"expected a square adjacency in {folder / 'adj_full.npz'} (got shape {adj.shape})")
    feats = load_array(folder / "feats.npy", "features")
    if feats.ndim != 2 or feats.shape[0] != n:
        raise InputError(f"expected feats.npy of shape [{n}, F] in {folder} (got {feats.shape})")
    y, num_classes = _labels(_json(folder / "class_map.json", "labels"), n, folder / "class_map.json")
    role = _json(folder / "role.json", "split")
    if not isinstance(role, dict) or not {"tr", "va", "te"} <= set(role):
        found = sorted(role) if isinstance(role, dict) else type(role).__name__
        raise InputError(f"expected keys tr, va, te in {folder / 'role.json'} (got {found})")
    masks = [torch.from_numpy(mask_from_ids(role[k], n, f"{folder / 'role.json'}[{k}]")) for k in ("tr", "va", "te")]
    coo = adj.tocoo()
    return Graph.from_edges(
        torch.from_numpy(coo.row.astype(np.int64)), torch.from_numpy(coo.col.astype(np.int64)), n,
        x=features_to_torch(feats, f"{folder / 'feats.npy'}"), y=y,
        train_mask=masks[0], val_mask=masks[1], test_mask=masks[2],
        name=name or folder.name, num_classes=num_classes,
    )
