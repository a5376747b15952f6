"""The three OGB raw layouts opened as :class:`~fullgraph.data.formats.ogb.OgbSource` (see
:mod:`.ogb` for the layouts themselves). Each opener reads only headers and small files, checks
that the counts agree (nodes, edges, feature rows, label rows), and returns iterators over the big
arrays."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from fullgraph.data.formats._common import read_table, read_table_blocks, require_files
from fullgraph.data.formats.npy_stream import NpyMember, npz_members
from fullgraph.data.formats.ogb import OgbSource, _columns, label_rows, npz_label_rows
from fullgraph.errors import InputError

__all__ = ["open_binary", "open_csv", "open_edge_feat"]


def _count(path: Path, what: str) -> int | None:
    """The single number of a ``num-*-list`` file, or ``None`` when the file is absent."""
    if not path.is_file():
        return None
    values = read_table(path, dtype=np.int64, what=what, ncols=1, header=False).reshape(-1)
    if values.size != 1:
        raise InputError(f"expected one graph's count in {path} (got {values.size} values: fullgraph reads "
                         f"node-property datasets, one graph each)")
    return int(values[0])


def _edge_blocks(path: Path):
    def blocks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for t in read_table_blocks(path, dtype=np.int64, what="edge list", ncols=2):
            yield np.ascontiguousarray(t[:, 0]), np.ascontiguousarray(t[:, 1])
    return blocks


def _count_rows(path: Path, ncols: int, what: str) -> int:
    return sum(t.shape[0] for t in read_table_blocks(path, dtype=np.float64, what=what, ncols=ncols))


def open_csv(folder: Path, name: str, scheme: str) -> OgbSource:
    """ogbn-arxiv / ogbn-products: the csv.gz layout."""
    raw = folder / "raw"
    edge_f, feat_f, label_f = raw / "edge.csv.gz", raw / "node-feat.csv.gz", raw / "node-label.csv.gz"
    require_files([edge_f, feat_f, label_f], f"OGB dataset in {folder}")
    width = _columns(feat_f)
    n = _count(raw / "num-node-list.csv.gz", "node count")
    if n is None:  # no count file: the labels are the cheapest table to count
        n = _count_rows(label_f, _columns(label_f), "node labels")
    if n < 1:
        raise InputError(f"expected at least one node in {folder} (got {n})")

    def features():
        yield from read_table_blocks(feat_f, dtype=np.float32, what="node features", ncols=width)

    return OgbSource(folder=folder, name=name, layout="csv", scheme=scheme, num_nodes=n, num_features=width,
                     label_columns=_columns(label_f), edges=_edge_blocks(edge_f), features=features,
                     labels=label_rows(label_f, "node labels"), num_edges=_count(raw / "num-edge-list.csv.gz",
                                                                                   "edge count"))


def _aligned(a: Iterator[np.ndarray], b: Iterator[np.ndarray], what: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Blocks of two row streams cut to the same lengths (two files of one row per edge whose text
    blocks hold different numbers of rows)."""
    ra, rb = np.zeros((0, 0)), np.zeros((0, 0))
    for xa in a:
        ra = np.concatenate([ra, xa]) if ra.size else xa
        while rb.shape[0] < ra.shape[0]:
            xb = next(b, None)
            if xb is None:
                raise InputError(f"expected one row per edge in {what} (got fewer rows than edges)")
            rb = np.concatenate([rb, xb]) if rb.size else xb
        k = ra.shape[0]
        yield ra, rb[:k]
        ra, rb = np.zeros((0, 0)), rb[k:]
    if rb.shape[0] or next(b, None) is not None:
        raise InputError(f"expected one row per edge in {what} (got more rows than edges)")


def open_edge_feat(folder: Path, name: str, scheme: str) -> OgbSource:
    """ogbn-proteins: node features are the mean of the incident edges' features (module doc of
    :mod:`.ogb`), computed here in one pass over the edges (``N x edge features`` float64 sums)."""
    raw = folder / "raw"
    edge_f, efeat_f, label_f = raw / "edge.csv.gz", raw / "edge-feat.csv.gz", raw / "node-label.csv.gz"
    require_files([edge_f, efeat_f, label_f], f"OGB dataset in {folder}")
    width = _columns(efeat_f)
    n = _count(raw / "num-node-list.csv.gz", "node count")
    if n is None:
        n = _count_rows(label_f, _columns(label_f), "node labels")
    sums, seen = np.zeros((n, width)), np.zeros(n, dtype=np.int64)
    edges = read_table_blocks(edge_f, dtype=np.int64, what="edge list", ncols=2)
    feats = read_table_blocks(efeat_f, dtype=np.float64, what="edge features", ncols=width)
    for e, f in _aligned(edges, feats, f"{efeat_f} against {edge_f}"):
        if e.size and (int(e.min()) < 0 or int(e.max()) >= n):
            raise InputError(f"expected edge ids in [0, {n}) in {edge_f} (got {int(e.min())}..{int(e.max())})")
        for end in (e[:, 0], e[:, 1]):
            for j in range(width):
                sums[:, j] += np.bincount(end, weights=f[:, j], minlength=n)
            seen += np.bincount(end, minlength=n)
    x = (sums / np.maximum(seen, 1)[:, None]).astype(np.float32)
    del sums
    return OgbSource(folder=folder, name=name, layout="edge-feat", scheme=scheme, num_nodes=n, num_features=width,
                     label_columns=_columns(label_f), edges=_edge_blocks(edge_f), features=lambda: iter([x]),
                     labels=label_rows(label_f, "node labels"),
                     notes={"feature_source": "mean of the incident edges' features (OGB's proteins examples)"})


def open_binary(folder: Path, name: str, scheme: str) -> OgbSource:
    """ogbn-papers100M: ``raw/data.npz`` and ``raw/node-label.npz``, read as streams."""
    raw = folder / "raw"
    require_files([raw / "data.npz", raw / "node-label.npz"], f"OGB binary dataset in {folder}")
    data, labels = raw / "data.npz", raw / "node-label.npz"
    have = set(npz_members(data))
    missing = {"edge_index", "node_feat", "num_nodes_list"} - have
    if missing:
        raise InputError(f"expected the arrays {', '.join(sorted(missing))} in {data} (found {', '.join(sorted(have))})")
    edge = NpyMember(data, "edge_index").expect(kind="iu", ndim=(2,), what="edge list")
    feat = NpyMember(data, "node_feat").expect(kind="fiu", ndim=(2,), what="node features")
    label = NpyMember(labels, "node_label").expect(kind="f", ndim=(1, 2), what="node labels")
    n = _small(NpyMember(data, "num_nodes_list"), "node count")
    if feat.shape[0] != n or label.shape[0] != n:
        raise InputError(f"expected {n} rows (num_nodes_list) of node_feat in {data} and of node_label in {labels} "
                         f"(got {feat.shape[0]} and {label.shape[0]})")
    e = edge.shape[1] if edge.shape[0] == 2 else -1
    if "num_edges_list" in have:
        m = _small(NpyMember(data, "num_edges_list"), "edge count")
        if m != e:
            raise InputError(f"expected edge_index of shape (2, {m}) (num_edges_list) in {data} (got {list(edge.shape)})")
    return OgbSource(folder=folder, name=name, layout="binary", scheme=scheme, num_nodes=n, num_features=feat.shape[1],
                     label_columns=1 if len(label.shape) == 1 else label.shape[1], edges=edge.column_pairs,
                     features=feat.rows, labels=npz_label_rows(label), num_edges=e)


def _small(member: NpyMember, what: str) -> int:
    """The one integer of a ``num_*_list`` member (one graph)."""
    member.expect(kind="iu", ndim=(1,), what=what)
    values = np.concatenate(list(member.rows())) if member.shape[0] else np.zeros(0, np.int64)
    if values.size != 1:
        raise InputError(f"expected one graph's {what} in the {member.where} (got {values.size} values)")
    return int(values[0])
