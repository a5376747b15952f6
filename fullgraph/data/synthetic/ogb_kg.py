"""Synthetic folders in OGB's knowledge-graph layouts (ogbl-biokg, ogbl-wikikg2), at any size.

The reader (:mod:`fullgraph.data.formats.ogb_kg`) and typed link prediction are tested and measured on
folders nobody downloads here: :func:`write_synthetic_kg` writes one with the files of either layout
(the module doc of the reader lists them). Triples are drawn so that there is something to learn: the
entities of each type sit in planted communities, a relation joins its head's community to one tail
community of its own (most draws) or to any node (the rest), and several relations of one pair of
types share many of their pairs (a drug that binds and inhibits one protein): each is kept in each.
The triples are split at random into training (the raw files: the graph), validation and test; each
held-out triple gets ``negatives`` corrupted heads and tails, uniform within their types, as OGB's.

biokg's relations: ``relations`` of them over the types ``("disease", "drug", "function", "protein",
"sideeffect")`` (biokg's five), two by two between one pair of types, the pairs taken in turn; wikikg2's: ``relations``
within its one type, ``entity``. The defaults are small; ``benchmarks/typed_links.py`` writes one at
ogbl-wikikg2's size (2.5 M entities, 535 relations, 16 M training triples).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from fullgraph.data.synthetic.ogb_hetero import _write, int_text

__all__ = ["write_synthetic_kg", "BIOKG_TYPES", "KG_LAYOUTS"]

BIOKG_TYPES = ("disease", "drug", "function", "protein", "sideeffect")
KG_LAYOUTS = ("biokg", "wikikg2")
_COMMUNITIES = 8  # planted communities per type
_INSIDE = 0.8  # the share of a relation's draws that follow its community map
_BLOCK = 1 << 20  # lines per text block


def _types(layout: str, entities: int) -> dict:
    if layout == "wikikg2":
        return {"entity": entities}
    per = max(entities // len(BIOKG_TYPES), 3)
    return {t: per for t in BIOKG_TYPES}


def _relation_ends(layout: str, types: dict, relations: int) -> list[tuple[str, str, str]]:
    names = list(types)
    if layout == "wikikg2":
        return [("entity", str(r), "entity") for r in range(relations)]
    pairs = [(a, b) for a in names for b in names]
    return [(pairs[r // 2 % len(pairs)][0], f"rel{r}", pairs[r // 2 % len(pairs)][1]) for r in range(relations)]


def _draw(count: int, n_head: int, n_tail: int, r: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct (head, tail) pairs: mostly from a head community to the relation's own tail community."""
    shift = 1 + r % (_COMMUNITIES - 1)
    heads = rng.integers(0, n_head, 2 * count + 16)
    size_t = max(n_tail // _COMMUNITIES, 1)
    comm = (heads * _COMMUNITIES // max(n_head, 1) + shift) % _COMMUNITIES
    tails = np.minimum(comm * size_t + rng.integers(0, size_t, heads.size), n_tail - 1)
    wild = rng.random(heads.size) > _INSIDE
    tails[wild] = rng.integers(0, n_tail, int(wild.sum()))
    keys = np.unique(heads * n_tail + tails)
    keys = rng.permutation(keys)[:count]
    return np.stack([keys // n_tail, keys % n_tail], 1)


def write_synthetic_kg(folder: str | os.PathLike, layout: str = "wikikg2", *, entities: int = 2000,
                       relations: int = 6, triples: int = 20000, negatives: int = 20, shared: float = 0.3,
                       held_out: float = 0.1, seed: int = 0) -> dict:
    """Write a synthetic knowledge graph in ``layout``'s files (module doc); returns its counts.
    ``shared``: the share of each relation's pairs that the next relation of the same two types also
    holds (pairs in two relations); ``held_out``: the share of each relation's triples for validation,
    and as many for test."""
    if layout not in KG_LAYOUTS:
        raise ValueError(f"layout must be one of {KG_LAYOUTS} (got {layout!r})")
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    types = _types(layout, entities)
    ends = _relation_ends(layout, types, relations)
    per = max(triples // relations, 4)
    rows, last = [], {}
    for r, (h, _, t) in enumerate(ends):
        pairs = _draw(per, types[h], types[t], r, rng)
        before = last.get((h, t))
        if before is not None and shared > 0:  # some pairs of the previous relation of these types again
            k = int(shared * min(before.shape[0], pairs.shape[0]))
            pairs = np.unique(np.concatenate([before[:k], pairs[k:]]), axis=0)
        last[(h, t)] = pairs
        rows.append((r, pairs))
    splits = {"train": [], "valid": [], "test": []}
    for r, pairs in rows:
        order = rng.permutation(pairs.shape[0])
        n_val = n_test = max(1, int(held_out * pairs.shape[0]))
        cut = {"valid": order[:n_val], "test": order[n_val:n_val + n_test], "train": order[n_val + n_test:]}
        for s, idx in cut.items():
            splits[s].append((r, pairs[np.sort(idx)]))
    _write_raw(folder, layout, types, ends, splits["train"])
    scheme = "time" if layout == "wikikg2" else "random"
    for s, parts in splits.items():
        _write_split(folder / "split" / scheme / f"{s}.pt", layout, types, ends, parts, negatives if s != "train" else 0,
                     rng)
    return {"entities": sum(types.values()), "relations": relations,
            **{s: int(sum(p.shape[0] for _, p in parts)) for s, parts in splits.items()}}


def _write_raw(folder: Path, layout: str, types: dict, ends: list, train: list) -> None:
    raw = folder / "raw"
    if layout == "wikikg2":
        pairs = np.concatenate([p for _, p in train])
        rel = np.concatenate([np.full(p.shape[0], r) for r, p in train])
        _write(raw / "edge.csv.gz", (int_text(pairs[a:a + _BLOCK]) for a in range(0, pairs.shape[0], _BLOCK)))
        _write(raw / "edge_reltype.csv.gz", (int_text(rel[a:a + _BLOCK, None]) for a in range(0, rel.size, _BLOCK)))
        _write(raw / "num-node-list.csv.gz", [f"{types['entity']}\n".encode()])
        _write(raw / "num-edge-list.csv.gz", [f"{pairs.shape[0]}\n".encode()])
        return
    _write(raw / "num-node-dict.csv.gz", [(",".join(types) + "\n" + ",".join(map(str, types.values())) + "\n").encode()])
    _write(raw / "triplet-type-list.csv.gz", ["".join(f"{h},{n},{t}\n" for h, n, t in ends).encode()])
    for r, pairs in train:
        base = raw / "relations" / "___".join(ends[r])
        _write(base / "edge.csv.gz", [int_text(pairs)])
        _write(base / "edge_reltype.csv.gz", [int_text(np.full((pairs.shape[0], 1), r))])
        _write(base / "num-edge-list.csv.gz", [f"{pairs.shape[0]}\n".encode()])


def _write_split(path: Path, layout: str, types: dict, ends: list, parts: list, negatives: int,
                 rng: np.random.Generator) -> None:
    """A ``torch.save``'d dict of numpy arrays (and biokg's type names as lists), as OGB saved them."""
    pairs = np.concatenate([p for _, p in parts])
    rel = np.concatenate([np.full(p.shape[0], r, np.int64) for r, p in parts])
    d = {"head": pairs[:, 0].astype(np.int64), "relation": rel, "tail": pairs[:, 1].astype(np.int64)}
    if layout == "biokg":
        d["head_type"] = [ends[r][0] for r in rel.tolist()]
        d["tail_type"] = [ends[r][2] for r in rel.tolist()]
    if negatives:
        n_head = np.array([types[ends[r][0]] for r in rel.tolist()], np.int64)
        n_tail = np.array([types[ends[r][2]] for r in rel.tolist()], np.int64)
        d["head_neg"] = (rng.random((rel.size, negatives)) * n_head[:, None]).astype(np.int64)
        d["tail_neg"] = (rng.random((rel.size, negatives)) * n_tail[:, None]).astype(np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(d, path)
