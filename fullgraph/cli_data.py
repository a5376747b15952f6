"""The data commands of ``fullgraph`` (the others: :mod:`fullgraph.cli`).

``generate`` and ``convert`` write a native dataset folder (:mod:`fullgraph.data.formats.native`): a
synthetic graph, or any graph ``--dataset`` can name (a known name or a path), so that later runs
memory-map it instead of parsing the original files again. ``datasets`` lists the known datasets and
which are present.
"""

from __future__ import annotations

import argparse
import json
import time

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError

__all__ = ["add_data_commands", "cmd_generate", "cmd_convert", "cmd_datasets"]


def add_data_commands(sub, parser_class) -> None:
    """The ``generate``, ``convert`` and ``datasets`` subcommands, on the ``fullgraph`` parser's ``sub``."""
    from fullgraph.data.datasets import ROOT_HELP

    gen = sub.add_parser("generate", help="write a synthetic graph as a native dataset folder",
                         description="Generate a synthetic graph and write it as a native dataset folder.")
    kinds = gen.add_subparsers(dest="kind", required=True, parser_class=parser_class)
    rm = kinds.add_parser("rmat", help="an R-MAT power-law graph (2**scale nodes)",
                          description="An R-MAT graph: 2**scale nodes, about 2 x edges directed edges after "
                                      "symmetrizing, class-centroid features.")
    rm.add_argument("--scale", type=int, required=True, help="2**scale nodes, 1..31")
    rm.add_argument("--edges", type=int, required=True, help="edges drawn before symmetrizing")
    rm.add_argument("--features", type=int, default=128, help="feature columns (default 128)")
    rm.add_argument("--classes", type=int, default=16, help="classes (default 16)")
    pl = kinds.add_parser("planted", help="a planted-partition graph (the built-in synthetic kind)",
                          description="A planted-partition graph whose classes a GCN separates.")
    pl.add_argument("--nodes", type=int, required=True, help="nodes")
    pl.add_argument("--classes", type=int, default=5, help="classes (default 5)")
    pl.add_argument("--features", type=int, default=64, help="feature columns (default 64)")
    pl.add_argument("--avg-degree", type=float, default=10.0, help="average degree (default 10)")
    pl.add_argument("--homophily", type=float, default=0.7, help="fraction of edges inside a class (default 0.7)")
    for kind, default_name in ((rm, "rmat-SCALE"), (pl, "planted-NODES")):
        kind.add_argument("--seed", type=int, default=0, help="seed (default 0)")
        kind.add_argument("--name", default=None, help=f"the graph's name (default {default_name})")
        kind.add_argument("--out", required=True, help="a new or empty folder, or an earlier dataset folder")
    conv = sub.add_parser("convert", help="write any dataset as a native dataset folder",
                          description="Load a dataset (a known name or a path, as 'train --dataset' takes) "
                                      "and write it as a native dataset folder.")
    conv.add_argument("--dataset", required=True, help="a known dataset name, or a path to a dataset folder or file")
    conv.add_argument("--root", default=None, help=ROOT_HELP)
    conv.add_argument("--split", type=int, default=0, help="which fixed split, or the seed of a made one (default 0)")
    conv.add_argument("--out", required=True, help="a new or empty folder, or an earlier dataset folder")
    ds = sub.add_parser("datasets", help="list known datasets and which are present",
                        description="List the datasets --dataset takes by name, the files each needs under the "
                                    "data root, and which are present there (a missing one is downloaded on first "
                                    "use where a direct public URL exists).")
    ds.add_argument("--root", default=None, help=ROOT_HELP)
    ds.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _need(ok: bool, text: str) -> None:
    if not ok:
        raise InputError(text)


def _wrote(out: str, meta: dict, start: float) -> None:
    from fullgraph.memory import peak_rss_bytes

    c = meta["counts"]
    print(f"wrote {out}: {meta['name']}, {c['num_nodes']} nodes, {c['num_edges']} edges, "
          f"{meta['total_bytes']} bytes ({meta['total_bytes'] / 2**20:.1f} MiB) in {time.perf_counter() - start:.2f} s, "
          f"peak RSS {peak_rss_bytes() / 2**20:.0f} MiB")


def cmd_generate(args: argparse.Namespace) -> int:
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
    else:
        from fullgraph.data.synthetic import planted_partition

        _need(args.avg_degree > 0, f"expected --avg-degree > 0 (got {args.avg_degree})")
        _need(0 <= args.homophily <= 1, f"expected --homophily in [0, 1] (got {args.homophily})")
        graph = planted_partition(args.nodes, args.classes, args.avg_degree, args.homophily, args.features,
                                  seed=args.seed, name=args.name or f"planted-{args.nodes}")
        source = (f"fullgraph generate planted --nodes {args.nodes} --classes {args.classes} --features "
                  f"{args.features} --avg-degree {args.avg_degree} --homophily {args.homophily} --seed {args.seed}")
    meta = write_native(graph, args.out, preprocessed=True, source=source)  # both generators symmetrize
    _wrote(args.out, meta, start)
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from fullgraph.data.formats.native import check_target, write_native
    from fullgraph.data.load import feature_norm_of, load_raw_graph

    start = time.perf_counter()
    check_target(args.out)
    meta = _convert_ogb(args)
    if meta is not None:
        _wrote(args.out, meta, start)
        return 0
    cfg = TrainConfig.of(dataset=args.dataset, root=args.root, split=args.split)
    graph = load_raw_graph(cfg)  # every source comes out preprocessed
    meta = write_native(graph, args.out, preprocessed=True, feature_norm=feature_norm_of(cfg),
                        source=f"fullgraph convert --dataset {args.dataset} --split {args.split}")
    _wrote(args.out, meta, start)
    return 0


def _convert_ogb(args: argparse.Namespace) -> dict | None:
    """An OGB folder given as a path, streamed into the native folder in bounded memory
    (:mod:`fullgraph.data.formats.ogb_convert`); ``None`` for any other source."""
    from fullgraph.data.detect import detect, looks_like_path

    if not looks_like_path(args.dataset):
        return None
    det = detect(args.dataset)
    if det.kind != "ogb":
        return None
    from fullgraph.data.formats.ogb import open_ogb
    from fullgraph.data.formats.ogb_convert import convert_ogb

    _need(args.split == 0, f"expected --split 0 for {det.path} (OGB data has one published split) (got {args.split})")
    return convert_ogb(open_ogb(det.path, det.name), args.out,
                       source=f"fullgraph convert --dataset {args.dataset} (OGB {det.options['layout']} layout)")


def cmd_datasets(args: argparse.Namespace) -> int:
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
