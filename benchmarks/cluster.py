"""An emulated cluster: each rank in its own network namespace, linked through rate-limited veth pairs,
and the measured epoch time of graph parallelism, the pipeline and the hybrid next to ``fullgraph
plan``'s estimate (issue 14 §2; GNNPipe Table 3's claim: fewer bytes win where links are slow).

Needs root (``ip netns``, ``tc``). Every rank's namespace gets one veth, its peer on a bridge in the
root namespace; ``tc tbf`` limits both directions of every veth to ``--rates`` Gbit/s (``netem`` is
not available here, so latency is the kernel's own). The namespaces, veths and bridge are removed at
the end, also on failure or Ctrl-C, and so are the cgroups (``_netns.py``).

    sudo .venv/bin/python benchmarks/cluster.py                                # default grid
    .venv/bin/python benchmarks/cluster.py --graphs squirrel --models gcn --depths 16 --rates 0.1,1

The ranks run on this machine's cores. Where they outnumber the cores, each runs in a CPU cgroup of
its own capped at ``--cpu-share`` of a core (default: the cores over the ranks): a cluster of equal
machines, each slower than this one's core, which do not lend each other their cores (a rank waiting
for the network leaves its own idle). The plan then models a cluster whose machines compute at the
speed the capped ranks measured (``probes/corun.py`` in the same cgroups: their share, less what they
cost each other through caches and memory bandwidth). ``--cpu-share 0`` leaves them time-sliced, as the
scheduler likes: a rank's idle core serves the others and the critical path runs at whatever share it
gets, and the estimate is the plan's with ``cores`` set (no faster than all ranks' compute over the
cores). Either way it predicts this emulation, not a real cluster. Measured and estimated epochs both
include the evaluation (``--eval-every 1``), as the plan's bytes do.

This VM's speed drifts by up to a quarter over minutes, the same run measured minutes apart included.
``--repeats N`` runs every cell of a rate once, then all of them again, N times, and measures each
cell's median; between the rounds the plan's layer timings are taken once more (``LayerTimer.sample``),
so the estimate's medians stand for the same minutes as the measured ones.

``--sync-probe`` measures what an exchange between ranks busy computing costs beyond its bytes
(``probes/sync.py``; the link probe's latency is taken with idle cores), and ``--nprocs`` equal to the
cores (with ``--layouts graph,pipeline``: the hybrid 2x2 needs 4) runs the cells where every rank has a
core of its own, as on a real cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

from _harness import REPO, print_header, write_json
from _netns import Cluster, CpuQuota

from fullgraph.config import TrainConfig
from fullgraph.data.load import load_graph
from fullgraph.parallel.setup import prepare_run

HIDDEN = MappingProxyType({"squirrel": 1000, "coauthor-physics": 100})
LAYOUTS = MappingProxyType({"graph": dict(parallel="graph"), "pipeline": dict(parallel="pipeline"),
                            "hybrid 2x2": dict(parallel="hybrid", stages=2, graph_ways=2),
           "graph metis-memory": dict(parallel="graph", partitioner="metis-memory"),
                            "spmm-1d": dict(parallel="spmm-1d"), "tensor": dict(parallel="tensor")})  # the last three: --layouts


def base_options(name: str, root: str, model: str, depth: int, precision: str = "fp32") -> dict:
    """The options a cell trains and plans with (the graph's hidden width from ``HIDDEN``)."""
    extra = {"comm_precision": precision} if precision != "fp32" else {}
    return dict(dataset=name, root=root, model=model, layers=depth, hidden=HIDDEN.get(name, 64), **extra)


def estimate(graph, base: dict, layout: dict, nprocs: int, network, timers: dict, cpu: dict) -> dict:
    """``fullgraph plan``'s row for this layout, its ranks (one thread each) as ``cpu`` says (``cpu_speed``):
    sharing this machine's cores at ``core_efficiency`` of their solo speed, or each capped at a share of
    a core that computes at ``node_speed`` of a solo core."""
    from fullgraph.cli.plan import build_planned_model, plan_layout
    from fullgraph.plan.layer_timer import LayerTimer

    key = (base["dataset"], base["model"], base["layers"])  # the precision changes bytes, not layers
    if key not in timers:  # one timer per model: its layer timings serve every layout and rate
        timers[key] = LayerTimer(build_planned_model(TrainConfig.of(**base), graph), graph.x, threads=1)
    args = argparse.Namespace(nprocs=nprocs, chunks=0, partition_dir=None)
    cores = (os.cpu_count() or 1) if "core_efficiency" in cpu else None
    return plan_layout(graph, base, layout, args, timers[key], network, cores=cores, **cpu)


TIMES = ("epoch_time_s", "eval_time_s", "comm_time_s", "compute_time_s", "stage_compute_s", "stage_wait_s",
         "stage_bubble_s")  # what each epoch's record says of where its time went, kept with the cell


def measured_epoch(out: Path) -> tuple[float, list[dict]]:
    """The median over epochs 2.. of training plus evaluation (the plan's epoch evaluates too), and each
    epoch's time split as the run recorded it (``TIMES``)."""
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    times = [r["epoch_time_s"] + r.get("eval_time_s", 0.0) for r in records]
    split = [{k: r[k] for k in TIMES if k in r} for r in records]
    return statistics.median(times[1:] if len(times) > 1 else times), split


def cell(graph, name: str, root: str, model: str, depth: int, layout: str, network, a, cluster,
         timers: dict, cpu: dict, precision: str = "fp32") -> dict:
    """The cell's row: the plan's estimate and what it moves, before any run (``add_run`` adds those)."""
    base = base_options(name, root, model, depth, precision)
    est = estimate(graph, base, LAYOUTS[layout], a.nprocs, network, timers, cpu)
    return {"graph": name, "model": model, "depth": depth, "layout": layout, "precision": precision,
            "rate_gbit": cluster.rate,
            "link_gbps": network.bandwidth_gbps, "link_exchange_gbps": network.exchange_gbps,
            "link_latency_us": network.latency_us, "link_cpu_ns_per_byte": network.cpu_ns_per_byte,
            "cpu_share": cluster.quota.share, **cpu, "estimate_s": est["epoch_s"],
            "plan_bytes": est["bytes_per_epoch"],
            "runs": []}


def add_run(row: dict, a, cluster) -> dict:
    """One more real ``fullgraph train`` of the cell; the row's measured epoch is the median over its
    runs (each run's own: the median of its epochs after the first)."""
    base = base_options(row["graph"], a.root, row["model"], row["depth"], row["precision"])
    layout = LAYOUTS[row["layout"]]
    flags = prepare_run(TrainConfig.of(**base, nprocs=a.nprocs, **layout)).flags()  # partitions, chunks: cached
    opts = {**base, **layout, "nprocs": a.nprocs, "epochs": a.epochs, "eval_every": 1,
            "progress": "none", "threads": 1, "comm_timeout": 600}
    argv = [x for k, v in opts.items() for x in (f"--{k.replace('_', '-')}", str(v))] + flags
    with tempfile.TemporaryDirectory(prefix="fg-cluster-") as out:
        t0 = time.perf_counter()
        summary = cluster.run_ranks(argv, Path(out), a.timeout)
        wall = time.perf_counter() - t0
        if "error" in summary:
            return row | {"error": summary["error"]}
        epoch_s, epochs = measured_epoch(Path(out))
    runs = row["runs"] + [{"epoch_s": epoch_s, "train_s": summary["epoch_time_s"], "wall_s": wall, "epochs": epochs}]
    median = statistics.median(r["epoch_s"] for r in runs)
    return row | {"runs": runs, "epoch_s": median, "train_s": statistics.median(r["train_s"] for r in runs),
                  "bytes": sum(summary["comm_bytes_per_epoch"].values()), "ratio": row["estimate_s"] / median}


def reestimate(rows: list[dict], a, graphs: dict | None = None, timers: dict | None = None) -> list[dict]:
    """The plan's estimate of each measured cell again (same graph, model, layout and measured link),
    from layer timings settled over all the cells: each layer kind timed once as the cells first need
    it, then again in rounds over all of them (``LayerTimer.settle``); ``graphs`` and ``timers``: those
    already loaded and timed."""
    from fullgraph.plan.epoch_time import Network

    graphs, timers, cpus = {} if graphs is None else graphs, {} if timers is None else timers, {}

    def again(r: dict) -> dict:
        if r["graph"] not in graphs:
            graphs[r["graph"]] = load_graph(TrainConfig.of(dataset=r["graph"], root=a.root))
        base = base_options(r["graph"], a.root, r["model"], r["depth"], r.get("precision", "fp32"))
        key = (r["graph"], r["model"], r["depth"])
        cpu = {k: r[k] for k in ("core_efficiency", "node_speed") if k in r}
        if not cpu and key not in cpus:  # cells run before it was measured: the cores shared, as they were then
            with CpuQuota(a.nprocs, 0) as quota:
                cpus[key] = model_cpu_speed(graphs[r["graph"]], base, quota)
        cpu = cpu or cpus[key]
        network = Network(r["link_gbps"], r["link_latency_us"], r["link_exchange_gbps"],
                          r.get("link_cpu_ns_per_byte", 0.0))  # not measured before 2026-11-24: none
        est = estimate(graphs[r["graph"]], base, LAYOUTS[r["layout"]], a.nprocs, network, timers, cpu)
        new = r | cpu | {"estimate_as_run_s": r.get("estimate_as_run_s", r["estimate_s"]),
                   "estimate_s": est["epoch_s"]}
        if "epoch_s" in r:
            new["ratio"] = est["epoch_s"] / r["epoch_s"]
        return new

    for r in rows:  # every kind the cells need, timed once
        again(r)
    for timer in timers.values():
        timer.settle()
    return [again(r) for r in rows]


def cpu_speed(base: dict, rows: int, quota: CpuQuota, seconds: float = 2.0, rounds: int = 5,
              delay: float = 15.0) -> dict:
    """How fast ``quota.n`` processes running the model's middle layer at once compute (``probes/corun.py``),
    the median over ``rounds`` interleaved windows, against one process alone and uncapped.

    Capped (``quota.share``): ``{"node_speed": s}``, each process's throughput over the uncapped one's, its
    share of a core less what the others cost it through shared caches and memory bandwidth. Time-sliced:
    ``{"core_efficiency": e}``, all processes' throughput over that of one alone times the cores they can
    use: 1 when sharing costs nothing, lower when time-slicing, caches and memory bandwidth slow them."""
    probe, cores, n = str(Path(__file__).parent / "probes" / "corun.py"), os.cpu_count() or 1, quota.n
    start = time.time() + delay  # every process has loaded the graph and warmed up by then
    cgroups = [quota.procs(i) for i in range(n)]
    procs = [subprocess.Popen([sys.executable, probe, json.dumps(base), str(rows), str(start), str(seconds),
                               str(rounds), str(i), *([cgroups[i], quota.lobby()] if cgroups[i] else [])],
                              stdout=subprocess.PIPE, text=True, preexec_fn=quota.join(i)) for i in range(n)]
    outs = [json.loads(p.communicate(timeout=120 + 2 * rounds * seconds)[0].strip().splitlines()[-1]) for p in procs]
    alone = outs[0]["alone"]
    if quota.share:
        return {"node_speed": statistics.median(statistics.mean(o["together"][r] for o in outs) / alone[r]
                                                for r in range(rounds))}
    ratios = [sum(o["together"][r] for o in outs) / (min(n, cores) * alone[r]) for r in range(rounds)]
    return {"core_efficiency": min(1.0, statistics.median(ratios))}


def model_cpu_speed(graph, base: dict, quota: CpuQuota, seconds: float = 2.0, delay: float = 15.0) -> dict:
    """``cpu_speed`` of the ranks running this model's layers on their share of the graph, printed
    (``seconds``, ``delay``: its windows and its start, longer for a graph whose layer takes seconds)."""
    cpu = cpu_speed(base, max(1, graph.num_nodes // quota.n), quota, seconds=seconds, delay=delay)
    how = (f"each capped at {quota.share:.2g} of a core, at {cpu['node_speed']:.2f} of a solo core's speed"
           if quota.share else f"at {cpu['core_efficiency']:.2f} of the cores' solo speed")
    print(f"* {quota.n} processes on {os.cpu_count()} cores run a {base['model']} layer of width {base['hidden']} "
          f"{how}", flush=True)
    return cpu


def link_network(cluster):
    """The plan's network for this cluster: the link as measured (a tbf-limited veth delivers less than
    its nominal rate, gloo adds its own cost to every message, and the kernel moves every byte on the
    cores the ranks compute on), the nominal rate if the probe fails."""
    from fullgraph.plan.epoch_time import Network

    link = cluster.probe()
    if "error" in link:
        print(f"* link probe failed ({link['error'][:200]}); planning with the nominal {cluster.rate} Gbit/s")
        return Network(cluster.rate)
    print(f"* link at a nominal {cluster.rate:g} Gbit/s: measured {link['gbps']:.3g} Gbit/s point to point, "
          f"{link['exchange_gbps']:.3g} Gbit/s in an all-to-all, {link['latency_us']:.0f} us per message, "
          f"{link['cpu_ns_per_byte']:.2g} ns of the cores' time per byte", flush=True)
    return Network(link["gbps"], link["latency_us"], link["exchange_gbps"], link["cpu_ns_per_byte"])


def print_cells(rows: list[dict]) -> None:
    """The table (one line per layout, grouped by graph, model, depth and rate; a cell run more than
    once shows its runs' range after the median) and the targets: the plan within 25 % of the measured
    epoch, its pick the fastest layout or within 10 % of it."""
    print("\n| graph | model | L | Gbit/s | layout | measured s | plan s | plan/measured | MiB/epoch | fastest | plan picks |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["graph"], r["model"], r["depth"], r["rate_gbit"], r.get("precision", "fp32")),
                          []).append(r)
    close = picks = 0
    for key, rs in groups.items():
        ok = [r for r in rs if "epoch_s" in r]
        fastest = min(ok, key=lambda r: r["epoch_s"]) if ok else None
        picked = min(rs, key=lambda r: r["estimate_s"])
        good_pick = fastest is not None and "epoch_s" in picked and picked["epoch_s"] <= 1.1 * fastest["epoch_s"]
        picks += good_pick
        for r in rs:
            runs = [run["epoch_s"] for run in r.get("runs", [])]
            measured = f"{r['epoch_s']:.3g}" if "epoch_s" in r else f"failed: {r['error'][:60]}"
            if len(runs) > 1:
                measured += f" ({min(runs):.3g}-{max(runs):.3g})"
            if "epoch_s" in r and "error" in r:  # a later repeat failed: the runs before it stand
                measured += f" (run {len(runs) + 1} failed)"
            ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
            close += "ratio" in r and abs(r["ratio"] - 1) <= 0.25
            label = r["layout"] + (f" {key[4]}" if key[4] != "fp32" else "")
            print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]:g} | {label} | {measured} | {r['estimate_s']:.3g} | "
                  f"{ratio} | {r['plan_bytes'] / 2**20:.1f} | {fastest['layout'] if fastest else '-'} | "
                  f"{picked['layout']}{'' if good_pick else ' (miss)'} |", flush=True)
    print(f"\nplan within 25 % of the measured epoch: {close} of {len(rows)} cells; its pick the fastest or within "
          f"10 % of it: {picks} of {len(groups)} settings")


def run_grid(a, quota: CpuQuota) -> tuple[list[dict], dict, dict]:
    """Every cell of ``a``'s grid measured and estimated: its rows, the graphs loaded and the layer timers."""
    rows, graphs, timers, cpus = [], {}, {}, {}
    for name in a.graphs.split(","):
        graph = graphs[name] = load_graph(TrainConfig.of(dataset=name, root=a.root))
        for model in a.models.split(","):  # before the links exist: the probe's processes share the cores only
            for depth in [int(d) for d in a.depths.split(",")]:
                cpus[name, model, depth] = model_cpu_speed(graph, base_options(name, a.root, model, depth), quota,
                                                   a.probe_seconds, a.probe_delay)
        for rate in [float(r) for r in a.rates.split(",")]:
            with Cluster(a.nprocs, rate, quota) as cluster:
                network = link_network(cluster)
                cells = [cell(graph, name, a.root, model, depth, layout, network, a, cluster, timers,
                              cpus[name, model, depth], precision)
                         for model in a.models.split(",") for depth in [int(d) for d in a.depths.split(",")]
                         for layout in a.layouts.split(",") for precision in a.precisions.split(",")]
                for repeat in range(a.repeats):  # every cell once, then again: each sees the VM's slow minutes
                    for i, row in enumerate(cells):
                        if "error" not in row:
                            cells[i] = add_run(row, a, cluster)
                            print(json.dumps({k: v for k, v in cells[i].items() if k != "runs"}), flush=True)
                            write_json(a.out, {"rows": rows + cells})
                    for timer in timers.values():  # the layer timings, taken in the same minutes as the runs
                        timer.sample()
                rows += cells
    return rows, graphs, timers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--graphs", default="squirrel,coauthor-physics")
    ap.add_argument("--models", default="gcn,gcnii")
    ap.add_argument("--depths", default="16,32")
    ap.add_argument("--rates", default="0.1,1,10", help="link rates, Gbit/s")
    ap.add_argument("--layouts", default="graph,pipeline,hybrid 2x2", help=f"of: {', '.join(LAYOUTS)}")
    ap.add_argument("--precisions", default="fp32", help="--comm-precision values to run each cell at")
    ap.add_argument("--nprocs", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of each cell, interleaved (all cells once, then again); the median is measured")
    ap.add_argument("--cpu-share", type=float, default=None,
                    help="cap each rank at this share of a core, in a CPU cgroup of its own (default: the cores "
                         "over --nprocs where the ranks outnumber the cores, else 0: no cap)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--probe-seconds", type=float, default=2.0, help="each window of the CPU probe (probes/corun.py)")
    ap.add_argument("--probe-delay", type=float, default=15.0,
                    help="seconds the CPU probe's processes get to load the graph before the first window")
    ap.add_argument("--out", default="runs/bench_cluster.json")
    ap.add_argument("--sync-probe", action="store_true",
                    help="only measure, per rate, what an exchange between busy ranks costs (probes/sync.py)")
    ap.add_argument("--table", nargs="+", metavar="JSON", help="only print the table of earlier runs' JSON files")
    ap.add_argument("--reestimate", action="store_true",
                    help="with --table: estimate those cells again with this code, on the links they measured "
                         "(the estimates they ran with are kept as estimate_as_run_s), and write them to --out")
    a = ap.parse_args()
    if a.table:
        rows = [r for f in a.table for r in json.loads(Path(f).read_text())["rows"]]
        if a.reestimate:
            rows = reestimate(rows, a)
            write_json(a.out, {"rows": rows})
        print_cells(rows)
        return 0
    cores = os.cpu_count() or 1
    if os.geteuid() != 0 or not (shutil.which("ip") and shutil.which("tc")):
        print("cluster.py needs root and the ip and tc commands (network namespaces, veth pairs, tbf): not here")
        return 2
    print_header()
    share = a.cpu_share if a.cpu_share is not None else (cores / a.nprocs if a.nprocs > cores else 0.0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the with blocks' exits remove namespaces and cgroups
    with CpuQuota(a.nprocs, share) as quota:
        if a.sync_probe:
            for rate in [float(r) for r in a.rates.split(",")]:
                with Cluster(a.nprocs, rate, quota) as cluster:
                    cost = cluster.sync_cost()
                    print(f"* {a.nprocs} ranks on {cores} cores, {rate:g} Gbit/s: {json.dumps(cost)}", flush=True)
            return 0
        print(f"* configuration: {a.nprocs} ranks, one network namespace each"
              f"{f', each capped at {share:.2g} of a core' if share else ''}; graphs {a.graphs}, models {a.models}, "
              f"depths {a.depths}, rates {a.rates} Gbit/s, {a.epochs} epochs (median epoch after the first)")
        rows, graphs, timers = run_grid(a, quota)
    rows = reestimate(rows, a, graphs, timers)  # the timings settled (the first estimate: as run)
    write_json(a.out, {"rows": rows})
    print_cells(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
