"""Edge classification (``--task edge``) against the same model in plain PyG, on the same split.

    .venv/bin/python benchmarks/edge_classification.py --out benchmarks/results/edge_classification/edge_classification.json

The label, derived here and stated: for each co-purchase edge ``u - v`` of Amazon-Computers (``../shared/data``,
each undirected edge once, ``u < v``), whether its two products share a category (class 1) or not (class 0).
Neither side sees the categories: a model must infer them from the features and the structure. The labelled
edges are split 80/10/10 by ``data.edge_labels.random_edge_split`` (seed 0), the same for both sides; the
encoder passes messages over every edge (as fullgraph's edge tasks do).

* **fullgraph**: ``Trainer(TrainConfig.of(task="edge", model="gcn", ...), graph, split=split)``, one process.
* **PyG**: ``GCNConv`` (``cached=True``) over PyG's fastest CPU form, a transposed sparse CSR ``adj_t``:
  dropout → conv → ReLU, dropout → conv to the embedding; the decoder ``Linear(2H, H) → ReLU → Linear(H, 2)``
  on the two ends' embeddings concatenated (source first), cross-entropy over the training edges, Adam.

Both: GCN 2 × 64, dropout 0.5, lr 0.01, weight decay 5e-4 (every weight), every training edge in one step
an epoch, 100 epochs, every epoch evaluated, the test accuracy at the first epoch of best validation accuracy;
5 seeds. Targets: fullgraph's mean test accuracy ≥ PyG's − 0.5 points; the training step (median after one
warm-up, one thread) ≤ 0.5 × PyG's.
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
from fullgraph.data.edge_labels import random_edge_split
from fullgraph.data.load import load_graph
from fullgraph.train.trainer import Trainer

from _harness import start_report, write_json

DEFAULT_ROOT = os.environ.get("FULLGRAPH_DATA") or str(Path(__file__).resolve().parents[2] / "shared" / "data")
GRAPHS = ("amazon-computers",)
SETTINGS = MappingProxyType({"layers": 2, "hidden": 64, "dropout": 0.5, "lr": 0.01, "weight_decay": 5e-4})
TARGETS = MappingProxyType({"points": -0.5, "time": 0.5})


def same_category_edges(name: str, root: str):
    """The graph and its labelled edges: each undirected edge once, labelled 1 where its ends share a class."""
    g = load_graph(TrainConfig.of(dataset=name, root=root))
    src, dst = g.edges()
    once = src < dst
    pairs = torch.stack([src[once], dst[once]], 1)
    return g, pairs, (g.y[pairs[:, 0]] == g.y[pairs[:, 1]]).long()


def pyg_side(graph, split, seed: int):
    """The PyG model, its optimizer and its inputs; ``step`` trains an epoch, ``accuracy(part)`` evaluates."""
    from torch_geometric import transforms as T
    from torch_geometric.data import Data
    from torch_geometric.nn import GCNConv

    torch.manual_seed(seed)
    src, dst = graph.edges()
    adj_t = T.ToSparseTensor(layout=torch.sparse_csr)(Data(edge_index=torch.stack([src, dst]),
                                                           num_nodes=graph.num_nodes)).adj_t
    x = graph.x.to_dense() if graph.x.layout != torch.strided else graph.x
    s, h = SETTINGS, SETTINGS["hidden"]

    class EdgeGCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([GCNConv(graph.num_features, h, cached=True), GCNConv(h, h, cached=True)])
            self.hidden, self.out = torch.nn.Linear(2 * h, h), torch.nn.Linear(h, 2)

        def forward(self, x, adj_t, pairs):
            z = F.relu(self.convs[0](F.dropout(x, s["dropout"], self.training), adj_t))
            z = self.convs[1](F.dropout(z, s["dropout"], self.training), adj_t)
            return self.out(F.relu(self.hidden(torch.cat([z[pairs[:, 0]], z[pairs[:, 1]]], 1))))

    model = EdgeGCN()
    opt = torch.optim.Adam(model.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    train_pairs, train_y = split.part("train")

    def step() -> float:
        model.train()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x, adj_t, train_pairs), train_y)
        loss.backward()
        opt.step()
        return loss.item()

    def accuracy(part: str) -> float:
        model.eval()
        pairs, y = split.part(part)
        with torch.no_grad():
            return float((model(x, adj_t, pairs).argmax(1) == y).double().mean())
    return step, accuracy


def train_pyg(graph, split, seed: int, epochs: int) -> dict:
    step, accuracy = pyg_side(graph, split, seed)
    best_val, best_test, times = -1.0, 0.0, []
    for _ in range(epochs):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        val = accuracy("val")
        if val > best_val:
            best_val, best_test = val, accuracy("test")
    return {"val_acc": best_val, "test_acc": best_test, "step_s": statistics.median(times[1:])}


def train_fullgraph(graph, split, seed: int, epochs: int, threads: int) -> dict:
    opts = dict(task="edge", model="gcn", seed=seed, threads=threads, progress="none", **SETTINGS)
    trainer = Trainer(TrainConfig.of(epochs=epochs, metric="acc", **opts), graph, split=split)
    try:
        result = trainer.build().train()
        timing, times = Trainer(TrainConfig.of(epochs=1 << 20, **opts), graph, split=split).build(), []
        for epoch in itertools.islice(itertools.count(1), 21):
            t0 = time.perf_counter()
            timing.train_step(epoch)
            times.append(time.perf_counter() - t0)
        timing.close()
    finally:
        trainer.close()
    return {"val_acc": result.val_metric, "test_acc": result.test_metric, "step_s": statistics.median(times[1:])}


def compare(name: str, args) -> dict:
    graph, pairs, y = same_category_edges(name, args.root)
    split = random_edge_split(pairs, y, (0.8, 0.1, 0.1), 0, name)
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = {"fullgraph": [train_fullgraph(graph, split, s, args.epochs, args.threads) for s in seeds],
            "pyg": [train_pyg(graph, split, s, args.epochs) for s in seeds]}
    mean = {side: 100 * statistics.mean(r["test_acc"] for r in rs) for side, rs in runs.items()}
    spread = {side: 100 * statistics.stdev(r["test_acc"] for r in rs) if len(rs) > 1 else 0.0 for side, rs in runs.items()}
    step = {side: statistics.median(r["step_s"] for r in rs) for side, rs in runs.items()}
    majority = 100 * float(split.y[split.test].double().mean())
    row = {"graph": name, "nodes": graph.num_nodes, "labelled_edges": split.sizes(), "runs": runs, "test_acc": mean,
           "test_acc_std": spread, "points": mean["fullgraph"] - mean["pyg"], "step_s": step,
           "time_ratio": step["fullgraph"] / step["pyg"], "test_share_of_class_1": majority}
    print(f"| {name} | {mean['fullgraph']:.2f} ± {spread['fullgraph']:.2f} | {mean['pyg']:.2f} ± {spread['pyg']:.2f} | "
          f"{row['points']:+.2f} | {step['fullgraph'] * 1e3:.1f} | {step['pyg'] * 1e3:.1f} | {row['time_ratio']:.2f} | "
          f"{majority:.2f} |", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=DEFAULT_ROOT)
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/results/edge_classification/edge_classification.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    started, now, env, _ = start_report("Edge classification, fullgraph against PyG's GCNConv", args.threads)
    print(f"config: {dict(SETTINGS)}; Adam; {args.epochs} epochs; seeds {args.seeds}; targets {dict(TARGETS)}")
    print("\n| graph | fullgraph test acc | PyG test acc | Δ points (≥ −0.5) | fullgraph step ms | PyG step ms | "
          "time ratio (≤ 0.5) | test share of class 1 |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = [compare(name, args) for name in args.graphs.split(",")]
    met = all(r["points"] >= TARGETS["points"] and r["time_ratio"] <= TARGETS["time"] for r in rows)
    write_json(args.out, {"date": now, "environment": env, "settings": dict(SETTINGS), "targets": dict(TARGETS),
                          "epochs": args.epochs, "seeds": args.seeds, "rows": rows, "met": met,
                          "total_s": time.perf_counter() - started})
    print(f"\ntargets {'met' if met else 'missed'}; total {(time.perf_counter() - started) / 60:.1f} min; wrote {args.out}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
