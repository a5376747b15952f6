"""A typed folder: a heterogeneous graph from plain files, one per relation and one per node type.

What a user with several node types writes without code (``fullgraph train --dataset FOLDER``,
``fullgraph convert --dataset FOLDER``)::

    paper__written_by__author.txt   one edge file per relation, named SRC__REL__DST (two underscores):
    paper__cites__paper.npy         pairs (source id, destination id), each in its own type's ids from 0;
                                    text (.txt, .csv, .tsv: whitespace or commas, '#' comments, an optional
                                    header line) or .npy ([E, 2] or [2, E] integers)
    paper_feat.npz                  a type's features, TYPE_feat.npy (dense) or .npz (scipy.sparse);
    author_feat.npy                 a type without a file is featureless (a learned row per node)
    labels.npy                      class ids of the labelled type (-1: no label), or TYPE_labels.npy
    train.npy  val.npy  test.npy    ids of the labelled type; or train_K.npy, val_K.npy, test_K.npy for
                                    several splits (``--split k``: the k-th K, smallest first); none: a
                                    per-class split of 20 / 30 / the rest per class, seeded by ``--split``
    num_nodes.json                  optional, {"TYPE": count}: a type's count where its features do not
                                    give it (else the largest id its edge files name + 1)

Node types are every name an edge, feature, label or count file gives; ids run type after type, the
labelled type first, the others in name order. ``labels.npy`` belongs to the one type with as many
nodes as it has labels (``TYPE_labels.npy`` names it where several do). Each relation's reverse is
added as HeCo's and PyG's readers add it (:func:`~fullgraph.data.typed.typed_graph`: ``rev_<name>``
between two types, symmetric in place within one), so the graph trains as the named typed datasets do.

HeCo's folders are this layout with other names: rename ``pa.txt`` to ``p__written_by__a.txt`` and
``ps.txt`` to ``p__has_subject__s.txt`` and ACM loads as types ``p``, ``a`` and ``s`` (its
``p_feat.npz``, ``a_feat.npz``, ``labels.npy`` and ``train_20.npy``... already follow it).

Everything is read without pickle; every damaged or inconsistent file is one ``InputError`` that names
it (and the row, for an id out of range).

``fullgraph convert`` streams the edge files (:mod:`.typed_folder_convert`: relation by relation, block
by block, never a whole file; the features are per type, held where sparse) into the native folder
that this loader's graph is written as; the rules both roads follow (the counts, the node order, the
labelled type, the splits) are the functions here, one source for each.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fullgraph.data.formats._common import _is_number_row, labels_from_onehot, load_array, read_table
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

__all__ = ["load_typed_folder", "read_typed_splits", "is_typed_folder", "typed_folder_files", "required_files",
           "read_features", "check_ids", "read_labels", "read_split_ids", "edge_what", "edge_npy", "node_counts",
           "labelled_type", "node_order", "split_ids", "split_masks", "label_column", "read_labelled_edges",
           "EDGE_SUFFIXES", "SEP"]

SEP = "__"
"""Between the source type, the relation and the destination type of an edge file's name."""
EDGE_SUFFIXES = (".txt", ".csv", ".tsv", ".npy")
FEATURE_SUFFIXES = (".npy", ".npz")


def _relation_of(path: Path) -> tuple[str, str, str] | None:
    parts = path.stem.split(SEP)
    return tuple(parts) if len(parts) == 3 and all(parts) else None


def is_typed_folder(folder: str | Path) -> bool:
    """Whether ``folder`` holds an edge file named ``SRC__REL__DST`` (what ``data.detect`` recognises)."""
    return any(p.suffix in EDGE_SUFFIXES and p.is_file() and _relation_of(p) for p in Path(folder).glob(f"*{SEP}*"))


def typed_folder_files(folder: str | Path) -> dict:
    """The folder's files by role: ``edges`` ({relation: path}), ``features`` ({type: path}), ``labels``
    (``(type or None, path)``), ``splits`` ({K or None: {split: path}}), ``counts`` (path or None)."""
    folder = Path(folder)
    edges: dict = {}
    for p in sorted(folder.glob(f"*{SEP}*")):
        if p.suffix not in EDGE_SUFFIXES or not p.is_file():
            continue
        rel = _relation_of(p)
        if rel is None:
            raise InputError(f"expected an edge file named SRC{SEP}REL{SEP}DST{p.suffix} (three non-empty parts "
                             f"between two underscores) (got {p.name})")
        if rel in edges:
            raise InputError(f"expected one edge file of relation {SEP.join(rel)} in {folder} (got {edges[rel].name} "
                             f"and {p.name})")
        edges[rel] = p
    features: dict = {}
    for p in sorted(folder.glob("*_feat.*")):
        if p.suffix in FEATURE_SUFFIXES and p.is_file():
            t = p.stem[: -len("_feat")]
            if t in features:
                raise InputError(f"expected one feature file of node type {t!r} (got {features[t].name} and {p.name})")
            features[t] = p
    labels = [(None, p) for p in [folder / "labels.npy"] if p.is_file()]
    labels += [(p.stem[: -len("_labels")], p) for p in sorted(folder.glob("*_labels.npy")) if p.is_file()]
    if len(labels) > 1:
        raise InputError(f"expected one labels file in {folder} (got {', '.join(p.name for _, p in labels)})")
    splits: dict = {}
    for p in sorted(folder.glob("*.npy")):
        head, _, k = p.stem.partition("_")
        if head in ("train", "val", "test") and (not k or k.isdigit()):
            splits.setdefault(int(k) if k else None, {})[head] = p
    counts = folder / "num_nodes.json"
    return {"edges": edges, "features": features, "labels": labels[0] if labels else None, "splits": splits,
            "counts": counts if counts.is_file() else None}


# ------------------------------------------------------------------------------------ files
def read_features(path: Path, *, mmap: bool = False):
    """A feature file, by its magic bytes: a zip is ``scipy.sparse.save_npz``'s, anything else a ``.npy``
    (``mmap``: memory-mapped, read only where its rows are asked for)."""
    try:
        with open(path, "rb") as f:
            zipped = f.read(2) == b"PK"
        x = sp.load_npz(path) if zipped else load_array(path, "features", mmap_mode="r" if mmap else None)
    except (ValueError, OSError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise InputError(f"expected {path} to be a scipy.sparse .npz or a plain .npy features array (got "
                         f"{type(e).__name__}: {e})") from None
    if x.ndim != 2 or not (sp.issparse(x) or np.issubdtype(x.dtype, np.number)):
        raise InputError(f"expected a numeric [nodes, features] matrix in {path} (got {x.dtype} of shape {x.shape})")
    return x


def check_ids(ids: np.ndarray, count: int, t: str, where: str, source: str, place=None) -> None:
    """Ids of type ``t`` within its ``count`` (``source``: what counted them), naming the file and row.
    ``place(i)``: where the ``i``-th of ``ids`` is in the file (default ``row i + 1``; a block of a
    streamed file says its own row or line)."""
    bad = np.flatnonzero((ids < 0) | (ids >= count))
    if bad.size:
        at = place(int(bad[0])) if place is not None else f"row {int(bad[0]) + 1}"
        raise InputError(f"expected {t} ids in [0, {count}) ({source}) in {where} (got {int(ids[bad[0]])} at {at})")


def read_labels(path: Path, count: int, t: str, source: str) -> np.ndarray:
    """Class ids of the ``count`` nodes of type ``t`` (one-hot rows taken as their class; -1: no label)."""
    y = load_array(path, "labels")
    if y.ndim == 2:  # one-hot rows [N, C]: their class ids, rather than a refusal
        y = labels_from_onehot(y, str(path))
    if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)):
        raise InputError(f"expected one class id per {t} in {path} (got {y.dtype} of shape {y.shape})")
    if y.shape[0] != count:
        raise InputError(f"expected one label per {t} in {path}, {count} ({source}) (got {y.shape[0]})")
    if np.issubdtype(y.dtype, np.floating):  # HeCo's ACM labels are float64 class ids
        whole = np.isfinite(y) & (y == np.round(y))
        if not whole.all():
            raise InputError(f"expected integer class ids in {path} (got {y[~whole][0]!r})")
    y = y.astype(np.int64)
    if y.size and int(y.min()) < -1:
        raise InputError(f"expected class ids >= 0 (-1: no label) in {path} (got {int(y.min())})")
    return y


def edge_what(rel: tuple) -> str:
    """What an edge file is called in its errors."""
    return f"edge file of relation {SEP.join(rel)}"


def edge_npy(path: Path, rel: tuple, *, mmap: bool = False) -> np.ndarray:
    """A ``.npy`` edge file as integer pairs ``[E, 2]`` (a ``[2, E]`` file transposed: a view; ``mmap``:
    memory-mapped, read only where its rows are asked for)."""
    e = load_array(path, edge_what(rel), mmap_mode="r" if mmap else None)
    if e.ndim == 2 and e.shape[1] != 2 and e.shape[0] == 2:
        e = e.T  # PyG's edge_index [2, E]
    if e.ndim != 2 or e.shape[1] != 2 or not np.issubdtype(e.dtype, np.integer):
        raise InputError(f"expected integer pairs [E, 2] (or [2, E]) in {path} (got {e.dtype} of shape {e.shape})")
    return e


def label_column(path: Path) -> bool:
    """Whether the text edge file ``path`` is a relation's labelled edges: a header line ``src dst label``
    (``formats.edgelist.LABEL_NAMES``, any case) whose third column is each edge's label (an edge task's:
    ``data.edge_sources``; NaN: none), never a layer's input. Any other third column is refused."""
    from fullgraph.data.formats.edgelist import LABEL_NAMES

    if path.suffix == ".npy":
        return False
    with open(path, encoding="utf8", errors="replace") as f:
        first = next((line.split("#", 1)[0] for line in f if line.split("#", 1)[0].strip()), "")
    names = first.replace(",", " ").split()
    if len(names) < 3 or any(_is_number_row(w) for w in names):
        return False
    if len(names) != 3 or names[2].lower() not in LABEL_NAMES:
        raise InputError(f"expected the header of {path} to name two ids and at most a label column, 'src dst "
                         f"label' (got {' '.join(names)}): a typed folder's edges carry no other data")
    return True


def read_labelled_edges(path: Path, rel: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``[E, 2]`` (each end in its own type's ids) and the labels ``[E]`` (float64, NaN: none) of a
    labelled edge file (:func:`label_column`)."""
    table = read_table(path, dtype=np.float64, what=edge_what(rel), ncols=3, header=True, int_columns=2)
    return table[:, :2].astype(np.int64), table[:, 2]


def _edges(path: Path, rel: tuple) -> np.ndarray:
    if label_column(path):
        return read_labelled_edges(path, rel)[0]
    if path.suffix != ".npy":
        return read_table(path, dtype=np.int64, what=edge_what(rel), ncols=2, header=None)
    return edge_npy(path, rel).astype(np.int64, copy=False)


def _given_counts(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        counts = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"expected {path} to hold JSON {{\"TYPE\": count}} (got {type(e).__name__}: {e})") from None
    if not isinstance(counts, dict) or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0
                                               for c in counts.values()):
        raise InputError(f"expected {path} to map each node type to a positive count (got {counts!r})")
    return counts


def node_counts(files: dict, rows: dict, largest) -> tuple[dict, dict]:
    """Nodes per type and what counted them: its features' ``rows``, ``num_nodes.json``, or its largest id
    + 1 (``largest(t)``: the largest ``t`` id its edge files name, -1 for none; asked of those types only,
    so that a streamed reader passes over just the edge files that count a type)."""
    given = _given_counts(files["counts"])
    names = {t for rel in files["edges"] for t in (rel[0], rel[2])} | set(rows) | set(given)
    counts, source = {}, {}
    for t in sorted(names):
        if t in rows:
            counts[t], source[t] = int(rows[t]), f"the rows of {files['features'][t].name}"
            if t in given and given[t] != counts[t]:
                raise InputError(f"expected num_nodes.json to give {t!r} its {counts[t]} feature rows (got {given[t]})")
        elif t in given:
            counts[t], source[t] = given[t], "num_nodes.json"
        else:
            counts[t] = int(largest(t)) + 1
            source[t] = f"the largest {t} id in the edge files + 1"
            if counts[t] < 1:
                raise InputError(f"expected a {t} feature file, a count in num_nodes.json or {t} ids in its edge "
                                 f"files to count the {t}s (got none)")
    return counts, source


def _largest_in(edges: dict):
    """``node_counts``' ``largest`` over edge arrays held whole."""
    def largest(t: str) -> int:
        cols = [e[:, col] for rel, e in edges.items() for pos, col in ((0, 0), (2, 1)) if rel[pos] == t and e.size]
        return max((int(c.max()) for c in cols), default=-1)
    return largest


def labelled_type(files: dict, counts: dict) -> str:
    """The labelled type: the one ``TYPE_labels.npy`` names, or the one type with as many nodes as
    ``labels.npy`` has labels."""
    t, path = files["labels"]
    if t is not None:
        if t not in counts:
            raise InputError(f"expected {path.name} to label a node type of the folder ({', '.join(sorted(counts))}) "
                             f"(got {t!r})")
        return t
    n = len(load_array(path, "labels"))
    fits = [t for t, c in counts.items() if c == n]
    if len(fits) != 1:
        raise InputError(f"expected one node type with as many nodes as {path} has labels, {n} (got "
                         f"{' and '.join(fits) if fits else 'none'}; name it TYPE_labels.npy)")
    return fits[0]


def node_order(counts: dict, labelled: str) -> dict:
    """The counts in the order ids are given: the labelled type first, the others in name order."""
    return {t: counts[t] for t in [labelled, *sorted(set(counts) - {labelled})]}


def split_ids(files: dict, split: int, count: int, t: str, y: np.ndarray) -> dict:
    """The ``split``-th set of split files (the only one where they are not numbered), or a seeded per-class split."""
    sets = files["splits"]
    if not sets:
        import torch

        from fullgraph.data.splits import per_class_split

        masks = per_class_split(torch.from_numpy(y), seed=split)
        return {s: m.nonzero().flatten().numpy() for s, m in zip(("train", "val", "test"), masks)}
    keys = sorted(sets, key=lambda k: -1 if k is None else k)
    if not 0 <= split < len(keys):
        raise InputError(f"expected --split 0..{len(keys) - 1} for the split files of the typed folder (got {split})")
    chosen = sets[keys[split]]
    missing = [s for s in ("train", "val", "test") if s not in chosen]
    if missing:
        suffix = "" if keys[split] is None else f"_{keys[split]}"
        raise InputError(f"expected {', '.join(f'{s}{suffix}.npy' for s in missing)} beside "
                         f"{', '.join(p.name for p in chosen.values())} (got none)")
    return read_split_ids(chosen, count, t)


def read_split_ids(paths: dict, count: int, t: str) -> dict:
    """The ``train``, ``val`` and ``test`` ids of ``paths`` (``.npy`` files), each checked against the
    ``count`` nodes of the labelled type ``t``."""
    out = {}
    for s in ("train", "val", "test"):
        p = paths[s]
        ids = load_array(p, f"{s} split")
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise InputError(f"expected a 1-D array of {t} ids in {p} (got {ids.dtype} of shape {ids.shape})")
        check_ids(ids, count, t, str(p), "the labelled nodes")
        out[s] = ids.astype(np.int64)
    return out


def required_files(folder: Path) -> dict:
    """:func:`typed_folder_files`, refused without an edge file or a labels file."""
    files = typed_folder_files(folder)
    if not files["edges"]:
        raise InputError(f"expected at least one edge file SRC{SEP}REL{SEP}DST.txt in {folder} (got none)")
    if files["labels"] is None:
        raise InputError(f"expected labels.npy (or TYPE_labels.npy) in the typed folder {folder} (got none)")
    return files


def load_typed_folder(folder: str | Path, *, split: int = 0, name: str | None = None, reverse: bool = True) -> Graph:
    """The typed folder at ``folder`` as one typed graph (module doc). ``split``: which numbered set of
    split files (0: the smallest K), or the seed of the per-class split where the folder has none.
    ``reverse``: add each relation's reverse (``typed_graph``)."""
    from fullgraph.data.typed import typed_graph

    folder = Path(folder)
    files = required_files(folder)
    features = {t: read_features(p) for t, p in files["features"].items()}
    edges = {rel: _edges(p, rel) for rel, p in files["edges"].items()}
    counts, source = node_counts(files, {t: f.shape[0] for t, f in features.items()}, _largest_in(edges))
    for rel, e in edges.items():
        for col, t in ((0, rel[0]), (1, rel[2])):
            check_ids(e[:, col], counts[t], t, f"column {col + 1} of {files['edges'][rel]}", source[t])
    lt = labelled_type(files, counts)
    y = read_labels(files["labels"][1], counts[lt], lt, source[lt])
    pairs = {rel: (e[:, 0], e[:, 1]) for rel, e in edges.items()}
    return typed_graph(node_order(counts, lt), features, pairs, (lt, y), split_ids(files, split, counts[lt], lt, y),
                       name=name or folder.name, reverse=reverse)


def read_typed_splits(folder: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every set of split files, in ``--split`` order, as ``(train, val, test)`` bool ``[S, N]`` over the
    graph's global ids (the labelled type's ids come first): what ``fullgraph convert`` keeps, so that
    ``--split k`` means the same there. ``None`` where the folder has no split files (the split is drawn)."""
    graph = load_typed_folder(folder)  # checks every file, and counts the nodes as loading does
    files = typed_folder_files(folder)
    if not files["splits"]:
        return None
    count = graph.node_types.counts[0]
    return split_masks(files, count, graph.node_types.labelled[0], graph.y[:count].numpy(), graph.num_nodes)


def split_masks(files: dict, count: int, t: str, y: np.ndarray, num_nodes: int):
    """Every set of split files as ``(train, val, test)`` bool ``[S, num_nodes]`` (:func:`read_typed_splits`),
    the labelled type ``t`` (``count`` nodes, labels ``y``) being the first of the graph's ids."""
    masks = np.zeros((3, len(files["splits"]), num_nodes), dtype=bool)
    for j in range(len(files["splits"])):
        for i, ids in enumerate(split_ids(files, j, count, t, y).values()):
            masks[i, j, ids] = True
    return masks[0], masks[1], masks[2]
