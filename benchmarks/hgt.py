"""HGT on typed graphs: the built-in ``--model hgt`` against the same model built from PyG's ``HGTConv``.

    .venv/bin/python benchmarks/hgt.py --threads 1 --out-dir benchmarks/results/hgt      # ~60 min on a busy VM
    .venv/bin/python benchmarks/hgt.py --graphs acm --seeds 0,1 --epochs 30 --parts accuracy   # a quick look

HeCo's ACM and DBLP (``load_heco``: reverse relations added, 20 training nodes per class, 1,000 validation
and 1,000 test nodes), one typed graph each, the same on both sides.

* **fullgraph**: ``Trainer(TrainConfig.of(model="hgt", ...), graph)``, one process (``models/hgt.py``): the
  typed input map with ReLU (a ``Linear`` draw per featured type, a Glorot table per featureless one), HGT
  layers, a linear map to the classes; dropout on each HGT layer's input.
* **PyG**: what a PyG user writes after PyG's ``examples/hetero/hgt_dblp.py``: a ``torch.nn.Linear`` per featured
  type (a sparse block through ``torch.sparse.mm`` with its weight), an ``nn.Parameter`` table per featureless
  type (PyG's ``glorot``), ReLU, then per layer dropout on every type's rows and ``HGTConv(hidden, hidden,
  metadata, heads)`` over ``x_dict`` and ``edge_index_dict``, and a ``Linear`` to the classes on the labelled
  type's rows (only those: PyG's example does so).

Both: full batch, Adam, the same depth, width, heads, dropout, learning rate, weight decay and epochs, every
epoch evaluated, test accuracy and Macro-F1 at the first epoch of best validation accuracy (``hetero_accuracy``'s
selection and metrics). Target: fullgraph's mean >= PyG's - 0.5 points.

``speed``: ``--rounds`` rounds, in each every side in a fresh interpreter (which goes first alternates),
``--threads`` threads: the median training step after one warm-up (>= 3 timed, then until ``--budget-s``);
and the **train peak** (``VmHWM`` after building minus the RSS before it: the model, its optimizer and a step's
activations, not the graph both load alike); the ratios are the medians of the rounds' own (the machine's drift
between rounds cancels in a round's ratio); ``--prune``: fullgraph's side computes only the rows that reach the
loss (the same loss and gradients). Targets: time <= 0.5x, train peak <= 0.7x PyG's. Results: benchmarks/README.md ("HGT").
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path
from types import MappingProxyType

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.config import TrainConfig
from fullgraph.data.formats.heco import load_heco
from fullgraph.train.trainer import Trainer

from _harness import REPO, hwm_bytes, reset_hwm, rss_bytes, start_report, write_json
from _single_process_systems import release_free_memory
from edge_data import RESULT_MARK, spawn, timed
from hetero_accuracy import pyg_inputs, scores, summary, train_fullgraph
from your_model import IdleWaiter

GRAPHS, SIDES, PARTS = ("acm", "dblp"), ("fullgraph", "pyg"), ("accuracy", "speed")
SETTINGS = MappingProxyType({"layers": 2, "hidden": 64, "heads": 2, "dropout": 0.2, "lr": 0.01,
                             "weight_decay": 0.001})  # PyG's hgt_dblp example's width, heads, lr and decay
TOLERANCE = 0.5  # points: fullgraph's mean may trail PyG's by at most this much
TARGETS = MappingProxyType({"time": 0.5, "memory": 0.7})
MIB = 1 << 20


class PygHGT(nn.Module):
    """PyG's example model (module docstring): per-type input maps, ``HGTConv`` layers, a linear head."""

    def __init__(self, types, hidden: int, classes: int, layers: int, heads: int, dropout: float):
        from torch_geometric.nn import HGTConv
        from torch_geometric.nn.inits import glorot

        super().__init__()
        metadata = (list(types.names), [tuple(r) for r in types.relations])
        self.p, self.labelled = dropout, types.labelled[0]
        self.lins = nn.ModuleDict({n: nn.Linear(w, hidden) for n, w in zip(types.names, types.widths) if w})
        tables = {n: torch.empty(c, hidden) for n, c, w in zip(types.names, types.counts, types.widths) if not w}
        for t in tables.values():
            glorot(t)  # in place
        self.tables = nn.ParameterDict({n: nn.Parameter(t) for n, t in tables.items()})
        self.convs = nn.ModuleList(HGTConv(hidden, hidden, metadata, heads) for _ in range(layers))
        self.head = nn.Linear(hidden, classes)

    def forward(self, x_dict: dict, edge_index_dict: dict) -> torch.Tensor:
        h = {}
        for name, x in x_dict.items():
            if name in self.tables:
                h[name] = F.relu(self.tables[name])
            elif x.layout == torch.sparse_coo:
                h[name] = F.relu(torch.sparse.mm(x, self.lins[name].weight.t()) + self.lins[name].bias)
            else:
                h[name] = F.relu(self.lins[name](x))
        for conv in self.convs:
            h = conv({k: F.dropout(v, self.p, self.training) for k, v in h.items()}, edge_index_dict)
        return self.head(h[self.labelled])


def pyg_dicts(graph) -> tuple[dict, dict, slice]:
    """``x_dict`` (each type's feature block; a featureless type's: an empty placeholder), ``edge_index_dict``
    (local ids per relation) and the labelled type's rows among the global ids."""
    types, inputs = graph.node_types, pyg_inputs(graph)
    off, (src, dst) = types.offsets, graph.edges()
    x = {n: (b if b is not None else torch.empty(types.counts[t], 0)) for t, (n, b) in
         enumerate(zip(types.names, inputs["blocks"]))}
    edges = {}
    for r, (s, name, d) in enumerate(types.relations):
        sel = graph.edge_type == r
        edges[(s, name, d)] = torch.stack([src[sel] - off[types.index(s)], dst[sel] - off[types.index(d)]])
    t = types.index(types.labelled[0])
    return x, edges, slice(off[t], off[t + 1])


def pyg_model(graph, s: dict, seed: int) -> PygHGT:
    torch.manual_seed(seed)
    return PygHGT(graph.node_types, s["hidden"], graph.num_classes, s["layers"], s["heads"], s["dropout"])


def train_pyg(graph, s: dict, epochs: int, seed: int) -> dict:
    """Full-batch training; test accuracy and Macro-F1 at the first epoch of best validation accuracy."""
    x, edges, rows = pyg_dicts(graph)
    model = pyg_model(graph, s, seed)
    opt = torch.optim.Adam(model.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    y, tr, va, te = (t[rows] for t in (graph.y, graph.train_mask, graph.val_mask, graph.test_mask))
    best, times = {"val_acc": -1.0}, []
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(x, edges)[tr], y[tr]).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        model.eval()
        with torch.no_grad():
            logits = model(x, edges)
        val_acc = scores(logits[va], y[va])[0]
        if val_acc > best["val_acc"]:
            test_acc, test_f1 = scores(logits[te], y[te])
            best = {"val_acc": val_acc, "test_acc": test_acc, "test_macro_f1": test_f1, "best_epoch": epoch}
    return best | {"epoch_time_s": statistics.median(times)}


# ---------------------------------------------------------------- accuracy
def part_accuracy(args) -> dict:
    s, out = dict(SETTINGS), {}
    for name in args.graphs:
        graph = load_heco(Path(args.root) / f"heco_{name}", labels_per_class=20, name=name)
        print(f"\n== accuracy on {name}: {graph.node_types.describe()}; {graph.num_edges:,} edges", flush=True)
        row = {side: [] for side in SIDES}
        for seed in args.seeds:
            for side in SIDES:
                r = (train_fullgraph(graph, s, args.epochs, seed, args.threads, model="hgt") if side == "fullgraph"
                     else train_pyg(graph, s, args.epochs, seed))
                r.pop("val_curve", None)
                row[side].append(r)
                print(f"   {side:<9} seed {seed}: test acc {100 * r['test_acc']:.2f}, Macro-F1 "
                      f"{100 * r['test_macro_f1']:.2f} (best epoch {r['best_epoch']}; step "
                      f"{1e3 * r['epoch_time_s']:.1f} ms)", flush=True)
        for key in ("test_acc", "test_macro_f1"):
            ours, theirs = summary(row["fullgraph"], key)[0], summary(row["pyg"], key)[0]
            row[f"delta_{key}"], row[f"pass_{key}"] = ours - theirs, ours >= theirs - TOLERANCE
        out[name] = row
    return out


def accuracy_table(rows: dict) -> list[str]:
    lines = ["| graph | metric | fullgraph HGT | PyG `HGTConv` | Δ points | ≥ PyG − 0.5 |", "| --- | --- | ---: | ---: | ---: | --- |"]
    for name, r in rows.items():
        for key, label in (("test_acc", "accuracy"), ("test_macro_f1", "Macro-F1")):
            (om, osd), (pm, psd) = summary(r["fullgraph"], key), summary(r["pyg"], key)
            lines.append(f"| {name.upper()} | {label} | {om:.2f} ± {osd:.2f} | {pm:.2f} ± {psd:.2f} | "
                         f"{r[f'delta_{key}']:+.2f} | {'PASS' if r[f'pass_{key}'] else 'FAIL'} |")
    return lines


# ---------------------------------------------------------------- speed
def build_step(graph, side: str, cfg: dict):
    """One training step of ``side``'s model on ``graph`` (a closure), built under ``cfg['seed']``."""
    s = dict(SETTINGS)
    if side == "fullgraph":
        tc = TrainConfig.of(model="hgt", seed=cfg["seed"], epochs=1 << 20, metric="acc", progress="none",
                            threads=cfg["threads"], prune=cfg.get("prune", False), **s)
        trainer, epoch = Trainer(tc, graph).build(), itertools.count(1)
        return lambda: float(trainer.train_step(next(epoch)))
    x, edges, rows = pyg_dicts(graph)
    model = pyg_model(graph, s, cfg["seed"])
    opt = torch.optim.Adam(model.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    y, tr = graph.y[rows], graph.train_mask[rows]

    def step() -> float:
        model.train()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x, edges)[tr], y[tr])
        loss.backward()
        opt.step()
        return loss.item()
    return step


def speed_worker(cfg: dict) -> dict:
    torch.set_num_threads(cfg["threads"])
    small = load_heco(Path(cfg["root"]) / "heco_acm", name="acm")
    build_step(small, cfg["side"], cfg)()  # lazy imports and one-time set-up, before the baseline
    del small
    graph = load_heco(Path(cfg["root"]) / f"heco_{cfg['graph']}", name=cfg["graph"])
    release_free_memory()
    rss_before, reset_ok = rss_bytes(), reset_hwm()
    step = build_step(graph, cfg["side"], cfg)
    out = timed(step, 1, cfg["epochs"], cfg["budget_s"])
    return {"side": cfg["side"], **out, "train_peak_bytes": hwm_bytes() - rss_before, "rss_before_bytes": rss_before,
            "hwm_reset": reset_ok, "threads": torch.get_num_threads()}


def speed_round(name: str, base: dict, args, first: str) -> dict:
    """One round: each side in a fresh interpreter, ``first`` first."""
    order = (first, *(side for side in SIDES if side != first))
    runs = {side: spawn(base | {"graph": name, "side": side}, args, f"{name} {side}", script=__file__, width=16)
            for side in order}
    for side, r in runs.items():
        print(f"   {name} {side}: " + (f"{r['epoch_time_s']:.4f} s, {len(r['epoch_times_s'])} steps, "
              f"{r['train_peak_bytes'] / MIB:,.1f} MiB" if "epoch_time_s" in r else str(r.get("error"))), flush=True)
    return runs


def part_speed(args) -> dict:
    """``--rounds`` rounds per graph, the sides alternating which goes first; the ratios are the medians of
    the rounds' own (a round's two sides run minutes apart at most: the machine's drift between rounds,
    which moved PyG's ACM step by a third, cancels in them)."""
    base = {"root": str(Path(args.root).resolve()), "threads": args.threads, "seed": 0, "epochs": args.speed_epochs,
            "budget_s": args.budget_s, "prune": args.prune}
    out = {}
    print("\n== speed: | graph | side | step s (median) | timed steps | train peak MiB |", flush=True)
    for name in args.graphs:
        rounds = [speed_round(name, base, args, SIDES[k % 2]) for k in range(args.rounds)]
        done = [r for r in rounds if all("epoch_time_s" in r[side] for side in SIDES)]
        runs = {side: rounds[0][side] for side in SIDES} | {"rounds": rounds}
        if done:
            for side in SIDES:
                runs[side] = {"epoch_time_s": statistics.median(r[side]["epoch_time_s"] for r in done),
                              "train_peak_bytes": statistics.median(r[side]["train_peak_bytes"] for r in done)}
            runs["time_ratios"] = [r["fullgraph"]["epoch_time_s"] / r["pyg"]["epoch_time_s"] for r in done]
            runs["memory_ratios"] = [r["fullgraph"]["train_peak_bytes"] / r["pyg"]["train_peak_bytes"] for r in done]
            runs["time_ratio"] = statistics.median(runs["time_ratios"])
            runs["memory_ratio"] = statistics.median(runs["memory_ratios"])
            print(f"   {name}: time {runs['time_ratio']:.3f}x (rounds: "
                  f"{', '.join(f'{v:.3f}' for v in runs['time_ratios'])}; target <= {TARGETS['time']}), train peak "
                  f"{runs['memory_ratio']:.3f}x (target <= {TARGETS['memory']})", flush=True)
        out[name] = runs
    return out


def speed_table(rows: dict) -> list[str]:
    lines = ["| graph | fullgraph step s | PyG step s | time ratio | rounds' time ratios | fullgraph train peak MiB | "
             "PyG train peak MiB | peak ratio |", "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for name, r in rows.items():
        if "time_ratio" not in r:
            continue
        a, b = r["fullgraph"], r["pyg"]
        lines.append(f"| {name.upper()} | {a['epoch_time_s']:.4f} | {b['epoch_time_s']:.4f} | **{r['time_ratio']:.2f}** | "
                     f"{', '.join(f'{v:.2f}' for v in r['time_ratios'])} | {a['train_peak_bytes'] / MIB:,.1f} | "
                     f"{b['train_peak_bytes'] / MIB:,.1f} | **{r['memory_ratio']:.2f}** |")
    return lines


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=os.environ.get("FULLGRAPH_DATA") or str(REPO.parent / "shared" / "data"))
    p.add_argument("--graphs", default=",".join(GRAPHS), help=f"subset of {','.join(GRAPHS)}")
    p.add_argument("--parts", default=",".join(PARTS), help=f"subset of {','.join(PARTS)}")
    p.add_argument("--seeds", default="0,1,2,3,4", help="seeds of the accuracy runs (default: 0..4)")
    p.add_argument("--epochs", type=int, default=250, help="epochs per accuracy run (default: 250: every run past its plateau)")
    p.add_argument("--speed-epochs", type=int, default=20, help="most timed steps per speed run (default: 20)")
    p.add_argument("--rounds", type=int, default=3, help="speed rounds per graph, each side fresh in each (default: 3)")
    p.add_argument("--budget-s", type=float, default=20.0, help="time budget of a speed run's timed steps")
    p.add_argument("--threads", type=int, default=2, help="torch threads of both sides (default: 2)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds a speed worker may run")
    p.add_argument("--prune", action="store_true",
                   help="fullgraph's speed runs with --prune (each layer computes only the rows that reach the loss: the "
                        "same loss and gradients)")
    p.add_argument("--wait-idle", type=float, default=0.0, help="seconds to wait for a quiet CPU before each worker")
    p.add_argument("--out-dir", default="runs/hgt", help="where hgt.json and hgt.md go")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.graphs, args.parts = args.graphs.split(","), args.parts.split(",")
    args.seeds = [int(v) for v in args.seeds.split(",")]
    if set(args.graphs) - set(GRAPHS) or set(args.parts) - set(PARTS):
        p.error(f"expected graphs among {', '.join(GRAPHS)} and parts among {', '.join(PARTS)}")
    args.waiter = IdleWaiter(args.wait_idle)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        print(RESULT_MARK + json.dumps(speed_worker(json.loads(args.worker))), flush=True)
        return 0
    torch.set_num_threads(args.threads)
    started, now, env, header = start_report("HGT on typed graphs, fullgraph against PyG's HGTConv", args.threads)
    print(f"config: {dict(SETTINGS)}; Adam; {args.epochs} epochs; seeds {args.seeds}; 20 labels per class", flush=True)
    result = {"date": now, "header": header, "machine": env["machine"], "versions": env["versions"],
              "settings": dict(SETTINGS), "args": {k: v for k, v in vars(args).items() if k != "waiter"}}
    lines = []
    if "accuracy" in args.parts:
        result["accuracy"] = part_accuracy(args)
        lines += accuracy_table(result["accuracy"]) + [""]
    if "speed" in args.parts:
        result["speed"] = part_speed(args)
        lines += speed_table(result["speed"]) + [""]
    print("\n" + "\n".join(lines))
    out = Path(args.out_dir)
    write_json(out / "hgt.json", result | {"total_s": time.perf_counter() - started})
    (out / "hgt.md").write_text("\n".join([f"HGT against PyG's HGTConv, {now}", "", *header, "", *lines]))
    print(f"total {(time.perf_counter() - started) / 60:.1f} min; wrote {out}/hgt.json and .md")
    acc = all(r["pass_test_acc"] for r in result.get("accuracy", {}).values())
    fast = all(r.get("time_ratio", 0) <= TARGETS["time"] and r.get("memory_ratio", 0) <= TARGETS["memory"]
               for r in result.get("speed", {}).values())
    return 0 if acc and fast else 1


if __name__ == "__main__":
    sys.exit(main())
