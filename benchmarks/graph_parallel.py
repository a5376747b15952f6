"""Graph-parallel training with BNS-GCN boundary node sampling: halo traffic and epoch time.

Two measurements, both through the real command (``fullgraph train --parallel graph``):

1. **Halo bytes.** For every graph, part count P, partitioner and boundary rate p, a short run
   (``--bytes-epochs``, default 3) reads the per-epoch ledger (``summary.json``:
   ``comm_bytes_per_epoch``, the median over epochs of each category summed over ranks). Next to
   the measured ``halo/fwd`` it prints the analytic volume::

       halo/fwd(p = 1) = sum_parts |halo| * hidden * 4 bytes * (layers - 1)

   (the first layer reads input features, which every part holds for its halo nodes too, so it
   moves nothing; every later layer receives each halo row once, ``hidden`` float32 wide), and
   ``p * that`` for p < 1 (each part keeps each halo node with probability p, so this is the
   expectation; the measured value is a binomial draw around it). ``halo/bwd`` is the same volume
   going back. The reduction p = 1 -> p = 0.1 of halo traffic is checked against BNS-GCN's ~10x
   (Tables 8-9); it passes within +-20 %.

2. **Epoch time** of P = 2 graph-parallel training (METIS parts, p = 1 and p = 0.1) against
   single-process training of the same model on the same cores: the single process gets all the
   cores as threads, each of the 2 ranks cores / 2 threads (the launcher's default). Median
   training-step time over ``--time-epochs`` epochs minus the first (warm-up), evaluation only at
   the end (outside the timed step). Targets: P = 2 at p = 1 within 1.3x of single process, P = 2 at
   p = 0.1 faster than single process.

Before each timed run the script waits (at most ``--wait-idle`` seconds over the whole run) until
no process outside its own process tree uses CPU, and it samples foreign CPU use during every timed
run; a timing taken while another process used more than 0.2 cores is marked ``CONTENDED``.

The graphs: Coauthor-Physics (34,493 nodes, 8,415 sparse features) and an R-MAT graph
(``fullgraph.data.synthetic.rmat(17, 1_200_000, num_features=128)``: 131,072 nodes, about 2.2M
directed edges). Dataset graphs and the synthetic one take the same path: the benchmark loads the
graph once, writes the partition with ``PartitionBook`` / ``save_partition`` into a temporary
folder and launches ``fullgraph train --partition-dir DIR``; single-process runs go through
``Trainer`` in a subprocess of this script (``--single-worker``). Model: GraphSAGE (mean), 3 layers,
hidden 256, dropout 0.5, Adam lr 0.01 (BNS-GCN's model family).

Usage::

    .venv/bin/python benchmarks/graph_parallel.py                          # the full benchmark
    .venv/bin/python benchmarks/graph_parallel.py --quick                  # a smoke run (~1 min)
    .venv/bin/python benchmarks/graph_parallel.py --graphs rmat --parts 2 --rates 1,0.1 --no-time
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from _graph_parallel_load import FOREIGN_BUSY_CORES, IdleWaiter, LoadMonitor
from _graph_parallel_report import MB, TIME_TARGETS, report_halo, report_timing
from _harness import REPO, environment, finish, print_header, run_and_read, train

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data"


# ----------------------------------------------------------------------------- graphs
def make_graph(name: str, root: str, scale: int, edges: int):
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    if name == "rmat":
        from fullgraph.data.synthetic import rmat

        return rmat(scale, edges, num_features=128, seed=0)
    return load_graph(TrainConfig.of(dataset=name, root=root))


def write_partition(graph, parts: int, method: str, folder: Path) -> dict:
    """Partition ``graph`` and write it to ``folder``; returns the book's summary."""
    from fullgraph.partition import PartitionBook, cached_partition, save_partition

    t0 = time.perf_counter()
    node_part = cached_partition(graph, parts, method, 0)
    book = PartitionBook.build(graph, node_part)
    # the runs name no --dataset: the folder says what its graph is called (train records it in config.json)
    save_partition(book, graph, folder, {"method": method, "seed": 0, "benchmark": "graph_parallel",
                                         "dataset": graph.name})
    s = book.summary()
    s["seconds"] = time.perf_counter() - t0
    return s


class Partitions:
    """The partitions of one graph, each written once into the benchmark's folder when first asked
    for, and removed together when the graph is done."""

    def __init__(self, graph, name: str, tmp: Path):
        self.graph, self.name, self.tmp = graph, name, tmp
        self.made: dict[tuple[int, str], tuple[Path, dict]] = {}

    def get(self, parts: int, method: str) -> tuple[Path, dict]:
        key = (parts, method)
        if key not in self.made:
            folder = self.tmp / f"{self.name}-{method}-{parts}"
            self.made[key] = (folder, write_partition(self.graph, parts, method, folder))
        return self.made[key]

    def remove(self) -> None:
        for folder, _ in self.made.values():
            shutil.rmtree(folder, ignore_errors=True)
        self.graph = None  # the next graph loads without this one


# ----------------------------------------------------------------------------- runs
def _model_flags(a) -> list[str]:
    return ["--model", a.model, "--layers", str(a.layers), "--hidden", str(a.hidden), "--lr", str(a.lr),
            "--dropout", str(a.dropout), "--seed", "0"]


def run_graph_parallel(a, pdir: Path, parts: int, rate: float, epochs: int, out: Path) -> dict:
    """One ``fullgraph train --parallel graph`` run, with its median time in collectives (the first
    epoch left out, as for the epoch time) and every epoch's bytes."""
    r = train(["--partition-dir", str(pdir), "--parallel", "graph", "--nprocs", str(parts), *_model_flags(a),
               "--boundary-rate", str(rate), "--epochs", str(epochs), "--eval-every", str(epochs), "--progress",
               "none", "--comm-timeout", "600"], out)
    if "error" in r:
        return r
    comm_t = [m["comm_time_s"] for m in r["metrics"][1:] if "comm_time_s" in m]
    return r | {"comm_time_s": statistics.median(comm_t) if comm_t else None,
                "per_epoch_bytes": [m.get("comm_bytes", {}) for m in r["metrics"]]}


def run_single(a, graph_name: str, epochs: int, out: Path) -> dict:
    spec = {"graph": graph_name, "root": a.root, "scale": a.rmat_scale, "edges": a.rmat_edges, "model": a.model,
            "layers": a.layers, "hidden": a.hidden, "lr": a.lr, "dropout": a.dropout, "epochs": epochs,
            "threads": os.cpu_count() or 1, "out": str(out)}
    return run_and_read([sys.executable, __file__, "--single-worker", json.dumps(spec)], out)


def single_worker(spec: dict) -> int:
    """One single-process training run (a subprocess, so its threads and memory are its own)."""
    from fullgraph.config import TrainConfig
    from fullgraph.train.trainer import Trainer

    graph = make_graph(spec["graph"], spec["root"], spec["scale"], spec["edges"])
    cfg = TrainConfig.of(dataset=spec["graph"] if spec["graph"] != "rmat" else "synthetic", root=spec["root"],
                      model=spec["model"], layers=spec["layers"], hidden=spec["hidden"], lr=spec["lr"],
                      dropout=spec["dropout"], epochs=spec["epochs"], eval_every=spec["epochs"],
                      threads=spec["threads"], seed=0, progress="none", out=spec["out"])
    trainer = Trainer(cfg, graph)
    try:
        trainer.build().train()
    finally:
        trainer.close()
    return 0


# ----------------------------------------------------------------------------- 1. halo bytes
def _analytic_fwd(halo_total: int, a, rate: float) -> float:
    return rate * halo_total * a.hidden * 4 * (a.layers - 1)


def halo_row(a, gname: str, book: dict, rate: float, r: dict, base: float | None) -> dict:
    """The halo table's row of one finished run; ``base`` is the halo traffic at p = 1."""
    c = r["summary"]["comm_bytes_per_epoch"]
    row = {"halo_fwd_bytes": c.get("halo/fwd", 0), "halo_bwd_bytes": c.get("halo/bwd", 0),
           "sample_index_bytes": c.get("sample/index", 0), "grad_allreduce_bytes": c.get("grad/allreduce", 0),
           "analytic_fwd_bytes": _analytic_fwd(book["halo_total"], a, rate), "per_epoch_bytes": r["per_epoch_bytes"],
           "epoch_time_s": r["summary"]["epoch_time_s"]}
    row["fwd_over_analytic"] = row["halo_fwd_bytes"] / row["analytic_fwd_bytes"] if row["analytic_fwd_bytes"] else None
    halo = row["halo_fwd_bytes"] + row["halo_bwd_bytes"]
    row["halo_cut"] = base / halo if base and halo and rate < 1.0 else None
    print(f"    p={rate:g}: halo/fwd {row['halo_fwd_bytes'] / MB:.3f} MB (analytic "
          f"{row['analytic_fwd_bytes'] / MB:.3f}), halo/bwd {row['halo_bwd_bytes'] / MB:.3f}"
          f" MB, sample/index {row['sample_index_bytes'] / 1e3:.1f} KB, grad/allreduce "
          f"{row['grad_allreduce_bytes'] / MB:.2f} MB ({r['wall_s']:.0f} s)", flush=True)
    return row


def halo_sweep(a, gname: str, partitions: Partitions, tmp: Path, spec: tuple[list, list, list]) -> tuple[list, int]:
    """Every (parts, partitioner, rate) of one graph: its halo rows and how many runs failed."""
    parts_list, methods, rates = spec
    rows, failed = [], 0
    for parts in parts_list:
        for method in methods:
            folder, book = partitions.get(parts, method)
            print(f"  {method} x{parts}: alpha {book['replication_factor']:.3f}, "
                  f"sum|halo| {book['halo_total']:,}, cut edges {book['cut_edges']:,}, imbalance "
                  f"{book['imbalance']:.3f} ({book['seconds']:.1f} s)", flush=True)
            base = None
            for rate in rates:
                out = tmp / f"run-{gname}-{method}-{parts}-{rate:g}"
                r = run_graph_parallel(a, folder, parts, rate, a.bytes_epochs, out)
                row = {"graph": gname, "parts": parts, "partitioner": method, "rate": rate,
                       "alpha": book["replication_factor"], "halo_total": book["halo_total"],
                       "cut_edges": book["cut_edges"], "wall_s": r["wall_s"]}
                if "error" in r:
                    failed += 1
                    row["error"] = r["error"]
                    print(f"    p={rate:g}: FAILED: {r['error']}", flush=True)
                else:
                    row |= halo_row(a, gname, book, rate, r, base)
                    if rate == 1.0:
                        base = row["halo_fwd_bytes"] + row["halo_bwd_bytes"]
                rows.append(row)
    return rows, failed


# ----------------------------------------------------------------------------- 2. epoch time
def timed_run(a, gname: str, label: str, rate: float | None, folder: Path, out: Path) -> tuple[dict, bool]:
    """One timed run (single process where ``rate`` is None), with the foreign load during it:
    its entry of the timing table and whether it failed."""
    with LoadMonitor() as mon:
        if rate is None:
            r = run_single(a, gname, a.time_epochs, out)
        else:
            r = run_graph_parallel(a, folder, 2, rate, a.time_epochs, out)
    entry = {"label": label, "rate": rate, "foreign_cores": mon.mean,
             "contended": mon.mean > FOREIGN_BUSY_CORES, "wall_s": r["wall_s"]}
    if "error" in r:
        entry["error"] = r["error"]
        print(f"    {label} p={rate}: FAILED: {r['error']}", flush=True)
        return entry, True
    s = r["summary"]
    entry |= {"epoch_time_s": s["epoch_time_s"], "peak_rss_bytes": s["peak_rss_bytes"],
              "comm_time_s": r.get("comm_time_s"), "comm_bytes_per_epoch": s.get("comm_bytes_per_epoch", {}),
              "test_acc": s["test_acc"]}
    print(f"    {label:<9} p={'-' if rate is None else f'{rate:g}':<4} "
          f"{s['epoch_time_s'] * 1000:8.1f} ms/epoch  (foreign load {mon.mean:.2f} cores"
          f"{', CONTENDED' if entry['contended'] else ''})", flush=True)
    return entry, False


def time_graph(a, gname: str, partitions: Partitions, tmp: Path, waiter: IdleWaiter) -> tuple[dict, int]:
    """Single process against P = 2 graph-parallel (METIS) at each rate with a target, on one graph."""
    folder, book = partitions.get(2, "metis")
    print(f"  timing on {os.cpu_count() or 1} cores: single process vs P = 2 graph-parallel (metis, "
          f"alpha {book['replication_factor']:.3f})", flush=True)
    runs = [("single", None)] + [("graph x2", p) for p in sorted(TIME_TARGETS, reverse=True)]
    timing, failed = {"graph": gname, "runs": []}, 0
    for label, rate in runs:
        waiter.wait()
        out = tmp / f"time-{gname}-{label.replace(' ', '')}-{rate}"
        entry, bad = timed_run(a, gname, label, rate, folder, out)
        failed += bad
        timing["runs"].append(entry)
    return timing, failed


# ----------------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=os.environ.get("FULLGRAPH_DATA") or str(DEFAULT_ROOT))
    p.add_argument("--graphs", default="coauthor-physics,rmat", help="comma-separated: dataset names and/or rmat")
    p.add_argument("--parts", default="2,4,8")
    p.add_argument("--partitioners", default="metis,random")
    p.add_argument("--rates", default="1,0.1,0.01")
    p.add_argument("--model", default="sage")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--bytes-epochs", type=int, default=3, help="epochs of each halo-bytes run")
    p.add_argument("--time-epochs", type=int, default=15, help="epochs of each timed run (the first is warm-up)")
    p.add_argument("--rmat-scale", type=int, default=17)
    p.add_argument("--rmat-edges", type=int, default=1_200_000)
    p.add_argument("--no-bytes", action="store_true", help="skip the halo-bytes sweep")
    p.add_argument("--no-time", action="store_true", help="skip the epoch-time comparison")
    p.add_argument("--wait-idle", type=float, default=600.0,
                   help="seconds (in all) to wait for other processes to stop before timed runs")
    p.add_argument("--quick", action="store_true", help="a tiny smoke run: cora + a small R-MAT, few epochs")
    p.add_argument("--out", default=str(REPO / "runs" / "bench_graph_parallel.json"))
    p.add_argument("--single-worker", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.quick:
        a.graphs, a.parts, a.rates = "cora,rmat", "2,4", "1,0.1"
        a.rmat_scale, a.rmat_edges, a.hidden = 12, 30_000, 64
        a.bytes_epochs, a.time_epochs, a.wait_idle = 2, 4, 0.0
    return a


def print_setup(a, env: dict, graphs: list[str], spec: tuple[list, list, list]) -> None:
    """The header: date, machine, model, graphs and what each kind of run does."""
    parts_list, methods, rates = spec
    cores = os.cpu_count() or 1
    print(f"fullgraph graph-parallel benchmark, {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    print_header(env)
    print(f"model: {a.model}, {a.layers} layers, hidden {a.hidden}, dropout {a.dropout}, Adam lr {a.lr}, seed 0")
    print(f"graphs: {', '.join(graphs)} (rmat = rmat(scale={a.rmat_scale}, edges={a.rmat_edges}, "
          f"num_features=128)); parts {parts_list}; partitioners {methods}; rates {rates}")
    print(f"halo-bytes runs: {a.bytes_epochs} epochs each, median per epoch summed over ranks; timed runs: "
          f"{a.time_epochs} epochs, median of epochs 2..{a.time_epochs}; threads: single {cores}, "
          f"graph-parallel ranks {cores} // P (at least 1)")
    load0 = os.getloadavg()
    print(f"load average at start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)


def measure_graph(a, gname: str, tmp: Path, spec, waiter: IdleWaiter, result: dict) -> int:
    """Load one graph, run its halo sweep and its timing into ``result``; returns the failed runs."""
    import torch

    t0 = time.perf_counter()
    graph = make_graph(gname, a.root, a.rmat_scale, a.rmat_edges)
    ginfo = {"name": graph.name, "nodes": graph.num_nodes, "edges": graph.num_edges,
             "features": graph.num_features, "classes": int(graph.num_classes),
             "sparse_features": graph.x.layout == torch.sparse_csr}
    result["graphs"][gname] = ginfo
    print(f"\n== {gname}: {graph.num_nodes:,} nodes, {graph.num_edges:,} directed edges, "
          f"{graph.num_features} {'sparse ' if ginfo['sparse_features'] else ''}features, "
          f"{ginfo['classes']} classes (loaded in {time.perf_counter() - t0:.1f} s)", flush=True)
    partitions, failed = Partitions(graph, gname, tmp), 0
    del graph  # the partitions hold it until they are removed
    if not a.no_bytes:
        rows, bad = halo_sweep(a, gname, partitions, tmp, spec)
        result["halo"] += rows
        failed += bad
    if not a.no_time:
        timing, bad = time_graph(a, gname, partitions, tmp, waiter)
        result["timing"].append(timing)
        failed += bad
    partitions.remove()
    return failed


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.single_worker:
        return single_worker(json.loads(a.single_worker))
    env = environment()
    graphs = [g for g in a.graphs.split(",") if g]
    spec = ([int(x) for x in a.parts.split(",") if x], [m for m in a.partitioners.split(",") if m],
            [float(x) for x in a.rates.split(",") if x])
    started = time.perf_counter()
    print_setup(a, env, graphs, spec)
    waiter = IdleWaiter(a.wait_idle)
    tmp = Path(tempfile.mkdtemp(prefix="fg-bench-gp-"))
    result = {"benchmark": "graph_parallel", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": env["machine"] | env["versions"],
              "config": {k: v for k, v in vars(a).items() if k != "single_worker"},
              "graphs": {}, "halo": [], "timing": [], "checks": []}
    failed = 0
    try:
        for gname in graphs:
            failed += measure_graph(a, gname, tmp, spec, waiter, result)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report_halo(result)
    report_timing(result)
    return finish(result, a.out, failed, started, indent=2)


if __name__ == "__main__":
    sys.exit(main())
