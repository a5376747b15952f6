"""How good a cut the streaming partitioner makes: fennel against metis-memory, random and contiguous.

Issue 38 §3's targets: on the R-MAT and planted-partition graphs, fennel's replication factor
α = Σ halo / N within 1.5x METIS's (``metis-memory`` with ``--metis-sample``) and at most 0.6x
random's; and the largest rank's estimated memory (``plan.variable_bytes`` for GraphSAGE 3 x 128,
the cost both memory-balanced partitioners balance) beside each.

Every partitioner runs in this process on the loaded graph, as ``fullgraph partition`` runs it
(fennel and metis-memory: ``partition.balance``'s rounds, seed 0; random and contiguous:
``partition_nodes``). α and the per-part counts come from ``fennel.stream_part_stats`` (tested equal
to ``PartitionBook.stats``), the estimated memory from ``balance.stats_costs``. Times are wall
seconds of the partitioner alone (METIS's include its edge sample).

Graphs (seed 0): ``rmat-1e6`` / ``rmat-1e7`` are ``scale.py``'s (scale 17 and 20, 100 features);
``planted-1e6`` / ``planted-1e7`` are planted partitions (5 classes, homophily 0.7, average degree
10.5, 64 features; 10^5 and 10^6 nodes: the second is ``time_to_accuracy.py``'s planted graph).
Their node ids are shuffled relative to the classes, the hardest order for a stream.

    .venv/bin/python benchmarks/fennel_quality.py                      # every graph, P = 4 and 16
    .venv/bin/python benchmarks/fennel_quality.py --graphs rmat-1e6 --parts 4 --metis-sample 1
    .venv/bin/python benchmarks/fennel_quality.py --graphs /tmp/fg-ogb-1e8/native --parts 4 --metis-sample 0.2
"""

from __future__ import annotations

import argparse
import functools
import sys
import time

import numpy as np
import torch
from types import MappingProxyType

from _harness import print_header, write_json

GRAPHS = MappingProxyType({
    "rmat-1e6": ("rmat", dict(scale=17, num_edges=530_000, num_features=100)),
    "rmat-1e7": ("rmat", dict(scale=20, num_edges=5_150_000, num_features=100)),
    "planted-1e6": ("planted", dict(num_nodes=100_000, num_classes=5, avg_degree=10.5, homophily=0.7,
                                    num_features=64)),
    "planted-1e7": ("planted", dict(num_nodes=1_000_000, num_classes=5, avg_degree=10.5, homophily=0.7,
                                    num_features=64)),
})
METHODS = ("fennel", "metis-memory", "random", "contiguous")
MODEL = MappingProxyType(dict(model="sage", layers=3, hidden=128))
TARGET_OF_METIS, TARGET_OF_RANDOM = 1.5, 0.6


def load(name: str):
    """One of :data:`GRAPHS`, or a native dataset folder given by its path (memory-mapped)."""
    from fullgraph.data.synthetic import planted_partition, rmat

    if name not in GRAPHS:
        from fullgraph.data.formats.native_read import load_native

        return load_native(name)
    kind, kw = GRAPHS[name]
    return (rmat if kind == "rmat" else planted_partition)(**kw, seed=0, name=name)


def memory_cost():
    from fullgraph.config import TrainConfig
    from fullgraph.plan import model_memory_options, variable_bytes

    return functools.partial(variable_bytes, model_opts=model_memory_options(TrainConfig.of(**MODEL)))


def assign(graph, method: str, parts: int, sample: float, cost) -> np.ndarray:
    """The node -> part map of ``method``, as ``fullgraph partition`` makes it."""
    from fullgraph.partition import partition_nodes
    from fullgraph.partition.balance import fennel_by_memory, metis_by_memory

    if method == "fennel":
        return fennel_by_memory(graph, parts, 0, cost)
    if method == "metis-memory":
        return metis_by_memory(graph, parts, 0, sample, cost).numpy()
    return partition_nodes(graph, parts, method, seed=0).numpy()


def measure(graph, method: str, parts: int, sample: float, cost) -> dict:
    from fullgraph.data.formats.native_stream import CSRStream
    from fullgraph.partition.balance import graph_counts, stats_costs
    from fullgraph.partition.fennel import stream_part_stats

    t0 = time.perf_counter()
    node_part = assign(graph, method, parts, sample, cost)
    seconds = time.perf_counter() - t0
    st = stream_part_stats(CSRStream.of_arrays(graph.indptr, graph.indices), node_part, parts)
    est, _ = stats_costs(graph_counts(graph), zip(st["inner"], st["halo"], st["edges"]), cost)
    return {"method": method, "parts": parts, "seconds": seconds, "alpha": float(st["halo"].sum() / graph.num_nodes),
            "largest_bytes": float(max(est)), "largest_over_mean": float(max(est) / np.mean(est)),
            "sample": sample if method == "metis-memory" else None}


def verdicts(rows: list[dict]) -> dict:
    """fennel's α over METIS's and over random's, for one graph and P, with the targets' verdicts."""
    by = {r["method"]: r for r in rows}
    f = by["fennel"]["alpha"]
    over_metis, over_random = f / by["metis-memory"]["alpha"], f / by["random"]["alpha"]
    return {"fennel_over_metis": over_metis, "fennel_over_random": over_random,
            "metis_over_random": by["metis-memory"]["alpha"] / by["random"]["alpha"],
            "pass_metis": over_metis <= TARGET_OF_METIS, "pass_random": over_random <= TARGET_OF_RANDOM}


def print_table(name: str, graph, parts: int, rows: list[dict], v: dict) -> None:
    print(f"\n{name}: {graph.num_nodes:,} nodes, {graph.num_edges:,} directed edges, P = {parts}")
    print("| method | α | largest rank est. MiB | largest / mean | seconds |")
    print("|---|---|---|---|---|")
    for r in rows:
        label = r["method"] + (f" (q = {r['sample']:g})" if r["sample"] is not None else "")
        print(f"| {label} | {r['alpha']:.3f} | {r['largest_bytes'] / 2**20:,.0f} | {r['largest_over_mean']:.3f} "
              f"| {r['seconds']:.1f} |")
    print(f"fennel α / METIS α = {v['fennel_over_metis']:.2f} (target <= {TARGET_OF_METIS}: "
          f"{'PASS' if v['pass_metis'] else 'FAIL'}); fennel α / random α = {v['fennel_over_random']:.2f} "
          f"(target <= {TARGET_OF_RANDOM}: {'PASS' if v['pass_random'] else 'FAIL'}; METIS's own: "
          f"{v['metis_over_random']:.2f})", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=",".join(GRAPHS),
                    help=f"comma-separated, of {', '.join(GRAPHS)}, or native dataset folders")
    ap.add_argument("--parts", default="4,16", help="comma-separated part counts")
    ap.add_argument("--metis-sample", type=float, default=None,
                    help="METIS's edge sample (default: 1 below 10^7 edges, 0.25 from there on)")
    ap.add_argument("--json", default="runs/bench_fennel_quality.json")
    a = ap.parse_args(argv)
    print_header()
    torch.manual_seed(0)
    cost, out = memory_cost(), []
    for name in a.graphs.split(","):
        graph = load(name)
        sample = a.metis_sample or (1.0 if graph.num_edges < 10**7 else 0.25)
        for parts in (int(p) for p in a.parts.split(",")):
            rows = [measure(graph, m, parts, sample, cost) for m in METHODS]
            v = verdicts(rows)
            print_table(name, graph, parts, rows, v)
            out.append({"graph": name, "nodes": graph.num_nodes, "edges": graph.num_edges, "parts": parts,
                        "rows": rows, **v})
            write_json(a.json, {"model": dict(MODEL), "results": out})
        del graph
    return 0


if __name__ == "__main__":
    sys.exit(main())
