"""OGB's heterogeneous node-property layout (ogbn-mag), read as one typed graph.

An unzipped ``http://snap.stanford.edu/ogb/data/nodeproppred/mag.zip`` holds (gzip text, comma-separated,
headerless unless said; ``ogb/io/read_graph_raw.py``'s ``read_csv_heterograph_raw``):

* ``raw/num-node-dict.csv.gz``: a header row of node type names and one row of their counts;
* ``raw/triplet-type-list.csv.gz``: one ``source type,relation,destination type`` per row;
* ``raw/relations/<src>___<rel>___<dst>/``: ``edge.csv.gz`` (``src,dst`` per row, each in its own type's
  ids), ``num-edge-list.csv.gz`` (the edge count) and ``edge_reltype.csv.gz`` (one relation id per edge,
  the same on every row): the three must agree, or the folder is damaged;
* ``raw/node-feat/<type>/node-feat.csv.gz``: a dense feature row per node; a type without the folder has
  no features (ogbn-mag: only papers have them, 128 each; ``node_year.csv.gz`` beside them is not one);
* ``raw/node-label/<type>/node-label.csv.gz``: one class id per node of that type (``nan``: none);
* ``split/<scheme>/<type>/{train,valid,test}.csv.gz``: ids of the labelled type (ogbn-mag: ``time``).

Types are numbered in sorted order, and relations sorted, as OGB's own reader lists them (ogbn-mag:
author, field_of_study, institution, paper), so a type's local ids are OGB's and its global ids are
contiguous (``ops.node_types``). Everything ends in :func:`~fullgraph.data.typed.typed_graph`, which adds
the reverse relations by default (``rev_<name>``; paper-cites-paper, within one type, is made symmetric
in place). The big files are read in blocks into arrays of their final size, whose sizes the small
files give (``num-edge-list``, ``num-node-dict``): no file is held as text whole, and no array is grown.
The blocks themselves (:func:`relation_blocks`, :func:`feature_blocks`) are what ``fullgraph convert``
streams instead, in bounded memory (:mod:`.ogb_hetero_convert`).

Each damaged piece (an id past its type's count, a relation naming an unknown type, labels on a type
without a split, feature rows other than the type's count, edge files that disagree, a missing file)
is one :class:`~fullgraph.errors.InputError` naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from fullgraph.data.formats._common import _read_text, parse_table, read_table, read_table_blocks, require_files
from fullgraph.data.formats.ogb_source import SPLIT_FILES, _columns, _labels_block, _split_name
from fullgraph.data.formats.ogb_layouts import _count
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

__all__ = ["load_ogb_hetero", "open_ogb_hetero", "is_ogb_hetero_folder", "OgbHetero", "COUNT_FILE", "TRIPLET_FILE",
           "SEP", "relation_blocks", "feature_blocks", "feature_width"]

COUNT_FILE, TRIPLET_FILE = "num-node-dict.csv.gz", "triplet-type-list.csv.gz"
SEP = "___"
"""What joins a relation's three names into its folder's name (``author___writes___paper``)."""


def is_ogb_hetero_folder(folder: str | Path) -> bool:
    """Whether ``folder`` holds either file that only this layout has (``data.detect``'s mark; the loader
    then names any other file that is missing)."""
    raw = Path(folder) / "raw"
    return (raw / COUNT_FILE).is_file() or (raw / TRIPLET_FILE).is_file()


@dataclass(frozen=True)
class OgbHetero:
    """A folder's layout, opened and checked (files present, types and relations known), nothing big read."""

    folder: Path
    counts: dict  # {type: nodes}, sorted by type
    relations: tuple  # ((src, rel, dst), ...), sorted
    featured: tuple  # the types with raw/node-feat/<type>/
    labelled: str
    scheme: str

    @property
    def raw(self) -> Path:
        return self.folder / "raw"

    def relation_dir(self, triplet: tuple) -> Path:
        return self.raw / "relations" / SEP.join(triplet)

    def split_file(self, split: str) -> Path:
        return self.folder / "split" / self.scheme / self.labelled / f"{split}.csv.gz"


def _lines(path: Path) -> list[tuple[int, list[str]]]:
    """``(line number, values)`` of the non-blank lines of a small table of names."""
    return [(i, [v.strip() for v in line.split(",")]) for i, line in enumerate(_read_text(path).splitlines(), 1)
            if line.strip()]


def _read_counts(raw: Path) -> dict:
    """``{type: count}`` of ``num-node-dict.csv.gz`` (its header, then one graph's counts), sorted by type."""
    path = raw / COUNT_FILE
    rows = _lines(path)
    if len(rows) != 2:
        raise InputError(f"expected a header of node type names and one row of counts in {path} (got {len(rows)} "
                         f"non-blank lines: fullgraph reads node-property datasets, one graph each)")
    (_, names), (line, values) = rows
    if not all(names) or len(set(names)) != len(names):
        raise InputError(f"expected distinct, non-empty node type names in the header of {path} (got {names})")
    counts = parse_table(",".join(values), path, dtype=np.int64, what="node counts", ncols=len(names),
                         header=False, first_line=line)[0]
    for name, c in zip(names, counts):
        if c < 1:
            raise InputError(f"expected at least one node of each type in {path} (got {int(c)} for {name!r})")
    return {name: int(c) for name, c in sorted(zip(names, counts))}


def _read_triplets(raw: Path, counts: dict) -> tuple:
    """The relations of ``triplet-type-list.csv.gz``, each joining two types that ``num-node-dict`` counts."""
    path, seen = raw / TRIPLET_FILE, set()
    for line, row in _lines(path):
        if len(row) != 3 or not all(row):
            raise InputError(f"expected 'source type,relation,destination type' on each line of {path} (got "
                             f"{','.join(row)!r} on line {line})")
        for end in (row[0], row[2]):
            if end not in counts:
                raise InputError(f"expected relation {SEP.join(row)} in {path} to join node types of "
                                 f"{raw / COUNT_FILE} ({', '.join(counts)}) (got an unknown type {end!r})")
        if tuple(row) in seen:
            raise InputError(f"expected each relation once in {path} (got {SEP.join(row)} twice)")
        seen.add(tuple(row))
    if not seen:
        raise InputError(f"expected at least one relation in {path} (got none)")
    return tuple(sorted(seen))


def _typed_dirs(base: Path, counts: dict, what: str) -> list[str]:
    """The type folders under ``base`` (``node-feat``, ``node-label``, a split scheme), each a known type."""
    names = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    for name in names:
        if name not in counts:
            raise InputError(f"expected the {what} folders under {base} to be node types ({', '.join(counts)}) "
                             f"(got {name!r})")
    return names


def open_ogb_hetero(folder: str | Path, *, split_name: str | None = None) -> OgbHetero:
    """The layout in ``folder`` with every file it names present; the labelled type and its split found."""
    folder = Path(folder)
    raw = folder / "raw"
    require_files([raw / COUNT_FILE, raw / TRIPLET_FILE], f"OGB heterogeneous dataset in {folder}")
    counts = _read_counts(raw)
    relations = _read_triplets(raw, counts)
    featured = _typed_dirs(raw / "node-feat", counts, "node-feat")
    labelled = _typed_dirs(raw / "node-label", counts, "node-label")
    if len(labelled) != 1:
        raise InputError(f"expected the labels of one node type, raw/node-label/<type>/node-label.csv.gz, in "
                         f"{folder} (got {', '.join(labelled) or 'none'})")
    scheme = _split_name(folder, split_name)
    split_types = _typed_dirs(folder / "split" / scheme, counts, f"{scheme} split")
    label_f = raw / "node-label" / labelled[0] / "node-label.csv.gz"
    if split_types != labelled:
        raise InputError(f"expected a split of the labelled type {labelled[0]!r} only, under {folder / 'split' / scheme} "
                         f"(got labels in {label_f} and splits for {', '.join(split_types) or 'no type'})")
    layout = OgbHetero(folder, counts, relations, tuple(featured), labelled[0], scheme)
    files = [label_f, *(raw / "node-feat" / t / "node-feat.csv.gz" for t in featured),
             *(layout.split_file(s) for s in SPLIT_FILES)]
    for triplet in relations:
        files += [layout.relation_dir(triplet) / f for f in ("edge.csv.gz", "num-edge-list.csv.gz",
                                                              "edge_reltype.csv.gz")]
    require_files(files, f"OGB heterogeneous dataset in {folder}")
    return layout


# ------------------------------------------------------------------------------------ the big files
def _check_ids(ids: np.ndarray, count: int, t: str, where: str, row0: int, source: Path) -> None:
    """Ids of type ``t`` within its ``count`` (``source``: the file that counts it), naming file and row."""
    bad = np.flatnonzero((ids < 0) | (ids >= count))
    if bad.size:
        raise InputError(f"expected {t} ids in [0, {count}) ({source.name}) in {where} (got {int(ids[bad[0]])} at "
                         f"row {row0 + int(bad[0]) + 1})")


def relation_blocks(layout: OgbHetero, triplet: tuple) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """A relation's ``(src, dst)`` in type-local ids, block by block as ``edge.csv.gz`` holds them, each
    block's ids checked against their types' counts before it is yielded; the edge count is checked
    against ``num-edge-list`` (and ``edge_reltype``) as the blocks pass, so that a stream that ends
    without an error held the whole relation (the bounded converter, :mod:`.ogb_hetero_convert`,
    never holds it)."""
    folder = layout.relation_dir(triplet)
    edge_f, num_f = folder / "edge.csv.gz", folder / "num-edge-list.csv.gz"
    m, at = _count(num_f, "edge count"), 0
    for block in read_table_blocks(edge_f, dtype=np.int64, what="edge list", ncols=2):
        if at + block.shape[0] > m:
            raise InputError(f"expected {m} edges ({num_f.name}) in {edge_f} (got more)")
        for col, t in ((0, triplet[0]), (1, triplet[2])):
            _check_ids(block[:, col], layout.counts[t], t, f"column {col + 1} of {edge_f}", at, layout.raw / COUNT_FILE)
        yield block[:, 0], block[:, 1]
        at += block.shape[0]
    if at != m:
        raise InputError(f"expected {m} edges ({num_f.name}) in {edge_f} (got {at})")
    _check_reltype(folder / "edge_reltype.csv.gz", m, num_f.name)


def _relation_edges(layout: OgbHetero, triplet: tuple) -> tuple[np.ndarray, np.ndarray]:
    """A relation's ``(src, dst)`` in type-local ids, read in blocks into arrays of ``num-edge-list``'s size."""
    m = _count(layout.relation_dir(triplet) / "num-edge-list.csv.gz", "edge count")
    src, dst, at = np.empty(m, np.int64), np.empty(m, np.int64), 0
    for s, d in relation_blocks(layout, triplet):
        src[at:at + s.size], dst[at:at + s.size] = s, d
        at += s.size
    return src, dst


def _check_reltype(path: Path, m: int, source: str) -> None:
    """``edge_reltype.csv.gz``: one row per edge, every row the relation's one id (read, never kept)."""
    first, rows = None, 0
    for block in read_table_blocks(path, dtype=np.int64, what="relation ids", ncols=1):
        col = block[:, 0]
        first = int(col[0]) if first is None else first
        bad = np.flatnonzero(col != first)
        if bad.size:
            raise InputError(f"expected one relation id on every row of {path}, a relation's file holding one "
                             f"(got {first} and {int(col[bad[0]])} at row {rows + int(bad[0]) + 1})")
        rows += col.size
    if rows != m:
        raise InputError(f"expected {m} rows ({source}), one per edge, in {path} (got {rows})")


def feature_blocks(layout: OgbHetero, t: str, width: int) -> Iterator[np.ndarray]:
    """Type ``t``'s dense float32 features of ``width`` columns, block by block, each checked (finite, no
    row past the type's count) before it is yielded; the row count checked after the last."""
    path, count = layout.raw / "node-feat" / t / "node-feat.csv.gz", layout.counts[t]
    at = 0
    for block in read_table_blocks(path, dtype=np.float32, what="node features", ncols=width):
        if at + block.shape[0] > count:
            raise InputError(f"expected one feature row per {t}, {count} ({COUNT_FILE}), in {path} (got more)")
        bad = np.flatnonzero(~np.isfinite(block).all(axis=1))
        if bad.size:
            raise InputError(f"expected finite features in {path} (got a NaN or infinity on row {at + int(bad[0]) + 1})")
        yield block
        at += block.shape[0]
    if at != count:
        raise InputError(f"expected one feature row per {t}, {count} ({COUNT_FILE}), in {path} (got {at})")


def feature_width(layout: OgbHetero, t: str) -> int:
    """The columns of type ``t``'s feature file (its first line's values)."""
    return _columns(layout.raw / "node-feat" / t / "node-feat.csv.gz")


def _features(layout: OgbHetero, t: str) -> np.ndarray:
    """Type ``t``'s dense float32 features, read in blocks into an array of its count's rows."""
    width = feature_width(layout, t)
    x, at = np.empty((layout.counts[t], width), np.float32), 0
    for block in feature_blocks(layout, t, width):
        x[at:at + block.shape[0]] = block
        at += block.shape[0]
    return x


def _labels(layout: OgbHetero) -> np.ndarray:
    """The labelled type's class ids (``-1``: ``nan``, no label), one per node."""
    t, count = layout.labelled, layout.counts[layout.labelled]
    path = layout.raw / "node-label" / t / "node-label.csv.gz"
    if _columns(path) != 1:
        raise InputError(f"expected one class id per {t} on each line of {path} (got {_columns(path)} values on the "
                         f"first line: a typed graph has one label per node)")
    y, at = np.empty(count, np.int64), 0
    for block in read_table_blocks(path, dtype=np.float64, what="node labels", ncols=1):
        if at + block.shape[0] > count:
            raise InputError(f"expected one label per {t}, {count} ({COUNT_FILE}), in {path} (got more)")
        y[at:at + block.shape[0]] = _labels_block(block, str(path))
        at += block.shape[0]
    if at != count:
        raise InputError(f"expected one label per {t}, {count} ({COUNT_FILE}), in {path} (got {at})")
    return y


def _splits(layout: OgbHetero, y: np.ndarray) -> dict:
    """``{train, val, test: ids}`` of the labelled type, each id within its count and labelled."""
    t, out = layout.labelled, {}
    for key, s in zip(("train", "val", "test"), SPLIT_FILES):
        path = layout.split_file(s)
        ids = read_table(path, dtype=np.int64, what="split", ncols=1, header=False).reshape(-1)
        _check_ids(ids, layout.counts[t], t, str(path), 0, layout.raw / COUNT_FILE)
        bad = np.flatnonzero(y[ids] < 0)
        if bad.size:
            raise InputError(f"expected every {t} of the {layout.scheme} split to have a label in {path} (got {t} "
                             f"{int(ids[bad[0]])} at row {int(bad[0]) + 1} unlabelled (nan) in node-label.csv.gz)")
        out[key] = ids
    return out


def load_ogb_hetero(folder: str | Path, name: str | None = None, *, split_name: str | None = None,
                    reverse: bool = True) -> Graph:
    """The OGB heterogeneous dataset unpacked in ``folder`` as one typed graph (module doc), with its split.

    ``reverse``: add each relation's reverse (``data.typed``), which leaves the graph symmetric, as
    ``datasets.preprocess`` keeps it; ``False``: the relations as the files list them."""
    from fullgraph.data.typed import typed_graph

    layout = open_ogb_hetero(folder, split_name=split_name)
    y = _labels(layout)
    splits = _splits(layout, y)
    features = {t: _features(layout, t) for t in layout.featured}
    edges = {triplet: _relation_edges(layout, triplet) for triplet in layout.relations}
    return typed_graph(layout.counts, features, edges, (layout.labelled, y), splits,
                       name=name or layout.folder.name, num_classes=max(int(y.max(initial=-1)) + 1, 1),
                       reverse=reverse)
