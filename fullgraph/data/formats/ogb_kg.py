"""OGB's knowledge-graph link layouts (ogbl-biokg, ogbl-wikikg2), read by their files without running
code, as the typed graph an encoder sees and the typed :class:`~fullgraph.data.link_split.LinkSplit`
its triples are trained and scored on.

An unzipped ``linkproppred/<name>.zip`` holds (``ogb/io/read_graph_raw.py``; gzip text, headerless):

* ogbl-biokg (typed entities): ``raw/num-node-dict.csv.gz`` (a header of entity types, a row of
  counts), ``raw/triplet-type-list.csv.gz`` and per relation ``raw/relations/<h>___<r>___<t>/``
  (``edge.csv.gz`` in each type's own ids, ``num-edge-list.csv.gz``, ``edge_reltype.csv.gz``: the
  relation's id on every row, the id the split files use), read as ogbn-mag's are
  (:mod:`.ogb_hetero`);
* ogbl-wikikg2 (one entity type, 535 relations): ``raw/edge.csv.gz`` (``head,tail``), ``raw/
  edge_reltype.csv.gz`` (each edge's relation id) and ``raw/num-node-list.csv.gz``;
* ``split/<scheme>/{train,valid,test}.pt``: ``torch.save``'d dicts of ``head``, ``relation`` and
  ``tail`` (biokg adds ``head_type`` and ``tail_type``, its ids local to those types), and in
  ``valid`` and ``test`` ``head_neg`` and ``tail_neg`` ``[n, K]`` (K = 500): each positive's own
  negatives, its head or its tail replaced. Read as :func:`.ogb_link.read_split_file` reads every
  OGB split (``torch.load(weights_only=True)``, numpy's arrays allowed, nothing that runs code).

The raw edges are the training triples (OGB took the held-out ones out). The encoder's graph holds
them with a reverse relation each (``rev_<name>``, ids ``R..2R-1``: R-GCN's inverse relations), so
that a relation within one type keeps its direction; wikikg2's relations are named by their ids
(``entity___<id>___entity``). Every entity type is featureless (R-GCN's learned embeddings). The
split: the training triples, and for validation and test each positive twice, against its ``tail_neg``
and against its ``head_neg`` (``LinkSplit.per_positive = K``): the rank of the true tail among the given
corrupted tails and of the true head among the corrupted heads, averaged, OGB's MRR and Hits@K (its
examples score both batches and average the two). Labels and masks are placeholders, as
:mod:`.ogb_link` gives them (no link task reads them; ``detect.load_path`` refuses node tasks).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from fullgraph.data.formats._common import read_table_blocks, require_files
from fullgraph.data.formats.ogb_source import SPLIT_FILES, _split_name
from fullgraph.data.formats.ogb_layouts import _count
from fullgraph.data.link_split import LinkSplit
from fullgraph.errors import InputError

__all__ = ["is_ogb_kg_folder", "load_ogb_kg", "KG_KEYS"]

KG_KEYS = ("head", "relation", "tail")
"""What every split file of a knowledge-graph layout holds (``valid``/``test`` add ``head_neg``, ``tail_neg``)."""


def is_ogb_kg_folder(folder: str | Path) -> bool:
    """A ``split/*/train.pt`` beside biokg's typed relations or wikikg2's ``edge_reltype`` file."""
    folder, raw = Path(folder), Path(folder) / "raw"
    kg = (raw / "triplet-type-list.csv.gz").is_file() or (raw / "edge_reltype.csv.gz").is_file()
    return kg and any(p.is_file() for p in folder.glob("split/*/train.pt"))


def _array(split: dict, key: str, path: Path, ndim: int) -> np.ndarray:
    """``split[key]`` as an int64 array of ``ndim`` dimensions (ranges are checked by the caller)."""
    if key not in split:
        raise InputError(f"expected the key {key!r} in {path}, as OGB's knowledge-graph splits hold (found keys "
                         f"{sorted(map(str, split))})")
    a = split[key]
    a = a.numpy() if isinstance(a, torch.Tensor) and a.layout == torch.strided else a
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "iu" or a.ndim != ndim or (ndim == 2 and a.shape[1] == 0):
        got = f"{a.dtype} array of shape {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise InputError(f"expected {path}[{key!r}] to be integer ids {'[n]' if ndim == 1 else '[n, K]'} (got {got})")
    return a.astype(np.int64, copy=False)


def _types_of(split: dict, key: str, path: Path, n: int) -> list[str] | None:
    """biokg's ``head_type``/``tail_type``: a type name per triple (a list, or a numpy array of text)."""
    if key not in split:
        return None
    a = split[key]
    names = list(a.tolist()) if isinstance(a, np.ndarray) else a
    if not isinstance(names, (list, tuple)) or len(names) != n or not all(isinstance(t, str) for t in names[:1000]):
        raise InputError(f"expected {path}[{key!r}] to be one node type name per triple, {n} (got "
                         f"{type(a).__name__}{' of ' + str(len(a)) if hasattr(a, '__len__') else ''})")
    return names


class _Relations:
    """The knowledge graph's entities and relations: type offsets, each relation's ``(head type,
    name, tail type)`` by its OGB id."""

    def __init__(self, counts: dict, triplets: dict):
        self.names = tuple(counts)
        self.counts = counts
        self.offsets = dict(zip(self.names, np.cumsum([0, *counts.values()])[:-1].tolist()))
        self.triplets = triplets  # {relation id: (head type, name, tail type)}, ids 0..R-1
        if sorted(triplets) != list(range(len(triplets))):
            raise InputError(f"expected relation ids 0..{len(triplets) - 1} (got {sorted(triplets)[:8]}...)")

    @property
    def num_relations(self) -> int:
        return len(self.triplets)

    def ends(self, r: int) -> list[int]:
        h, _, t = self.triplets[r]
        return [r, self.offsets[h], self.offsets[h] + self.counts[h], self.offsets[t], self.offsets[t] + self.counts[t]]


def _biokg(folder: Path) -> tuple[_Relations, dict]:
    """biokg's types and relations, and each relation's edges in global ids, by relation id."""
    from fullgraph.data.formats.ogb_hetero import COUNT_FILE, SEP, _read_counts, _read_triplets

    raw = folder / "raw"
    require_files([raw / COUNT_FILE, raw / "triplet-type-list.csv.gz"], f"OGB knowledge graph in {folder}")
    counts = _read_counts(raw)
    triplets, edges = {}, {}
    offsets = dict(zip(counts, np.cumsum([0, *counts.values()])[:-1].tolist()))
    for triplet in _read_triplets(raw, counts):
        base = raw / "relations" / SEP.join(triplet)
        files = [base / f for f in ("edge.csv.gz", "num-edge-list.csv.gz", "edge_reltype.csv.gz")]
        require_files(files, f"OGB knowledge graph in {folder}")
        blocks = list(read_table_blocks(files[0], dtype=np.int64, what="edge list", ncols=2))
        table = np.concatenate(blocks) if blocks else np.zeros((0, 2), np.int64)
        ids = np.concatenate(list(read_table_blocks(files[2], dtype=np.int64, what="relation ids", ncols=1)))[:, 0]
        m = _count(files[1], "edge count")
        if table.shape[0] != m or ids.size != m or (m and (ids != ids[0]).any()):
            raise InputError(f"expected {m} edges (num-edge-list.csv.gz) of one relation id in {base} (got "
                             f"{table.shape[0]} edges and ids {sorted(set(ids.tolist()))[:4]})")
        for col, t in ((0, triplet[0]), (1, triplet[2])):
            bad = np.flatnonzero((table[:, col] < 0) | (table[:, col] >= counts[t]))
            if bad.size:
                raise InputError(f"expected {t} ids in [0, {counts[t]}) in column {col + 1} of {files[0]} (got "
                                 f"{int(table[bad[0], col])} on line {int(bad[0]) + 1})")
        r = int(ids[0]) if m else len(triplets)
        if r in triplets:
            raise InputError(f"expected each relation its own id in edge_reltype.csv.gz (got {r} for "
                             f"{SEP.join(triplets[r])} and {SEP.join(triplet)})")
        triplets[r] = triplet
        edges[r] = (table[:, 0] + offsets[triplet[0]], table[:, 1] + offsets[triplet[2]])
    return _Relations(counts, triplets), edges


def _wikikg(folder: Path) -> tuple[_Relations, dict]:
    """wikikg2's one entity type and its relations (named by id), each relation's edges by id."""
    raw = folder / "raw"
    edge_f, rel_f = raw / "edge.csv.gz", raw / "edge_reltype.csv.gz"
    require_files([edge_f, rel_f, raw / "num-node-list.csv.gz"], f"OGB knowledge graph in {folder}")
    n = _count(raw / "num-node-list.csv.gz", "node count")
    blocks = list(read_table_blocks(edge_f, dtype=np.int64, what="edge list", ncols=2))
    table = np.concatenate(blocks) if blocks else np.zeros((0, 2), np.int64)
    del blocks
    rel = np.concatenate(list(read_table_blocks(rel_f, dtype=np.int64, what="relation ids", ncols=1)))[:, 0]
    if rel.size != table.shape[0]:
        raise InputError(f"expected one relation id per edge of {edge_f}, {table.shape[0]}, in {rel_f} (got {rel.size})")
    bad = np.flatnonzero(((table < 0) | (table >= n)).any(axis=1))
    if bad.size:
        raise InputError(f"expected entity ids in [0, {n}) in {edge_f} (got {table[bad[0]].tolist()} on line "
                         f"{int(bad[0]) + 1})")
    if rel.size and int(rel.min()) < 0:
        raise InputError(f"expected relation ids >= 0 in {rel_f} (got {int(rel.min())})")
    R = int(rel.max()) + 1 if rel.size else 1
    if R > max(rel.size, 1):
        raise InputError(f"expected relation ids below the edge count in {rel_f} (got {R - 1}): dense ids, 0..R-1")
    order = np.argsort(rel, kind="stable")
    bounds = np.searchsorted(rel[order], np.arange(R + 1))
    edges = {r: (table[order[bounds[r]:bounds[r + 1]], 0], table[order[bounds[r]:bounds[r + 1]], 1]) for r in range(R)}
    return _Relations({"entity": n}, {r: ("entity", str(r), "entity") for r in range(R)}), edges


def _graph(rels: _Relations, edges: dict, name: str):
    """The encoder's typed graph: every relation and its reverse (``rev_<name>``, id ``r + R``)."""
    from fullgraph.data.graph import Graph
    from fullgraph.ops.node_types import REVERSE_PREFIX, NodeTypes

    R = rels.num_relations
    relations = tuple(rels.triplets[r] for r in range(R))
    relations += tuple((t, REVERSE_PREFIX + rn, h) for h, rn, t in relations)
    n = sum(rels.counts.values())
    types = NodeTypes(rels.names, tuple(rels.counts.values()), (0,) * len(rels.names), relations, (rels.names[0],))
    src = np.concatenate([edges[r][0] for r in range(R)] + [edges[r][1] for r in range(R)])
    dst = np.concatenate([edges[r][1] for r in range(R)] + [edges[r][0] for r in range(R)])
    etype = np.concatenate([np.full(edges[r][0].size, r) for r in range(R)] +
                           [np.full(edges[r][0].size, r + R) for r in range(R)])
    keep = src != dst  # a loop stays out, as preprocess leaves graphs
    masks = {k: torch.zeros(n, dtype=torch.bool) for k in ("train_mask", "val_mask", "test_mask")}
    first = rels.counts[rels.names[0]]
    if first < 3:
        raise InputError(f"expected at least 3 entities of type {rels.names[0]!r} (got {first}): the placeholder "
                         f"node splits need three")
    masks["train_mask"][: first - 2], masks["val_mask"][first - 2], masks["test_mask"][first - 1] = True, True, True
    y = torch.full((n,), -1, dtype=torch.int64)
    y[:first] = 0
    return Graph.from_edges(torch.from_numpy(src[keep]), torch.from_numpy(dst[keep]), n,
                            edge_type=torch.from_numpy(etype[keep]), num_relations=2 * R, x=torch.ones(n, 1), y=y,
                            num_classes=2, name=name, node_types=types, **masks)


def _ranked(d: dict, path: Path, head, rel, tail, ends) -> tuple:
    """A held-out file's positives against their own ``tail_neg`` and then ``head_neg`` rows: each positive
    listed twice, once per end corrupted, so that ranking a positive among its K negatives gives OGB's
    MRR (the mean over head-batch and tail-batch). ``(positives, negatives, the positives' relations, the
    negatives' relations, K)``."""
    sides = []
    for key, lo, hi in (("tail_neg", 3, 4), ("head_neg", 1, 2)):
        neg = _array(d, key, path, 2)
        if neg.shape[0] != head.size:
            raise InputError(f"expected one row of negatives per triple, {head.size}, in {path}[{key!r}] (got "
                             f"{neg.shape[0]})")
        neg = neg + ends[rel, lo][:, None]
        if ((neg < ends[rel, lo][:, None]) | (neg >= ends[rel, hi][:, None])).any():
            raise InputError(f"expected {path}[{key!r}] ids within each relation's {key[:4]} type")
        k = neg.shape[1]
        kept = head if key == "tail_neg" else tail
        pairs = [np.repeat(kept, k), neg.reshape(-1)]
        sides.append((k, np.stack(pairs if key == "tail_neg" else pairs[::-1], 1)))
    if sides[0][0] != sides[1][0]:
        raise InputError(f"expected as many head_neg as tail_neg per triple in {path} (got {sides[1][0]} and "
                         f"{sides[0][0]})")
    k, pos = sides[0][0], np.stack([head, tail], 1)
    return (np.concatenate([pos, pos]), np.concatenate([sides[0][1], sides[1][1]]), np.concatenate([rel, rel]),
            np.repeat(np.concatenate([rel, rel]), k), k)


def _split(folder: Path, scheme: str, rels: _Relations, name: str, relation_names: tuple) -> LinkSplit:
    """The split files as a typed ``LinkSplit``: global ids, each triple's relation, its given negatives (``_ranked``)."""
    from fullgraph.data.formats.ogb_link import read_split_file

    paths = {s: folder / "split" / scheme / f"{s}.pt" for s in SPLIT_FILES}
    require_files(paths.values(), f"OGB knowledge-graph split of {folder}")
    R, tables, rel_of, per = rels.num_relations, {}, {}, {}
    for s, path in paths.items():
        d = read_split_file(path)
        head, rel, tail = (_array(d, k, path, 1) for k in KG_KEYS)
        if not head.size == rel.size == tail.size:
            raise InputError(f"expected as many heads, relations and tails in {path} (got {head.size}, {rel.size} "
                             f"and {tail.size})")
        if rel.size and (int(rel.min()) < 0 or int(rel.max()) >= R):
            raise InputError(f"expected relation ids in [0, {R}) in {path}['relation'] (got {int(rel.min())}.."
                             f"{int(rel.max())})")
        ends = np.array([rels.ends(r) for r in range(R)], dtype=np.int64).reshape(-1, 5)
        for key, ids, lo, hi in (("head", head, 1, 2), ("tail", tail, 3, 4)):
            types = _types_of(d, f"{key}_type", path, ids.size)
            if types is not None:
                want = [rels.triplets[int(r)][0 if key == "head" else 2] for r in rel[:1000]]
                if types[:1000] != want:
                    raise InputError(f"expected {path}[{key + '_type'!r}] to name each relation's {key} type (got "
                                     f"{next(a for a, b in zip(types, want) if a != b)!r} where the relation says "
                                     f"{next(b for a, b in zip(types, want) if a != b)!r})")
            ids = ids + ends[rel, lo]  # biokg's ids are local to their types (wikikg2's one type starts at 0)
            bad = np.flatnonzero((ids < ends[rel, lo]) | (ids >= ends[rel, hi]))
            if bad.size:
                raise InputError(f"expected {path}[{key!r}] ids within each relation's {key} type (got "
                                 f"{int(ids[bad[0]] - ends[rel[bad[0]], lo])} at row {int(bad[0]) + 1})")
            if key == "head":
                head = ids
            else:
                tail = ids
        table = {"train": "train", "valid": "val", "test": "test"}[s]
        if s == "train":
            tables[table], rel_of[table] = np.stack([head, tail], 1), rel
            continue
        tables[table], tables[f"{table}_neg"], rel_of[table], rel_of[f"{table}_neg"], per[table] = _ranked(
            d, path, head, rel, tail, ends)
    if per["val"] != per["test"]:
        raise InputError(f"expected as many negatives per triple in {paths['valid']} as in {paths['test']} (got "
                         f"{per['val']} and {per['test']})")
    targets = sorted(set(np.concatenate([rel_of[t] for t in ("train", "val", "test")]).tolist()))
    n = sum(rels.counts.values())
    fields = ("train", "val", "val_neg", "test", "test_neg")
    return LinkSplit(n, *(torch.from_numpy(np.ascontiguousarray(tables[f])) for f in fields), per_positive=per["val"],
                     name=f"{name} {scheme} split (OGB)", relations={f: torch.from_numpy(rel_of[f]) for f in fields},
                     relation_names=relation_names, ends=torch.tensor([rels.ends(r) for r in targets]))


def load_ogb_kg(path: str | Path, *, name: str | None = None):
    """The knowledge graph unpacked in ``path``: ``(encoder graph, typed LinkSplit)`` (module doc)."""
    from fullgraph.data.typed.link_split import relation_triplets

    folder = Path(path)
    name = name or folder.name or folder.resolve().name
    scheme = _split_name(folder, None)
    rels, edges = _biokg(folder) if (folder / "raw" / "triplet-type-list.csv.gz").is_file() else _wikikg(folder)
    graph = _graph(rels, edges, name)
    return graph, _split(folder, scheme, rels, name, relation_triplets(graph.node_types))
