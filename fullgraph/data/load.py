"""``load_graph(cfg)``: the graph a run names, from whichever source it comes.

This is the one place a configuration turns into a :class:`Graph`: the built-in synthetic graph, a
folder of edge lists, a named published dataset (:mod:`fullgraph.data.datasets`), or a path to a
dataset in any format fullgraph reads, recognised from its files (:mod:`fullgraph.data.detect`),
followed by the configured feature normalization. Known names win over paths: ``--dataset cora`` is
the registry's Cora even if a folder ``./cora`` exists (write ``./cora`` for the folder). A relative
path is relative to the working directory (``--root`` is the data root of named datasets only).

It lives in ``data/`` so that every higher layer (the partitioner, the parallel layouts, the trainer)
can call it without importing each other.
"""

from __future__ import annotations

import functools

import torch

from fullgraph.data.graph import Graph
from fullgraph.data.preprocess import row_normalize_features
from fullgraph.errors import InputError

__all__ = ["load_graph", "load_link_graph", "load_edge_split", "ROW_NORMALIZED", "feature_norm_of", "published_metric"]

# Planetoid features are bag-of-words rows that Kipf & Welling's loader row-normalizes.
ROW_NORMALIZED = frozenset({"cora", "citeseer", "pubmed"})


def feature_norm_of(cfg) -> str:
    """``row`` or ``none``: the configured feature normalization with ``auto`` resolved.

    ``auto`` is ``row`` for the Planetoid graphs: by name, a Planetoid folder given as a path, or a
    native folder whose ``meta.json`` records ``row`` (as ``fullgraph convert`` does for them).
    """
    if cfg.data.feature_norm != "auto":
        return cfg.data.feature_norm
    if cfg.data.dataset in ROW_NORMALIZED:
        return "row"
    from fullgraph.data.detect import detect, looks_like_path

    return detect(cfg.data.dataset).feature_norm if looks_like_path(cfg.data.dataset) else "none"


@functools.lru_cache(maxsize=16)
def _published(dataset: str) -> str | None:
    from fullgraph.data.detect import detect, looks_like_path

    return detect(dataset).metric if looks_like_path(dataset) else None


def published_metric(cfg) -> str | None:
    """The metric the dataset's publishers report, where the dataset records one (an OGB
    proteins-layout folder, or a native folder converted from one): what ``--metric auto`` picks."""
    return _published(cfg.data.dataset)


def load_raw_graph(cfg) -> Graph:
    """The graph ``cfg.data.dataset`` names, preprocessed, before feature normalization."""
    if cfg.data.dataset == "synthetic":
        from fullgraph.data.synthetic import planted_partition

        return planted_partition(seed=0)
    if cfg.data.dataset == "edgelist":
        from fullgraph.data.datasets import preprocess
        from fullgraph.data.formats.edgelist_folder import load_edgelist_folder

        if cfg.data.root is None:
            raise InputError("expected --root FOLDER with --dataset edgelist (got no --root)")
        link = _scores_pairs(cfg)  # a link or edge task reads no node labels: a folder may come without them
        return preprocess(load_edgelist_folder(cfg.data.root, seed=cfg.data.split, labels_optional=link,
                                               numeric=_task(cfg) == "node-regression"))
    from fullgraph.data.detect import load_path, looks_like_path

    if looks_like_path(cfg.data.dataset):
        return load_path(cfg.data.dataset, split=cfg.data.split, labels_optional=_scores_pairs(cfg),
                         numeric=_task(cfg) == "node-regression")
    from fullgraph.data.datasets import get_spec, load_dataset

    if get_spec(cfg.data.dataset).format == "npz_shchur":  # no published split: --split seeds ours
        return load_dataset(cfg.data.dataset, cfg.data.root, split=0, seed=cfg.data.split)
    return load_dataset(cfg.data.dataset, cfg.data.root, split=cfg.data.split)


def load_graph(cfg) -> Graph:
    """The graph ``cfg`` names, with the configured feature normalization applied; for a link task, the
    graph its encoder sees (held-out edges removed: :func:`load_link_graph`)."""
    if _task(cfg) == "link":
        return load_link_graph(cfg)[0]
    graph = load_raw_graph(cfg)
    if getattr(cfg.task, "edge_holdout", False):  # an edge task's validation and test edges leave the encoder's graph
        from fullgraph.data.link_split import without_pairs

        split = load_edge_split(cfg)
        graph = without_pairs(graph, split.pairs[torch.cat([split.val, split.test])])
    return row_normalize_features(graph) if feature_norm_of(cfg) == "row" else graph


def _scores_pairs(cfg) -> bool:
    """Whether ``cfg``'s task scores pairs of nodes (links, labelled edges), reading no node labels."""
    return getattr(getattr(cfg, "task", None), "scores_pairs", False)


def _task(cfg) -> str:
    task = getattr(cfg, "task", None)
    return getattr(task, "name", "node")


def load_edge_split(cfg):
    """The ``EdgeSplit`` of an edge task (``data.edge_labels``): the labelled edges of the folder ``cfg`` names
    (``data.edge_sources``), split as the folder says where it has split files, else by ``--edge-split`` with
    the run's seed."""
    from pathlib import Path

    from fullgraph.data.detect import looks_like_path
    from fullgraph.data.edge_labels import DEFAULT_EDGE_SPLIT, edge_split, parse_edge_split
    from fullgraph.data.edge_sources import labelled_edges

    folder = cfg.data.root if cfg.data.dataset == "edgelist" else cfg.data.dataset
    if not (folder and looks_like_path(folder) and Path(folder).is_dir()):
        raise InputError(f"expected a folder whose edges carry labels (an edge list with a label column, "
                         f"edge_labels.npz, or an OGB layout's raw/edge_label.csv.gz) with --task {cfg.task.name} (got "
                         f"--dataset {cfg.data.dataset}): see docs/data.md, edge labels")
    edges = labelled_edges(folder, cfg.task.name)
    if edges.parts is not None and cfg.task.edge_split != DEFAULT_EDGE_SPLIT:  # a given split is never dropped silently
        raise InputError(f"expected no --edge-split with {folder}, whose split files are its edges' split (got "
                         f"--edge-split {cfg.task.edge_split}): leave it out, or move the split files away")
    return edge_split(edges, numeric=cfg.task.name == "edge-regression", task=cfg.task.name,
                      fractions=parse_edge_split(cfg.task.edge_split), seed=cfg.optimization.seed,
                      name=Path(folder).name)


def load_link_graph(cfg):
    """``(encoder graph, LinkSplit)`` of a link task: an OGB link-property folder's own split, or any
    other graph split by ``--link-split`` with the run's seed (``data.link_split``); then the feature
    normalization. The split is a function of the graph and those options, so every process that
    draws it gets the same pairs."""
    from fullgraph.data.detect import detect, looks_like_path
    from fullgraph.data.link_split import parse_link_split, random_link_split

    kind = detect(cfg.data.dataset).kind if looks_like_path(cfg.data.dataset) else None
    if kind in ("ogb_link", "ogb_kg"):
        from fullgraph.data.link_split import DEFAULT_LINK_SPLIT

        if cfg.task.link_split != DEFAULT_LINK_SPLIT:  # a given split is never dropped without a word
            raise InputError(f"expected no --link-split with {cfg.data.dataset}, an OGB link dataset whose split "
                             f"files are its split (got --link-split {cfg.task.link_split}): leave it out")
        if cfg.task.target_relation:
            raise InputError(f"expected no --target-relation with {cfg.data.dataset}, an OGB link dataset whose split "
                             f"files name the scored relations (got --target-relation {cfg.task.target_relation}): "
                             f"leave it out")
        if kind == "ogb_kg":
            from fullgraph.data.formats.ogb_kg import load_ogb_kg

            graph, split = load_ogb_kg(cfg.data.dataset)
        else:
            from fullgraph.data.formats.ogb_link import load_ogb_link

            graph, split = load_ogb_link(cfg.data.dataset)
    else:
        raw = load_raw_graph(cfg)
        fractions = parse_link_split(cfg.task.link_split)
        if cfg.task.target_relation:  # typed links: the named relations' edges are split and scored
            from fullgraph.data.typed.link_split import random_typed_link_split, target_relations

            graph, split = random_typed_link_split(raw, fractions, cfg.optimization.seed,
                                                   target_relations(raw, cfg.task.target_relation), cfg.task.corrupt)
        elif raw.node_types is not None and raw.node_types.relations:
            from fullgraph.data.typed.link_split import relation_triplets

            names = relation_triplets(raw.node_types)
            raise InputError(f"expected --target-relation SRC___REL___DST with --task link on {raw.name}, a typed graph "
                             f"(got none): name the relations to predict, e.g. --target-relation {names[0]}")
        else:
            graph, split = random_link_split(raw, fractions, cfg.optimization.seed)
    return (row_normalize_features(graph) if feature_norm_of(cfg) == "row" else graph), split
