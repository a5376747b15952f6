"""Time to accuracy: full-graph training (fullgraph) against PyG's mini-batch training (issue 37 §1).

    .venv/bin/python benchmarks/time_to_accuracy.py                        # the whole protocol (many hours)
    .venv/bin/python benchmarks/time_to_accuracy.py --graphs physics-sparse,tolokers --search-seeds 1 \\
        --time-limit 60                                                    # lr search on one seed, capped runs
    .venv/bin/python benchmarks/time_to_accuracy.py --from-json benchmarks/results/time_to_accuracy/summary.json

Every method trains GraphSAGE, 3 layers, hidden 256, LayerNorm after each hidden layer, dropout 0.5,
Adam (weight decay 5e-4), on the same graph and split, and is judged by the metric ``--metric auto``
picks (accuracy; ROC-AUC on the two-class Tolokers):

* ``fg-1``: ``fullgraph train --model sage --layers 3 --hidden 256 --norm layer``, one process;
* ``fg-P2-p1`` / ``fg-P2-p0.1``: the same, ``--parallel graph --nprocs 2``, boundary rate 1 and 0.1 (BNS-GCN);
* ``fg-prune``: the same with ``--prune`` (only the rows the loss needs are computed);
* ``pyg-neighbor`` / ``pyg-cluster``: PyG's ``NeighborLoader`` (15/10/5) and ClusterGCN (``_tta_pyg.py``).

Per method, a search: learning rate (``--lrs``) and, for the mini-batch methods, the batch size
(``--neighbor-batches`` seed nodes, ``--cluster-batches`` METIS parts per step); each setting trains
the first ``--search-seeds`` seeds, the one with the best median validation metric is kept and trains
every seed of ``--seeds``. Every run evaluates after each epoch (a full-graph step, or a pass over the
training nodes) and stops after ``--patience`` evaluations without a better validation metric, after
``--max-epochs``, or once its training and evaluation took ``--time-limit`` seconds.

Time is the sum of each epoch's training (sampling included) and its evaluation, from the first epoch
on; fullgraph's are the ``epoch_time_s`` and ``eval_time_s`` its ``metrics.jsonl`` records (rank 0's
under graph parallelism). Set-up is counted apart (``setup``): for fullgraph, the command's wall time
less those epochs (interpreter start, loading, partitioning, building); for PyG, loading the graph,
building the ``Data``, METIS's ``ClusterData`` and the loader. The common target of a graph is 99% of
the best median validation metric of any method; "to target" is the median over seeds of the first
time a run's validation metric reaches it (inf when it never does).

Raw results: one JSON per run under ``OUT/runs/GRAPH/`` (an existing one is read, not rerun, so a run
cut short loses nothing), ``OUT/summary.json`` with the tables, and ``OUT/GRAPH.png``, validation
metric against epoch and wall time, one curve per method, drawn by ``fullgraph report``'s code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType

from _harness import REPO, environment, print_header, write_json
from _tta_runs import GRAPHS, curve_stats, fullgraph_has, load_for_pyg, prepare, run_fullgraph

DEFAULT_ROOT = str(REPO.parent / "shared" / "data")
MODEL = ("--model", "sage", "--layers", "3", "--hidden", "256", "--norm", "layer", "--metric", "auto")
FULLGRAPH = MappingProxyType({"fg-1": (), "fg-P2-p1": ("--parallel", "graph", "--nprocs", "2"),
                              "fg-P2-p0.1": ("--parallel", "graph", "--nprocs", "2", "--boundary-rate", "0.1"),
                              "fg-prune": ("--prune",)})
EXACT = ("fg-P2-p1", "fg-prune")  # compute what fg-1 computes (up to the order of float sums)
PYG = ("pyg-neighbor", "pyg-cluster")
METHODS = (*FULLGRAPH, *PYG)
TEST_TOLERANCE = 0.005  # 0.5 points


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=",".join(GRAPHS), help=f"of {', '.join(GRAPHS)}")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"of {', '.join(METHODS)}")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--search-seeds", type=int, default=3, help="seeds each setting of the search trains")
    ap.add_argument("--lrs", default="0.003,0.01,0.03")
    ap.add_argument("--neighbor-batches", default="512,1024", help="NeighborLoader seed nodes per step")
    ap.add_argument("--cluster-batches", default="10,20", help="ClusterGCN METIS parts per step")
    ap.add_argument("--staged", action="store_true",
                    help="search the learning rate at the first batch size, then the other batch sizes at its choice")
    ap.add_argument("--share-exact", action="store_true",
                    help=f"{' and '.join(EXACT)} take fg-1's chosen learning rate instead of searching their own")
    ap.add_argument("--max-epochs", type=int, default=1000)
    ap.add_argument("--patience", type=int, default=50, help="evaluations without a better validation metric")
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds of training and evaluation per run")
    ap.add_argument("--setup-limit", type=float, default=900.0, help="more seconds of wall time a fullgraph run may take")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads of the one-process methods (0: all cores); graph-parallel ranks share the cores")
    ap.add_argument("--root", default=DEFAULT_ROOT)
    ap.add_argument("--work", default="runs/tta", help="fullgraph's run folders and the written datasets")
    ap.add_argument("--out", default="benchmarks/results/time_to_accuracy", help="raw runs, summary, figures")
    ap.add_argument("--from-json", help="a summary.json: redraw its tables and figures from its raw runs "
                                        "(of its graphs, or of --graphs where given)")
    args = ap.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.lrs = [float(v) for v in args.lrs.split(",")]
    args.graphs, args.methods = args.graphs.split(","), args.methods.split(",")
    for name, known in (("graph", GRAPHS), ("method", METHODS)):
        bad = [v for v in getattr(args, name + "s") if v not in known]
        if bad:
            ap.error(f"unknown {name} {bad} (known: {', '.join(known)})")
    return args


def settings(method: str, args) -> list[tuple[float, int | None]]:
    batches = {"pyg-neighbor": args.neighbor_batches, "pyg-cluster": args.cluster_batches}.get(method)
    return [(lr, int(b) if batches else None) for lr in args.lrs for b in (batches.split(",") if batches else [""])]


def run_path(out: Path, graph: str, method: str, lr: float, batch, seed: int) -> Path:
    return out / "runs" / graph / f"{method}-lr{lr:g}{f'-b{batch}' if batch else ''}-s{seed}.json"


# ---------------------------------------------------------------- running
class GraphRunner:
    """The runs of one graph: fullgraph through its command, PyG in this process (graph loaded once)."""

    def __init__(self, graph: str, args):
        self.graph, self.args, self.out = graph, args, Path(args.out)
        t0 = time.perf_counter()
        self.flags = prepare(graph, str(Path(args.root).resolve()), REPO / args.work)
        self.prepare_s = time.perf_counter() - t0
        self.pyg = None  # (data, adj_t, metric, load seconds), on first use
        self.clusters = None  # (ClusterData, seconds)

    def run(self, method: str, lr: float, batch, seed: int) -> dict:
        path = run_path(self.out, self.graph, method, lr, batch, seed)
        if path.is_file():
            return json.loads(path.read_text())
        a = self.args
        rec = {"graph": self.graph, "method": method, "lr": lr, "batch": batch, "seed": seed,
               "time_limit_s": a.time_limit, "patience": a.patience, "max_epochs": a.max_epochs}
        if method in FULLGRAPH:
            argv = [*self.flags, *MODEL, *FULLGRAPH[method], "--lr", str(lr), "--seed", str(seed), "--epochs",
                    str(a.max_epochs), "--patience", str(a.patience), "--progress", "none"]
            if a.threads and method not in ("fg-P2-p1", "fg-P2-p0.1"):
                argv += ["--threads", str(a.threads)]
            out = REPO / a.work / "runs" / self.graph / path.stem
            rec |= run_fullgraph(argv, out, time_limit=a.time_limit, setup_limit=a.setup_limit)
        else:
            rec |= self._pyg(method, lr, batch, seed)
        rec["epochs"] = [{k: e.get(k) for k in ("epoch", "loss", "epoch_time_s", "eval_time_s", "train_metric",
                                                 "val_metric", "test_metric", "steps") if k in e}
                         for e in rec["epochs"]]
        rec |= curve_stats(rec["epochs"]) | {"load_1min": os.getloadavg()[0]}  # other processes on the cores
        write_json(path, rec)
        print(f"  {method:<13} lr {lr:<6g} batch {batch or '-':<5} seed {seed}: best val {rec['best_val']:.4f} "
              f"test {rec['test']:.4f} at {rec['time_to_best_s']:.1f} s (epoch {rec['best_epoch']} of "
              f"{rec['n_epochs']}; set-up {rec['setup_s']:.1f} s; load {rec['load_1min']:.1f}){' ' + rec['stopped'] if rec.get('stopped') else ''}"
              f"{' ERROR ' + rec['error'] if rec.get('error') else ''}", flush=True)
        return rec

    def _pyg(self, method: str, lr: float, batch: int, seed: int) -> dict:
        import torch

        import _tta_pyg
        from fullgraph.tasks.metrics import resolve_metric

        if self.pyg is None:
            t0 = time.perf_counter()
            g = load_for_pyg(self.flags)
            data, adj_t = _tta_pyg.to_pyg(g)
            self.pyg = (data, adj_t, resolve_metric("auto", g.num_classes, g.multilabel), time.perf_counter() - t0)
        data, adj_t, metric, load_s = self.pyg
        setup = load_s
        if method == "pyg-cluster":
            if self.clusters is None:
                self.clusters = _tta_pyg.cluster_data(data)
            setup += self.clusters[1]
        a = self.args
        if a.threads:
            torch.set_num_threads(a.threads)
        rec = _tta_pyg.train(method, data, adj_t, metric, lr=lr, batch=batch, seed=seed, max_epochs=a.max_epochs,
                             patience=a.patience, time_limit=a.time_limit,
                             clusters=self.clusters[0] if self.clusters else None)
        rec["setup_s"] += setup
        rec["setup_parts_s"] = {"load": load_s, "metis": self.clusters[1] if method == "pyg-cluster" else 0.0}
        return rec


def run_graph(graph: str, args) -> None:
    print(f"\n== {graph}", flush=True)
    runner = GraphRunner(graph, args)
    search, chosen = args.seeds[:args.search_seeds], {}
    for method in sorted(args.methods, key=lambda m: m != "fg-1"):  # fg-1 first: --share-exact reads its choice
        if method == "fg-prune" and not fullgraph_has("--prune"):
            print("  fg-prune: skipped, this fullgraph has no --prune", flush=True)
            continue
        if args.share_exact and method in EXACT and "fg-1" in chosen:
            lr, batch = chosen["fg-1"]  # the same function as fg-1's, epoch for epoch: only the time differs
        else:
            lr, batch = search_method(runner, method, search, args)
        chosen[method] = (lr, batch)
        for seed in args.seeds:
            runner.run(method, lr, batch, seed)


def search_method(runner, method: str, search: list[int], args) -> tuple:
    """The learning rates (at the first batch size), then, with ``--staged``, the other batch sizes at
    the chosen rate; without it, every pair."""
    grid = settings(method, args)
    if args.staged:
        grid = [s for s in grid if s[1] == grid[0][1]]
    runs = {s: [runner.run(method, s[0], s[1], seed) for seed in search] for s in grid}
    lr, batch = choose(runs)
    if args.staged:
        for s in settings(method, args):
            if s[0] == lr and s not in runs:
                runs[s] = [runner.run(method, s[0], s[1], seed) for seed in search]
    return choose(runs)


def choose(grid: dict) -> tuple:
    """The setting whose runs have the best median validation metric (the first of equals)."""
    def score(runs):
        vals = [r["best_val"] for r in runs if r.get("best_val") == r.get("best_val")]  # NaN out
        return statistics.median(vals) if vals else float("-inf")
    return max(grid, key=lambda s: score(grid[s]))


# ---------------------------------------------------------------- reporting
def load_runs(out: Path, graph: str) -> list[dict]:
    folder = out / "runs" / graph
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def summarize(graph: str, runs: list[dict], args) -> dict:
    """Per method: the setting chosen on the search seeds, and its seeds' medians against the target."""
    search = set(args.seeds[:args.search_seeds])
    chosen = {}
    for method in dict.fromkeys(r["method"] for r in runs):
        mine = [r for r in runs if r["method"] == method]
        grid = {}
        for r in mine:
            if r["seed"] in search:
                grid.setdefault((r["lr"], r["batch"]), []).append(r)
        lr, batch = choose(grid)
        chosen[method] = [r for r in mine if (r["lr"], r["batch"]) == (lr, batch) and r["seed"] in args.seeds]
    med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
    best = max((med([r["best_val"] for r in rs]) for rs in chosen.values()), default=float("nan"))
    target = 0.99 * best
    rows = []
    for method, rs in chosen.items():
        stats = [curve_stats(r["epochs"], target) for r in rs]
        rows.append({"method": method, "lr": rs[0]["lr"], "batch": rs[0]["batch"], "seeds": [r["seed"] for r in rs],
                     "best_val": med([s["best_val"] for s in stats]), "test": med([s["test"] for s in stats]),
                     "time_to_best_s": med([s["time_to_best_s"] for s in stats]),
                     "time_to_target_s": med([s["time_to_target_s"] for s in stats]),
                     "setup_s": med([r["setup_s"] for r in rs]), "epochs": med([s["n_epochs"] for s in stats]),
                     "s_per_epoch": med([s["train_eval_s"] / max(1, s["n_epochs"]) for s in stats]),
                     "load": med([r.get("load_1min", float("nan")) for r in rs]),
                     "stopped": sum(bool(r.get("stopped")) for r in rs), "errors": sum("error" in r for r in rs),
                     "metric": rs[0].get("metric")})
    return {"graph": graph, "target": target, "best_val_any": best, "rows": rows, "checks": checks(graph, rows)}


def checks(graph: str, rows: list[dict]) -> list[dict]:
    """Issue 37's targets for ``fg-prune`` against the faster PyG method (None: not measurable here)."""
    by = {r["method"]: r for r in rows}
    pyg = [by[m] for m in PYG if m in by]
    if "fg-prune" not in by or not pyg:
        return []
    fg, fastest = by["fg-prune"], min(pyg, key=lambda r: r["time_to_target_s"])
    sparse = GRAPHS[graph][1] is None and graph != "tolokers" or GRAPHS[graph][1] == 0.01
    factor = 2.0 if sparse else 1.0
    t_ok = fg["time_to_target_s"] <= factor * fastest["time_to_target_s"]
    best_test = max(r["test"] for r in pyg)
    return [{"check": f"fg-prune to target <= {factor:g} x fastest mini-batch ({fastest['method']})",
             "value": fg["time_to_target_s"] / fastest["time_to_target_s"] if fastest["time_to_target_s"] else
             float("inf"), "pass": bool(t_ok)},
            {"check": "fg-prune test >= best mini-batch test - 0.5 points", "value": 100 * (fg["test"] - best_test),
             "pass": bool(fg["test"] >= best_test - TEST_TOLERANCE)}]


def fmt_s(t: float) -> str:
    return "inf" if t == float("inf") else "nan" if t != t else f"{t:.1f}"


def table(s: dict) -> list[str]:
    lines = [f"### {s['graph']}: target {s['target']:.4f} (99% of {s['best_val_any']:.4f})", "",
             "| method | lr | batch | best val | test | to best (s) | to target (s) | set-up (s) | epochs | "
             "s/epoch | capped | load |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in s["rows"]:
        lines.append(f"| {r['method']} | {r['lr']:g} | {r['batch'] or '-'} | {r['best_val']:.4f} | {r['test']:.4f} | "
                     f"{fmt_s(r['time_to_best_s'])} | {fmt_s(r['time_to_target_s'])} | {fmt_s(r['setup_s'])} | "
                     f"{r['epochs']:.0f} | {r['s_per_epoch']:.3f} | {r['stopped']}/{len(r['seeds'])} | {r['load']:.1f} |")
    for c in s["checks"]:
        lines.append(f"* {'PASS' if c['pass'] else 'FAIL'} {c['check']}: {c['value']:.2f}")
    return lines + [""]


def figure(s: dict, runs: list[dict], path: Path) -> None:
    """Validation metric against epoch and wall time, one curve per method (its first seed at the
    chosen setting), with ``fullgraph report``'s drawing code; the target as a dotted line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fullgraph.cli.report import _against_epoch_and_time, _palette
    from fullgraph.tasks.metrics import METRIC_NAMES

    curves = []
    for row, color in zip(s["rows"], _palette(len(s["rows"]))):
        r = next(r for r in runs if r["method"] == row["method"] and r["lr"] == row["lr"] and
                 r["batch"] == row["batch"] and r["seed"] == row["seeds"][0])
        if r["epochs"]:
            curves.append({"name": row["method"], "epochs": r["epochs"], "color": color, "summary": {}})
    name = METRIC_NAMES.get(s["rows"][0]["metric"], "metric")
    fig = _against_epoch_and_time(curves, [("val_metric", "-")], f"validation {name}",
                                  f"{s['graph']}: validation {name} (seed {s['rows'][0]['seeds'][0]}); "
                                  f"dotted: the common target")
    for ax in fig.axes:
        ax.axhline(s["target"], color="black", linestyle=":", linewidth=1)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def report(args, env: dict, header: list[str]) -> dict:
    out = Path(args.out)
    summaries = []
    for graph in args.graphs:
        runs = load_runs(out, graph)
        if not runs:
            continue
        s = summarize(graph, runs, args)
        summaries.append(s)
        print("\n" + "\n".join(table(s)), flush=True)
        figure(s, runs, out / f"{graph}.png")
    config = {k: v for k, v in vars(args).items() if k != "from_json"}
    result = {"header": header, "environment": env, "config": config, "graphs": summaries,
              "written": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"}
    write_json(out / "summary.json", result)
    (out / "tables.md").write_text("\n".join(header + [""] + [ln for s in summaries for ln in table(s)]) + "\n")
    print(f"wrote {out / 'summary.json'}, tables.md and a figure per graph", flush=True)
    return result


def _sampler_versions() -> list[str]:
    """What PyG's samplers run on: torch_sparse (built here from source) or pyg_lib, where installed."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for pkg in ("torch_sparse", "torch_scatter", "pyg_lib"):
        try:
            out.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            out.append(f"{pkg} absent")
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        given = {"graphs": args.graphs} if "--graphs" in (argv if argv is not None else sys.argv) else {}
        args = argparse.Namespace(**(saved["config"] | {"out": str(Path(args.from_json).parent)} | given))
        report(args, saved["environment"], saved["header"])
        return 0
    env = environment()
    print(f"# time to accuracy ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)")
    header = print_header(env, threads=args.threads or None, versions_extra=_sampler_versions())
    conf = (f"configuration: graphs {args.graphs}; methods {args.methods}; seeds {args.seeds} (search on the first "
            f"{args.search_seeds}); lrs {args.lrs}; batches neighbor {args.neighbor_batches}, cluster "
            f"{args.cluster_batches}; patience {args.patience}; max epochs {args.max_epochs}; time limit "
            f"{args.time_limit:g} s per run; threads {args.threads or 'all cores'} (one-process methods)")
    print(conf, flush=True)
    for graph in args.graphs:
        run_graph(graph, args)
    report(args, env, header + [conf])
    return 0


if __name__ == "__main__":
    sys.exit(main())
