"""Node regression (``--task node-regression``) against the same model in plain PyG, on the same split.

    .venv/bin/python benchmarks/node_regression.py --out benchmarks/results/node_regression/node_regression.json   # ~10 min

The target, derived here and stated: each node's **local homophily**, the share of its in-neighbours that
carry its own class (a number in [0, 1]; a node without neighbours has none, NaN). Neither side sees the
classes: a model must infer them, its own and its neighbours', from the features and the structure. Graph:
Amazon-Computers (``../shared/data``; ``--graphs`` takes any named graph with classes); split: 60/20/20 of the
labelled nodes at random (``data.splits.random_split``, seed 0), the same for both sides.

* **fullgraph**: ``Trainer(TrainConfig.of(task="node-regression", model="gcn", ...), graph)``, one process.
* **PyG**: ``GCNConv`` (``cached=True``) over PyG's fastest CPU form, a transposed sparse CSR ``adj_t``:
  dropout → conv → ReLU, dropout → conv to one column; the targets standardized by the training nodes' mean
  and deviation (as fullgraph does inside), the mean squared error of the standardized targets, Adam.

Both: GCN 2 × 64, dropout 0.5, lr 0.01, weight decay 5e-4, 200 epochs, every epoch evaluated, the test RMSE
(in the targets' units) at the first epoch of lowest validation RMSE; 5 seeds. Targets: fullgraph's mean
test RMSE ≤ 1.02 × PyG's; the training step (median after one warm-up, one thread) ≤ 0.5 × PyG's.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
from pathlib import Path
from types import MappingProxyType

import torch
from torch.nn import functional as F

from fullgraph.config import TrainConfig
from fullgraph.data.graph import Graph
from fullgraph.data.load import load_graph
from fullgraph.data.splits import random_split
from fullgraph.train.trainer import Trainer

from _harness import start_report, write_json

DEFAULT_ROOT = os.environ.get("FULLGRAPH_DATA") or str(Path(__file__).resolve().parents[2] / "shared" / "data")
GRAPHS = ("amazon-computers",)
SETTINGS = MappingProxyType({"layers": 2, "hidden": 64, "dropout": 0.5, "lr": 0.01, "weight_decay": 5e-4})
TARGETS = MappingProxyType({"rmse": 1.02, "time": 0.5})


def homophily_graph(name: str, root: str) -> Graph:
    """``name`` with its classes replaced by each node's local homophily (module docstring), split 60/20/20."""
    g = load_graph(TrainConfig.of(dataset=name, root=root))
    src, dst = g.edges()
    same = torch.bincount(dst, weights=(g.y[src] == g.y[dst]).double(), minlength=g.num_nodes)
    degree = torch.bincount(dst, minlength=g.num_nodes).double()
    y = torch.where(degree > 0, same / degree.clamp(min=1), torch.nan).float()
    train, val, test = random_split(y, seed=0)
    return Graph(indptr=g.indptr, indices=g.indices, x=g.x, y=y, train_mask=train, val_mask=val, test_mask=test,
                 name=f"{name}-homophily")


def pyg_side(graph: Graph, seed: int):
    """The PyG model, its optimizer, and its inputs (dense features, ``adj_t``, standardized targets)."""
    from torch_geometric import transforms as T
    from torch_geometric.data import Data
    from torch_geometric.nn import GCNConv

    torch.manual_seed(seed)
    src, dst = graph.edges()
    adj_t = T.ToSparseTensor(layout=torch.sparse_csr)(Data(edge_index=torch.stack([src, dst]),
                                                           num_nodes=graph.num_nodes)).adj_t
    x = graph.x.to_dense() if graph.x.layout != torch.strided else graph.x
    s = SETTINGS

    class GCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([GCNConv(graph.num_features, s["hidden"], cached=True),
                                              GCNConv(s["hidden"], 1, cached=True)])

        def forward(self, x, adj_t):
            h = F.relu(self.convs[0](F.dropout(x, s["dropout"], self.training), adj_t))
            return self.convs[1](F.dropout(h, s["dropout"], self.training), adj_t)[:, 0]

    model = GCN()
    opt = torch.optim.Adam(model.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    y_train = graph.y[graph.train_mask].double()
    mean, std = float(y_train.mean()), float(y_train.std(unbiased=False))
    z = ((graph.y.double() - mean) / std).float()

    def step() -> float:
        model.train()
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x, adj_t)[graph.train_mask], z[graph.train_mask])
        loss.backward()
        opt.step()
        return loss.item()

    def predict() -> torch.Tensor:
        model.eval()
        with torch.no_grad():
            return model(x, adj_t).double() * std + mean
    return step, predict


def rmse(pred: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> float:
    return float((pred[mask] - y[mask].double()).square().mean().sqrt())


def train_pyg(graph: Graph, seed: int, epochs: int) -> dict:
    step, predict = pyg_side(graph, seed)
    best_val, best_test, times = float("inf"), 0.0, []
    for _ in range(epochs):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        pred = predict()
        val = rmse(pred, graph.y, graph.val_mask)
        if val < best_val:
            best_val, best_test = val, rmse(pred, graph.y, graph.test_mask)
    return {"val_rmse": best_val, "test_rmse": best_test, "step_s": statistics.median(times[1:])}


def train_fullgraph(graph: Graph, seed: int, epochs: int, threads: int) -> dict:
    cfg = TrainConfig.of(task="node-regression", model="gcn", epochs=epochs, seed=seed, metric="rmse", threads=threads,
                         progress="none", **SETTINGS)
    trainer = Trainer(cfg, graph)
    try:
        result = trainer.build().train()
        tc = TrainConfig.of(task="node-regression", model="gcn", epochs=1 << 20, seed=seed, threads=threads,
                            progress="none", **SETTINGS)
        timing, times = Trainer(tc, graph).build(), []
        for epoch in itertools.islice(itertools.count(1), 21):
            t0 = time.perf_counter()
            timing.train_step(epoch)
            times.append(time.perf_counter() - t0)
        timing.close()
    finally:
        trainer.close()
    return {"val_rmse": result.val_metric, "test_rmse": result.test_metric, "step_s": statistics.median(times[1:])}


def compare(name: str, args) -> dict:
    graph = homophily_graph(name, args.root)
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = {"fullgraph": [train_fullgraph(graph, s, args.epochs, args.threads) for s in seeds],
            "pyg": [train_pyg(graph, s, args.epochs) for s in seeds]}
    mean = {side: statistics.mean(r["test_rmse"] for r in rs) for side, rs in runs.items()}
    step = {side: statistics.median(r["step_s"] for r in rs) for side, rs in runs.items()}
    row = {"graph": graph.name, "nodes": graph.num_nodes, "edges": graph.num_edges, "runs": runs,
           "test_rmse": mean, "rmse_ratio": mean["fullgraph"] / mean["pyg"], "step_s": step,
           "time_ratio": step["fullgraph"] / step["pyg"],
           "target_std": float(graph.y[graph.test_mask].double().std())}
    print(f"| {graph.name} | {mean['fullgraph']:.4f} | {mean['pyg']:.4f} | {row['rmse_ratio']:.3f} | "
          f"{step['fullgraph'] * 1e3:.1f} | {step['pyg'] * 1e3:.1f} | {row['time_ratio']:.2f} | "
          f"{row['target_std']:.4f} |", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=DEFAULT_ROOT)
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/results/node_regression/node_regression.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    started, now, env, _ = start_report("Node regression, fullgraph against PyG's GCNConv", args.threads)
    print(f"config: {dict(SETTINGS)}; Adam; {args.epochs} epochs; seeds {args.seeds}; targets {dict(TARGETS)}")
    print("\n| graph | fullgraph test RMSE | PyG test RMSE | RMSE ratio (≤ 1.02) | fullgraph step ms | PyG step ms | "
          "time ratio (≤ 0.5) | test targets' deviation |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = [compare(name, args) for name in args.graphs.split(",")]
    met = all(r["rmse_ratio"] <= TARGETS["rmse"] and r["time_ratio"] <= TARGETS["time"] for r in rows)
    write_json(args.out, {"date": now, "environment": env, "settings": dict(SETTINGS), "targets": dict(TARGETS),
                          "epochs": args.epochs, "seeds": args.seeds, "rows": rows, "met": met,
                          "total_s": time.perf_counter() - started})
    print(f"\ntargets {'met' if met else 'missed'}; total {(time.perf_counter() - started) / 60:.1f} min; wrote {args.out}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
