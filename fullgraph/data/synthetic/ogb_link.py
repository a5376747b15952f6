"""Synthetic folders in ogbl-collab's layout (OGB's link-property-prediction layout), at any size.

The link reader (:mod:`fullgraph.data.formats.ogb_link`) and the link task are tested and measured on
folders nobody downloads here: :func:`write_synthetic_ogb_link` writes one with ogbl-collab's files and
sizes by default (235,868 authors; 1,285,465 collaboration rows, of which 1,179,052 train, 60,084 valid,
46,329 test; 100,000 negatives in each of valid and test), every count scaled with ``edges`` for a
smaller folder:

* ``raw/edge.csv.gz`` (the training rows, which are the graph), ``raw/edge_weight.csv.gz`` and
  ``raw/edge_year.csv.gz`` (one per row), ``raw/node-feat.csv.gz`` (``features`` floats per node),
  ``raw/num-node-list.csv.gz``, ``raw/num-edge-list.csv.gz``;
* ``split/time/{train,valid,test}.pt``: ``torch.save``'d dicts of numpy int64 arrays, as OGB saved
  them: ``edge`` [n, 2], ``weight`` [n], ``year`` [n], and in valid and test ``edge_neg`` [m, 2].

As in collab, a row is one pair of authors in one year, its weight the papers they wrote together
that year: a pair drawn several times in one year is one row whose weight counts the draws, and a pair
that collaborates in several years has a row for each (the reader merges them). Years split the rows as
collab's do (``split_years``: training up to 2017, validation 2018, test 2019). Negatives are uniform
pairs of distinct nodes that are no pair of any row, either way round.

The structure is there to be learned: nodes fall into planted communities of about 100, most draws
join two members of one community, each node's share of draws follows a Pareto weight (a few authors
write with many, most with few), and features are the community's centroid plus noise; a GCN encoder
with a dot-product decoder can then rank held-out pairs well above random ones (the negatives that
fall inside a community are the hard ones, as in collab).

The features are weak on their own (the dot product of two nodes' features ranks collab-sized held-out
pairs at Hits@50 of about 0.01) and strong once averaged over a node's neighbours: a 2-layer GCN of
width 128 trained 40 short epochs on CPU reached Hits@50 of 0.42 (valid) and 0.40 (test) on the
full-size folder and was still climbing (OGB's GCN on the real collab: about 0.47 test).

Text is formatted by :mod:`.ogb_hetero`'s numpy writers and gzipped at level 1, features in
blocks of rows; the rows, a few int64 arrays of the edge count, are the only large arrays held.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from fullgraph.data.synthetic.ogb_hetero import _write, float_text, int_text

__all__ = ["write_synthetic_ogb_link", "COLLAB_NODES", "COLLAB_SPLIT", "COLLAB_NEGATIVES"]

COLLAB_NODES, COLLAB_FEATURES = 235_868, 128
COLLAB_SPLIT = {"train": 1_179_052, "valid": 60_084, "test": 46_329}
COLLAB_NEGATIVES = 100_000
"""ogbl-collab's validation and test negatives, each."""
_COMMUNITY = 100  # nodes per planted community
_INSIDE = 0.8  # the share of draws that stay inside the first node's community
_ROWS = 1 << 12  # feature rows per text block
_SPAN = 54  # training years reach this far back (collab: 1963 to 2017)
_SIGNAL = 0.3  # the centroid's weight in a node's features, beside noise of weight 1


class _Planted:
    """Communities and draw weights: node ``perm[i]`` sits at position ``i``, in community ``i·C // n``;
    a node is drawn with probability its Pareto weight over the total (``cum``: running sums by position)."""

    def __init__(self, n: int, rng: np.random.Generator):
        self.n, self.c = n, max(2, n // _COMMUNITY)
        self.perm = rng.permutation(n)
        self.cum = np.concatenate([[0.0], np.cumsum(rng.pareto(2.0, n) + 1.0)])
        self.bounds = np.searchsorted(np.arange(n, dtype=np.int64) * self.c // n, np.arange(self.c + 1))

    def community(self) -> np.ndarray:
        """Each node's community, by node id."""
        out = np.empty(self.n, np.int64)
        out[self.perm] = np.arange(self.n, dtype=np.int64) * self.c // self.n
        return out

    def _pick(self, lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Positions drawn by weight among those whose running sums lie in ``[lo, hi)``."""
        r = lo + rng.random(lo.size) * (hi - lo)
        return np.clip(np.searchsorted(self.cum, r, side="right") - 1, 0, self.n - 1)

    def draws(self, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``k`` draws of ``(u, v)`` node ids, ``u != v`` (draws of one node twice are dropped)."""
        total = np.full(k, self.cum[-1])
        u = self._pick(np.zeros(k), total, rng)
        com = u * self.c // self.n
        lo, hi = self.cum[self.bounds[com]], self.cum[self.bounds[com + 1]]
        outside = rng.random(k) >= _INSIDE
        lo[outside], hi[outside] = 0.0, self.cum[-1]
        v = self._pick(lo, hi, rng)
        keep = u != v
        return self.perm[u[keep]], self.perm[v[keep]]


def _rows(planted: _Planted, m: int, years, rng: np.random.Generator) -> dict:
    """``m`` rows of distinct (pair, year), in the order first drawn: ``edge`` [m, 2], ``weight`` (the
    draws of that pair in that year) and ``year``. ``years(k)``: the years of ``k`` draws."""
    n, k = planted.n, int(1.3 * m) + 16
    while True:
        u, v = planted.draws(k, rng)
        y = np.asarray(years(u.size), np.int64)
        keys = (np.minimum(u, v) * n + np.maximum(u, v)) * 4096 + (y % 4096)
        uniq, first, count = np.unique(keys, return_index=True, return_counts=True)
        if uniq.size >= m:
            break
        k *= 2  # too few distinct rows (a tiny, dense folder): draw afresh, twice as many
    keep = np.sort(first)[:m]
    weight = count[np.searchsorted(uniq, keys[keep])]
    return {"edge": np.stack([u[keep], v[keep]], 1), "weight": weight.astype(np.int64), "year": y[keep]}


def _negatives(count: int, n: int, taken: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct uniform pairs ``(a, b)``, ``a != b``, whose unordered key ``min·n + max`` is not
    in the sorted ``taken`` (fewer where the graph leaves fewer)."""
    count = min(count, n * (n - 1) // 2 - taken.size)
    got = np.zeros(0, np.int64)
    while got.size < count:
        want = 2 * (count - got.size) + 16
        a, b = rng.integers(0, n, want), rng.integers(0, n, want)
        keys = (np.minimum(a, b) * n + np.maximum(a, b))[a != b]
        at = np.clip(np.searchsorted(taken, keys), 0, max(taken.size - 1, 0))
        keys = keys[taken[at] != keys] if taken.size else keys
        keys = np.concatenate([got, keys])
        _, first = np.unique(keys, return_index=True)
        got = keys[np.sort(first)][:count]
    return np.stack([got // n, got % n], 1)


def _sizes(edges: int) -> dict:
    """Rows per split and negatives per held-out split, collab's shares of ``edges``."""
    total = sum(COLLAB_SPLIT.values())
    valid = max(1, round(edges * COLLAB_SPLIT["valid"] / total))
    test = max(1, round(edges * COLLAB_SPLIT["test"] / total))
    if edges - valid - test < 1:
        raise ValueError(f"expected at least 3 edges (got {edges})")
    return {"train": edges - valid - test, "valid": valid, "test": test,
            "negatives": max(1, round(COLLAB_NEGATIVES * edges / total))}


def _features(path: Path, planted: _Planted, width: int, seed: int) -> None:
    """Each node's community centroid plus noise, written in blocks of rows."""
    centroids = np.random.default_rng([seed, 3]).standard_normal((planted.c, width)).astype(np.float32)
    com = planted.community()
    n = planted.n

    def blocks():
        for i, a in enumerate(range(0, n, _ROWS)):
            noise = np.random.default_rng([seed, 4, i]).standard_normal((min(_ROWS, n - a), width), dtype=np.float32)
            yield float_text(_SIGNAL * centroids[com[a:a + _ROWS]] + noise)
    _write(path, blocks())


def write_synthetic_ogb_link(folder: str | os.PathLike, *, nodes: int = COLLAB_NODES, edges: int = 1_285_465,
                             features: int = COLLAB_FEATURES, seed: int = 0,
                             split_years: tuple[int, int, int] = (2017, 2018, 2019)) -> Path:
    """A synthetic ogbl-collab under ``folder`` (module doc): ``edges`` rows in all (train, valid and test
    in collab's shares), ``split_years`` = (the last training year, the validation year, the test year).
    The same ``seed`` writes the same files.

    Measured at full size (the defaults) on 2 cores: 6.6 s, 508 MiB peak RSS for the whole process (219 MiB
    of it importing torch and numpy); 112 MB of raw files (node-feat.csv.gz 103 MB, edge.csv.gz 7.9 MB) and
    48 MB of split files (train.pt 41 MB)."""
    if nodes < 3 or features < 1:
        raise ValueError(f"expected at least 3 nodes and 1 feature (got {nodes} and {features})")
    folder = Path(folder)
    sizes = _sizes(edges)
    planted = _Planted(nodes, np.random.default_rng([seed, 1]))
    last, valid_year, test_year = split_years
    rng = np.random.default_rng([seed, 2])

    def train_years(k):
        return np.maximum(last - np.floor(rng.exponential(6.0, k)).astype(np.int64), last - _SPAN)
    split = {"train": _rows(planted, sizes["train"], train_years, rng),
             "valid": _rows(planted, sizes["valid"], lambda k: np.full(k, valid_year), rng),
             "test": _rows(planted, sizes["test"], lambda k: np.full(k, test_year), rng)}
    taken = np.unique(np.concatenate([np.minimum(*s["edge"].T) * nodes + np.maximum(*s["edge"].T)
                                      for s in split.values()]))
    neg = _negatives(2 * sizes["negatives"], nodes, taken, np.random.default_rng([seed, 5]))
    half = (neg.shape[0] + 1) // 2
    split["valid"]["edge_neg"], split["test"]["edge_neg"] = neg[:half], neg[half:]
    raw, train = folder / "raw", split["train"]
    _write(raw / "edge.csv.gz", (int_text(train["edge"][a:a + (1 << 18)]) for a in range(0, sizes["train"], 1 << 18)))
    _write(raw / "edge_weight.csv.gz", [int_text(train["weight"][:, None])])
    _write(raw / "edge_year.csv.gz", [int_text(train["year"][:, None])])
    _write(raw / "num-node-list.csv.gz", [b"%d\n" % nodes])
    _write(raw / "num-edge-list.csv.gz", [b"%d\n" % sizes["train"]])
    _features(raw / "node-feat.csv.gz", planted, features, seed)
    (folder / "split" / "time").mkdir(parents=True, exist_ok=True)
    for name, d in split.items():
        torch.save(d, folder / "split" / "time" / f"{name}.pt")
    return folder
