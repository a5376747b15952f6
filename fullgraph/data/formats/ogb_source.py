"""The shared part of OGB's node-property layouts (:mod:`.ogb`): where a folder's files are, which layout
it holds, its split scheme, and :class:`OgbSource`, the opened folder whose edges, features and labels
come as row blocks; the label readers the layouts share. Below :mod:`.ogb_layouts` (each layout's
opener) and :mod:`.ogb` (``open_ogb``, ``load_ogb``), which both build on it, and the OGB link, knowledge
graph and heterogeneous readers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from fullgraph.data.formats._common import mask_from_ids, read_table, read_table_blocks
from fullgraph.data.formats.npy_stream import NpyMember
from fullgraph.errors import InputError

__all__ = ["ogb_files", "ogb_layout", "OgbSource", "SPLIT_FILES", "label_rows", "npz_label_rows"]

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
