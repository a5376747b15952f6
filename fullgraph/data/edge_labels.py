"""``EdgeSplit``: the labelled edges an edge task learns (``--task edge``: a class per edge;
``edge-regression``: a number per edge), and the seeded split of them (``--edge-split 0.8,0.1,0.1``).

The labels come from the edge list's column named ``label`` (``data.formats.edgelist.LABEL_NAMES``), one
per listed edge, in the direction it was listed; the edges themselves stay in the graph, so that the
encoder passes messages over every edge (as GraphStorm's edge tasks do by default). An edge is
predicted from its two ends' output rows, which the layouts fetch as they do a link's
(``parallel.pairs``). The split shuffles the labelled edges by the seed and cuts them by the fractions;
every process that draws it gets the same edges, and the launcher writes it once for the ranks
(``--link-file``), as it writes a link split.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fullgraph.errors import InputError

__all__ = ["EdgeSplit", "DEFAULT_EDGE_SPLIT", "parse_edge_split", "read_edge_labels", "random_edge_split"]

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
    int64 indices into ``pairs``); the ids are checked against the graph's node count where the task binds."""

    pairs: torch.Tensor
    y: torch.Tensor
    train: torch.Tensor
    val: torch.Tensor
    test: torch.Tensor
    num_classes: int
    name: str = "edge split"

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
        for t in (self.pairs, self.y, self.train, self.val, self.test):
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
                 **{p: getattr(self, p).numpy() for p in PARTS})
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "EdgeSplit":
        try:
            with np.load(path, allow_pickle=False) as z:
                return cls(torch.from_numpy(z["pairs"]), torch.from_numpy(z["y"]),
                           *(torch.from_numpy(z[p]) for p in PARTS), num_classes=int(z["num_classes"]),
                           name=str(z["name"]))
        except (OSError, KeyError, ValueError) as e:
            raise InputError(f"expected an edge split file written by fullgraph at {path} ({e})") from None


def read_edge_labels(path: str | Path, numeric: bool, task: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The labelled edges of the edge list ``path`` and their labels: class ids >= 0 (``numeric`` False) or
    numbers; an edge whose label is NaN has none. ``task`` names the ``--task`` in errors."""
    from fullgraph.data.formats.edgelist import LABEL_NAMES, read_edge_list

    pairs, data = read_edge_list(path)
    if "edge_label" not in data:
        raise InputError(f"expected a column named {' or '.join(LABEL_NAMES)} in the header line of {path} with "
                         f"--task {task} (got none): name the column of each edge's label")
    y = data["edge_label"]
    keep = ~np.isnan(y)
    pairs, y = pairs[keep], y[keep]
    if not y.size:
        raise InputError(f"expected labelled edges in {path} with --task {task} (got every label NaN)")
    if pairs.min() < 0:
        raise InputError(f"expected node ids >= 0 in {path} (got {int(pairs.min())})")
    if not numeric:
        bad = np.flatnonzero((y != np.round(y)) | (y < 0))
        if bad.size:
            raise InputError(f"expected class ids >= 0 in the label column of {path} with --task edge (got "
                             f"{y[bad[0]]:g}): a number per edge trains --task edge-regression")
        return torch.from_numpy(pairs), torch.from_numpy(y.astype(np.int64))
    return torch.from_numpy(pairs), torch.from_numpy(y.astype(np.float32))


def random_edge_split(pairs: torch.Tensor, y: torch.Tensor, fractions: tuple[float, float, float], seed: int,
                      name: str) -> EdgeSplit:
    """The labelled edges shuffled by ``seed`` and cut by ``fractions``; a part left empty is refused."""
    n = pairs.shape[0]
    order = torch.from_numpy(np.random.default_rng(np.random.SeedSequence([seed, 0xED6E])).permutation(n))
    cuts = np.floor(np.cumsum(fractions[:2]) * n + 1e-9).astype(np.int64)
    parts = dict(zip(PARTS, (order[:cuts[0]], order[cuts[0]:cuts[1]], order[cuts[1]:])))
    empty = [p for p, rows in parts.items() if rows.numel() == 0]
    if empty:
        raise InputError(f"expected --edge-split to leave every part some of the {n} labelled edges (got none in "
                         f"{' and '.join(empty)}): give each part a larger fraction, or label more edges")
    classes = 0 if y.is_floating_point() else int(y.max()) + 1
    if classes == 1:
        raise InputError(f"expected at least two classes of edges with --task edge (got only class 0 in {name})")
    return EdgeSplit(pairs, y, **{p: rows.sort().values for p, rows in parts.items()},
                     num_classes=classes, name=f"{name} edge split {','.join(f'{f:g}' for f in fractions)} seed {seed}")
