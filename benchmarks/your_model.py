"""Your own PyG model through fullgraph: a PyG ``GraphSAGE`` (``BasicGNN``) against plain PyG full-graph.

The model is the one a user writes and hands to ``fullgraph train --model FILE.py:build``::

    from torch_geometric.nn.models import GraphSAGE

    def build(in_dim, out_dim, hidden=256, layers=3, dropout=0.5):
        return GraphSAGE(in_dim, hidden, layers, out_dim, dropout=dropout)

The script writes that builder into a temporary file and runs every configuration in a fresh
process, one at a time: ``fullgraph`` through the real command (``--model FILE.py:build``, one process
and ``--parallel graph --nprocs k``), and the same builder's model trained by plain PyG full-graph in a
worker (``--worker``) in each of PyG's adjacency forms (``edge_index``, ``EdgeIndex``, a CSR ``adj_t``),
on the graph fullgraph's loader gives. Epoch time: the median after the first; peak: each process's
``VmHWM``. Ratios are fullgraph over the better PyG form (targets, one process: time <= 1.1x, peak
<= 1.0x). The CPU that other processes use during a run is recorded (``C``: contended); the method
in full is in ``benchmarks/README.md``.
See ``benchmarks/README.md``. Usage::

    .venv/bin/python benchmarks/your_model.py                                  # Coauthor-Physics, SAGE 3 x 256
    .venv/bin/python benchmarks/your_model.py --dataset cora --epochs 5 --nprocs 2   # a quick check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from _harness import (CLK_TCK, REPO, Sampler, environment, hwm_bytes, print_header, process_table, process_tree,
                      rss_bytes, train, write_json)
from _your_model_report import FOREIGN_BUSY_CORES, TARGETS, label, report

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data"
PYG_FORMS = ("edge_index", "EdgeIndex", "adj_t")
RESULT_MARK = "@@result "

BUILDER = '''"""The user's model (written by benchmarks/your_model.py): a PyG GraphSAGE, unchanged."""
from torch_geometric.nn.models import GraphSAGE


def build(in_dim, out_dim, hidden=256, layers=3, dropout=0.5):
    return GraphSAGE(in_dim, hidden, layers, out_dim, dropout=dropout)
'''


# ----------------------------------------------------------------------------- the PyG worker
EDGE_INDEX_MEMORY_SHARE = 0.6
"""PyG's ``edge_index`` form, and ``EdgeIndex`` where the conv does not fuse it (``SAGEConv`` in PyG
2.8: ``SUPPORTS_FUSED_EDGE_INDEX = False``, so it gathers and scatters as ``edge_index`` does), is
skipped where its first layer's messages alone would take more than this share of the available
memory (Coauthor-Physics: 16.7 GB; ``EdgeIndex`` was measured there once at a 19.8 GB peak)."""


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable")) * 1024


def _pyg_data(cfg: dict):
    """The graph as fullgraph loads it, as a PyG ``Data`` with a dense ``x``; its description."""
    import torch
    from torch_geometric.data import Data

    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    graph = load_graph(TrainConfig.of(dataset=cfg["dataset"], root=cfg["root"], split=0, seed=cfg["seed"]))
    src, dst = graph.edges()
    data = Data(x=graph.dense_x(), edge_index=torch.stack([src, dst]), y=graph.y, train_mask=graph.train_mask,
                test_mask=graph.test_mask, num_nodes=graph.num_nodes)
    info = {"name": graph.name, "nodes": graph.num_nodes, "edges": int(src.numel()),
            "features": int(data.x.shape[1]), "classes": int(graph.num_classes),
            "train_nodes": int(graph.train_mask.sum()),
            "x_layout": "sparse CSR" if graph.x.layout == torch.sparse_csr else "dense"}
    return data, info


def _pyg_adjacency(data, form: str):
    import torch
    import torch_geometric.transforms as T
    from torch_geometric import EdgeIndex

    if form == "adj_t":
        return T.ToSparseTensor(layout=torch.sparse_csr)(data).adj_t
    if form == "EdgeIndex":
        return EdgeIndex(data.edge_index, sparse_size=(data.num_nodes, data.num_nodes)).sort_by("col")[0]
    return data.edge_index


def _too_large(form: str, info: dict) -> str | None:
    """Why a gathering form is skipped: edge_index, and EdgeIndex for a conv that does not fuse it
    (SAGEConv in PyG 2.8), gather the first layer's messages x_j, [E, F] float32, before the scatter."""
    from torch_geometric.nn import SAGEConv

    gathers = form == "edge_index" or (form == "EdgeIndex" and not SAGEConv.SUPPORTS_FUSED_EDGE_INDEX)
    messages = info["edges"] * info["features"] * 4
    if gathers and messages > EDGE_INDEX_MEMORY_SHARE * mem_available():
        return (f"its first layer gathers [E, F] = {info['edges']:,} x {info['features']:,} messages, "
                f"{messages / 2**30:.1f} GiB, over {EDGE_INDEX_MEMORY_SHARE:.0%} of the "
                f"{mem_available() / 2**30:.1f} GiB available")
    return None


def pyg_worker(cfg: dict) -> dict:
    """Plain PyG full-graph training of the builder's model, in this (fresh) process."""
    import torch

    torch.set_num_threads(cfg["threads"])
    import torch.nn.functional as F

    from fullgraph.models.user import load_builder

    rss_imports = rss_bytes()
    data, info = _pyg_data(cfg)
    rss_loaded = rss_bytes()
    if (why := _too_large(cfg["form"], info)) is not None:
        return {"system": f"pyg-{cfg['form']}", "graph": info, "skipped": why}
    adj = _pyg_adjacency(data, cfg["form"])
    torch.manual_seed(cfg["seed"])
    model = load_builder(f"{cfg['builder']}:build")(info["features"], info["classes"], hidden=cfg["hidden"],
                                                    layers=cfg["layers"], dropout=cfg["dropout"])
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    x, y, mask = data.x, data.y, data.train_mask
    times, losses = [], []
    for _ in range(cfg["epochs"]):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x, adj)[mask], y[mask])
        loss.backward()
        opt.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
        del loss
    model.eval()
    with torch.no_grad():  # the one evaluation fullgraph's --eval-every E runs at the end
        test_acc = float((model(x, adj).argmax(-1)[data.test_mask] == y[data.test_mask]).float().mean())
    return {"system": f"pyg-{cfg['form']}", "graph": info, "epoch_times_s": times,
            "epoch_time_s": statistics.median(times[1:] if len(times) > 1 else times), "losses": losses,
            "test_acc": test_acc, "peak_rss_bytes": hwm_bytes(), "rss_after_imports_bytes": rss_imports,
            "rss_graph_loaded_bytes": rss_loaded, "threads": torch.get_num_threads()}


# ----------------------------------------------------------------------------- running one configuration
class ForeignLoad(Sampler):
    """CPU used by processes outside this benchmark's process tree while a run goes, in cores."""

    def __init__(self, period_s: float = 1.0):
        self.period, self.samples = period_s, []
        super().__init__()

    def _run(self):
        prev, t_prev = process_table(), time.monotonic()
        while not self._stop.wait(self.period):
            now, t_now = process_table(), time.monotonic()
            mine = process_tree(now, os.getpid()) | process_tree(prev, os.getpid())
            ticks = sum(row[1] - prev[p][1] for p, row in now.items() if p not in mine and p in prev)
            self.samples.append(ticks / CLK_TCK / max(t_now - t_prev, 1e-3))
            prev, t_prev = now, t_now

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else 0.0


def foreign_cores(seconds: float) -> float:
    """Cores used by processes outside this benchmark's tree over the next ``seconds``."""
    with ForeignLoad(period_s=seconds / 3) as watch:
        time.sleep(seconds)
    return watch.mean


class IdleWaiter:
    """Before each run: wait until other processes stop using CPU, with one budget for the whole benchmark."""

    def __init__(self, budget_s: float):
        self.left = budget_s

    def wait(self) -> None:
        while True:
            load = foreign_cores(3.0)
            if load < FOREIGN_BUSY_CORES:
                return
            if self.left <= 0:
                print(f" (machine still busy, {load:.2f} foreign cores; wait budget spent: timing anyway)", end="")
                return
            step = min(30.0, self.left)
            print(f" (waiting {step:.0f} s: {load:.2f} foreign cores)", end="", flush=True)
            time.sleep(step)
            self.left -= step + 3.0


def run_pyg(cfg: dict, timeout: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(cfg)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"error": f"exit status {proc.returncode}: " + " | ".join(tail)}


def run_fullgraph(args, builder: Path, nprocs: int, work: Path) -> dict:
    out = work / f"fullgraph-p{nprocs}"
    argv = ["--dataset", args.dataset, "--root", str(Path(args.root).resolve()), "--model", f"{builder}:build",
            "--model-arg", f"hidden={args.hidden}", "--model-arg", f"layers={args.layers}",
            "--model-arg", f"dropout={args.dropout}", "--lr", str(args.lr), "--weight-decay", "0",
            "--seed", str(args.seed), "--epochs", str(args.epochs), "--eval-every", str(args.epochs),
            "--progress", "none", "--overwrite"]
    if nprocs > 1:
        argv += ["--parallel", "graph", "--nprocs", str(nprocs)]
    elif args.threads:
        argv += ["--threads", str(args.threads)]
    try:
        r = train(argv, out, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout:.0f} s"}
    if "error" in r:
        return r
    s = r["summary"]
    return {"system": "fullgraph" if nprocs == 1 else f"fullgraph-graph{nprocs}", "nprocs": nprocs,
            "epoch_time_s": s["epoch_time_s"], "epoch_times_s": [m["epoch_time_s"] for m in r["metrics"]],
            "losses": [m["loss"] for m in r["metrics"]], "test_acc": s["test_acc"],
            "peak_rss_bytes": s["peak_rss_bytes"], "peak_rss_bytes_per_rank": s["peak_rss_bytes_per_rank"],
            "comm_bytes_per_epoch": s.get("comm_bytes_per_epoch", {}), "threads": s["environment"].get("threads"),
            "wall_s": r["wall_s"], "command": "python -m fullgraph train " + " ".join(argv) + f" --out {out}"}


# ----------------------------------------------------------------------------- driver
def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="coauthor-physics", help="a fullgraph dataset name (default: coauthor-physics)")
    p.add_argument("--root", default=None, help="data root (default: $FULLGRAPH_DATA, else <repo>/../shared/data)")
    p.add_argument("--layers", type=int, default=3, help="GraphSAGE layers (default: 3)")
    p.add_argument("--hidden", type=int, default=256, help="hidden width (default: 256)")
    p.add_argument("--dropout", type=float, default=0.5, help="the BasicGNN's dropout (default: 0.5)")
    p.add_argument("--lr", type=float, default=0.01, help="Adam learning rate, no weight decay (default: 0.01)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=10, help="epochs per run; the first is not timed (default: 10)")
    p.add_argument("--nprocs", default="2,4", help="graph-parallel process counts, comma-separated ('' for none)")
    p.add_argument("--pyg-forms", default=",".join(PYG_FORMS), help=f"subset of {','.join(PYG_FORMS)}")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads of the single-process runs, PyG's and fullgraph's (default 0: all cores)")
    p.add_argument("--wait-idle", type=float, default=600.0,
                   help="seconds (in all) to wait before runs for other processes to stop using CPU (default: 600)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run before it is abandoned")
    p.add_argument("--workdir", default=None, help="where the builder and the run folders go (default: a temp folder)")
    p.add_argument("--out", default="runs/bench_your_model.json", help="JSON results file")
    args = p.parse_args(argv)
    args.nprocs = [int(v) for v in args.nprocs.split(",") if v.strip()]
    args.pyg_forms = [f.strip() for f in args.pyg_forms.split(",") if f.strip()]
    unknown = sorted(set(args.pyg_forms) - set(PYG_FORMS))
    if unknown:
        p.error(f"expected PyG forms among {', '.join(PYG_FORMS)} (got {', '.join(unknown)})")
    if args.epochs < 2:
        p.error("expected --epochs >= 2 (the first epoch is not timed)")
    if args.root is None:
        args.root = os.environ.get("FULLGRAPH_DATA") or str(DEFAULT_ROOT)
    return args


def run_all(args, threads: int, builder: Path, work: Path) -> dict[str, dict]:
    """Every configuration, one at a time, each waiting for an idle machine and watched for foreign load."""
    runs: dict[str, dict] = {}
    waiter = IdleWaiter(args.wait_idle)
    plan = [("pyg", f) for f in args.pyg_forms] + [("fullgraph", 1)] + [("fullgraph", k) for k in args.nprocs]
    for kind, what in plan:
        system = f"pyg-{what}" if kind == "pyg" else ("fullgraph" if what == 1 else f"fullgraph-graph{what}")
        print(f"  running {label(system)} ...", end="", flush=True)
        waiter.wait()
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        with ForeignLoad() as watch:
            if kind == "pyg":
                r = run_pyg({"dataset": args.dataset, "root": str(Path(args.root).resolve()), "form": what,
                             "builder": str(builder), "hidden": args.hidden, "layers": args.layers,
                             "dropout": args.dropout, "lr": args.lr, "seed": args.seed, "epochs": args.epochs,
                             "threads": threads}, args.timeout)
            else:
                r = run_fullgraph(args, builder, what, work)
        r |= {"foreign_cores": watch.mean, "load_avg_1min": [load0, os.getloadavg()[0]],
              "run_s": time.perf_counter() - t0}
        runs[system] = r
        print(f" {r['run_s']:.0f} s" + (f": {r['error']}" if "error" in r else "")
              + (f": skipped ({r['skipped']})" if "skipped" in r else ""), flush=True)
    return runs


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    threads = args.threads or os.cpu_count() or 1
    env = environment(isolated=True)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"your model through fullgraph: a PyG GraphSAGE (BasicGNN) against plain PyG, {now}")
    header = print_header(env, threads=threads,
                          machine_extra=[f"1-min load average at start {os.getloadavg()[0]:.2f}"])
    config = (f"config:   {args.dataset} (fullgraph's loader, split 0, seed {args.seed}); "
              f"torch_geometric.nn.models.GraphSAGE(in, {args.hidden}, {args.layers}, classes, dropout={args.dropout}) "
              f"from one builder file, seeded {args.seed}; Adam lr {args.lr}, no weight decay; cross-entropy on the "
              f"train nodes; {args.epochs} epochs per run, epoch time = median of epochs 2..{args.epochs}; one "
              f"evaluation at the end; single-process runs {threads} threads, graph P=k ranks cores/k each; "
              f"peak = VmHWM of each process (imports and loading included); each run its own process, one at a time")
    print(config, flush=True)

    work_ctx = tempfile.TemporaryDirectory(prefix="your_model_") if args.workdir is None else None
    work = Path(work_ctx.name if work_ctx else args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    builder = work / "your_model_builder.py"
    builder.write_text(BUILDER)

    runs = run_all(args, threads, builder, work)
    if work_ctx:
        work_ctx.cleanup()

    best, table, result_checks = report(args, runs)
    failed = sum("error" in r for r in runs.values())
    out = write_json(args.out, {"date": now, "header": header, "config": config, "machine": env["machine"],
                                "versions": env["versions"], "args": vars(args), "targets": dict(TARGETS), "builder": BUILDER,
                                "runs": runs, "best_pyg": best, "table": table, "checks": result_checks,
                                "failed_runs": failed, "total_s": time.perf_counter() - started})
    print(f"\n{failed} failed runs; total {(time.perf_counter() - started) / 60:.1f} min; wrote {out}")
    return 1 if failed or not all(c["pass"] for c in result_checks) else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(RESULT_MARK + json.dumps(pyg_worker(json.loads(sys.argv[2]))), flush=True)
    else:
        sys.exit(main())
