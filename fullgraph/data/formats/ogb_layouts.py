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
from fullgraph.data.formats.ogb_source import OgbSource, _columns, label_rows, npz_label_rows
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


def _edge_blocks(path: Path, edge_files: dict[str, tuple[Path, int]] | None = None):
    """The edge list's blocks as ``(src, dst)``, or with ``edge_files`` (``Graph.from_edges``'s name ->
    ``(file, columns)``, a row per edge) as ``(src, dst, {name: rows})`` (a weight file's one column
    as a 1-D array)."""
    def pairs() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for t in read_table_blocks(path, dtype=np.int64, what="edge list", ncols=2):
            yield np.ascontiguousarray(t[:, 0]), np.ascontiguousarray(t[:, 1])

    if not edge_files:
        return pairs

    def blocks():
        names = list(edge_files)
        streams = [read_table_blocks(f, dtype=np.float64, what=_EDGE_WHAT[k], ncols=c)
                   for k, (f, c) in edge_files.items()]
        where = f"{', '.join(str(f) for f, _ in edge_files.values())} against {path}"
        done = 0
        for (src, dst), *rows in _aligned(pairs(), streams, where):
            rows = [_finite32(r, edge_files[k][0], _EDGE_WHAT[k], done) for k, r in zip(names, rows)]
            done += src.size
            yield src, dst, {k: (r[:, 0] if k == "edge_weight" else r) for k, r in zip(names, rows)}
    return blocks


def _finite32(rows: np.ndarray, path: Path, what: str, before: int) -> np.ndarray:
    """A block of edge data as float32, refused at its first value that is not finite there (NaN, inf, or
    past float32's range: numpy's cast would only warn), naming the file and the line."""
    with np.errstate(over="ignore"):
        out = rows.astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(out).all(axis=1))
    if bad.size:
        r = int(bad[0])
        raise InputError(f"expected finite {what} within float32's range in {path} (got {rows[r].tolist()} on line "
                         f"{before + r + 1})")
    return out


_EDGE_WHAT = {"edge_weight": "edge weights", "edge_attr": "edge features"}


def _edge_files(raw: Path, edge_data: bool) -> dict[str, tuple[Path, int]]:
    """The edge files beside ``raw/edge.csv.gz`` kept as edge data (``ogb`` module doc), with their
    column counts: ``edge_weight.csv.gz`` must hold one."""
    if not edge_data:
        return {}
    out = {}
    for name, file in (("edge_weight", "edge_weight.csv.gz"), ("edge_attr", "edge-feat.csv.gz")):
        if (raw / file).is_file():
            out[name] = (raw / file, _columns(raw / file))
    if "edge_weight" in out and out["edge_weight"][1] != 1:
        raise InputError(f"expected one weight per line in {out['edge_weight'][0]} (got {out['edge_weight'][1]} "
                         f"values on the first line)")
    return out


def _count_rows(path: Path, ncols: int, what: str) -> int:
    return sum(t.shape[0] for t in read_table_blocks(path, dtype=np.float64, what=what, ncols=ncols))


def open_csv(folder: Path, name: str, scheme: str, *, edge_data: bool = True) -> OgbSource:
    """ogbn-arxiv / ogbn-products: the csv.gz layout (with any edge files beside the edge list kept
    as edge data, when ``edge_data``)."""
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

    files = _edge_files(raw, edge_data)
    return OgbSource(folder=folder, name=name, layout="csv", scheme=scheme, num_nodes=n, num_features=width,
                     label_columns=_columns(label_f), edges=_edge_blocks(edge_f, files), features=features,
                     labels=label_rows(label_f, "node labels"), num_edges=_count(raw / "num-edge-list.csv.gz",
                                                                                   "edge count"),
                     edge_data=tuple(files), notes=_edge_notes(files))


def _edge_notes(files: dict) -> dict:
    """What meta.json records of where the edge data came from."""
    return {"edge_data_source": {k: f"raw/{f.name}" for k, (f, _) in files.items()}} if files else {}


def _aligned(lead: Iterator, others: list[Iterator[np.ndarray]], what: str) -> Iterator[tuple]:
    """The rows of ``lead`` (blocks of rows, or tuples of equally long arrays) with those of each of
    ``others`` (files of one row per edge whose blocks hold other numbers of rows), in pieces cut at
    every block's end: ``(lead rows, rows of others[0], ...)``, views of the blocks, so that no block
    is copied or held longer than its rows take to pass."""
    cur: list[np.ndarray | None] = [None] * len(others)
    at = [0] * len(others)
    for block in lead:
        k = len(block[0]) if isinstance(block, tuple) else block.shape[0]
        a = 0
        while a < k:
            m = k - a
            for j, it in enumerate(others):
                while cur[j] is None or at[j] >= cur[j].shape[0]:
                    cur[j], at[j] = next(it, None), 0
                    if cur[j] is None:
                        raise InputError(f"expected one row per edge in {what} (got fewer rows than edges)")
                m = min(m, cur[j].shape[0] - at[j])
            piece = tuple(x[a:a + m] for x in block) if isinstance(block, tuple) else block[a:a + m]
            rows = [cur[j][at[j]:at[j] + m] for j in range(len(others))]
            for j in range(len(others)):
                at[j] += m
            yield (piece, *rows)
            a += m
    for j, it in enumerate(others):
        if (cur[j] is not None and at[j] < cur[j].shape[0]) or next(it, None) is not None:
            raise InputError(f"expected one row per edge in {what} (got more rows than edges)")


def open_edge_feat(folder: Path, name: str, scheme: str, *, edge_data: bool = True) -> OgbSource:
    """ogbn-proteins: node features are the mean of the incident edges' features (module doc of
    :mod:`.ogb`), computed here in one pass over the edges (``N x edge features`` float64 sums);
    ``edge_data``: each edge keeps its own features too (read again as the edges are)."""
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
    done = 0
    for e, f in _aligned(edges, [feats], f"{efeat_f} against {edge_f}"):
        if e.size and (int(e.min()) < 0 or int(e.max()) >= n):
            raise InputError(f"expected edge ids in [0, {n}) in {edge_f} (got {int(e.min())}..{int(e.max())})")
        _finite32(f, efeat_f, "edge features", done)  # checked as the edge data will be; summed in float64
        done += e.shape[0]
        for end in (e[:, 0], e[:, 1]):
            for j in range(width):
                sums[:, j] += np.bincount(end, weights=f[:, j], minlength=n)
            seen += np.bincount(end, minlength=n)
    x = (sums / np.maximum(seen, 1)[:, None]).astype(np.float32)
    del sums
    files = _edge_files(raw, edge_data)
    notes = {"feature_source": "mean of the incident edges' features (OGB's proteins examples)", **_edge_notes(files)}
    return OgbSource(folder=folder, name=name, layout="edge-feat", scheme=scheme, num_nodes=n, num_features=width,
                     label_columns=_columns(label_f), edges=_edge_blocks(edge_f, files), features=lambda: iter([x]),
                     labels=label_rows(label_f, "node labels"), edge_data=tuple(files), notes=notes)


def open_binary(folder: Path, name: str, scheme: str, *, edge_data: bool = True) -> OgbSource:
    """ogbn-papers100M: ``raw/data.npz`` and ``raw/node-label.npz``, read as streams (an ``edge_feat``
    member, a feature row per edge, kept as edge data when ``edge_data``)."""
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
    edges, kinds, notes = edge.column_pairs, (), {}
    if edge_data and "edge_feat" in have:
        efeat = NpyMember(data, "edge_feat").expect(kind="fiu", ndim=(2,), what="edge features")
        if efeat.shape[0] != e:
            raise InputError(f"expected {e} rows of edge_feat (one per edge) in {data} (got {efeat.shape[0]})")

        def edges():
            for (src, dst), rows in _aligned(edge.column_pairs(), [efeat.rows()], efeat.where):
                yield src, dst, {"edge_attr": rows.astype(np.float64, copy=False) if rows.dtype.kind != "f" else rows}
        kinds, notes = ("edge_attr",), {"edge_data_source": {"edge_attr": "raw/data.npz:edge_feat"}}
    return OgbSource(folder=folder, name=name, layout="binary", scheme=scheme, num_nodes=n, num_features=feat.shape[1],
                     label_columns=1 if len(label.shape) == 1 else label.shape[1], edges=edges,
                     features=feat.rows, labels=npz_label_rows(label), num_edges=e, edge_data=kinds, notes=notes)


def _small(member: NpyMember, what: str) -> int:
    """The one integer of a ``num_*_list`` member (one graph)."""
    member.expect(kind="iu", ndim=(1,), what=what)
    values = np.concatenate(list(member.rows())) if member.shape[0] else np.zeros(0, np.int64)
    if values.size != 1:
        raise InputError(f"expected one graph's {what} in the {member.where} (got {values.size} values)")
    return int(values[0])
