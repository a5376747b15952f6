"""Synthetic folders in ogbn-mag's layout (OGB's heterogeneous node-property layout), at any scale.

The reader of that layout (:mod:`fullgraph.data.formats.ogb_hetero`) is tested and measured on folders
nobody downloads here: :func:`write_synthetic_mag` writes one with ogbn-mag's sizes times ``scale``
(:data:`MAG_NODES`, :data:`MAG_RELATIONS`: 1,939,743 nodes and 21,111,007 edges at ``scale=1``), the same
files and names (types and relations sorted, as OGB lists them), 128 features on papers, 349 classes and
the ``time`` split on papers (629,571 / 64,879 / 41,939 at ``scale=1``; every paper is in one, as in
ogbn-mag, and ``node_year`` says which: before 2018, 2018, 2019).

Each relation's pairs are distinct (as ogbn-mag's are) with skewed ends: a few papers are cited and
written by many, most by few. Ends are drawn ``floor(n u^2)`` (``u`` uniform), through one shuffle of
each type's ids, until enough distinct pairs are drawn, and a random subset of the right size kept; a
relation denser than half its possible pairs draws them uniformly instead (the tiny test scales).
Features are a class centroid plus noise, so the task is learnable.

Text is formatted with numpy (digit arrays, masks for leading zeros and signs) rather than by Python's
``%`` per value, and written through gzip (level 1) block by block. Memory: one relation's distinct
pairs as int64 keys with their draws and sort's temporaries (about 40 bytes per edge of the largest
relation: 295 MiB measured for ogbn-mag's 7.5M paper-has_topic pairs), plus a block of rows (a few tens
of MB); never a whole file. ``scale=0.01`` wrote 3.9 MB in 0.3 s, so ``scale=1`` is about 390 MB and
30 to 45 s (``scale=0.05``: 19.8 MB, 2.1 s) on a busy 2-core machine.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

__all__ = ["write_synthetic_mag", "MAG_NODES", "MAG_RELATIONS", "MAG_SPLIT", "MAG_FEATURES", "MAG_CLASSES",
           "int_text", "float_text"]

MAG_NODES = {"paper": 736_389, "author": 1_134_649, "institution": 8_740, "field_of_study": 59_965}
MAG_RELATIONS = {("author", "affiliated_with", "institution"): 1_043_998, ("author", "writes", "paper"): 7_145_660,
                 ("paper", "cites", "paper"): 5_416_271, ("paper", "has_topic", "field_of_study"): 7_505_078}
MAG_SPLIT = {"train": 629_571, "valid": 64_879, "test": 41_939}
MAG_FEATURES, MAG_CLASSES = 128, 349
_ROWS = 1 << 12  # feature rows per block (0.5M values: tens of MB of text temporaries)
_PAIRS = 1 << 18  # edge rows per block


def _digits(q: np.ndarray, width: int) -> np.ndarray:
    """uint8 ``[..., width]``: the ASCII decimal digits of the non-negative integers ``q``, leading zeros kept
    (one in-place division per digit, in int32 where the values fit: no ``[..., width]`` int64 temporaries)."""
    out = np.empty(q.shape + (width,), np.uint8)
    q = q.astype(np.int32 if q.size and int(q.max()) < 2**31 else np.int64)
    r = np.empty_like(q)
    for i in range(width - 1, -1, -1):
        np.divmod(q, 10, out=(q, r))
        out[..., i] = r
    out += ord("0")
    return out


def _distinct(keys: np.ndarray) -> np.ndarray:
    """The distinct values of ``keys``, sorted (by a sort: numpy 2's hashing ``np.unique`` is far slower on
    int64 keys here)."""
    keys = np.sort(keys)
    return keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if keys.size else keys


def _lines(parts: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """Cells of ``[rows, cols, k]`` bytes with their keep-masks, joined by commas into one line per row."""
    shape = parts[0][0].shape[:2]
    sep = np.full(shape + (1,), ord(","), np.uint8)
    sep[:, -1] = ord("\n")
    chars = np.concatenate([p for p, _ in parts] + [sep], axis=2)
    keep = np.concatenate([k for _, k in parts] + [np.ones(sep.shape, bool)], axis=2)
    return chars[keep].tobytes()


def int_text(table: np.ndarray) -> bytes:
    """Rows of non-negative integers as comma-separated lines (``12,7\\n``), as pandas writes them."""
    table = np.asarray(table, dtype=np.int64).reshape(len(table), -1)
    width = len(str(int(table.max(initial=0))))
    keep = table[..., None] >= 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    keep[..., -1] = True  # 0 is "0"
    return _lines([(_digits(table, width), keep)])


def float_text(x: np.ndarray, decimals: int = 4) -> bytes:
    """Rows of floats as comma-separated lines of ``decimals`` fixed decimals (``-0.0123,1.5000\\n``)."""
    x = np.asarray(x).reshape(len(x), -1)
    q = np.rint(np.abs(x) * 10.0 ** decimals).astype(np.int64)
    width = max(decimals + 1, len(str(int(q.max(initial=0)))))
    whole = width - decimals
    keep = q[..., None] >= 10 ** np.arange(width - 1, decimals - 1, -1, dtype=np.int64)
    keep[..., -1] = True  # at least "0." before the decimals
    d = _digits(q, width)
    sign = ((x < 0) & (q > 0))[..., None]
    dot = np.full(x.shape + (1,), ord("."), np.uint8)
    ones = np.ones(x.shape + (decimals,), bool)
    return _lines([(np.full(x.shape + (1,), ord("-"), np.uint8), sign), (d[..., :whole], keep),
                   (dot, np.ones(dot.shape, bool)), (d[..., whole:], ones)])


def _write(path: Path, blocks) -> None:
    """One gzip text file from blocks of bytes (level 1: OGB's readers take any level; speed matters here)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb", compresslevel=1) as f:
        for b in blocks:
            f.write(b)


def _scaled(sizes: dict, scale: float) -> dict:
    return {k: max(1, int(round(v * scale))) for k, v in sizes.items()}


def _pairs(ns: int, nd: int, m: int, same: bool, perms: tuple, rng: np.random.Generator) -> np.ndarray:
    """``m`` distinct ``src * nd + dst`` keys, sorted (module doc); no self pair within one type."""
    possible = ns * nd - (ns if same else 0)
    m = min(m, possible)
    if 2 * m > possible:  # dense (tiny scales): uniform, exact
        keys = np.sort(rng.choice(possible, m, replace=False))
        return _skip_diagonal(keys, nd) if same else keys
    keys = np.zeros(0, np.int64)
    while keys.size < m:
        k = int(1.25 * (m - keys.size)) + 16
        s = perms[0][(ns * rng.random(k) ** 2).astype(np.int64)]
        d = perms[1][(nd * rng.random(k) ** 2).astype(np.int64)]
        keys = _distinct(np.concatenate([keys, (s * nd + d)[s != d] if same else s * nd + d]))
        del s, d
    if keys.size > m:
        keys = keys[np.sort(rng.choice(keys.size, m, replace=False))]
    return keys


def _skip_diagonal(keys: np.ndarray, n: int) -> np.ndarray:
    """Keys numbered among the ``n * (n - 1)`` off-diagonal pairs mapped to their ``src * n + dst``."""
    src, rest = keys // (n - 1), keys % (n - 1)
    return src * n + rest + (rest >= src)


def _relation(folder: Path, triplet: tuple, r: int, m: int, counts: dict, perms: dict, seed: int) -> int:
    """One relation's three files; returns its edge count (fewer than ``m`` only where fewer pairs exist)."""
    s, _, d = triplet
    rng = np.random.default_rng([seed, 2, r])
    keys = _pairs(counts[s], counts[d], m, s == d, (perms[s], perms[d]), rng)
    out = folder / "raw" / "relations" / "___".join(triplet)
    nd = counts[d]
    _write(out / "edge.csv.gz", (int_text(np.stack([keys[a:a + _PAIRS] // nd, keys[a:a + _PAIRS] % nd], axis=1))
                                 for a in range(0, keys.size, _PAIRS)))
    _write(out / "num-edge-list.csv.gz", [b"%d\n" % keys.size])
    _write(out / "edge_reltype.csv.gz", (b"%d\n" % r * min(_PAIRS, keys.size - a) for a in range(0, keys.size, _PAIRS)))
    return int(keys.size)


def _papers(folder: Path, n: int, scale: float, seed: int) -> None:
    """Papers' features, years, labels and ``time`` split (every paper in one: train, then valid, test)."""
    rng = np.random.default_rng([seed, 3])
    y = rng.integers(0, MAG_CLASSES, n)
    split = _scaled(MAG_SPLIT, scale)
    n_train = min(split["train"], n - 2)
    n_valid = max(1, min(split["valid"], n - n_train - 1))
    order = rng.permutation(n)
    parts = {"train": order[:n_train], "valid": order[n_train:n_train + n_valid], "test": order[n_train + n_valid:]}
    year = np.empty(n, np.int64)
    year[parts["train"]] = rng.integers(2010, 2018, n_train)
    year[parts["valid"]], year[parts["test"]] = 2018, 2019
    centroids = rng.standard_normal((MAG_CLASSES, MAG_FEATURES)).astype(np.float32)

    def features():
        for i, a in enumerate(range(0, n, _ROWS)):
            noise = np.random.default_rng([seed, 4, i]).standard_normal((min(_ROWS, n - a), MAG_FEATURES),
                                                                        dtype=np.float32)
            yield float_text(0.2 * centroids[y[a:a + _ROWS]] + 0.3 * noise)
    raw = folder / "raw"
    _write(raw / "node-feat" / "paper" / "node-feat.csv.gz", features())
    _write(raw / "node-feat" / "paper" / "node_year.csv.gz", [int_text(year[:, None])])
    _write(raw / "node-label" / "paper" / "node-label.csv.gz", [int_text(y[:, None])])
    for name, ids in parts.items():
        _write(folder / "split" / "time" / "paper" / f"{name}.csv.gz", [int_text(np.sort(ids)[:, None])])


def _has(path: Path, names: list, which: set) -> None:
    """OGB's ``nodetype-has-*.csv.gz``: a header of the types and one row of True/False."""
    _write(path, [(",".join(names) + "\n" + ",".join(str(n in which) for n in names) + "\n").encode()])


def write_synthetic_mag(folder: str | os.PathLike, scale: float = 1.0, seed: int = 0) -> dict:
    """A synthetic ogbn-mag of ogbn-mag's sizes times ``scale`` under ``folder`` (module doc); returns the
    counts written: ``{"nodes": {type: n}, "edges": {(src, rel, dst): m}}``."""
    if not 0 < scale <= 1:
        raise ValueError(f"expected 0 < scale <= 1 (got {scale})")
    folder = Path(folder)
    counts = dict(sorted(_scaled(MAG_NODES, scale).items()))
    names = list(counts)
    raw = folder / "raw"
    _write(raw / "num-node-dict.csv.gz", [(",".join(names) + "\n" + ",".join(map(str, counts.values())) + "\n").encode()])
    relations = sorted(MAG_RELATIONS)
    _write(raw / "triplet-type-list.csv.gz", ["".join(",".join(t) + "\n" for t in relations).encode()])
    perms = {t: np.random.default_rng([seed, 1, i]).permutation(counts[t]) for i, t in enumerate(names)}
    edges = {t: _relation(folder, t, r, max(1, int(round(MAG_RELATIONS[t] * scale))), counts, perms, seed)
             for r, t in enumerate(relations)}
    _papers(folder, counts["paper"], scale, seed)
    _has(raw / "nodetype-has-label.csv.gz", names, {"paper"})
    _has(folder / "split" / "time" / "nodetype-has-split.csv.gz", names, {"paper"})
    return {"nodes": counts, "edges": edges}
