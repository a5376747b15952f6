"""``--dataset PATH``: recognise a dataset's format from the files it holds, whatever its name.

A user's copy of ogbn-proteins may live in ``/scratch/prot``, a GraphSAINT download in
``~/Downloads/flickr (1)``: the folder name says nothing, so the format is read off the files. The
rules, tried in this order on a folder (the first that matches wins):

=============  ==================================================================================
native         ``meta.json`` whose ``format`` is ``fullgraph-native`` (:mod:`.formats.native`)
ogb_kg         a ``split/*/train.pt`` beside ``raw/triplet-type-list.csv.gz`` (ogbl-biokg) or
               ``raw/edge_reltype.csv.gz`` (ogbl-wikikg2): OGB's knowledge-graph layouts
               (:mod:`.formats.ogb_kg`). Before ogb_hetero and ogb_link, whose rules they would also
               match; refused by :func:`load_path` as a link layout is, read by ``--task link``
ogb_hetero     ``raw/num-node-dict.csv.gz`` or ``raw/triplet-type-list.csv.gz`` (ogbn-mag's heterogeneous
               layout, read as a typed graph: :mod:`.formats.ogb_hetero`; its loader names any other
               file that is missing). Before ogb, whose rule a folder of both layouts would also match
ogb_link       ``raw/edge.csv.gz`` with a ``split/*/train.pt`` (OGB's link-prediction layout: ogbl-collab,
               -ddi, -ppa, -citation2; :mod:`.formats.ogb_link`). Before ogb, whose rule its edge file
               would also match. A link dataset has no node labels: :func:`load_path` refuses it, and
               ``--task link`` reads it with :func:`.formats.ogb_link.load_ogb_link`
ogb            ``raw/data.npz`` (ogbn-papers100M's binary layout), or ``raw/edge.csv.gz`` with
               ``raw/node-feat.csv.gz`` (arxiv, products) or ``raw/edge-feat.csv.gz`` (proteins)
               (:mod:`.formats.ogb`)
graphsaint     ``adj_full.npz``, or ``class_map.json`` with ``role.json`` (:mod:`.formats.graphsaint`)
planetoid      ``ind.NAME.graph`` (with the other ``ind.NAME.*`` files; :mod:`.formats.planetoid`)
typed          an edge file named ``SRC__REL__DST.txt`` (or ``.csv``, ``.tsv``, ``.npy``): a typed folder, one
               edge file per relation and a feature file per node type (:mod:`.formats.typed_folder`)
heco           an edge file of HeCo's ACM or DBLP, ``pa.txt``, ``ps.txt``, ``pc.txt`` or ``pt.txt``
               (:mod:`.formats.heco`; its loader names any other file that is missing). Before the
               edge list: its ``labels.npy`` would mark one
edgelist       ``edges.*``, ``features.*`` or ``labels.*`` with an extension of
               :data:`.formats.edgelist.FOLDER_FILES` (``edges.txt``/``.csv``/``.tsv``/``.npy``,
               ``features.npy``/``.npz``/text, ...): the table the folder loader
               :func:`.formats.edgelist_folder.load_edgelist_folder` reads, so that what it reads is found
               here, and any one of the three marks the folder (the loader names those missing)
npz            exactly one ``.npz`` file in the folder, read as a file (below)
=============  ==================================================================================

A ``.npz`` file is told apart by its keys: ``node_features``/``node_labels``/``edges`` is the
heterophilous-graphs layout (:mod:`.formats.npz_hetero`); ``adj_matrix`` or ``adj_data`` is Shchur's
(:mod:`.formats.npz_shchur`). Anything else is one :class:`~fullgraph.errors.InputError` listing what
was looked for. Detection only lists names (and reads ``meta.json`` or an ``.npz`` directory): it is
cheap enough to run twice, once to load and once to resolve ``--feature-norm auto``.

The loaded graph is preprocessed (symmetric, deduplicated, no self loops) exactly as the named
datasets are, except a native folder whose ``meta.json`` says it already is: that one is used as
stored, memory-mapped. ``--split`` means what it means for the named datasets: the fixed split of a
heterophilous ``.npz`` (0..9) or of a native folder that holds several (``fullgraph convert`` keeps
them all: :func:`fixed_splits`), the seed of the per-class split drawn for a Shchur ``.npz``, an edge
list or a typed folder without split files, the published split of a HeCo folder (0, 1, 2: 20, 40, 60
training nodes per class) or a typed folder's numbered split files (``train_K.npy``, smallest K first),
and 0 for formats with one published split. ``--feature-norm auto`` is
``row`` for a Planetoid folder, what ``meta.json`` says for a native folder (``convert`` records it,
so a converted Cora trains like ``--dataset cora``), and ``none`` otherwise. ``--metric auto`` is
ROC-AUC for ogbn-proteins' layout and for a native folder whose ``meta.json`` names that metric
(a converted ogbn-proteins), and the task's default otherwise (:mod:`fullgraph.tasks.metrics`).
"""

from __future__ import annotations

import logging
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

__all__ = ["Detected", "detect", "looks_like_path", "load_path", "fixed_splits"]

log = logging.getLogger("fullgraph")

_WHAT_WE_LOOK_FOR = (
    "meta.json of a fullgraph native folder; raw/num-node-dict.csv.gz or raw/triplet-type-list.csv.gz (OGB "
    "heterogeneous); raw/edge.csv.gz + split/*/train.pt (OGB link prediction); raw/data.npz or raw/edge.csv.gz "
    "(OGB); adj_full.npz or class_map.json + role.json (GraphSAINT); ind.NAME.graph (Planetoid); "
    "SRC__REL__DST.txt edge files (typed folder); pa.txt, ps.txt, "
    "pc.txt or pt.txt (HeCo); edges.{edges} + features + labels (edge list); "
    "one .npz file (Shchur or heterophilous-graphs)"
)


@dataclass(frozen=True)
class Detected:
    """What a path holds: ``kind`` (a format name), the ``path`` its loader reads, a ``name``; what
    ``auto`` means for it: ``feature_norm``, and ``metric``, the one its publishers report (``None``:
    the task's default)."""

    kind: str
    path: Path
    name: str
    feature_norm: str = "none"
    metric: str | None = None
    options: dict = field(default_factory=dict)


def looks_like_path(dataset: str) -> bool:
    """Whether ``--dataset`` names a path rather than a known dataset: it is not a known name and it
    contains a path separator or names something that exists. Known names always win, so
    ``--dataset cora`` means the registry's Cora even with a ``./cora`` folder around."""
    from fullgraph.data.datasets import get_spec

    if dataset in ("synthetic", "edgelist"):
        return False
    try:
        get_spec(dataset)
        return False
    except InputError:
        pass
    seps = [os.sep] + ([os.altsep] if os.altsep else [])
    return any(s in dataset for s in seps) or dataset.startswith("~") or Path(dataset).exists()


def _npz_kind(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            keys = {n[:-4] if n.endswith(".npy") else n for n in zf.namelist()}
    except (zipfile.BadZipFile, OSError) as e:
        raise InputError(f"expected {path} to be an .npz (zip) archive (got {type(e).__name__}: {e})") from None
    if {"node_features", "node_labels", "edges"} <= keys:
        return "npz_hetero"
    if "adj_matrix" in keys or "adj_data" in keys:
        return "npz_shchur"
    raise InputError(
        f"expected a Shchur .npz (adj_matrix/node_attr/node_label or adj_data/...) or a heterophilous-graphs "
        f".npz (node_features/node_labels/edges/*_masks) at {path} (found keys {sorted(keys)[:12]})"
    )


def _name_of(path: Path) -> str:
    return path.name or path.resolve().name or "graph"


def _ogb_kind(p: Path) -> str | None:
    """OGB's layouts whose files another's rule would also match, in the order that tells them apart."""
    from fullgraph.data.formats.ogb_hetero import is_ogb_hetero_folder
    from fullgraph.data.formats.ogb_kg import is_ogb_kg_folder
    from fullgraph.data.formats.ogb_link import is_ogb_link_folder

    for kind, test in (("ogb_kg", is_ogb_kg_folder), ("ogb_hetero", is_ogb_hetero_folder),
                       ("ogb_link", is_ogb_link_folder)):
        if test(p):
            return kind
    return None


def detect(path: str | os.PathLike) -> Detected:
    """The format of the dataset at ``path`` (a folder, or an ``.npz`` file); see the module doc."""
    from fullgraph.data.formats.native_read import edge_kinds, is_native_folder, num_splits, read_native_meta

    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"expected --dataset to be a known dataset name or an existing folder or file "
                         f"(got {str(path)!r}, which does not exist)")
    if p.is_file():
        if p.suffix != ".npz":
            raise InputError(f"expected --dataset to be a dataset folder or an .npz file (got the file {p})")
        return Detected(_npz_kind(p), p, p.stem)
    if (p / "meta.json").is_file() and is_native_folder(p):
        meta = read_native_meta(p)
        norm = meta.get("feature_norm") if meta.get("feature_norm") in ("row", "none") else "none"
        metric = meta.get("metric")  # a metric node labels do not report is ignored where it is read (tasks.node)
        return Detected("native", p, meta.get("name") or _name_of(p), norm, metric,
                        {"preprocessed": bool(meta.get("preprocessed")), "num_splits": num_splits(meta),
                         "edge_data": edge_kinds(meta)})
    ogb = _ogb_kind(p)
    if ogb is not None:
        return Detected(ogb, p, _name_of(p))
    from fullgraph.data.formats.ogb_source import ogb_layout

    layout = ogb_layout(p)
    if layout is not None:
        multilabel = layout == "edge-feat"  # ogbn-proteins' layout: 112 binary tasks, scored by ROC-AUC
        return Detected("ogb", p, _name_of(p), metric="rocauc" if multilabel else None, options={"layout": layout})
    if (p / "adj_full.npz").is_file() or ((p / "class_map.json").is_file() and (p / "role.json").is_file()):
        return Detected("graphsaint", p, _name_of(p))
    prefixes = sorted(f.name[len("ind."):-len(".graph")] for f in p.glob("ind.*.graph") if f.is_file())
    if len(prefixes) > 1:
        raise InputError(f"expected one Planetoid dataset in {p} (got ind.NAME.graph for {', '.join(prefixes)}; "
                         f"point --dataset at a folder holding one)")
    if prefixes:
        return Detected("planetoid", p, prefixes[0], "row", options={"prefix": prefixes[0]})
    from fullgraph.data.formats.heco import is_heco_folder
    from fullgraph.data.formats.typed_folder import is_typed_folder

    if is_typed_folder(p):
        return Detected("typed", p, _name_of(p))
    if is_heco_folder(p):
        return Detected("heco", p, _name_of(p))
    from fullgraph.data.formats.edgelist import FOLDER_FILES

    if any((p / f"{stem}{ext}").is_file() for stem in ("edges", "features", "labels") for ext in FOLDER_FILES[stem]):
        return Detected("edgelist", p, _name_of(p))  # its loader names any of the three that is missing
    npz = sorted(f for f in p.glob("*.npz") if f.is_file())
    if len(npz) == 1:
        return Detected(_npz_kind(npz[0]), npz[0], npz[0].stem)
    if len(npz) > 1:
        raise InputError(f"expected one .npz file in {p} (got {len(npz)}: {', '.join(f.name for f in npz)}; "
                         f"pass --dataset {p}/FILE.npz)")
    if (p / "meta.json").is_file():
        read_native_meta(p)  # says what is wrong with it (not JSON, another format's meta.json)
    raise InputError(f"expected a dataset in a format fullgraph reads at {p} (found none of: "
                     f"{_WHAT_WE_LOOK_FOR.format(edges='|'.join(e[1:] for e in FOLDER_FILES['edges']))})")


def _only_split_zero(det: Detected, split: int) -> None:
    if split != 0:
        raise InputError(f"expected --split 0 for {det.path} ({det.kind} data has one fixed split) (got {split})")


def load_path(path: str | os.PathLike, *, split: int = 0, verify: bool | None = None,
              labels_optional: bool = False, numeric: bool = False) -> Graph:
    """The graph at ``path``, detected, loaded and preprocessed as named datasets are (a native one marked so: as
    stored); ``verify``: native checksums; ``labels_optional``, ``numeric``: a link task's, a regression's."""
    from fullgraph.data.datasets import preprocess

    det = detect(path)
    if det.kind == "native":
        from fullgraph.data.formats.native_read import load_native

        graph = load_native(det.path, verify=verify, split=split)
        if det.options["preprocessed"]:
            return graph
        log.info("%s: meta.json says the graph is not preprocessed; symmetrizing it", det.path)
        return preprocess(graph)
    if det.kind in ("ogb_link", "ogb_kg"):  # no node labels to train on: the link task loads it itself
        what = "knowledge-graph" if det.kind == "ogb_kg" else "link"
        raise InputError(f"{det.path} is a link-prediction dataset (OGB's {what} layout): train it with --task link")
    if det.kind == "ogb":
        from fullgraph.data.formats.ogb import load_ogb

        _only_split_zero(det, split)
        graph = load_ogb(det.path, det.name)
    elif det.kind == "ogb_hetero":
        from fullgraph.data.formats.ogb_hetero import load_ogb_hetero

        _only_split_zero(det, split)
        graph = load_ogb_hetero(det.path, det.name)
    elif det.kind == "graphsaint":
        from fullgraph.data.formats.graphsaint import load_graphsaint

        _only_split_zero(det, split)
        graph = load_graphsaint(det.path, det.name)
    elif det.kind == "planetoid":
        from fullgraph.data.formats.planetoid import load_planetoid

        _only_split_zero(det, split)
        graph = load_planetoid(det.path, det.options["prefix"])
    elif det.kind == "edgelist":
        from fullgraph.data.formats.edgelist_folder import load_edgelist_folder

        graph = load_edgelist_folder(det.path, seed=split, labels_optional=labels_optional, numeric=numeric)
    elif det.kind == "typed":
        from fullgraph.data.formats.typed_folder import load_typed_folder

        graph = load_typed_folder(det.path, split=split)
    elif det.kind == "heco":
        from fullgraph.data.formats.heco import heco_labels_per_class, load_heco

        graph = load_heco(det.path, labels_per_class=heco_labels_per_class(split, det.path))
    elif det.kind == "npz_hetero":
        from fullgraph.data.formats.npz_hetero import load_npz_hetero

        graph = load_npz_hetero(det.path, det.name, split=split)
    else:
        from fullgraph.data.formats.npz_shchur import load_npz_shchur

        graph = load_npz_shchur(det.path, det.name, seed=split)
    graph.name = det.name
    return preprocess(graph)


def fixed_splits(dataset: str, root: str | None = None):
    """Every fixed split of the dataset ``--dataset dataset`` names, as ``(train, val, test)`` bool
    arrays ``[S, N]``, when it has more than one (a heterophilous ``.npz`` or a HeCo folder, by name or
    path, or a native folder holding several); else ``None``. What ``fullgraph convert`` stores beside the graph,
    so that the converted folder answers ``--split k`` as its source does. Loading never reorders
    nodes, so the file's masks are the loaded graph's. Call it after loading the graph: a named
    dataset's file is then present (downloaded, checked)."""
    if dataset in ("synthetic", "edgelist"):
        return None
    if looks_like_path(dataset):
        det = detect(dataset)
        kind, path = det.kind, det.path
    else:
        from fullgraph.data.datasets import get_spec, resolve_root

        spec = get_spec(dataset)
        kind, path = spec.format, resolve_root(root) / spec.path
    if kind == "npz_hetero":
        from fullgraph.data.formats.npz_hetero import read_hetero_splits

        splits = read_hetero_splits(path)
    elif kind == "heco":
        from fullgraph.data.formats.heco import read_heco_splits

        splits = read_heco_splits(path)
    elif kind == "typed":
        from fullgraph.data.formats.typed_folder import read_typed_splits

        splits = read_typed_splits(path)
        if splits is None:
            return None
    elif kind == "native":
        from fullgraph.data.formats.native_read import read_native_splits

        splits = read_native_splits(path, verify=False)  # loaded, and so checked, just before
    else:
        return None
    return splits if len(splits[0]) > 1 else None
