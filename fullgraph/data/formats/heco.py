"""HeCo's ACM and DBLP folders (Wang et al. 2021, ``liun-online/HeCo``): two heterogeneous graphs.

Each folder holds one edge file per relation, ``p?.txt``: whitespace-separated ``(paper, other)`` pairs
of 0-based ids, each column in its own type's id space; a feature file per featured type
(``p_feat.npz``, ``a_feat.npz``: ``scipy.sparse.save_npz``; DBLP's ``t_feat.npz`` is a plain ``.npy``
array despite its name, so a feature file is read by its magic bytes, not its suffix); ``labels.npy``,
one class per node of the labelled type; and ``train_K.npy``/``val_K.npy``/``test_K.npy``, ids of the
labelled type, for K = 20, 40, 60 training nodes per class (validation and test: 1,000 nodes each).

Which graph a folder holds is read off its edge files (``ps.txt``: ACM; ``pc.txt``/``pt.txt``: DBLP),
and so are its types (:data:`SCHEMAS`), in id order, the labelled type first:

* ACM: paper (labelled, ``p_feat.npz``), author (``a_feat.npz``), subject (no features); relations
  ``paper -written_by-> author`` (``pa.txt``), ``paper -has_subject-> subject`` (``ps.txt``).
* DBLP: author (labelled, ``a_feat.npz``), paper (``p_feat.npz``), term (``t_feat.npz``), conference
  (no features); ``paper -written_by-> author`` (``pa.txt``), ``paper -published_in-> conference``
  (``pc.txt``), ``paper -has_term-> term`` (``pt.txt``).

A relation's source is its file's first column (always a paper), so a relation reads as the file does.
A type's node count is its feature file's rows; a type without features (subject, conference) has no
file that counts it, so its count is the largest id its edge file names + 1 (ACM: 60 subjects, DBLP:
20 conferences); a subject or conference no paper names would be dropped, which these files do not
have. The files list each pair one way only; ``reverse=True`` adds ``rev_<name>`` from the other end
(``data.typed``), which is what the standard preprocessing needs to leave the graph as it is.

Everything is read without pickle. Every damaged file is one ``InputError`` naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fullgraph.data.formats._common import read_table, require_files
from fullgraph.data.formats.typed_folder import check_ids, read_features, read_labels, read_split_ids
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

__all__ = ["load_heco", "read_heco_splits", "heco_schema", "heco_files", "heco_labels_per_class", "is_heco_folder",
           "SCHEMAS", "HECO_SPLITS", "HECO_URL", "HECO_SHA256"]

HECO_SPLITS = (20, 40, 60)
"""The published splits' training nodes per class; ``--split k`` picks ``HECO_SPLITS[k]``."""
HECO_URL = "https://raw.githubusercontent.com/liun-online/HeCo/20e8ca2042838877b2c815279920218b6bbea1db/data"
"""Upstream ``data/`` at a pinned commit (the offline copies' source): ``HECO_URL/acm/pa.txt``."""


@dataclass(frozen=True)
class Schema:
    """One HeCo graph: its node types in id order, the labelled one, feature and edge files."""

    name: str
    types: tuple[str, ...]
    labelled: str
    features: dict  # {type: file}; a type left out has no features
    edges: dict  # {file: (source type, relation, destination type)}


SCHEMAS = {
    "acm": Schema("acm", ("paper", "author", "subject"), "paper",
                  {"paper": "p_feat.npz", "author": "a_feat.npz"},
                  {"pa.txt": ("paper", "written_by", "author"), "ps.txt": ("paper", "has_subject", "subject")}),
    "dblp": Schema("dblp", ("author", "paper", "term", "conference"), "author",
                   {"author": "a_feat.npz", "paper": "p_feat.npz", "term": "t_feat.npz"},
                   {"pa.txt": ("paper", "written_by", "author"), "pc.txt": ("paper", "published_in", "conference"),
                    "pt.txt": ("paper", "has_term", "term")}),
}

_MARKS = ("pa.txt", "ps.txt", "pc.txt", "pt.txt")

# sha256 of the upstream files (shared/data/README.md), keyed as HECO_URL names them
HECO_SHA256 = {
    "acm/a_feat.npz": "e2f2ac8d357310149fc7badbf32ea0b171dec25aad6c37ec45de592666c65555",
    "acm/labels.npy": "019284b3e6a58fc8ebd432fb99aaaf183ad41dbf56b8ca7af0b56dca9dd844b5",
    "acm/p_feat.npz": "9e1019dfceaaabb19ee5b5f09de3147ffbaa818b43c3fc3f92bdfaf4ed5f02f4",
    "acm/pa.txt": "e67385fc13c3b3b624d81de7eb6e4245d9aeafa063c5466c6fab0f151bcb84d6",
    "acm/ps.txt": "3da7615ef5567c5f7f1ab9ec770c4b4b8b6a54790baa1cda3d4499329dfc22d5",
    "acm/test_20.npy": "eb90e38c882009c6439d749d160d39ed64f8813e9f672c02be54993914934afa",
    "acm/test_40.npy": "f73d7e23459dd654a7567ee8bf123849f400096f8fac558dc37033d3fdc11aa6",
    "acm/test_60.npy": "5181ccdeacc54b88ed53681ba9f2c789cc6d67a499f40a68ac6827a96932b976",
    "acm/train_20.npy": "6bf4c1cef638f3ffe1826091b9be7fbff23a4935dfbde03c24b492d264d67684",
    "acm/train_40.npy": "98239282e69e9775a9b13bc54598cc780eca31dcaeb81963efbbd4c6c3e51435",
    "acm/train_60.npy": "5b86f56415b84d1faa8c8f864cd37272589ec4ffff1b0ca347d4c39ee38dcc02",
    "acm/val_20.npy": "4280dccb661a50196502a39973a462919399fcfcd97b1d43581dfa9ca02d1b5d",
    "acm/val_40.npy": "19fb1e72b76bc24da95423d1a83583a42fe5b62d69b2b197312f630ff5096202",
    "acm/val_60.npy": "e234b6c1e19445ed6cc3694a273b943bbded8e847a9d0246f18d59f76fb8cd5d",
    "dblp/a_feat.npz": "997876bf8d90d29fdb90bf4801a9909893a9ee5646a85aeca079ce167595ec41",
    "dblp/labels.npy": "817efdc3ebb9e96067b8770dad5894b06ecabde2ac95d4b17443985f0439fda7",
    "dblp/p_feat.npz": "99c3d1836c44cda016f790d1cdbcc76fed729e48b9e2a9332eac145960716d9f",
    "dblp/pa.txt": "94cf38a92733d21664f55907305773bb6fb90dd9d1579392517596488f061382",
    "dblp/pc.txt": "316182e11f19fddfc3a01ebd6541134a7c3931ee62262e638be607bb3f9768e4",
    "dblp/pt.txt": "78f3d6f9a528ed112a2d29bd2a672cdf13a03779a87ce89856e6a622eda280b8",
    "dblp/t_feat.npz": "462ea84b5eebfd4883910d0d15afff53e960ae8a80d7d62591f86a8d61fb5467",
    "dblp/test_20.npy": "a7fc6b67e477df8301915065b116fb7742d99f28323a2bf8bcb57663a2d5c490",
    "dblp/test_40.npy": "9af7116d1d11e656e4fc64dc11601353a3f37cad8fb9ffe8d71cf16d7e2a7ca6",
    "dblp/test_60.npy": "52122be025ae02256f82376bc62d1ba74083a4473a211e89a1389d67ca6e68bb",
    "dblp/train_20.npy": "85f0e91265931c8b1433ed7bd04e7e8f4c8c4246784d4443c147d6f24cccc709",
    "dblp/train_40.npy": "82cead2b36410b52729e2034c0e75de55779e718e4a35f7cc0a31b25526d8c2b",
    "dblp/train_60.npy": "47086d378beda443b1a2aa1bb2d681e5a6d2b3e819a3e9850e365ea1f8f9b819",
    "dblp/val_20.npy": "6c06b017a4c45c7cd9d01c67fb409336ddcd5c076edb9c90792cc2d027565d38",
    "dblp/val_40.npy": "b4c0b94ed81eeb28fe9bf6dd4a057de9093aa512caf4197165a2634568e7b2d5",
    "dblp/val_60.npy": "7ba309a9daec8bd5d92e217cecc6a22d8547b7b0193a8a30855fffd41636cec6",
}


def is_heco_folder(folder: str | Path) -> bool:
    """Whether ``folder`` holds a HeCo edge file (what ``data.detect`` recognises it by; the loader
    then names any other file that is missing)."""
    return any((Path(folder) / m).is_file() for m in _MARKS)


def heco_schema(folder: str | Path) -> Schema:
    """The graph ``folder`` holds, told by its edge files: ``ps.txt`` is ACM's, ``pc.txt``/``pt.txt`` DBLP's."""
    folder = Path(folder)
    acm = (folder / "ps.txt").is_file()
    dblp = [f for f in ("pc.txt", "pt.txt") if (folder / f).is_file()]
    if acm and dblp:
        raise InputError(f"expected the edge files of one HeCo graph in {folder}, ps.txt (ACM) or pc.txt and pt.txt "
                         f"(DBLP) (got ps.txt and {' and '.join(dblp)})")
    if not acm and not dblp:
        raise InputError(f"expected ps.txt (HeCo ACM) or pc.txt and pt.txt (HeCo DBLP) in {folder} (got neither)")
    return SCHEMAS["acm" if acm else "dblp"]


def heco_files(schema: Schema, splits=HECO_SPLITS) -> list[str]:
    """Every file a graph's loader reads, for the splits with ``splits`` training nodes per class."""
    return [*schema.features.values(), *schema.edges, "labels.npy",
            *(f"{s}_{k}.npy" for k in splits for s in ("train", "val", "test"))]


def heco_labels_per_class(split: int, where) -> int:
    """``--split k``'s training nodes per class (``HECO_SPLITS[k]``): the one split option every format shares."""
    if not 0 <= split < len(HECO_SPLITS):
        raise InputError(f"expected --split 0..{len(HECO_SPLITS) - 1} for the HeCo graph {where} (the splits of "
                         f"{', '.join(map(str, HECO_SPLITS))} training nodes per class) (got {split})")
    return HECO_SPLITS[split]


# ------------------------------------------------------------------------------------ files
def _edges(path: Path) -> np.ndarray:
    return read_table(path, dtype=np.int64, what="HeCo edge file", ncols=2, header=False)


def _counts(folder: Path, schema: Schema, features: dict, edges: dict) -> dict:
    """Nodes per type: its feature rows, or, without features, the largest id its edge files name + 1."""
    counts = {}
    for t in schema.types:
        if t in features:
            counts[t] = int(features[t].shape[0])
            continue
        cols = [(f, 0 if rel[0] == t else 1) for f, rel in schema.edges.items() if t in (rel[0], rel[2])]
        top = max((int(edges[f][:, c].max()) for f, c in cols if edges[f].size), default=-1)
        if top < 0:
            raise InputError(f"expected at least one {t} id in {', '.join(str(folder / f) for f, _ in cols)} to "
                             f"count the {t}s, which have no feature file (got no pairs)")
        counts[t] = top + 1
    return counts


def _split_ids(folder: Path, k: int, count: int, t: str) -> dict:
    """The ``train_K``/``val_K``/``test_K`` ids, each checked against the labelled type's ``count``."""
    names = {s: folder / f"{s}_{k}.npy" for s in ("train", "val", "test")}
    if not all(p.is_file() for p in names.values()):
        have = sorted(int(p.stem[6:]) for p in folder.glob("train_*.npy") if p.stem[6:].isdigit())
        raise InputError(f"expected the split files {', '.join(p.name for p in names.values())} in {folder} for "
                         f"{k} training nodes per class (got splits for {', '.join(map(str, have)) or 'none'})")
    return read_split_ids(names, count, t)


def _read(folder: Path, k: int) -> tuple:
    """The schema and every piece of the graph, each checked against the files that count its type."""
    schema = heco_schema(folder)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"expected labels_per_class as a positive integer, one of the folder's K (got {k!r})")
    require_files([folder / f for f in heco_files(schema, ())], f"HeCo {schema.name.upper()}")
    features = {t: read_features(folder / f) for t, f in schema.features.items()}
    edges = {f: _edges(folder / f) for f in schema.edges}
    counts = _counts(folder, schema, features, edges)
    rows = {t: f"the rows of {folder / f}" for t, f in schema.features.items()}
    for f, (s, _, d) in schema.edges.items():
        for col, t in ((0, s), (1, d)):
            source = rows.get(t, f"the largest {t} id in the edge files + 1")
            check_ids(edges[f][:, col], counts[t], t, f"column {col + 1} of {folder / f}", source)
    lt = schema.labelled
    y = read_labels(folder / "labels.npy", counts[lt], lt, rows[lt])
    return schema, counts, features, edges, y, _split_ids(folder, int(k), counts[lt], lt)


def load_heco(folder: str | Path, *, labels_per_class: int = 20, reverse: bool = True,
              name: str | None = None) -> Graph:
    """The HeCo ACM or DBLP graph in ``folder`` as one typed graph (module doc), with the published split
    of ``labels_per_class`` training nodes per class (20, 40 or 60: ``train_K.npy``, ...).

    ``reverse``: add each relation's reverse, ``rev_<name>`` (the files list each pair one way), which
    leaves the graph symmetric, as ``datasets.preprocess`` (which the generic loaders apply) keeps it.
    ``reverse=False``: the graph as the files are, directed, for a caller that adds reverses its own
    way; ``preprocess`` refuses it, since ``symmetrize`` cannot name the relations it would add to
    the node types.
    """
    from fullgraph.data.typed import typed_graph

    folder = Path(folder)
    schema, counts, features, edges, y, splits = _read(folder, labels_per_class)
    pairs = {schema.edges[f]: (e[:, 0], e[:, 1]) for f, e in edges.items()}
    return typed_graph(counts, features, pairs, (schema.labelled, y), splits, name=name or schema.name,
                       reverse=reverse)


def read_heco_splits(folder: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every published split (``HECO_SPLITS`` order) as ``(train, val, test)`` bool ``[S, N]`` over the
    graph's global ids: what ``fullgraph convert`` keeps, so that ``--split k`` means the same there.
    Read without building the graph: ids are contiguous per type, in ``Schema.types`` order."""
    folder = Path(folder)
    schema, counts, *_ = _read(folder, HECO_SPLITS[0])
    lt = schema.labelled
    lo = sum(counts[t] for t in schema.types[: schema.types.index(lt)])
    masks = np.zeros((3, len(HECO_SPLITS), sum(counts.values())), dtype=bool)
    for j, k in enumerate(HECO_SPLITS):
        for i, ids in enumerate(_split_ids(folder, k, counts[lt], lt).values()):
            masks[i, j, ids + lo] = True
    return masks[0], masks[1], masks[2]
