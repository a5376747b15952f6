"""The data commands of ``fullgraph`` (the table of every command: :mod:`fullgraph.cli`).

``generate`` and ``convert`` write a native dataset folder (:mod:`fullgraph.data.formats.native`): a
synthetic graph (``rmat``, ``planted``, or ``typed``, of several node types and relations), or any
graph ``--dataset`` can name (a known name or a path), so that later runs memory-map it instead of
parsing the original files again. ``convert`` keeps every fixed split of a
dataset that has several (the heterophilous graphs' ten), so that ``--split k`` picks the same masks
from the converted folder as from the original; a split that ``--split`` seeds (Shchur, an edge list
without split files) is drawn once and stored as the folder's one split. ``datasets`` lists the
known datasets and which are present.
"""

from __future__ import annotations

import argparse
import json
import time

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError

__all__ = ["cmd_generate", "cmd_convert", "cmd_datasets"]


def _need(ok: bool, text: str) -> None:
    if not ok:
        raise InputError(text)


def _wrote(out: str, meta: dict, start: float) -> None:
    from fullgraph.memory import peak_rss_bytes

    c = meta["counts"]
    splits = f", {c['num_splits']} fixed splits" if c.get("num_splits", 1) > 1 else ""
    print(f"wrote {out}: {meta['name']}, {c['num_nodes']} nodes, {c['num_edges']} edges{splits}, "
          f"{meta['total_bytes']} bytes ({meta['total_bytes'] / 2**20:.1f} MiB) in {time.perf_counter() - start:.2f} s, "
          f"peak RSS {peak_rss_bytes() / 2**20:.0f} MiB")


def cmd_generate(args: argparse.Namespace, argv: list[str] = ()) -> int:
    from fullgraph.data.formats.native import check_target, write_native

    start = time.perf_counter()
    check_target(args.out)  # before minutes of generating, not after
    _need(args.features >= 1, f"expected --features >= 1 (got {args.features})")
    _need(args.classes >= 2, f"expected --classes >= 2 (got {args.classes})")
    if args.kind == "rmat":
        from fullgraph.data.synthetic import rmat

        _need(args.edges >= 1, f"expected --edges >= 1 (got {args.edges})")
        graph = rmat(args.scale, args.edges, num_features=args.features, num_classes=args.classes, seed=args.seed,
                     name=args.name)
        source = (f"fullgraph generate rmat --scale {args.scale} --edges {args.edges} --features {args.features} "
                  f"--classes {args.classes} --seed {args.seed}")
    elif args.kind == "typed":
        graph, source = _typed(args)
    else:
        from fullgraph.data.synthetic import planted_partition

        _need(args.avg_degree > 0, f"expected --avg-degree > 0 (got {args.avg_degree})")
        _need(0 <= args.homophily <= 1, f"expected --homophily in [0, 1] (got {args.homophily})")
        graph = planted_partition(args.nodes, args.classes, args.avg_degree, args.homophily, args.features,
                                  seed=args.seed, name=args.name or f"planted-{args.nodes}")
        source = (f"fullgraph generate planted --nodes {args.nodes} --classes {args.classes} --features "
                  f"{args.features} --avg-degree {args.avg_degree} --homophily {args.homophily} --seed {args.seed}")
    meta = write_native(graph, args.out, preprocessed=True, source=source)  # every generator symmetrizes
    _wrote(args.out, meta, start)
    return 0


def _typed(args: argparse.Namespace):
    """``generate typed``'s graph and the command that makes it again (``data.synthetic.typed``): the folder
    keeps its node types in ``meta.json``, so it trains ``--model rgcn`` as a typed dataset does."""
    from fullgraph.data.synthetic.typed import typed_rmat

    _need(args.nodes >= 1, f"expected --nodes >= 1 (got {args.nodes})")
    graph = typed_rmat(args.nodes, args.edges, num_types=args.node_types, num_relations=args.relations,
                       num_features=args.features, num_classes=args.classes, seed=args.seed, name=args.name)
    return graph, (f"fullgraph generate typed --nodes {args.nodes} --edges {args.edges} --node-types {args.node_types} "
                   f"--relations {args.relations} --features {args.features} --classes {args.classes} --seed {args.seed}")


def cmd_convert(args: argparse.Namespace, argv: list[str] = ()) -> int:
    from fullgraph.data.formats.native import check_target
    from fullgraph.train.run_lock import RunLock

    start = time.perf_counter()
    check_target(args.out)
    lock = RunLock(args.out, beside=True).acquire()  # one writer: a second convert into --out is refused
    try:
        return _convert(args, start)
    finally:
        lock.release(remove_created=True)  # folders made for the lock go again where nothing was written in them


def _convert(args: argparse.Namespace, start: float) -> int:
    from fullgraph.data.detect import fixed_splits
    from fullgraph.data.formats.native import write_native
    from fullgraph.data.load import feature_norm_of, load_raw_graph

    meta = _convert_streamed(args)
    if meta is not None:
        _wrote(args.out, meta, start)
        return 0
    cfg = TrainConfig.of(dataset=args.dataset, root=args.root, split=args.split)
    graph = load_raw_graph(cfg)  # every source comes out preprocessed; --split checked against its splits
    graph = graph if args.edge_data else graph.without_edge_data()
    splits = fixed_splits(args.dataset, args.root)  # all of them, where it has several
    which = f"(all {len(splits[0])} fixed splits)" if splits is not None else f"--split {args.split}"
    meta = write_native(graph, args.out, preprocessed=True, feature_norm=feature_norm_of(cfg), splits=splits,
                        source=f"fullgraph convert --dataset {args.dataset} {which}")
    _wrote(args.out, meta, start)
    return 0


def _convert_streamed(args: argparse.Namespace) -> dict | None:
    """A folder given as a path whose files are streamed into the native folder in bounded memory:
    an OGB folder (:mod:`fullgraph.data.formats.ogb_convert`; ogbn-mag's heterogeneous layout:
    :mod:`fullgraph.data.formats.ogb_hetero_convert`, unless several types have features), or a
    typed folder (:mod:`fullgraph.data.formats.typed_folder_convert`: its edge files); ``None`` for
    any other source."""
    from fullgraph.data.detect import detect, looks_like_path

    if not looks_like_path(args.dataset):
        return None
    det = detect(args.dataset)
    if det.kind == "typed":
        return _convert_typed(args, det)
    if det.kind == "ogb_hetero":
        from fullgraph.data.formats.ogb_hetero_convert import convert_ogb_hetero, streamable

        _need(args.split == 0, f"expected --split 0 for {det.path} (ogb_hetero data has one fixed split) (got "
                               f"{args.split})")
        if not streamable(det.path):
            return None
        return convert_ogb_hetero(det.path, args.out, name=det.name, edge_data=args.edge_data,
                                  source=f"fullgraph convert --dataset {args.dataset} (OGB heterogeneous layout)")
    if det.kind != "ogb":
        return None
    from fullgraph.data.formats.ogb import open_ogb
    from fullgraph.data.formats.ogb_convert import convert_ogb

    _need(args.split == 0, f"expected --split 0 for {det.path} (OGB data has one published split) (got {args.split})")
    return convert_ogb(open_ogb(det.path, det.name, edge_data=args.edge_data), args.out,
                       source=f"fullgraph convert --dataset {args.dataset} (OGB {det.options['layout']} layout)")


def _convert_typed(args: argparse.Namespace, det) -> dict:
    """A typed folder, its edge files streamed: every set of split files kept, as the in-memory road
    kept them, or the split ``--split`` chooses or seeds."""
    from fullgraph.data.formats.typed_folder_convert import convert_typed_folder
    from fullgraph.data.load import feature_norm_of

    cfg = TrainConfig.of(dataset=args.dataset, root=args.root, split=args.split)
    return convert_typed_folder(det.path, args.out, split=args.split, name=det.name, edge_data=args.edge_data,
                                feature_norm=feature_norm_of(cfg), source=f"fullgraph convert --dataset {args.dataset}")


def cmd_datasets(args: argparse.Namespace, argv: list[str] = ()) -> int:
    from fullgraph.data.datasets import ROOT_DEFAULT, dataset_status, resolve_root

    root = resolve_root(args.root)
    rows = dataset_status(root)
    if args.json:
        out = [{"name": r.name, "present": r.present, "paths": [str(p) for p in r.paths]} for r in rows]
        print(json.dumps({"root": str(root), "datasets": out}, indent=2))
        return 0
    print(f"data root: {root}  (--root; default: {ROOT_DEFAULT})")
    width = max(len(r.name) for r in rows)
    print(f"  {'synthetic':<{width}}  {'built-in':<9}  (the default: a planted-partition graph, no files)")
    for r in rows:
        mark = "present" if r.present else "missing"
        where = str(r.paths[0].parent) if len(r.paths) > 1 else str(r.paths[0])
        print(f"  {r.name:<{width}}  {mark:<9}  {where}")
    return 0
