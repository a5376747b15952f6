"""Heterogeneous graphs, speed and memory: the built-in R-GCN against PyG's ``RGCNConv`` and ``FastRGCNConv``,
and an ogbn-mag-sized layout converted and trained under graph parallelism.

    .venv/bin/python benchmarks/hetero_speed.py --out-dir benchmarks/results/hetero       # ~12 min on 2 cores
    .venv/bin/python benchmarks/hetero_speed.py --parts speed --graphs dblp --epochs 5      # a quick look

``speed``: R-GCN 2 layers x hidden 64, dropout 0.5, Adam lr 0.01, one process, ``--threads`` threads on every
side; each (graph, system) a fresh interpreter, one at a time (after waiting, ``--wait-idle`` s in all, for a
quiet CPU). Graphs: HeCo's DBLP (``load_heco``: 4 node types, 3 relations + reverses = 6) and a ``fullgraph
generate typed`` graph (``--typed`` nodes,draws; 4 types, relations ``type0 -> type1 -> type2 -> type3 ->
type0`` + their reverses = 8; 32 features on the even types; ~10^7 stored edges), written once to ``--work``.

* **fullgraph**: ``Trainer(TrainConfig.of(model="rgcn", ...), graph)``, ``Trainer.train_step`` timed.
* **pyg-rgcn** / **pyg-fast**: ``hetero_accuracy.PygRGCN`` (an ``nn.Linear`` per featured type, an embedding
  table per featureless type, then 2 convs, ``aggr="mean"``, ReLU + dropout between) with ``RGCNConv`` or
  ``FastRGCNConv``, over ``edge_index`` + ``edge_type``; cross-entropy on the train nodes, Adam.

Epoch time: median of the timed epochs after 1 warm-up (>= 3, then until ``--budget-s`` or ``--epochs``);
**train peak** = ``VmHWM`` after loading the graph and resetting the mark, minus the RSS then (``edge_data.py``'s
measure); **process peak** = ``VmHWM``. ``FastRGCNConv`` gathers an ``[in, out]`` weight per edge and keeps it
and its gradient: a run whose ``2 E in out`` float32 exceed 60% of the available memory is skipped. Targets
(fullgraph / each PyG form): time <= 0.5x, train peak <= 0.7x.

``mag``: ``write_synthetic_mag`` at ``--mag-scale`` and a fifth of it, each ``fullgraph convert``-ed in a
subprocess (peak = ``os.wait4``'s ``ru_maxrss``): bytes per stored edge, the line through the two, extrapolated
to scale 1. Then ``fullgraph train --model rgcn --hidden 64 --threads 1 --epochs 2`` on the larger one,
``--parallel single`` and ``--parallel graph --nprocs 4`` (a fresh ``FULLGRAPH_CACHE``: the partition is made in
the run): each rank's ``peak_rss_bytes_per_rank`` against the one process's. Results: benchmarks/README.md
("Heterogeneous graphs: speed and memory"); ``--markdown-from JSON`` rewrites an earlier result's ``.md``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import MappingProxyType

import torch
from torch import nn
from torch_geometric.nn import FastRGCNConv

from fullgraph.config import TrainConfig
from fullgraph.data.formats.heco import load_heco
from fullgraph.data.load import load_graph
from fullgraph.data.synthetic.ogb_hetero import write_synthetic_mag
from fullgraph.data.synthetic.typed import typed_rmat
from fullgraph.train.trainer import Trainer

from _harness import REPO, environment, hwm_bytes, print_header, reset_hwm, rss_bytes, train, write_json
from _single_process_systems import release_free_memory
from edge_data import RESULT_MARK, adam_step, profiled, timed
from edge_data import spawn as spawn_worker
from hetero_accuracy import PygRGCN, pyg_inputs
from your_model import IdleWaiter, mem_available

PARTS, GRAPHS, SYSTEMS = ("speed", "mag"), ("dblp", "typed"), ("fullgraph", "pyg-rgcn", "pyg-fast")
SETTINGS = MappingProxyType({"layers": 2, "hidden": 64, "dropout": 0.5, "lr": 0.01})
TARGETS = MappingProxyType({"time": 0.5, "memory": 0.7})
MAG_EDGES_SCALE1, MIB, FAST_SHARE, PROFILE_ROWS = 21_111_007, 1 << 20, 0.6, 15


def load(cfg: dict):
    """The typed graph of ``cfg["graph"]``: DBLP as ``load_heco`` gives it, the written synthetic one, or a tiny one."""
    if cfg["graph"] == "dblp":
        return load_heco(Path(cfg["root"]) / "heco_dblp", name="dblp")
    if cfg["graph"] == "tiny":
        return typed_rmat(400, 3000, num_types=4, num_relations=4, seed=0)
    return load_graph(TrainConfig.of(dataset=cfg["typed_folder"]))


def describe(graph) -> dict:
    t = graph.node_types
    return {"name": graph.name, "nodes": graph.num_nodes, "edges": int(graph.indices.numel()),
            "node_types": t.num_types, "relations": t.num_relations, "featured_types": sum(w > 0 for w in t.widths),
            "classes": int(graph.num_classes), "train_nodes": int(graph.train_mask.sum()), "types": t.describe()}


def build_fullgraph(graph, cfg: dict):
    tc = TrainConfig.of(model="rgcn", seed=cfg["seed"], epochs=1 << 20, metric="acc", progress="none",
                        threads=cfg["threads"], weight_decay=0.0, **SETTINGS)
    trainer = Trainer(tc, graph).build()
    epoch = itertools.count(1)
    return lambda: float(trainer.train_step(next(epoch)))


def build_pyg(graph, cfg: dict, fast: bool):
    """``PygRGCN`` (RGCNConv), or the same with ``FastRGCNConv`` convs, and its Adam step."""
    inputs = pyg_inputs(graph)
    torch.manual_seed(cfg["seed"])
    model = PygRGCN(graph.node_types, SETTINGS["hidden"], graph.num_classes, SETTINGS["layers"], SETTINGS["dropout"])
    if fast:
        model.convs = nn.ModuleList(FastRGCNConv(c.in_channels, c.out_channels, c.num_relations, aggr="mean")
                                    for c in model.convs)
    args = (inputs["blocks"], inputs["edge_index"], inputs["edge_type"])
    return adam_step(model, lambda training: model(*args), graph, SETTINGS["lr"])


def fast_need(graph) -> int:
    """Bytes of FastRGCNConv's first conv's per-edge weights and their gradient: 2 E hidden hidden float32."""
    return 2 * int(graph.indices.numel()) * SETTINGS["hidden"] ** 2 * 4


def speed_worker(cfg: dict) -> dict:
    torch.set_num_threads(cfg["threads"])
    system = cfg["system"]

    def build(g):
        return build_fullgraph(g, cfg) if system == "fullgraph" else build_pyg(g, cfg, system == "pyg-fast")
    build(load({"graph": "tiny"}))()  # lazy imports and one-time set-up: before the baseline
    graph = load(cfg)
    info, avail = describe(graph), mem_available()
    if system == "pyg-fast" and fast_need(graph) > FAST_SHARE * avail:
        return {"system": system, "graph": info, "skipped": f"FastRGCNConv's per-edge weights weight[edge_type] "
                f"and their gradient, 2 x {info['edges']:,} x {SETTINGS['hidden']} x {SETTINGS['hidden']} float32 "
                f"= {fast_need(graph) / 2**30:,.1f} GiB, exceed {FAST_SHARE:.0%} of the {avail / 2**30:.1f} GiB "
                f"available", "need_bytes": fast_need(graph), "available_bytes": avail}
    release_free_memory()
    hwm_load, rss_before, reset_ok = hwm_bytes(), rss_bytes(), reset_hwm()
    step = build(graph)
    out = timed(step, cfg["warmup"], cfg["epochs"], cfg["budget_s"])
    peak = hwm_bytes()
    return {"system": system, "graph": info, **out, "train_peak_bytes": peak - rss_before,
            "process_peak_bytes": max(hwm_load, peak), "rss_after_load_bytes": rss_before, "hwm_reset": reset_ok,
            "profile": profiled(step, cfg["profile_rows"]) if system == "fullgraph" or cfg["profile_all"] else None,
            "threads": torch.get_num_threads()}


def spawn(cfg: dict, args, label: str) -> dict:
    """One configuration in a fresh interpreter: ``edge_data.spawn`` running this script's worker."""
    return spawn_worker(cfg, args, label, script=__file__, width=22)


def run_row(g: str, s: str, r: dict) -> str:
    """One run as a row of the Markdown table (printed as it finishes, too)."""
    gi = r.get("graph") or {}
    name = f"{g} ({gi.get('nodes', 0):,} nodes, {gi.get('edges', 0):,} edges, {gi.get('relations')} relations)"
    if "epoch_time_s" not in r:
        return row(name, s, r.get("skipped") or r.get("error"), *[""] * 6)
    return row(name, s, f"{r['epoch_time_s']:.3f}", f"{r['epoch_cpu_s']:.3f}", len(r["epoch_times_s"]),
               f"{r['train_peak_bytes'] / MIB:,.0f}", f"{r['process_peak_bytes'] / MIB:,.0f}",
               f"{r['foreign_cores']:.2f}", f"{r['load_avg_1min'][0]:.1f}-{r['load_avg_1min'][1]:.1f}")


def ratios(runs: dict) -> dict:
    """fullgraph / each PyG form that ran, per metric, with the target's verdict; and which form is PyG's best."""
    out, mine = {}, runs["fullgraph"]
    for name, key in (("time", "epoch_time_s"), ("memory", "train_peak_bytes"), ("process_peak", "process_peak_bytes")):
        pyg = {s: r[key] for s, r in runs.items() if s != "fullgraph" and key in r}
        if key not in mine or not pyg:
            continue
        limit = TARGETS.get(name)
        per = {s: {"ratio": mine[key] / v, "pass": None if limit is None else mine[key] / v <= limit}
               for s, v in pyg.items()}
        out[name] = {"target": limit, "against": per, "pyg_best": min(pyg, key=pyg.get)}
        for s, q in per.items():
            verdict = "" if limit is None else f" (target <= {limit}: {('FAIL', 'PASS')[q['pass']]})"
            print(f"   {'':<22}{name} fullgraph / {s}: {q['ratio']:.3f}x{verdict}", flush=True)
    return out


def part_speed(args) -> dict:
    if "typed" in args.graphs:
        write_typed(args)
    print("\n== speed: R-GCN 2 x 64, one process; | graph | system | epoch s (median) | CPU s | timed epochs | train "
          "peak MiB | process peak MiB | foreign cores | 1-min load |")
    base = {"part": "speed", "root": str(Path(args.root).resolve()), "typed_folder": str(args.typed_folder),
            "threads": args.threads, "seed": args.seed, "warmup": 1, "epochs": args.epochs,
            "budget_s": args.budget_s, "profile_rows": PROFILE_ROWS, "profile_all": args.profile_all}
    out = {}
    for g in args.graphs:
        runs = {}
        for system in args.systems:
            runs[system] = spawn(base | {"graph": g, "system": system}, args, f"{g} {system}")
            print(run_row(g, system, runs[system]), flush=True)
        out[g] = {"runs": runs, "ratios": ratios(runs)}
        if runs.get("fullgraph", {}).get("profile"):
            print(f"   fullgraph's epoch on {g} under torch.profiler:\n{runs['fullgraph']['profile']}")
    return out


def write_typed(args) -> None:
    """``fullgraph generate typed`` into ``--work``, once (kept when it is already there)."""
    folder, (nodes, edges) = args.typed_folder, args.typed
    if (folder / "meta.json").is_file():
        return
    cmd = [sys.executable, "-m", "fullgraph", "generate", "typed", "--nodes", str(nodes), "--edges", str(edges),
           "--node-types", "4", "--relations", "4", "--features", "32", "--classes", "8", "--seed", str(args.seed),
           "--out", str(folder)]
    wall, peak, last = child(cmd)
    print(f"   generated: {last} ({wall:.0f} s, peak {peak / MIB:,.0f} MiB)", flush=True)


def child(cmd: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (``ru_maxrss``, bytes) and the last output line of ``cmd`` in a subprocess."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, env=env)
    text = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[2:5])} failed: {' | '.join(text.strip().splitlines()[-3:])}")
    return time.perf_counter() - t0, usage.ru_maxrss * 1024, (text.strip().splitlines() or [""])[-1]


def convert_at(scale: float, args) -> dict:
    """A synthetic mag folder at ``scale``, converted by ``fullgraph convert`` in a subprocess."""
    folder, native = args.work / f"mag-{scale:g}", args.work / f"mag-{scale:g}-native"
    shutil.rmtree(folder, ignore_errors=True), shutil.rmtree(native, ignore_errors=True)
    t0 = time.perf_counter()
    counts = write_synthetic_mag(folder, scale, args.seed)
    wrote = time.perf_counter() - t0
    wall, peak, last = child([sys.executable, "-m", "fullgraph", "convert", "--dataset", str(folder),
                              "--out", str(native)])
    stored = int(json.loads((native / "meta.json").read_text())["counts"]["num_edges"])
    row = {"scale": scale, "nodes": sum(counts["nodes"].values()), "input_edges": sum(counts["edges"].values()),
           "stored_edges": stored, "write_s": wrote, "convert_s": wall, "convert_peak_bytes": peak,
           "bytes_per_stored_edge": peak / stored, "native": str(native), "said": last}
    print(f"   scale {scale:g}: {row['nodes']:,} nodes, {row['input_edges']:,} input / {stored:,} stored edges; write "
          f"{wrote:.1f} s, convert {wall:.1f} s, peak {peak / MIB:,.0f} MiB = {peak / stored:.1f} B / stored edge")
    return row


def extrapolate(rows: list[dict]) -> dict:
    """The line peak = a + b E through the two converts, at scale 1's stored edges (the same ratio to input edges)."""
    small, big = rows
    b = (big["convert_peak_bytes"] - small["convert_peak_bytes"]) / (big["stored_edges"] - small["stored_edges"])
    a = big["convert_peak_bytes"] - b * big["stored_edges"]
    stored1 = big["stored_edges"] / big["input_edges"] * MAG_EDGES_SCALE1
    out = {"fixed_bytes": a, "bytes_per_stored_edge": b, "scale1_stored_edges": stored1,
           "scale1_peak_bytes_extrapolated": a + b * stored1,
           "scale1_peak_bytes_at_top_ratio": big["bytes_per_stored_edge"] * stored1}
    print(f"   line: {a / MIB:,.0f} MiB + {b:.1f} B / stored edge; scale 1 (~{stored1:,.0f} stored edges, "
          f"extrapolated): {out['scale1_peak_bytes_extrapolated'] / 2**30:.2f} GiB (at the top size's "
          f"{big['bytes_per_stored_edge']:.1f} B / edge: {out['scale1_peak_bytes_at_top_ratio'] / 2**30:.2f} GiB)")
    return out


def train_mag(native: str, args) -> dict:
    """One process against graph parallelism over 4 ranks, 1 thread each, 2 epochs, a fresh partition cache."""
    out, env = {}, os.environ | {"FULLGRAPH_CACHE": str(args.work / "cache")}
    shutil.rmtree(args.work / "cache", ignore_errors=True)
    for name, extra in (("single", ["--parallel", "single"]), ("graph-4", ["--parallel", "graph", "--nprocs", "4"])):
        shutil.rmtree(run_dir := args.work / f"run-{name}", ignore_errors=True)
        argv = ["--dataset", native, "--model", "rgcn", "--hidden", "64", "--threads", "1", "--epochs", "2", *extra]
        load0 = os.getloadavg()[0]
        r = train(argv, run_dir, timeout=args.timeout, env=env)
        s = r.get("summary") or {}
        out[name] = {"argv": argv, "wall_s": r["wall_s"], "load_avg_1min": [load0, os.getloadavg()[0]],
                     "error": r.get("error"), "peak_rss_bytes_per_rank": s.get("peak_rss_bytes_per_rank"),
                     "epoch_time_s": s.get("epoch_time_s"), "replication_factor": s.get("replication_factor"),
                     "comm_bytes_per_epoch": s.get("comm_bytes_per_epoch")}
        peaks = s.get("peak_rss_bytes_per_rank") or []
        print(f"   {name:<9} {r['wall_s']:6.1f} s, epoch {s.get('epoch_time_s') or float('nan'):.2f} s, peak RSS per "
              f"rank MiB: {', '.join(f'{p / MIB:,.0f}' for p in peaks) or r.get('error')}", flush=True)
    single, ranks = (out[k]["peak_rss_bytes_per_rank"] for k in ("single", "graph-4"))
    if single and ranks:
        out["rank_over_single"] = [p / single[0] for p in ranks]
        print(f"   each rank / one process: {', '.join(f'{q:.3f}' for q in out['rank_over_single'])}")
    return out


def part_mag(args) -> dict:
    print(f"\n== ogbn-mag's layout: synthetic at scales {args.mag_scale / 5:g} and {args.mag_scale:g}")
    rows = [convert_at(s, args) for s in (args.mag_scale / 5, args.mag_scale)]
    return {"convert": rows, "fit": extrapolate(rows), "train": train_mag(rows[-1]["native"], args)}


def head(cols: str, align: str) -> list[str]:
    """A Markdown table's first two lines: the columns ``cols`` names (comma-separated), ``align`` l or r for each."""
    return [row(*(c.strip() for c in cols.split(","))), row(*("---:" if a == "r" else "---" for a in align))]


def row(*cells) -> str:
    return "| " + " | ".join(map(str, cells)) + " |"


def speed_lines(speed: dict) -> list[str]:
    lines = [*head("graph, system, epoch s (median), CPU s, timed epochs, train peak MiB, process peak MiB, foreign "
                   "cores, 1-min load", "llrrrrrrl"), *(run_row(g, s, r) for g, v in speed.items()
                                                         for s, r in v["runs"].items()),
             "", *head("graph, measure, against, fullgraph / PyG, target, verdict", "lllrll")]
    for g, v in speed.items():
        for name, m in v["ratios"].items():
            for s, q in m["against"].items():
                verdict = "" if q["pass"] is None else ("PASS", "**FAIL**")[not q["pass"]]
                lines.append(row(g, name, s + (" (PyG's best)" if s == m["pyg_best"] else ""), f"{q['ratio']:.3f}",
                                 m["target"] or "", verdict))
    return lines


def mag_lines(mag: dict) -> list[str]:
    lines = head("scale, nodes, input edges, stored edges, write s, convert s, convert peak MiB, B / stored edge",
                 "r" * 8)
    lines += [row(f"{r['scale']:g}", f"{r['nodes']:,}", f"{r['input_edges']:,}", f"{r['stored_edges']:,}",
                  f"{r['write_s']:.1f}", f"{r['convert_s']:.1f}", f"{r['convert_peak_bytes'] / MIB:,.0f}",
                  f"{r['bytes_per_stored_edge']:.1f}") for r in mag["convert"]]
    f = mag["fit"]
    lines += ["", f"Line through the two: {f['fixed_bytes'] / MIB:,.0f} MiB + {f['bytes_per_stored_edge']:.1f} B / "
              f"stored edge; scale 1 (~{f['scale1_stored_edges']:,.0f} stored edges), extrapolated: "
              f"{f['scale1_peak_bytes_extrapolated'] / 2**30:.2f} GiB (at the top size's bytes per edge: "
              f"{f['scale1_peak_bytes_at_top_ratio'] / 2**30:.2f} GiB).", "",
              *head("run, wall s, epoch s, peak RSS per rank MiB, rank / one process", "lrrll")]
    t = mag["train"]
    for name in ("single", "graph-4"):
        r, q = t[name], t.get("rank_over_single") if name == "graph-4" else None
        peaks = ", ".join(f"{p / MIB:,.0f}" for p in r["peak_rss_bytes_per_rank"] or []) or r["error"]
        lines.append(row(name, f"{r['wall_s']:.1f}", f"{r['epoch_time_s'] or float('nan'):.2f}", peaks,
                         ", ".join(f"{x:.3f}" for x in q) if q else ""))
    return lines


def write_md(result: dict, path: Path) -> Path:
    lines = [f"R-GCN speed and memory, {result['date']}", "", *result["header"], ""]
    lines += speed_lines(result["speed"]) + [""] if "speed" in result else []
    lines += mag_lines(result["mag"]) + [""] if "mag" in result else []
    path.write_text("\n".join(lines))
    return path


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--parts", default=",".join(PARTS), help=f"subset of {','.join(PARTS)}")
    p.add_argument("--graphs", default=",".join(GRAPHS), help="graphs of the speed part")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="systems of the speed part")
    p.add_argument("--root", default=os.environ.get("FULLGRAPH_DATA") or str(REPO.parent / "shared" / "data"))
    p.add_argument("--threads", type=int, default=2, help="torch threads of every speed run, both sides (default: 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=10, help="speed: most timed epochs (default: 10)")
    p.add_argument("--budget-s", type=float, default=10.0, help="speed: stop after 3 timed epochs and this long")
    p.add_argument("--profile-all", action="store_true", help="profile PyG's runs too (one more epoch each)")
    p.add_argument("--typed", default="500000,5300000", help="synthetic typed graph: nodes,drawn edges")
    p.add_argument("--mag-scale", type=float, default=0.1, help="mag: the largest scale (default: 0.1)")
    p.add_argument("--work", default="/tmp/hetero_speed", help="where the graphs and runs are written")
    p.add_argument("--wait-idle", type=float, default=30.0, help="seconds in all to wait for a quiet machine")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per run before it is abandoned")
    p.add_argument("--out-dir", default="runs/hetero", help="where speed.json and speed.md go")
    p.add_argument("--markdown-from", help="only write the .md of this earlier speed.json, beside it")
    args = p.parse_args(argv)
    args.parts, args.graphs, args.systems = (v.split(",") for v in (args.parts, args.graphs, args.systems))
    args.typed, args.work = json.loads(f"[{args.typed}]"), Path(args.work).resolve()
    args.typed_folder = args.work / f"typed-{args.typed[0]}-{args.typed[1]}"
    if set(args.parts) - set(PARTS) or set(args.systems) - set(SYSTEMS) or "fullgraph" not in args.systems:
        p.error(f"expected parts among {', '.join(PARTS)} and systems among {', '.join(SYSTEMS)}, fullgraph included")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.markdown_from:
        src = Path(args.markdown_from)
        print(f"wrote {write_md(json.loads(src.read_text()), src.with_suffix('.md'))}")
        return 0
    args.waiter, started, env = IdleWaiter(args.wait_idle), time.perf_counter(), environment()
    args.work.mkdir(parents=True, exist_ok=True)
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"fullgraph heterogeneous speed and memory benchmark, {now}")
    header = print_header(env, threads=args.threads, machine_extra=[f"1-min load {os.getloadavg()[0]:.2f} at start"])
    print(f"config:   R-GCN {SETTINGS['layers']} x {SETTINGS['hidden']}; 1 warm-up + 3..{args.epochs} timed epochs, "
          f"{args.budget_s:g} s budget; typed graph {args.typed[0]:,} nodes, {args.typed[1]:,} draws; mag scale "
          f"{args.mag_scale:g}; seed {args.seed}", flush=True)
    result = {"date": now, "header": header, "machine": env["machine"], "versions": env["versions"],
              "args": {k: v for k, v in vars(args).items() if k != "waiter"}, "settings": dict(SETTINGS),
              "targets": dict(TARGETS), "load_avg_at_start": os.getloadavg()}
    for part in args.parts:
        t0 = time.perf_counter()
        result[part] = {"speed": part_speed, "mag": part_mag}[part](args)
        result[part + "_seconds"] = time.perf_counter() - t0
    result["load_avg_at_end"], result["total_s"] = os.getloadavg(), time.perf_counter() - started
    path = write_json(Path(args.out_dir) / "speed.json", result)
    print(f"\ntotal {result['total_s'] / 60:.1f} min; wrote {path} and {write_md(result, path.with_suffix('.md'))}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker_cfg = json.loads(sys.argv[2])
        print(RESULT_MARK + json.dumps(globals()[worker_cfg["part"] + "_worker"](worker_cfg)), flush=True)
    else:
        sys.exit(main())
