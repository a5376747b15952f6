"""OGB node-property datasets in their raw download layouts, read as streams.

An unzipped ``http://snap.stanford.edu/ogb/data/nodeproppred/<name>.zip`` holds one of three layouts
(``ogb/io/README.md``; text files headerless, comma-separated, gzip-compressed):

* **csv** (ogbn-arxiv, ogbn-products): ``raw/edge.csv.gz`` (``src,dst`` per line),
  ``raw/node-feat.csv.gz`` (a feature row per node), ``raw/node-label.csv.gz`` (a class id, ``nan``
  where unlabelled), optional ``raw/num-node-list.csv.gz``.
* **binary** (ogbn-papers100M): ``raw/data.npz`` with ``edge_index`` (2, E) integers, ``node_feat``
  (N, F), ``num_nodes_list`` and ``num_edges_list`` (one graph: [N] and [E]), ``node_year`` (not
  used); ``raw/node-label.npz`` with ``node_label`` (N, 1) floats, NaN where unlabelled. Members may
  be deflate-compressed; each is read as a stream in row blocks (:mod:`.npy_stream`), never whole.
* **edge-feat** (ogbn-proteins): no node features but ``raw/edge-feat.csv.gz`` (8 per edge),
  ``raw/node-label.csv.gz`` with 112 binary tasks (multi-label). Each edge keeps its features as
  edge data (``Graph.edge_attr``; the reverse edge that symmetrizing adds gets the same), and a
  node's features are the **mean of the features of its incident edges**, every edge counted at
  both ends, as OGB's own proteins examples build them (PyG's DeeperGCN example sums instead; the
  mean keeps the scale of the input). ``edge_data=False`` (:func:`open_ogb`, :func:`load_ogb`)
  gives the graph of earlier versions: the mean alone, no edge data. ``raw/node_species.csv.gz``
  is not a feature. OGB reports this task's ROC-AUC averaged over tasks, and the folder says so:
  ``--metric auto`` picks it (:attr:`.ogb_source.OgbSource.metric`).

Edge files beside the edge list are kept as edge data in every layout (unless ``edge_data=False``):
``raw/edge-feat.csv.gz`` (a feature row per edge) as features, ``raw/edge_weight.csv.gz`` (one
number per edge, as ogbl-collab ships it) as weights, the binary layout's ``edge_feat`` member as
features. Repeated edges then follow ``Graph.from_edges``: weights summed, features refused.

Every layout has ``split/<scheme>/{train,valid,test}.csv.gz`` (node ids; ``time``, ``sales_ranking``,
``species``). A node listed in a split without a label (NaN) is refused: it would enter the loss.

:class:`~.ogb_source.OgbSource` opens a folder, checks the counts against each other, and gives its edges,
features and labels as row blocks: :func:`load_ogb` gathers them into a :class:`Graph` (a graph that
fits in memory), ``fullgraph convert`` streams them into a native folder (:mod:`.ogb_convert`), so
that converting papers100M needs memory for arrays of N, never of E or N x F. Edges come as stored;
both paths symmetrize (arxiv's and papers100M's citations are directed; products' and proteins'
undirected pairs are stored once) and the native folder records ``"symmetrized": true``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from fullgraph.data.formats._common import require_files
from fullgraph.data.formats.ogb_layouts import open_binary, open_csv, open_edge_feat
from fullgraph.data.formats.ogb_source import SPLIT_FILES, OgbSource, _split_name, ogb_layout
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

__all__ = ["open_ogb", "load_ogb"]


def open_ogb(folder: str | Path, name: str | None = None, *, split_name: str | None = None,
             edge_data: bool = True) -> OgbSource:
    """The OGB dataset unpacked in ``folder`` (any layout of the module doc), opened and checked.
    ``edge_data``: keep the edge files as edge data (module doc); ``False`` leaves them out (the
    edge-feat layout's node features are the mean of its edges' either way)."""
    folder = Path(folder)
    layout = ogb_layout(folder)
    if layout is None:
        raise InputError(f"expected an OGB raw layout in {folder} (raw/data.npz, or raw/edge.csv.gz with "
                         f"raw/node-feat.csv.gz or raw/edge-feat.csv.gz) (found none)")
    scheme = _split_name(folder, split_name)
    require_files([folder / "split" / scheme / f"{s}.csv.gz" for s in SPLIT_FILES], f"OGB split of {folder}")
    opener = {"binary": open_binary, "csv": open_csv, "edge-feat": open_edge_feat}[layout]
    return opener(folder, name or folder.name, scheme, edge_data=edge_data)


def _gather(blocks: Iterator[np.ndarray]) -> np.ndarray:
    parts = list(blocks)
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


def load_ogb(folder: str | Path, name: str | None = None, *, split_name: str | None = None,
             edge_data: bool = True) -> Graph:
    """The OGB node-property dataset unpacked in ``folder``, with its official split, in memory
    (``edge_data``: as :func:`open_ogb` takes it)."""
    src = open_ogb(folder, name, split_name=split_name, edge_data=edge_data)
    masks = src.masks()
    num_classes = src.label_summary(masks)
    blocks = list(src.edges())
    s = np.concatenate([b[0] for b in blocks]) if blocks else np.zeros(0, np.int64)
    d = np.concatenate([b[1] for b in blocks]) if blocks else np.zeros(0, np.int64)
    edge = {k: torch.from_numpy(np.concatenate([b[2][k] for b in blocks])) for k in src.edge_data} if blocks else {}
    del blocks
    x = _gather(src.features()).astype(np.float32, copy=False)
    if x.shape != (src.num_nodes, src.num_features):
        raise InputError(f"expected node features of shape {[src.num_nodes, src.num_features]} in {src.folder} "
                         f"(got {list(x.shape)})")
    return Graph.from_edges(torch.from_numpy(s.astype(np.int64)), torch.from_numpy(d.astype(np.int64)),
                            src.num_nodes, x=torch.from_numpy(x), y=torch.from_numpy(_gather(src.labels())),
                            name=src.name, num_classes=num_classes, **edge,
                            **{k: torch.from_numpy(v) for k, v in masks.items()})
