"""Synthetic graphs written in ogbn-papers100M's exact binary layout, streamed member by member.

The reader of that layout (:mod:`fullgraph.data.formats.ogb`) is tested and measured on folders
nobody can download here: this writes them, at any size, without holding the edge list or the
features. ``raw/data.npz`` gets ``edge_index`` (2, E) int64 in C order (every source, then every
destination: the destinations wait in a spill file while the sources are written),
``node_feat`` (N, F) float32, ``node_year`` (N, 1) int64, ``num_nodes_list`` and
``num_edges_list``; ``raw/node-label.npz`` gets ``node_label`` (N, 1) float32 with NaN for the
unlabelled nodes (papers100M labels about 1.4% of its nodes); ``split/time/*.csv.gz`` lists
labelled nodes only. Members are deflate-compressed (``compress``) as ``np.savez_compressed``
writes them, or stored. ``edge_features`` > 0 adds OGB's ``edge_feat`` member, (E, k) float32
(standard normal draws), which the reader keeps as edge data: a graph whose edges carry features.

The edges are R-MAT draws, directed as citations are (``fullgraph.data.synthetic``'s generator,
chunk by chunk: the graph is the same whatever the memory), features the class centroid plus noise.
"""

from __future__ import annotations

import gzip
import os
import zipfile
from pathlib import Path
from typing import Iterator

import numpy as np

from fullgraph.data.synthetic import _rmat_draws

__all__ = ["write_rmat_ogb_binary", "npz_writer"]

CHUNK = 1 << 22


def _member(zf: zipfile.ZipFile, name: str, dtype, shape, blocks: Iterator[np.ndarray]) -> None:
    """One ``.npy`` member written from blocks (never the whole array)."""
    with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape})
        for b in blocks:
            f.write(np.ascontiguousarray(b, dtype=dtype).tobytes())


def npz_writer(path: Path, compress: bool) -> zipfile.ZipFile:
    return zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED,
                           compresslevel=1 if compress else None, allowZip64=True)


def _edge_chunks(scale: int, num_edges: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """R-MAT draws in chunks, each from its own seeded stream, ids scrambled by one permutation."""
    n = 1 << scale
    perm = np.random.default_rng([seed, 1]).permutation(n).astype(np.int64)
    cum = np.cumsum((0.57, 0.19, 0.19, 0.05))
    for i, a in enumerate(range(0, num_edges, CHUNK)):
        k = min(CHUNK, num_edges - a)
        s, d = _rmat_draws(scale, k, cum, np.random.default_rng([seed, 2, i]), CHUNK)
        yield perm[s], perm[d]


def _node_blocks(n: int, f: int, classes: int, seed: int, labelled: float):
    """Per block of rows: class ids, whether labelled, and features (centroid + noise); the ids and
    the labelled flags are drawn first, so they do not depend on ``f``."""
    centroids = np.random.default_rng([seed, 3]).standard_normal((classes, f)).astype(np.float32)
    rows = 1 << 17  # fixed: the labels are drawn again, without the features, and must agree
    for i, a in enumerate(range(0, n, rows)):
        rng = np.random.default_rng([seed, 4, i])
        k = min(rows, n - a)
        y = rng.integers(0, classes, k)
        known = rng.random(k) < labelled
        x = centroids[y] + 4.0 * rng.standard_normal((k, f), dtype=np.float32)
        yield y, known, x


def write_rmat_ogb_binary(folder: str | os.PathLike, scale: int, num_edges: int, *, num_features: int = 128,
                          num_classes: int = 172, labelled: float = 0.014, seed: int = 0,
                          compress: bool = True, edge_features: int = 0, distinct: bool | None = None) -> Path:
    """An R-MAT graph of ``2**scale`` nodes and ``num_edges`` directed edges in papers100M's binary
    layout under ``folder`` (module doc), with ``edge_features`` per edge when > 0. Memory: a chunk
    of edges, a block of rows, and the node permutation (8 bytes per node).

    ``distinct`` (default: with edge features, which a graph lists once per edge): repeated draws
    are dropped, the first of each kept in draw order, so the graph has fewer edges than drawn
    (the members say how many); this holds the draws' int64 keys, about 24 bytes per edge."""
    folder = Path(folder)
    (folder / "raw").mkdir(parents=True, exist_ok=True)
    n = 1 << scale
    spill = folder / "raw" / ".dst.spill"
    distinct = edge_features > 0 if distinct is None else distinct
    with npz_writer(folder / "raw" / "data.npz", compress) as zf:
        if distinct:
            src, dst = _distinct_draws(scale, num_edges, seed)
            num_edges = src.size
            _member(zf, "edge_index", np.int64, (2, num_edges),
                    (a[i:i + CHUNK] for a in (src, dst) for i in range(0, num_edges, CHUNK)))
            del src, dst
        else:
            with open(spill, "wb") as out:
                def sources():
                    for s, d in _edge_chunks(scale, num_edges, seed):
                        out.write(d.tobytes())
                        yield s
                _member(zf, "edge_index", np.int64, (2, num_edges),
                        _then(sources(), lambda: _read_spill(spill, out)))
            spill.unlink()
        if edge_features > 0:
            _member(zf, "edge_feat", np.float32, (num_edges, edge_features),
                    (np.random.default_rng([seed, 6, i]).standard_normal((min(CHUNK, num_edges - a), edge_features),
                                                                         dtype=np.float32)
                     for i, a in enumerate(range(0, num_edges, CHUNK))))
        _member(zf, "node_feat", np.float32, (n, num_features),
                (x for _, _, x in _node_blocks(n, num_features, num_classes, seed, labelled)))
        _member(zf, "node_year", np.int64, (n, 1), (np.full((min(CHUNK, n - a), 1), 2020) for a in range(0, n, CHUNK)))
        _member(zf, "num_nodes_list", np.int64, (1,), [np.array([n])])
        _member(zf, "num_edges_list", np.int64, (1,), [np.array([num_edges])])
    labelled_ids = []
    with npz_writer(folder / "raw" / "node-label.npz", compress) as zf:
        def labels():
            a = 0
            for y, known, _ in _node_blocks(n, 1, num_classes, seed, labelled):  # the same draws of y
                labelled_ids.append(a + np.flatnonzero(known))
                a += y.size
                yield np.where(known, y.astype(np.float32), np.float32("nan")).reshape(-1, 1)
        _member(zf, "node_label", np.float32, (n, 1), labels())
    _write_splits(folder / "split" / "time", np.concatenate(labelled_ids), seed)
    return folder


def _distinct_draws(scale: int, num_edges: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The draws of :func:`_edge_chunks` without repeats, the first of each in draw order."""
    n = 1 << scale
    key = np.empty(num_edges, dtype=np.int64)
    a = 0
    for s, d in _edge_chunks(scale, num_edges, seed):
        key[a:a + s.size] = s * n + d
        a += s.size
    first = np.unique(key, return_index=True)[1]
    first.sort()
    key = key[first]
    del first
    return key // n, key % n


def _then(first: Iterator, second) -> Iterator:
    yield from first
    yield from second()


def _read_spill(path: Path, out) -> Iterator[np.ndarray]:
    out.flush()
    with open(path, "rb") as f:
        while block := f.read(CHUNK * 8):
            yield np.frombuffer(block, dtype=np.int64)


def _write_splits(folder: Path, ids: np.ndarray, seed: int) -> None:
    """Labelled nodes cut 78/8/14 as papers100M's time split is (1.2M / 125K / 214K)."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = np.random.default_rng([seed, 5]).permutation(ids)
    a, b = int(0.78 * ids.size), int(0.86 * ids.size)
    for name, part in (("train", ids[:a]), ("valid", ids[a:b]), ("test", ids[b:])):
        with gzip.open(folder / f"{name}.csv.gz", "wt", compresslevel=1) as f:
            f.write("".join(f"{i}\n" for i in np.sort(part)))
