"""OGB node-property-prediction datasets in their raw download layout (ogbn-arxiv, ogbn-products, ...).

After unzipping ``http://snap.stanford.edu/ogb/data/nodeproppred/<name>.zip`` a dataset folder holds
(as specified in ``ogb/io/README.md``; all files headerless, comma-separated, gzip-compressed):

* ``raw/edge.csv.gz``: ``src,dst`` per line (for ogbn-arxiv the citation direction; an undirected
  graph such as ogbn-products stores each pair once, and OGB adds the reverse when loading);
* ``raw/node-feat.csv.gz``: one feature row per node;
* ``raw/node-label.csv.gz``: one row per node, one column (a class id; ``nan`` where unlabelled)
  or several 0/1 columns (multi-label, e.g. ogbn-proteins);
* ``raw/num-node-list.csv.gz``: the node count (optional here: it must agree with the feature rows);
* ``split/<scheme>/{train,valid,test}.csv.gz``: node ids, one per line (``time`` for arxiv,
  ``sales_ranking`` for products).

Edges are returned as stored (``datasets`` symmetrizes). The ``mapping/`` folder (ids to MAG ids or
ASINs) is not needed. ogbn-papers100M ships ``.npz`` raw files instead and is not read here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from fullgraph.data.formats._common import features_to_torch, mask_from_ids, read_table, require_files
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

__all__ = ["load_ogb", "ogb_files"]


def ogb_files(folder: str | Path, split_name: str) -> list[Path]:
    folder = Path(folder)
    raw = [folder / "raw" / f for f in ("edge.csv.gz", "node-feat.csv.gz", "node-label.csv.gz")]
    return raw + [folder / "split" / split_name / f"{s}.csv.gz" for s in ("train", "valid", "test")]


def _split_name(folder: Path, split_name: str | None) -> str:
    if split_name is not None:
        return split_name
    schemes = sorted(p.name for p in (folder / "split").glob("*") if p.is_dir())
    if len(schemes) != 1:
        raise InputError(
            f"expected exactly one split scheme under {folder / 'split'} or an explicit split_name "
            f"(found {schemes or 'none'})"
        )
    return schemes[0]


def _labels(table: np.ndarray, n: int, path: Path) -> torch.Tensor:
    if table.shape[0] != n:
        raise InputError(f"expected {n} label rows (one per node) in {path} (got {table.shape[0]})")
    if table.shape[1] == 1:
        col = table[:, 0]
        known = ~np.isnan(col)
        if np.any(col[known] != np.round(col[known])) or np.any(col[known] < 0):
            raise InputError(f"expected non-negative integer class ids (or nan) in {path}")
        y = np.full(n, -1, dtype=np.int64)
        y[known] = col[known].astype(np.int64)
        return torch.from_numpy(y)
    if not np.isin(table, (0.0, 1.0)).all():
        raise InputError(f"expected 0/1 entries in the multi-label file {path}")
    return torch.from_numpy(table.astype(np.float32))


def load_ogb(folder: str | Path, name: str | None = None, *, split_name: str | None = None) -> Graph:
    """The OGB node-property dataset unpacked in ``folder``, with its official split."""
    folder = Path(folder)
    scheme = _split_name(folder, split_name)
    files = ogb_files(folder, scheme)
    require_files(files, f"OGB dataset in {folder}")
    edge_f, feat_f, label_f, train_f, valid_f, test_f = files
    x = read_table(feat_f, dtype=np.float32, what="node features", header=False)
    n = x.shape[0]
    count_f = folder / "raw" / "num-node-list.csv.gz"
    if count_f.is_file():
        counts = read_table(count_f, dtype=np.int64, what="node count", ncols=1, header=False).reshape(-1)
        if counts.size != 1 or int(counts[0]) != n:
            raise InputError(
                f"expected {count_f} to hold the node count {n} (the feature rows) (got {counts.tolist()[:3]})"
            )
    if n == 0:
        raise InputError(f"expected at least one feature row in {feat_f} (got none)")
    edges = read_table(edge_f, dtype=np.int64, what="edge list", ncols=2, header=False)
    y = _labels(read_table(label_f, dtype=np.float64, what="node labels", header=False), n, label_f)
    masks = [
        torch.from_numpy(mask_from_ids(read_table(f, dtype=np.int64, what="split", ncols=1, header=False), n, str(f)))
        for f in (train_f, valid_f, test_f)
    ]
    return Graph.from_edges(
        torch.from_numpy(np.ascontiguousarray(edges[:, 0])), torch.from_numpy(np.ascontiguousarray(edges[:, 1])), n,
        x=features_to_torch(x, str(feat_f)), y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2],
        name=name or folder.name,
    )
