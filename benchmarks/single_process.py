"""Single-process epoch time and peak memory: fullgraph against PyTorch Geometric's GCN, and per precision.

One run measures, on the same graph, split and model, three ways of training a GCN:

* ``fullgraph``      -- ``fullgraph.models`` GCN through ``SingleEngine`` (sparse input features stay sparse);
* ``pyg edge_index`` -- ``GCNConv(cached=True)`` message passing over a COO ``edge_index`` [2, E];
* ``pyg adj_t``      -- ``GCNConv(cached=True)`` over a transposed torch.sparse CSR ``adj_t``
  (``ToSparseTensor(layout=torch.sparse_csr)``), PyG's fast sparse-product form.

Each (graph, depth, system) runs in its own process (``--worker``), so one system's allocations and
thread pools cannot leak into another's numbers. A worker first trains one step of its system on a
tiny graph (lazy imports and one-time initialisation then belong to the baseline), loads the graph
with fullgraph's loader, resets the kernel's RSS high-water mark, converts the graph into its
system's form, builds the model and trains. ``train peak`` = high-water mark after the reset minus
the RSS just before it (what the system adds on top of the loaded graph); ``process peak`` is the
whole process's high-water mark. Epoch time is the median wall time of the timed epochs; the
median process CPU time and the 1-min load average are reported next to it, because a busy
machine inflates wall times.

Ratios are fullgraph over the *better* PyG form for each metric; the targets are checked for the
2-layer (time and memory) and 32-layer (memory) GCN. See ``benchmarks/README.md``.

``--precisions fp32,bf16,fp16`` runs fullgraph's step once per compute precision, the way
``fullgraph train --precision`` does (``Trainer.train_step``: the forward and backward under
``Precision.compute()``, then fp16's unscale and overflow check before Adam steps), and reports each
against fullgraph in fp32 and against the better PyG form (PyG always runs in fp32). ``--models``
takes other fullgraph models (``sage``, ...) for fullgraph alone: PyG's forms here are GCN only. Usage::

    .venv/bin/python benchmarks/single_process.py                    # the full benchmark (~30 min, 2 cores)
    .venv/bin/python benchmarks/single_process.py --graphs tolokers --depths 2 --epochs 3
    .venv/bin/python benchmarks/single_process.py --graphs coauthor-physics,amazon-computers \\
        --models gcn,sage --depths 3 --precisions fp32,bf16,fp16
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _harness import REPO, environment, hwm_bytes, reset_hwm, rss_bytes, write_json
from _single_process_report import cpu_low_precision, print_graph_line, print_setup, print_summary, print_table, targets_json
from _single_process_systems import build_fullgraph, build_pyg, describe_graph, load_graph, release_free_memory

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data"
GRAPHS = ("coauthor-physics", "tolokers", "rmat")
SYSTEMS = ("fullgraph", "pyg-edge_index", "pyg-adj_t")
PRECISIONS = ("fp32", "bf16", "fp16")  # fullgraph.optim.precision.COMPUTE_PRECISIONS
RESULT_MARK = "@@result "


# ----------------------------------------------------------------------------- worker
def run_worker(cfg: dict) -> dict:
    import torch

    torch.set_num_threads(cfg["threads"])
    importlib.import_module("fullgraph.data.datasets")  # imports are part of the baseline, not of the peak

    def build(graph, depth):
        run_cfg = {**cfg, "depth": depth}
        if cfg["system"] == "fullgraph":
            return build_fullgraph(graph, run_cfg)
        return build_pyg(graph, run_cfg, cfg["system"].split("-", 1)[1])

    # One step on a tiny graph first: lazy imports (torch.optim alone pulls in ~70 MiB of modules),
    # generated code and library pages touched on first use then belong to the baseline, not the peak.
    from fullgraph.data.synthetic import planted_partition

    # bf16/fp16: features wider than hidden, so that the fused GCN layer transforms first; aggregating
    # first (dense input narrower than hidden) fails in its backward under autocast in fullgraph/ops/gcn.py
    width = 8 if cfg.get("precision", "fp32") == "fp32" else 2 * cfg["hidden"]
    build(planted_partition(num_nodes=60, num_classes=3, num_features=width, seed=0), 2)[0]()
    release_free_memory()
    rss_imports = rss_bytes()
    graph = load_graph(cfg["graph"], cfg["root"], cfg["rmat_scale"], cfg["rmat_edges"])
    info = describe_graph(graph)
    release_free_memory()
    hwm_load = hwm_bytes()
    rss_before = rss_bytes()
    reset_ok = reset_hwm()

    step, extra = build(graph, cfg["depth"])
    load_start = os.getloadavg()[0]
    times, cpu_times, losses = [], [], []
    warmup = cfg["warmup"]
    for epoch in range(warmup + cfg["epochs"]):
        t0, c0 = time.perf_counter(), time.process_time()
        losses.append(step())
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
        timed = epoch + 1 - warmup
        if timed >= cfg["min_epochs"] and sum(times[warmup:]) >= cfg["budget_s"]:
            break
    hwm_train = hwm_bytes()
    return {
        "graph": info, "system": cfg["system"], "depth": cfg["depth"], **extra,
        "epoch_time_s": statistics.median(times[warmup:]), "epoch_times_s": times[warmup:],
        "epoch_cpu_s": statistics.median(cpu_times[warmup:]), "epoch_cpu_times_s": cpu_times[warmup:],
        "warmup_times_s": times[:warmup],
        "train_peak_bytes": hwm_train - rss_before, "process_peak_bytes": max(hwm_load, hwm_train),
        "rss_after_imports_bytes": rss_imports, "rss_graph_loaded_bytes": rss_before,
        "hwm_reset": reset_ok, "losses": losses, "threads": torch.get_num_threads(),
        "load_avg_1min": [load_start, os.getloadavg()[0]],
    }


def worker_main(cfg_json: str) -> None:
    result = run_worker(json.loads(cfg_json))
    print(RESULT_MARK + json.dumps(result), flush=True)


# ----------------------------------------------------------------------------- driver
def spawn(cfg: dict, timeout_s: float) -> dict:
    """Run one configuration in a fresh interpreter; a failure (OOM kill, error) becomes a record."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(cfg)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"system": cfg["system"], "depth": cfg["depth"], "error": f"timed out after {timeout_s:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            out = json.loads(line[len(RESULT_MARK):])
            out["wall_s"] = time.perf_counter() - t0
            return out
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"system": cfg["system"], "depth": cfg["depth"],
            "error": f"exit status {proc.returncode}: " + " | ".join(tail)}


def per_depth(spec: str, depth: int, shallow: int, deep: int) -> int:
    """A count from a ``--epochs``/``--warmup`` value: one number for every depth, or ``depth:count``
    pairs; depths not listed get ``shallow`` up to 4 layers and ``deep`` beyond."""
    if ":" not in spec:
        return int(spec)
    table = dict(tuple(int(v) for v in item.split(":")) for item in spec.split(",") if item)
    return table.get(depth, shallow if depth <= 4 else deep)


def run_key(system: str, precision: str) -> str:
    """The name of a run in a configuration's table: fullgraph in fp32 keeps its plain name."""
    return system if system != "fullgraph" or precision == "fp32" else f"fullgraph-{precision}"


def ratios(runs: dict, key: str = "fullgraph") -> dict:
    """fullgraph (run ``key``) / better PyG form, per metric, with the form that was better."""
    fg = runs.get(key, {})
    pyg = {s: r for s, r in runs.items() if s.startswith("pyg") and "error" not in r}
    out = {}
    for metric, m in (("time", "epoch_time_s"), ("memory", "train_peak_bytes")):
        if "error" in fg or not fg or not pyg:
            continue
        best = min(pyg, key=lambda s: pyg[s][m])
        out[metric] = {"ratio": fg[m] / pyg[best][m], "against": best}
    return out


def precision_rows(runs: dict) -> list[dict]:
    """Each fullgraph precision's epoch time and train peak, over fullgraph fp32's and the better PyG form's."""
    base = runs.get("fullgraph", {})
    rows = []
    for key, r in runs.items():
        if not key.startswith("fullgraph") or "error" in r:
            continue
        vs_fp32 = {} if not base or "error" in base else {
            "time": r["epoch_time_s"] / base["epoch_time_s"], "memory": r["train_peak_bytes"] / base["train_peak_bytes"]}
        rows.append({"precision": r["precision"], "epoch_time_s": r["epoch_time_s"], "epoch_cpu_s": r["epoch_cpu_s"],
                     "train_peak_bytes": r["train_peak_bytes"], "skipped_steps": r["skipped_steps"],
                     "steps": len(r["losses"]), "last_loss": r["losses"][-1], "vs_fp32": vs_fp32,
                     "vs_pyg": ratios(runs, key)})
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graphs", default=",".join(GRAPHS),
                   help="comma-separated: coauthor-physics, tolokers, rmat (synthetic) or any fullgraph dataset name")
    p.add_argument("--depths", default="2,32", help="comma-separated GCN depths (default: 2,32)")
    p.add_argument("--epochs", default="2:10,32:3",
                   help="most timed epochs per run: one number or depth:count pairs "
                        "(default 2:10,32:3; unlisted depths: 10 up to 4 layers, else 3)")
    p.add_argument("--warmup", default="2:2,32:1",
                   help="untimed epochs first: one number or depth:count pairs (default 2:2,32:1; unlisted: 2, else 1)")
    p.add_argument("--budget-s", type=float, default=60.0,
                   help="stop timing a run once its timed epochs took this long (default: 60)")
    p.add_argument("--min-epochs", type=int, default=2, help="timed epochs each run gets at least (default: 2)")
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"subset of {','.join(SYSTEMS)}")
    p.add_argument("--models", default="gcn",
                   help="comma-separated fullgraph models (default: gcn); PyG's forms run for gcn only")
    p.add_argument("--precisions", default="fp32",
                   help=f"comma-separated compute precisions of fullgraph's runs, among {','.join(PRECISIONS)} "
                        "(default: fp32); each is also given as a ratio to fp32")
    p.add_argument("--root", default=None,
                   help="data root (default: $FULLGRAPH_DATA, else <repo>/../shared/data)")
    p.add_argument("--threads", type=int, default=None, help="torch threads per run (default: torch's default)")
    p.add_argument("--rmat-scale", type=int, default=17, help="synthetic graph: 2**scale nodes (default: 17)")
    p.add_argument("--rmat-edges", type=int, default=1_200_000,
                   help="synthetic graph: R-MAT edge draws before symmetrizing (default: 1200000, about 2.2M directed edges)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run before it is abandoned")
    p.add_argument("--out", default="runs/bench_single_process.json", help="JSON results file")
    args = p.parse_args(argv)
    args.graphs = [g.strip() for g in args.graphs.split(",") if g.strip()]
    args.depths = [int(d) for d in args.depths.split(",") if d.strip()]
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.precisions = [q.strip() for q in args.precisions.split(",") if q.strip()]
    for what, chosen, allowed in (("systems", args.systems, SYSTEMS), ("precisions", args.precisions, PRECISIONS)):
        unknown = sorted(set(chosen) - set(allowed))
        if unknown:
            p.error(f"expected {what} among {', '.join(allowed)} (got {', '.join(unknown)})")
    if args.root is None:
        args.root = os.environ.get("FULLGRAPH_DATA") or str(DEFAULT_ROOT)
    return args


def run_configuration(args, graph: str, model: str, depth: int, plan: dict, described: bool) -> tuple[dict, bool]:
    """Every system (and fullgraph precision) of one (graph, model, depth), each in its own process."""
    runs = {}
    warmup, epochs = plan[depth]
    for system in args.systems:
        if system != "fullgraph" and model != "gcn":
            continue  # PyG's forms here are GCN only
        for precision in args.precisions if system == "fullgraph" else ["fp32"]:
            cfg = {"graph": graph, "root": args.root, "system": system, "model": model, "precision": precision,
                   "depth": depth, "hidden": 256, "dropout": 0.5, "lr": 0.01, "seed": 0, "warmup": warmup,
                   "epochs": epochs, "min_epochs": args.min_epochs, "budget_s": args.budget_s,
                   "threads": args.threads, "rmat_scale": args.rmat_scale, "rmat_edges": args.rmat_edges}
            key = run_key(system, precision)
            runs[key] = spawn(cfg, args.timeout) | {"config": cfg}
            if not described and "graph" in runs[key]:
                print_graph_line(runs[key]["graph"])
                described = True
    return runs, described


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    args.threads = args.threads or torch.get_num_threads()
    env = environment()
    mach = env["machine"]
    plan = {d: (per_depth(args.warmup, d, 2, 1), per_depth(args.epochs, d, 10, 3)) for d in args.depths}
    print_setup(args, env, plan)
    rows, records = [], []
    for graph in args.graphs:
        described = False
        for model in args.models:
            for depth in args.depths:
                runs, described = run_configuration(args, graph, model, depth, plan, described)
                records += list(runs.values())
                if not described:
                    print(f"\n== {graph}")
                rat, prec = (ratios(runs) if model == "gcn" else {}), precision_rows(runs)
                print_table(model, depth, runs, rat, prec)
                rows.append({"graph": graph, "model": model, "depth": depth, "ratios": rat, "precisions": prec})
    print_summary(rows)
    busy = [r for r in records if "load_avg_1min" in r and max(r["load_avg_1min"]) > (mach["cores"] or 1)]
    if busy:
        print(f"\nnote: in {len(busy)} of {len(records)} runs the 1-min load average exceeded the {mach['cores']} cores "
              "(other processes were running): their wall times include waiting for a core; 'cpu' is less affected")
    out = write_json(args.out, {"machine": mach, "cpu_low_precision": cpu_low_precision(), "versions": env["versions"],
                                "targets": targets_json(), "args": vars(args), "runs": records, "summary": rows})
    print(f"\nresults written to {out}")
    return 0



if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2])
    else:
        sys.exit(main())
