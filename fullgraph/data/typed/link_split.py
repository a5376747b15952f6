"""Typed links: the seeded split of a heterogeneous graph's edges of some relations into the triples a
link-prediction run trains and scores (``--task link --target-relation SRC___REL___DST``), and the
negatives that corrupt one end of a triple within its node type.

A knowledge graph's link is a triple ``(head, relation, tail)``; a typed graph stores it as the edge
``head -> tail`` of that relation (``Graph.edge_type``), and the same pair may stand in several
relations. The split follows PyG's ``RandomLinkSplit(edge_types, rev_edge_types)``:

* each target relation's edges are shuffled by ``(seed, relation)`` and cut by ``--link-split`` on
  their own (val and test rounded down), so that every target relation has training, validation and
  test edges, or the split is refused in one line naming it; a relation within one type that the
  graph holds in both directions (``data.typed`` makes such relations symmetric in place) is split
  by unordered pairs, as the untyped split is;
* a held-out edge leaves the encoder's graph with its reverse, the edge of the reverse relation
  (``rev_<name>``: ``data.preprocess.reverse_relation_map``), so that no message carries the answer;
* each held-out positive gets one negative, drawn once and kept with the split: the positive with
  its tail (or, with ``corrupt="both"``, its head or its tail, by a fair coin) replaced by a node of
  the same type that forms no edge of that relation in the whole graph.

Training negatives are drawn per step by :func:`corrupted` (keyed by seed, epoch and step, unfiltered,
as PyG's and DGL-KE's training loops draw them): the same draw in every layout.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.data.link_split import PAIR_FIELDS, LinkSplit
from fullgraph.errors import InputError

__all__ = ["CORRUPT", "relation_triplets", "target_relations", "random_typed_link_split", "corrupted"]

CORRUPT = ("tail", "both")
"""Which end a negative replaces (``--corrupt``): the tail, or the head or the tail by a fair coin."""


def relation_triplets(types) -> tuple[str, ...]:
    """Every relation of a typed graph by id in OGB's spelling, ``SRC___REL___DST``."""
    return tuple("___".join(r) for r in types.relations)


def target_relations(graph, text: str) -> tuple[int, ...]:
    """The relation ids ``--target-relation`` names (``SRC___REL___DST``, comma-separated), checked
    against the graph: a typed graph with those relations, each named once."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    types = graph.node_types
    if types is None or not types.relations:
        raise InputError(f"expected a graph whose edges carry relations with --target-relation (got {graph.name}, "
                         f"{'of one node type' if types is None else 'without relations'}): leave it out, or give a "
                         f"typed graph")
    index = {name: i for i, name in enumerate(relation_triplets(types))}
    unknown = [name for name in names if name not in index]
    if unknown or not names:
        known = ", ".join(list(index)[:12]) + (", ..." if len(index) > 12 else "")
        raise InputError(f"expected --target-relation to name relations of {graph.name} as SRC___REL___DST (got "
                         f"{', '.join(unknown) or repr(text)}; the relations are {known})")
    return tuple(dict.fromkeys(index[name] for name in names))


def _triple_keys(src: np.ndarray, dst: np.ndarray, rel, n: int, r: int) -> np.ndarray:
    """One int64 key per ``(src, dst, relation)``: ``(dst·N + src)·R + relation``."""
    if n * n * max(r, 1) >= 2**62:
        raise InputError(f"expected a graph of fewer than 2^31 (nodes^2 x relations) to split typed links (got "
                         f"{n} nodes and {r} relations)")
    return (dst.astype(np.int64) * n + src.astype(np.int64)) * r + rel


def corrupted(pairs: torch.Tensor, rel: torch.Tensor, ends: torch.Tensor, k: int, rng: np.random.Generator,
              corrupt: str = "tail") -> tuple[torch.Tensor, torch.Tensor]:
    """``k`` negatives of each pair ``(head, tail)`` of relation ``rel``: the pair with its tail (or by a
    coin its head, ``corrupt="both"``) replaced by a uniform node of that end's type (``ends``: the
    split's ``[T, 5]`` ranges); ``(pairs [n·k, 2], relations [n·k])``, positive ``i``'s ``k`` first."""
    pairs = pairs.repeat_interleave(k, 0).numpy().copy()
    rel = rel.repeat_interleave(k).numpy()
    table = np.zeros((int(ends[:, 0].max()) + 1 if ends.numel() else 1, 4), dtype=np.int64)
    table[ends[:, 0].numpy()] = ends[:, 1:].numpy()
    lo_h, hi_h, lo_t, hi_t = (table[rel, c] for c in range(4))
    u = rng.random(pairs.shape[0])
    head = rng.random(pairs.shape[0]) < 0.5 if corrupt == "both" else np.zeros(pairs.shape[0], dtype=bool)
    pairs[head, 0] = lo_h[head] + (u[head] * (hi_h - lo_h)[head]).astype(np.int64)
    pairs[~head, 1] = lo_t[~head] + (u[~head] * (hi_t - lo_t)[~head]).astype(np.int64)
    return torch.from_numpy(pairs), torch.from_numpy(rel)


def _held_out_negatives(pos: np.ndarray, r: int, ends: torch.Tensor, existing: np.ndarray, n: int, R: int,
                        rng: np.random.Generator, corrupt: str, name: str) -> np.ndarray:
    """One negative per held-out positive of relation ``r``: corrupted within its type, and no edge of
    that relation in the whole graph (either direction for a relation within one type) nor a loop."""
    out = np.empty_like(pos)
    todo = np.arange(pos.shape[0])
    for _ in range(64):
        if todo.size == 0:
            return out
        got, _ = corrupted(torch.from_numpy(pos[todo]), torch.full((todo.size,), r), ends, 1, rng, corrupt)
        got = got.numpy()
        bad = np.isin(_triple_keys(got[:, 0], got[:, 1], r, n, R), existing) | (got[:, 0] == got[:, 1])
        bad |= np.isin(_triple_keys(got[:, 1], got[:, 0], r, n, R), existing)
        out[todo[~bad]] = got[~bad]
        todo = todo[bad]
    raise InputError(f"expected room for negatives of relation {name} (got {todo.size} held-out edges whose every "
                     f"corruption drawn was an edge: the relation is too dense to score against negatives)")


def random_typed_link_split(graph, fractions: tuple[float, float, float], seed: int, targets: tuple[int, ...],
                            corrupt: str = "tail"):
    """``(encoder graph, LinkSplit)`` of the typed links of the relations ``targets`` (module doc)."""
    from fullgraph.data.link_split import _keep_positions
    from fullgraph.data.typed.relations import reverse_relation_map

    types, n, R = graph.node_types, graph.num_nodes, int(graph.num_relations)
    names = relation_triplets(types)
    src, dst = (t.numpy() for t in graph.edges())
    etype = graph.edge_type.numpy()
    rev = reverse_relation_map(graph)
    tables = {f: [] for f in PAIR_FIELDS}
    rels = {f: [] for f in PAIR_FIELDS}
    drop, ends = [], []
    for r in targets:
        s_type, _, d_type = types.relations[r]
        hs, ts = types.index(s_type), types.index(d_type)
        ends.append([r, types.offsets[hs], types.offsets[hs + 1], types.offsets[ts], types.offsets[ts + 1]])
        sel = etype == r
        a, b = src[sel], dst[sel]
        existing = np.sort(_triple_keys(a, b, r, n, R))
        in_place = rev is not None and rev[r] == r  # within one type, both directions stored: pairs once
        if in_place:
            a, b = a[a < b], b[a < b]
        m = a.size
        n_val, n_test = int(fractions[1] * m), int(fractions[2] * m)
        n_train = m - n_val - n_test
        if n_train <= 0 or (fractions[1] > 0 and n_val == 0) or (fractions[2] > 0 and n_test == 0):
            raise InputError(f"expected --link-split to leave relation {names[r]} training, validation and test edges "
                             f"(got {n_train}, {n_val} and {n_test} of its {m} edges)")
        order = np.random.default_rng(np.random.SeedSequence([seed, 0x11A5, r])).permutation(m)
        cut = [np.sort(order[i:j]) for i, j in ((0, n_train), (n_train, n_train + n_val), (n_train + n_val, m))]
        neg_rng = np.random.default_rng(np.random.SeedSequence([seed, 0x11A6, r]))
        end = torch.tensor([ends[-1]])
        for table, idx in zip(("train", "val", "test"), cut):
            pos = np.stack([a[idx], b[idx]], 1)
            tables[table].append(pos)
            rels[table].append(np.full(idx.size, r))
            if table == "train":
                continue
            neg = _held_out_negatives(pos, r, end, existing, n, R, neg_rng, corrupt, names[r])
            tables[f"{table}_neg"].append(neg)
            rels[f"{table}_neg"].append(np.full(idx.size, r))
            drop.append(_triple_keys(pos[:, 0], pos[:, 1], r, n, R))  # the edge, and its reverse, leave the graph
            if rev is not None:
                drop.append(_triple_keys(pos[:, 1], pos[:, 0], rev[r], n, R))
    entry = _triple_keys(src, dst, etype, n, R)
    keep = ~np.isin(entry, np.concatenate(drop)) if drop else np.ones(entry.size, dtype=bool)
    as_tensor = lambda parts, cols: torch.from_numpy(  # noqa: E731
        np.concatenate(parts).astype(np.int64) if parts else np.zeros((0, 2) if cols else 0, np.int64))
    target_names = ",".join(names[r] for r in targets)
    split = LinkSplit(n, *(as_tensor(tables[f], True) for f in PAIR_FIELDS),
                      name=f"{graph.name} typed link split {target_names} {','.join(f'{f:g}' for f in fractions)} "
                           f"seed {seed} corrupt {corrupt}",
                      relations={f: as_tensor(rels[f], False) for f in PAIR_FIELDS}, relation_names=names,
                      ends=torch.tensor(ends, dtype=torch.int64))
    return _keep_positions(graph, keep), split
