"""``LinkSplit``: the node pairs a link-prediction run is trained and scored on, and the seeded split
that makes one from any graph (``--task link --link-split 0.85,0.05,0.10``).

A link-prediction run trains its encoder on one graph and scores pairs of its nodes: the training
edges (positives, each undirected edge once), and for validation and test the held-out edges and
negatives drawn once and kept with the split, so that every epoch, layout and later ``evaluate`` scores
the same pairs. Held-out edges are removed from the graph the encoder sees in both directions, as
PyG's ``RandomLinkSplit(is_undirected=True)`` does; negatives are pairs of distinct nodes that are no
edge of the whole graph (either direction), as its ``negative_sampling`` draws them.

Negatives come in two forms, as OGB's datasets give them: shared by every positive of the split
(ogbl-collab, -ddi, -ppa; Hits@K and ROC-AUC rank the positives against them all), or ``per_positive``
K of them for each positive (ogbl-citation2: positive ``i``'s are rows ``i·K .. i·K+K-1``; MRR ranks
each positive against its own).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fullgraph.data.checks import describe
from fullgraph.errors import InputError

__all__ = ["LinkSplit", "random_link_split", "parse_link_split", "edge_keys", "without_pairs", "parse_fractions", "PAIR_FIELDS",
           "DEFAULT_LINK_SPLIT"]

DEFAULT_LINK_SPLIT = "0.85,0.05,0.10"
"""``--link-split``'s default: PyG's ``link_pred.py`` split."""
PAIR_FIELDS = ("train", "val", "val_neg", "test", "test_neg")
"""The pair tables of a split, in the order files and fingerprints list them."""


def parse_fractions(text: str, flag: str) -> tuple[float, float, float]:
    """``flag``'s value as three fractions TRAIN,VAL,TEST in [0, 1] that sum to 1."""
    try:
        parts = tuple(float(p) for p in text.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 3 or not all(np.isfinite(p) and 0 <= p <= 1 for p in parts):
        raise InputError(f"expected {flag} as three fractions TRAIN,VAL,TEST in [0, 1] (got {text!r})")
    if abs(sum(parts) - 1.0) > 1e-6:
        raise InputError(f"expected {flag} fractions that sum to 1 (got {text!r}, which sums to {sum(parts):g})")
    return parts


def parse_link_split(text: str) -> tuple[float, float, float]:
    """``--link-split`` as three fractions (train, val, test) that sum to 1 and leave training edges."""
    parts = parse_fractions(text, "--link-split")
    if parts[0] <= 0:
        raise InputError(f"expected --link-split to leave training edges (got a train fraction of {parts[0]:g})")
    return parts


def edge_keys(a: np.ndarray, b: np.ndarray, num_nodes: int) -> np.ndarray:
    """One int64 key per unordered pair ``{a, b}``: ``min·N + max``."""
    lo, hi = np.minimum(a, b).astype(np.int64), np.maximum(a, b).astype(np.int64)
    return lo * num_nodes + hi


@dataclass(eq=False)
class LinkSplit:
    """The pairs of one link-prediction split, each table int64 ``[n, 2]`` of (src, dst) node ids.

    Attributes:
        num_nodes: the node count of the graph the ids index.
        train: the positive training edges (each undirected edge once); at least one.
        val, val_neg, test, test_neg: held-out positives and their negatives.
        per_positive: 0 when negatives are shared by all positives of a split; K when each positive has
            K of its own (``val_neg`` then has ``K·len(val)`` rows, positive ``i``'s first).
        name: where the split came from (a seeded split, or the dataset's own files).
        relations: typed links only (``data.typed.link_split``): ``{table: int64 [n]}``, the relation of
            each pair (a knowledge graph's triple is ``(src, relation, dst)``); ``None``: untyped.
        relation_names: every relation of the graph by id (``SRC___REL___DST``), for reports.
        ends: int64 ``[T, 5]``, per scored relation: its id, then the id ranges ``[lo, hi)`` of its head
            and tail node types, within which a negative corrupts an end.
    """

    num_nodes: int
    train: torch.Tensor
    val: torch.Tensor
    val_neg: torch.Tensor
    test: torch.Tensor
    test_neg: torch.Tensor
    per_positive: int = 0
    name: str = "split"
    relations: dict | None = None
    relation_names: tuple = ()
    ends: torch.Tensor | None = None

    @property
    def typed(self) -> bool:
        """Whether the pairs are typed links (``(head, relation, tail)``: a knowledge graph's triples)."""
        return self.relations is not None

    def relation(self, table: str) -> torch.Tensor | None:
        """int64 ``[n]``: the relation of each pair of ``table`` (``None`` for untyped links)."""
        return None if self.relations is None else self.relations[table]

    @property
    def targets(self) -> tuple[int, ...]:
        """The scored relations, in the order of ``ends``' rows (empty for untyped links)."""
        return () if self.ends is None else tuple(int(r) for r in self.ends[:, 0])

    def __post_init__(self) -> None:
        for f in PAIR_FIELDS:
            t = getattr(self, f)
            t = torch.as_tensor(t)
            if t.dtype != torch.int64 or t.dim() != 2 or t.shape[1] != 2:
                raise InputError(f"expected link pairs '{f}' to be an int64 tensor [n, 2] (got {describe(t)})")
            if t.numel() and (int(t.min()) < 0 or int(t.max()) >= self.num_nodes):
                raise InputError(f"expected the node ids of link pairs '{f}' in [0, {self.num_nodes}) (got "
                                 f"{int(t.min())}..{int(t.max())})")
            setattr(self, f, t.contiguous())
        if self.train.shape[0] == 0:
            raise InputError("expected at least one training edge in the link split (got none)")
        for pos, neg in (("val", "val_neg"), ("test", "test_neg")):
            p, n = getattr(self, pos).shape[0], getattr(self, neg).shape[0]
            if p == 0 or n == 0:
                raise InputError(f"expected positives and negatives in the link split's '{pos}' (got {p} and {n})")
            if self.per_positive and n != p * self.per_positive:
                raise InputError(f"expected {self.per_positive} negatives per positive in '{neg}' ({p * self.per_positive} "
                                 f"rows, got {n})")
        if self.relations is not None:
            self._check_relations()

    def _check_relations(self) -> None:
        """Typed links: a relation per pair of every table, and per scored relation the id ranges of its
        head and tail types (``ends`` int64 ``[T, 5]``: relation, head lo, hi, tail lo, hi)."""
        self.ends = torch.as_tensor(self.ends, dtype=torch.int64).reshape(-1, 5)
        self.relation_names = tuple(str(n) for n in self.relation_names)
        targets = set(self.targets)
        for f in PAIR_FIELDS:
            r = torch.as_tensor(self.relations.get(f, torch.zeros(0)), dtype=torch.int64).reshape(-1)
            if r.numel() != getattr(self, f).shape[0]:
                raise InputError(f"expected one relation per pair of '{f}' ({getattr(self, f).shape[0]}, got {r.numel()})")
            if r.numel() and not set(r.unique().tolist()) <= targets:
                raise InputError(f"expected the pairs of '{f}' in the scored relations {sorted(targets)} (got "
                                 f"{sorted(set(r.unique().tolist()) - targets)})")
            self.relations[f] = r.contiguous()

    def fingerprint(self) -> str:
        """A sha256 over every table: a run, its checkpoints and its ranks agree on the pairs."""
        h = hashlib.sha256(f"{self.num_nodes}/{self.per_positive}".encode())
        for f in PAIR_FIELDS:
            t = getattr(self, f)
            h.update(f"{f}{tuple(t.shape)}".encode())
            h.update(t.numpy().reshape(-1).view(np.uint8))
        if self.typed:  # typed links: their relations and the scored relations' ends too
            h.update(repr(self.relation_names).encode())
            for t in [self.ends] + [self.relations[f] for f in PAIR_FIELDS]:
                h.update(t.numpy().reshape(-1).view(np.uint8))
        return h.hexdigest()

    def sizes(self) -> dict:
        return {f: int(getattr(self, f).shape[0]) for f in PAIR_FIELDS} | {"per_positive": self.per_positive}

    def save(self, path: str | Path) -> Path:
        """Write the split as one ``.npz`` (plain arrays: reading it back runs no code)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        typed = {}
        if self.typed:
            typed = {f"{f}_relation": self.relations[f].numpy() for f in PAIR_FIELDS}
            typed |= {"ends": self.ends.numpy(), "relation_names": np.array(self.relation_names, dtype=str)}
        np.savez(tmp, num_nodes=np.int64(self.num_nodes), per_positive=np.int64(self.per_positive),
                 name=np.array(self.name), **{f: getattr(self, f).numpy() for f in PAIR_FIELDS}, **typed)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "LinkSplit":
        try:
            with np.load(path, allow_pickle=False) as z:
                typed = {}
                if "ends" in z:
                    typed = {"relations": {f: torch.from_numpy(z[f"{f}_relation"].astype(np.int64)) for f in PAIR_FIELDS},
                             "ends": torch.from_numpy(z["ends"].astype(np.int64)),
                             "relation_names": tuple(str(n) for n in z["relation_names"])}
                return cls(int(z["num_nodes"]), *(torch.from_numpy(z[f].astype(np.int64)) for f in PAIR_FIELDS),
                           per_positive=int(z["per_positive"]), name=str(z["name"]), **typed)
        except (OSError, KeyError, ValueError) as e:
            raise InputError(f"expected a link split file written by fullgraph at {path} ({e})") from None


def _undirected_pairs(indptr: torch.Tensor, indices: torch.Tensor, num_nodes: int) -> np.ndarray:
    """The sorted unique keys of the graph's edges as unordered pairs, self-loops left out."""
    dst = np.repeat(np.arange(num_nodes, dtype=np.int64), np.diff(indptr.numpy()))
    src = indices.numpy()
    off = src != dst
    return np.unique(edge_keys(src[off], dst[off], num_nodes))


def _negatives(count: int, num_nodes: int, taken: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct pairs of distinct nodes whose keys are not in ``taken`` (sorted)."""
    room = num_nodes * (num_nodes - 1) // 2 - taken.size
    if count > room:
        raise InputError(f"expected room for {count} negative pairs in a graph of {num_nodes} nodes (got {room})")
    got = np.empty(0, dtype=np.int64)
    while got.size < count:
        want = 2 * (count - got.size) + 16
        a, b = rng.integers(0, num_nodes, want), rng.integers(0, num_nodes, want)
        keys = edge_keys(a, b, num_nodes)[a != b]
        keys = keys[~np.isin(keys, taken, assume_unique=False)]
        keys = keys[~np.isin(keys, got)]
        _, first = np.unique(keys, return_index=True)
        got = np.concatenate([got, keys[np.sort(first)]])[:count]
    return np.stack([got // num_nodes, got % num_nodes], 1)


def random_link_split(graph, fractions: tuple[float, float, float], seed: int):
    """``(encoder graph, LinkSplit)``: the graph's undirected edges shuffled by ``seed`` and cut into
    train / val / test by ``fractions`` (val and test rounded down, as PyG's ``RandomLinkSplit``), the
    held-out ones removed from the graph in both directions (their edge data with them), and one
    negative per held-out positive drawn among the non-edges of the whole graph."""
    n = graph.num_nodes
    keys = _undirected_pairs(graph.indptr, graph.indices, n)
    if keys.size == 0:
        raise InputError(f"expected edges between distinct nodes to split for link prediction (got none in {graph.name})")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x11A5]))
    order = rng.permutation(keys.size)
    n_val, n_test = int(fractions[1] * keys.size), int(fractions[2] * keys.size)
    n_train = keys.size - n_val - n_test
    if n_train <= 0 or (fractions[1] > 0 and n_val == 0) or (fractions[2] > 0 and n_test == 0):
        raise InputError(f"expected --link-split to leave training, validation and test edges in {graph.name}'s "
                         f"{keys.size} edges (got {n_train}, {n_val} and {n_test})")
    cut = [np.sort(keys[order[a:b]]) for a, b in ((0, n_train), (n_train, n_train + n_val),
                                                  (n_train + n_val, keys.size))]
    pairs = [torch.from_numpy(np.stack([k // n, k % n], 1)) for k in cut]
    neg_rng = np.random.default_rng(np.random.SeedSequence([seed, 0x11A6]))
    negs = _negatives(n_val + n_test, n, keys, neg_rng)
    split = LinkSplit(n, pairs[0], pairs[1], torch.from_numpy(negs[:n_val]), pairs[2], torch.from_numpy(negs[n_val:]),
                      name=f"{graph.name} link split {','.join(f'{f:g}' for f in fractions)} seed {seed}")
    return _keep_entries(graph, cut[0]), split


def _keep_entries(graph, train_keys: np.ndarray):
    """The graph with only the CSR entries whose unordered pair is a training edge (self-loops kept:
    they were never split), edge data cut by the same positions."""
    n = graph.num_nodes
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr.numpy()))
    src = graph.indices.numpy()
    return _keep_positions(graph, np.isin(edge_keys(src, dst, n), train_keys) | (src == dst))


def without_pairs(graph, pairs: torch.Tensor):
    """The graph without the edges of ``pairs`` (``[n, 2]``), in both directions, edge data cut with them (an
    edge task's held-out edges, ``--edge-holdout``)."""
    n = graph.num_nodes
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr.numpy()))
    held = edge_keys(pairs[:, 0].numpy(), pairs[:, 1].numpy(), n)
    return _keep_positions(graph, ~np.isin(edge_keys(graph.indices.numpy(), dst, n), held))


def _keep_positions(graph, keep: np.ndarray):
    """The graph with the CSR entries ``keep`` (bool ``[E]``) only, edge data cut by the same positions."""
    from fullgraph.ops.csr import indptr_from_counts

    n = graph.num_nodes
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr.numpy()))
    indptr = torch.as_tensor(indptr_from_counts(torch.from_numpy(np.bincount(dst[keep], minlength=n))))
    pos = torch.from_numpy(np.nonzero(keep)[0])
    data = graph.edge_data()
    edge = {}
    if data is not None:
        cut = data.take(pos)
        edge = {k: v for k, v in (("edge_weight", cut.weight), ("edge_attr", cut.attr), ("edge_type", cut.type))
                if v is not None}
        if graph.num_relations is not None:
            edge["num_relations"] = graph.num_relations
    return graph.with_structure(indptr, graph.indices[pos], **edge)
