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
  ``--metric auto`` picks it (:attr:`OgbSource.metric`).

Edge files beside the edge list are kept as edge data in every layout (unless ``edge_data=False``):
``raw/edge-feat.csv.gz`` (a feature row per edge) as features, ``raw/edge_weight.csv.gz`` (one
number per edge, as ogbl-collab ships it) as weights, the binary layout's ``edge_feat`` member as
features. Repeated edges then follow ``Graph.from_edges``: weights summed, features refused.

Every layout has ``split/<scheme>/{train,valid,test}.csv.gz`` (node ids; ``time``, ``sales_ranking``,
``species``). A node listed in a split without a label (NaN) is refused: it would enter the loss.

:class:`OgbSource` opens a folder, checks the counts against each other, and gives its edges,
features and labels as row blocks: :func:`load_ogb` gathers them into a :class:`Graph` (a graph that
fits in memory), ``fullgraph convert`` streams them into a native folder (:mod:`.ogb_convert`), so
that converting papers100M needs memory for arrays of N, never of E or N x F. Edges come as stored;
both paths symmetrize (arxiv's and papers100M's citations are directed; products' and proteins'
undirected pairs are stored once) and the native folder records ``"symmetrized": true``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch

from fullgraph.data.formats._common import mask_from_ids, read_table, read_table_blocks, require_files
from fullgraph.data.formats.npy_stream import NpyMember
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

__all__ = ["load_ogb", "ogb_files", "ogb_layout", "OgbSource", "open_ogb"]

SPLIT_FILES = ("train", "valid", "test")


def ogb_files(folder: str | Path, split_name: str) -> list[Path]:
    """The files of the csv layout (what the dataset registry lists for arxiv and products)."""
    folder = Path(folder)
    raw = [folder / "raw" / f for f in ("edge.csv.gz", "node-feat.csv.gz", "node-label.csv.gz")]
    return raw + [folder / "split" / split_name / f"{s}.csv.gz" for s in SPLIT_FILES]


def ogb_layout(folder: str | Path) -> str | None:
    """``binary``, ``csv`` or ``edge-feat`` by the files in ``raw/`` (``None``: not an OGB folder)."""
    raw = Path(folder) / "raw"
    if (raw / "data.npz").is_file():
        return "binary"
    if (raw / "edge.csv.gz").is_file():
        has_nodes = (raw / "node-feat.csv.gz").is_file()
        return "edge-feat" if not has_nodes and (raw / "edge-feat.csv.gz").is_file() else "csv"
    return None


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


def _labels_block(table: np.ndarray, where: str) -> np.ndarray:
    """Raw label rows as stored: one column of class ids (NaN: unlabelled) -> int64 with -1; several
    0/1 columns (multi-label) -> float32."""
    table = np.asarray(table, dtype=np.float64).reshape(table.shape[0], -1)
    if table.shape[1] == 1:
        col = table[:, 0]
        known = ~np.isnan(col)
        if np.any(col[known] != np.round(col[known])) or np.any(col[known] < 0):
            raise InputError(f"expected non-negative integer class ids (or NaN) in {where}")
        y = np.full(col.shape[0], -1, dtype=np.int64)
        y[known] = col[known].astype(np.int64)
        return y
    if not np.isin(table, (0.0, 1.0)).all():
        raise InputError(f"expected 0/1 entries in the multi-label {where}")
    return table.astype(np.float32)


@dataclass
class OgbSource:
    """An OGB folder opened and checked: counts, and its arrays as row-block iterators (each call a
    fresh pass). Labels come converted (``int64`` with -1 for NaN, or ``float32`` 0/1)."""

    folder: Path
    name: str
    layout: str
    scheme: str
    num_nodes: int
    num_features: int
    label_columns: int
    edges: Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]
    features: Callable[[], Iterator[np.ndarray]]
    labels: Callable[[], Iterator[np.ndarray]]
    num_edges: int | None = None
    notes: dict = field(default_factory=dict)
    edge_data: tuple[str, ...] = ()
    """What each edge block carries besides its ends (``Graph.from_edges``'s names, ``edge_weight``,
    ``edge_attr``): ``edges()`` then yields ``(src, dst, {name: rows})`` triples."""

    @property
    def multilabel(self) -> bool:
        return self.label_columns > 1

    @property
    def metric(self) -> str | None:
        """The metric OGB reports for this task: ROC-AUC averaged over tasks for multi-label
        (ogbn-proteins); ``None`` (accuracy, the default) otherwise."""
        return "rocauc" if self.multilabel else None

    def masks(self) -> dict[str, np.ndarray]:
        """``train_mask``, ``val_mask``, ``test_mask`` from the split files (bool ``[N]`` each)."""
        out = {}
        for key, s in zip(("train_mask", "val_mask", "test_mask"), SPLIT_FILES):
            f = self.folder / "split" / self.scheme / f"{s}.csv.gz"
            ids = read_table(f, dtype=np.int64, what="split", ncols=1, header=False)
            out[key] = mask_from_ids(ids, self.num_nodes, str(f))
        return out

    def label_summary(self, masks: dict[str, np.ndarray]) -> int:
        """One pass over the labels: the number of classes (columns when multi-label), after checking
        the row count and that every node of a split has a label."""
        rows, top = 0, -1
        for y in self.labels():
            r0, rows = rows, rows + y.shape[0]
            if rows > self.num_nodes:
                break
            if y.ndim == 1:
                top = max(top, int(y.max(initial=-1)))
                split = masks["train_mask"][r0:rows] | masks["val_mask"][r0:rows] | masks["test_mask"][r0:rows]
                bad = np.flatnonzero(split & (y < 0))
                if bad.size:
                    raise InputError(f"expected every node of the {self.scheme} split to have a label in "
                                     f"{self.folder} (got node {r0 + int(bad[0])} unlabelled (NaN) and in a split)")
        if rows != self.num_nodes:
            raise InputError(f"expected {self.num_nodes} label rows (one per node) in {self.folder} (got "
                             f"{'more' if rows > self.num_nodes else rows})")
        return self.label_columns if self.multilabel else top + 1


def open_ogb(folder: str | Path, name: str | None = None, *, split_name: str | None = None,
             edge_data: bool = True) -> OgbSource:
    """The OGB dataset unpacked in ``folder`` (any layout of the module doc), opened and checked.
    ``edge_data``: keep the edge files as edge data (module doc); ``False`` leaves them out (the
    edge-feat layout's node features are the mean of its edges' either way)."""
    from fullgraph.data.formats.ogb_layouts import open_binary, open_csv, open_edge_feat

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


def label_rows(path: Path, what: str) -> Callable[[], Iterator[np.ndarray]]:
    """The converted label blocks of a ``node-label.csv.gz`` (csv and edge-feat layouts)."""
    def blocks():
        for table in read_table_blocks(path, dtype=np.float64, what=what, ncols=_columns(path)):
            yield _labels_block(table, str(path))
    return blocks


def _columns(path: Path) -> int:
    """The number of values on the first line of a (gzip) table."""
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf8") as f:
            line = f.readline()
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise InputError(f"expected {path} to be a readable text file (got {type(e).__name__}: {e})") from None
    n = len(line.replace(",", " ").split())
    if n == 0:
        raise InputError(f"expected at least one value on the first line of {path} (got an empty line)")
    return n


def npz_label_rows(member: NpyMember) -> Callable[[], Iterator[np.ndarray]]:
    """The converted label blocks of ``node-label.npz``'s ``node_label`` (binary layout)."""
    def blocks():
        for b in member.rows():
            yield _labels_block(b.reshape(b.shape[0], -1), member.where)
    return blocks
