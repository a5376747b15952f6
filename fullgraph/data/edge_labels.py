"""``EdgeSplit``: the labelled edges an edge task learns (``--task edge``: a class per edge;
``edge-regression``: a number per edge), and the seeded split of them (``--edge-split 0.8,0.1,0.1``).

The labelled edges come from the data (``data.edge_sources``: an edge list's ``label`` column, or a
folder's ``edge_labels.npz``), one label per edge in the direction it was listed, with the edge's own
features where it has some; the edges themselves stay in the graph, so that the encoder passes messages
over every edge (as GraphStorm's edge tasks do by default). An edge is predicted from its two ends'
output rows, which the layouts fetch as they do a link's (``parallel.pairs``). The split is the data's
own where it gives one (split files), else the labelled edges shuffled by the seed and cut by the
fractions; every process that draws it gets the same edges, and the launcher writes it once for the
ranks (``--link-file``), as it writes a link split.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fullgraph.errors import InputError

__all__ = ["EdgeSplit", "DEFAULT_EDGE_SPLIT", "parse_edge_split", "edge_split", "random_edge_split"]

DEFAULT_EDGE_SPLIT = "0.8,0.1,0.1"
"""``--edge-split``'s default."""
PARTS = ("train", "val", "test")


def parse_edge_split(text: str) -> tuple[float, float, float]:
    """``--edge-split`` as three fractions (train, val, test) in [0, 1] that sum to 1."""
    from fullgraph.data.link_split import parse_fractions

    return parse_fractions(text, "--edge-split")


@dataclass(eq=False)
class EdgeSplit:
    """Labelled edges ``pairs`` (int64 ``[E, 2]``: src, dst) with their labels ``y`` (int64 class ids, or
    float32 numbers where ``num_classes`` is 0), and the rows of each part (``train``, ``val``, ``test``:
    int64 indices into ``pairs``), and ``x`` the edges' own features (float32 ``[E, d]``, or ``None``); the
    ids are checked against the graph's node count where the task binds."""

    pairs: torch.Tensor
    y: torch.Tensor
    train: torch.Tensor
    val: torch.Tensor
    test: torch.Tensor
    num_classes: int
    name: str = "edge split"
    x: torch.Tensor | None = None

    @property
    def edge_dim(self) -> int:
        """The width of an edge's own features (0: none)."""
        return 0 if self.x is None else self.x.shape[1]

    def features(self, rows: torch.Tensor) -> torch.Tensor | None:
        """The own features of the labelled edges ``rows`` (``None`` where edges have none)."""
        return None if self.x is None else self.x[rows]

    @property
    def numeric(self) -> bool:
        return self.num_classes == 0

    def part(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The pairs and labels of ``train``, ``val`` or ``test``."""
        rows = getattr(self, name)
        return self.pairs[rows], self.y[rows]

    def fingerprint(self) -> str:
        """A hash of the labelled edges, their labels and the parts (the launcher's file is keyed by it)."""
        import hashlib

        h = hashlib.sha256()
        for t in (self.pairs, self.y, self.train, self.val, self.test, *(() if self.x is None else (self.x,))):
            h.update(t.numpy().tobytes())
        return h.hexdigest()

    def sizes(self) -> dict[str, int]:
        return {p: int(getattr(self, p).numel()) for p in PARTS}

    def save(self, path: str | Path) -> Path:
        """Write the split as one ``.npz`` of plain arrays (reading it back runs no code)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, kind=np.array("edge"), num_classes=np.int64(self.num_classes),
                 name=np.array(self.name), pairs=self.pairs.numpy(), y=self.y.numpy(),
                 **{p: getattr(self, p).numpy() for p in PARTS}, **({} if self.x is None else {"x": self.x.numpy()}))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "EdgeSplit":
        try:
            with np.load(path, allow_pickle=False) as z:
                return cls(torch.from_numpy(z["pairs"]), torch.from_numpy(z["y"]),
                           *(torch.from_numpy(z[p]) for p in PARTS), num_classes=int(z["num_classes"]),
                           name=str(z["name"]), x=torch.from_numpy(z["x"]) if "x" in z.files else None)
        except (OSError, KeyError, ValueError) as e:
            raise InputError(f"expected an edge split file written by fullgraph at {path} ({e})") from None


def edge_split(edges, *, numeric: bool, task: str, fractions: tuple[float, float, float], seed: int,
               name: str) -> EdgeSplit:
    """The ``EdgeSplit`` of ``edges`` (a ``data.edge_sources.LabelledEdges``): its labelled rows (NaN: none) as
    class ids >= 0 (``numeric`` False) or numbers, split as the data says where it gives a split, else by
    ``fractions`` and ``seed`` (:func:`random_edge_split`). ``task`` names the ``--task`` in errors."""
    y, where = edges.y, edges.where
    keep = ~np.isnan(y)
    if not keep.any():
        raise InputError(f"expected labelled edges in {where} with --task {task} (got every label NaN)")
    if edges.pairs.min() < 0:
        raise InputError(f"expected node ids >= 0 in {where} (got {int(edges.pairs.min())})")
    if not numeric:
        bad = np.flatnonzero(keep & ((y != np.round(y)) | (y < 0)))
        if bad.size:
            raise InputError(f"expected class ids >= 0 as the labels of {where} with --task edge (got "
                             f"{y[bad[0]]:g}): a number per edge trains --task edge-regression")
    kept = np.flatnonzero(keep)
    pairs = torch.from_numpy(edges.pairs[kept])
    labels = torch.from_numpy(y[kept].astype(np.float32 if numeric else np.int64))
    x = None if edges.x is None else torch.from_numpy(np.ascontiguousarray(edges.x[kept]))
    if edges.parts is None:
        return random_edge_split(pairs, labels, fractions, seed, name, x=x)
    rows = _given_rows(edges.parts, keep, where)
    return EdgeSplit(pairs, labels, **rows, num_classes=_classes(labels, name), name=f"{name} edge split as given",
                     x=x)


def _given_rows(parts: dict, keep: np.ndarray, where: str) -> dict[str, torch.Tensor]:
    """A given split's rows of the stored edges as rows of the labelled ones: each part non-empty, within
    the edges, labelled, and no row in two parts."""
    m, seen = keep.size, np.zeros(keep.size, bool)
    index = np.cumsum(keep) - 1  # a stored row's place among the labelled ones
    out = {}
    for part in PARTS:
        rows = np.asarray(parts[part], dtype=np.int64)
        if not rows.size:
            raise InputError(f"expected the given {part} split of {where} to name some edges (got none)")
        if rows.min() < 0 or rows.max() >= m:
            raise InputError(f"expected the {part} split's rows of {where} in [0, {m}) (got {int(rows.min())}.."
                             f"{int(rows.max())})")
        if not keep[rows].all():
            r = int(rows[~keep[rows]][0])
            raise InputError(f"expected the {part} split of {where} to name labelled edges only (got row {r}, "
                             f"whose label is NaN): label it, or leave it out of the split")
        if seen[rows].any() or np.unique(rows).size != rows.size:
            r = int(rows[seen[rows]][0]) if seen[rows].any() else int(rows[0])
            raise InputError(f"expected each edge in at most one part of the split of {where} (got row {r} twice)")
        seen[rows] = True
        out[part] = torch.from_numpy(np.sort(index[rows]))
    return out


def _classes(y: torch.Tensor, name: str) -> int:
    classes = 0 if y.is_floating_point() else int(y.max()) + 1
    if classes == 1:
        raise InputError(f"expected at least two classes of edges with --task edge (got only class 0 in {name})")
    return classes


def random_edge_split(pairs: torch.Tensor, y: torch.Tensor, fractions: tuple[float, float, float], seed: int,
                      name: str, x: torch.Tensor | None = None) -> EdgeSplit:
    """The labelled edges shuffled by ``seed`` and cut by ``fractions``; a part left empty is refused.
    ``x``: the edges' features, a row per pair (``None``: none)."""
    n = pairs.shape[0]
    order = torch.from_numpy(np.random.default_rng(np.random.SeedSequence([seed, 0xED6E])).permutation(n))
    cuts = np.floor(np.cumsum(fractions[:2]) * n + 1e-9).astype(np.int64)
    parts = dict(zip(PARTS, (order[:cuts[0]], order[cuts[0]:cuts[1]], order[cuts[1]:])))
    empty = [p for p, rows in parts.items() if rows.numel() == 0]
    if empty:
        raise InputError(f"expected --edge-split to leave every part some of the {n} labelled edges (got none in "
                         f"{' and '.join(empty)}): give each part a larger fraction, or label more edges")
    return EdgeSplit(pairs, y, **{p: rows.sort().values for p, rows in parts.items()}, num_classes=_classes(y, name),
                     name=f"{name} edge split {','.join(f'{f:g}' for f in fractions)} seed {seed}", x=x)
