"""Accuracy against the peer: the same graph, split and settings through fullgraph and through PyG's own layers.

    .venv/bin/python benchmarks/accuracy_vs_pyg.py                       # every cell (hours on 2 cores)
    .venv/bin/python benchmarks/accuracy_vs_pyg.py --datasets cora,tolokers --models gcn,sage --seeds 0,1,2
    .venv/bin/python benchmarks/accuracy_vs_pyg.py --datasets amazon-computers --models gcn --norms none \
        --layers 2 --hidden 64 --seeds 0-31 --threads 1     # issue 66: GCN 2 x 64, 32 seeds a side

For every (graph, model, norm) cell both sides train full-batch, single process, from the graph
fullgraph loads (features as ``fullgraph train`` normalizes them, the dataset's split ``--split``),
with Adam, the same learning rate, weight decay, dropout, depth, width and epochs, and report the
test metric at the epoch of the best validation metric (ROC-AUC on the two-class Tolokers, accuracy
elsewhere, both computed by ``fullgraph.tasks.metrics`` from each side's logits). Seeds set each
side's initial weights and dropout; the mean over ``--seeds`` is compared. A seed does not couple the
two sides (fullgraph draws its weights in another layout and keys its dropout masks by node), so the
two lists are independent samples: the standard error of Δ is ``√(sd_fg² / n + sd_pyg² / n)``. The
seeds of a cell alternate between the sides and the JSON is written after each, so a run cut short
still holds balanced samples.

The PyG side is written the way PyG's examples write these models, over PyG's fastest input form
(a transposed sparse ``adj_t``; ``edge_index`` for GAT):

* ``gcn``: ``GCNConv(cached=True)`` layers (PyG's ``gcn.py``: Â normalized once, the same numbers),
  ``dropout → conv → [norm] → ReLU`` between them (dropout on the input too);
* ``sage``: ``SAGEConv`` (mean) the same way;
* ``gat``: ``GATConv`` with ``heads`` concatenated heads of ``hidden / heads`` features, ELU, one head
  last, no attention dropout (fullgraph has none), dropout before every layer;
* ``gcnii``: ``Linear → ReLU``, ``GCN2Conv(α, θ = λ, layer = l)`` layers with ReLU, ``Linear``; dropout
  before each; the conv weights decayed by ``conv_weight_decay`` (PyG's ``gcn2_cora.py``);
* ``resgcn+``: ``Linear`` encoder, a plain ``GCNConv`` first layer, then ``DeepGCNLayer(GCNConv,
  LayerNorm, ReLU, block='res+')``, a final ``LayerNorm → ReLU → dropout → Linear`` (PyG's DeeperGCN example).

``--norm`` cells (``layer``, ``batch``) put ``LayerNorm`` / ``BatchNorm1d`` after every hidden
convolution on both sides (GCN, SAGE, GAT). Target: fullgraph's mean ≥ PyG's mean − 0.5 points in
every cell. The published numbers of the same models on these graphs are printed beside them (other
splits and tuning: a sanity check, not a target).
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

import torch
from types import MappingProxyType
from torch.nn import functional as F

from fullgraph.config import NORM_MODELS, TrainConfig
from fullgraph.data.load import load_graph
from fullgraph.tasks.metrics import counts, resolve_metric, roc_auc_columns, score_columns
from fullgraph.train.trainer import Trainer

from _harness import print_header, write_json

DEFAULT_ROOT = os.environ.get("FULLGRAPH_DATA") or str(Path(__file__).resolve().parents[2] / "shared" / "data")
DATASETS = ("cora", "citeseer", "amazon-computers", "coauthor-cs", "coauthor-physics", "squirrel-filtered",
            "tolokers")
MODELS = ("gcn", "sage", "gat", "gcnii", "resgcn+")
NORMED = NORM_MODELS  # the models that take --norm
SETTINGS = MappingProxyType({  # model: its hyperparameters (the same on both sides)
    "gcn": dict(layers=3, hidden=128, dropout=0.5, lr=0.01, weight_decay=5e-4),
    "sage": dict(layers=3, hidden=128, dropout=0.5, lr=0.01, weight_decay=5e-4),
    "gat": dict(layers=3, hidden=128, heads=8, dropout=0.5, lr=0.01, weight_decay=5e-4),
    "gcnii": dict(layers=8, hidden=64, dropout=0.6, lr=0.01, weight_decay=5e-4, conv_weight_decay=0.01,
                  gcnii_alpha=0.1, gcnii_lambda=0.5),
    "resgcn+": dict(layers=8, hidden=64, dropout=0.5, lr=0.01, weight_decay=5e-4),
})
PUBLISHED = MappingProxyType({  # (dataset, model): (number, source)
    ("amazon-computers", "gcn"): (82.6, "Shchur et al. 2018"),
    ("coauthor-cs", "gcn"): (91.1, "Shchur et al. 2018"),
    ("coauthor-physics", "gcn"): (92.8, "Shchur et al. 2018"),
    ("tolokers", "gcn"): (83.64, "Platonov et al. 2023, ROC-AUC"),
    ("tolokers", "sage"): (82.43, "Platonov et al. 2023, ROC-AUC"),
    ("squirrel-filtered", "gcn"): (39.47, "Platonov et al. 2023"),
    ("squirrel-filtered", "sage"): (36.09, "Platonov et al. 2023"),
})
TOLERANCE = 0.5  # points: fullgraph's mean may trail PyG's by at most this much


# ---------------------------------------------------------------- the PyG side
def pyg_model(name: str, in_dim: int, classes: int, norm: str, s: dict) -> torch.nn.Module:
    from torch_geometric import nn as pyg

    L, H, p = s["layers"], s["hidden"], s["dropout"]

    def make_norm(width):
        return {"none": None, "layer": torch.nn.LayerNorm(width), "batch": torch.nn.BatchNorm1d(width)}[norm]

    class Stack(torch.nn.Module):
        """``dropout → conv → [norm] → act`` per hidden layer, the last conv without norm or act."""

        def __init__(self, convs, act):
            super().__init__()
            self.convs = torch.nn.ModuleList(convs)
            self.norms = torch.nn.ModuleList(make_norm(c.out_channels * getattr(c, "heads", 1)) or torch.nn.Identity()
                                             for c in convs[:-1])
            self.act = act

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(F.dropout(x, p, self.training), edge_index)
                if i < len(self.convs) - 1:
                    x = self.act(self.norms[i](x))
            return x

    dims = [in_dim] + [H] * (L - 1) + [classes]
    if name == "gcn":
        return Stack([pyg.GCNConv(dims[i], dims[i + 1], cached=True) for i in range(L)], F.relu)
    if name == "sage":
        return Stack([pyg.SAGEConv(dims[i], dims[i + 1], aggr="mean") for i in range(L)], F.relu)
    if name == "gat":
        k = s["heads"]
        convs = [pyg.GATConv(in_dim if i == 0 else H, H // k, heads=k) for i in range(L - 1)]
        return Stack(convs + [pyg.GATConv(H, classes, heads=1)], F.elu)
    if name == "gcnii":
        return _PygGCNII(in_dim, classes, s)
    if name == "resgcn+":
        return _PygResGCN(in_dim, classes, s)
    raise ValueError(name)


class _PygGCNII(torch.nn.Module):
    def __init__(self, in_dim, classes, s):
        from torch_geometric.nn import GCN2Conv

        super().__init__()
        self.p = s["dropout"]
        self.lin_in, self.lin_out = torch.nn.Linear(in_dim, s["hidden"]), torch.nn.Linear(s["hidden"], classes)
        self.convs = torch.nn.ModuleList(GCN2Conv(s["hidden"], s["gcnii_alpha"], s["gcnii_lambda"], layer=i + 1)
                                         for i in range(s["layers"]))

    def forward(self, x, edge_index):
        x = x0 = F.relu(self.lin_in(F.dropout(x, self.p, self.training)))
        for conv in self.convs:
            x = F.relu(conv(F.dropout(x, self.p, self.training), x0, edge_index))
        return self.lin_out(F.dropout(x, self.p, self.training))

    def param_groups(self, s):
        return [{"params": list(self.convs.parameters()), "weight_decay": s["conv_weight_decay"]},
                {"params": list(self.lin_in.parameters()) + list(self.lin_out.parameters()),
                 "weight_decay": s["weight_decay"]}]


class _PygResGCN(torch.nn.Module):
    def __init__(self, in_dim, classes, s):
        from torch_geometric.nn import DeepGCNLayer, GCNConv

        super().__init__()
        H, self.p = s["hidden"], s["dropout"]
        self.encoder, self.decoder = torch.nn.Linear(in_dim, H), torch.nn.Linear(H, classes)
        self.first = GCNConv(H, H)
        self.layers = torch.nn.ModuleList(
            DeepGCNLayer(GCNConv(H, H), torch.nn.LayerNorm(H), torch.nn.ReLU(), block="res+", dropout=self.p)
            for _ in range(s["layers"] - 1))
        self.final_norm = torch.nn.LayerNorm(H)

    def forward(self, x, edge_index):
        x = self.first(self.encoder(x), edge_index)
        for layer in self.layers:
            x = layer(x, edge_index)
        return self.decoder(F.dropout(F.relu(self.final_norm(x)), self.p, self.training))


def metric_of(metric: str, logits: torch.Tensor, y: torch.Tensor) -> float:
    if metric == "rocauc":
        return roc_auc_columns(*score_columns(logits, y))
    num, den = counts(logits, y)
    return num / den if den else 0.0


def pyg_adjacency(graph, sparse: bool):
    """``edge_index``, or for the convolutions that take it PyG's fast form, a transposed torch.sparse
    CSR ``adj_t`` (``ToSparseTensor``): the same graph, several times faster on CPU (GATConv keeps
    ``edge_index``: its attention runs per edge)."""
    from torch_geometric import transforms as T
    from torch_geometric.data import Data

    src, dst = graph.edges()
    edge_index = torch.stack([src, dst])
    if not sparse:
        return edge_index
    return T.ToSparseTensor(layout=torch.sparse_csr)(Data(edge_index=edge_index, num_nodes=graph.num_nodes)).adj_t


def train_pyg(graph, name: str, norm: str, s: dict, epochs: int, seed: int, metric: str,
              device: str = "cpu") -> float:
    """Full-batch training of the PyG model; the test metric at the best validation metric."""
    torch.manual_seed(seed)
    x = (graph.x.to_dense() if graph.x.layout != torch.strided else graph.x).to(device)
    edge_index = pyg_adjacency(graph, sparse=name != "gat").to(device)
    model = pyg_model(name, graph.num_features, graph.num_classes, norm, s).to(device)
    groups = model.param_groups(s) if hasattr(model, "param_groups") else model.parameters()
    opt = torch.optim.Adam(groups, lr=s["lr"], weight_decay=0.0 if hasattr(model, "param_groups") else s["weight_decay"])
    y, tr, va, te = (t.to(device) for t in (graph.y, graph.train_mask, graph.val_mask, graph.test_mask))
    best_val, best_test = -1.0, 0.0
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index)[tr], y[tr]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(x, edge_index).cpu()
        v = metric_of(metric, logits[va.cpu()], y[va].cpu())
        if v > best_val:
            best_val, best_test = v, metric_of(metric, logits[te.cpu()], y[te].cpu())
    return best_test


def train_fullgraph(graph, name: str, norm: str, s: dict, epochs: int, seed: int, metric: str,
                    device: str = "cpu") -> float:
    cfg = TrainConfig.of(model=name, norm=norm, epochs=epochs, seed=seed, metric=metric, progress="none",
                      device=device, **s)
    trainer = Trainer(cfg, graph)
    try:
        return trainer.build().train().test_metric
    finally:
        trainer.close()


# ---------------------------------------------------------------- the table
def cells(datasets, models, norms):
    for d in datasets:
        for m in models:
            for n in norms:
                if n == "none" or m in NORMED:
                    yield d, m, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=DEFAULT_ROOT)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--norms", default="none,layer", help="of none, layer, batch (default none,layer)")
    ap.add_argument("--seeds", default="0,1,2", help="a list, ranges allowed: 0,1,2 or 0-31 or 0-9,20")
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--split", type=int, default=0, help="the dataset's fixed split, or the seed of a made one")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="where both sides train: cpu or cuda (default cpu)")
    ap.add_argument("--dropout", type=float, default=None,
                    help="override every model's dropout on both sides (0 takes the random masks out of the "
                         "comparison: what is left is the model, its initialization and the optimizer)")
    ap.add_argument("--layers", type=int, default=None, help="override every model's depth on both sides")
    ap.add_argument("--hidden", type=int, default=None, help="override every model's width on both sides")
    ap.add_argument("--out", default="runs/bench_accuracy_vs_pyg.json")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for key in ("dropout", "layers", "hidden"):
        if getattr(args, key) is not None:
            for s in SETTINGS.values():
                s[key] = getattr(args, key)
    seeds = parse_seeds(args.seeds)
    datasets, models, norms = args.datasets.split(","), args.models.split(","), args.norms.split(",")
    print(f"# accuracy vs PyG ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)")
    print_header(prefix="* ")
    print(f"* configuration: epochs {args.epochs}, seeds {seeds}, split {args.split}, norms {norms}; "
          f"device {args.device}; settings {json.dumps({m: SETTINGS[m] for m in models})}")
    rows, graphs = [], {}
    t_start = time.perf_counter()
    for d, m, n in cells(datasets, models, norms):
        if d not in graphs:
            graphs = {d: load_graph(TrainConfig.of(dataset=d, root=args.root, split=args.split))}
        g = graphs[d]
        metric = resolve_metric("auto", g.num_classes, g.multilabel)
        row = {"dataset": d, "model": m, "norm": n, "metric": metric, "fullgraph": [], "pyg": [], "seconds": 0.0}
        rows.append(row)
        run_cell(row, g, seeds, args, lambda: write_json(args.out, {"args": vars(args), "rows": rows}))
        print_row(row, flush=True)
    print_table(rows)
    print(f"total {time.perf_counter() - t_start:.0f} s; wrote {args.out}")
    return 1 if any(verdict(r) == "FAIL" for r in rows) else 0


def parse_seeds(text: str) -> list[int]:
    """``0,1,2``, ``0-31`` or a mix (``0-9,20``): the seeds in the order given."""
    seeds = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        seeds += list(range(int(first), int(last or first) + 1))
    return seeds


def run_cell(row: dict, graph, seeds, args, save) -> None:
    """Train a cell's seeds, fullgraph then PyG for each seed in turn, saving after each run."""
    d, m, n, metric = row["dataset"], row["model"], row["norm"], row["metric"]
    t0 = time.perf_counter()
    for seed in seeds:
        for side, train in (("fullgraph", train_fullgraph), ("pyg", train_pyg)):
            row[side].append(train(graph, m, n, SETTINGS[m], args.epochs, seed, metric, args.device))
            row["seconds"] = time.perf_counter() - t0
            save()
        print(f"  {d} {m} {n} seed {seed}: fullgraph {row['fullgraph'][-1]:.4f}, PyG {row['pyg'][-1]:.4f} "
              f"({row['seconds']:.0f} s)", flush=True)


def mean_pts(v):
    return 100.0 * statistics.mean(v)


def verdict(r) -> str:
    return "PASS" if mean_pts(r["fullgraph"]) >= mean_pts(r["pyg"]) - TOLERANCE else "FAIL"


def sd_pts(v) -> float:
    return 100.0 * (statistics.stdev(v) if len(v) > 1 else 0.0)


def delta_se(r) -> float:
    """Standard error of Δ in points: of the difference of two independent means (see the docstring)."""
    return (sd_pts(r["fullgraph"]) ** 2 / len(r["fullgraph"]) + sd_pts(r["pyg"]) ** 2 / len(r["pyg"])) ** 0.5


def print_row(r, flush=False):
    pub = PUBLISHED.get((r["dataset"], r["model"])) if r["norm"] == "none" else None
    delta, se = mean_pts(r["fullgraph"]) - mean_pts(r["pyg"]), delta_se(r)
    print(f"| {r['dataset']} | {r['model']} | {r['norm']} | {r['metric']} | {len(r['pyg'])} | "
          f"{mean_pts(r['fullgraph']):.2f} ± {sd_pts(r['fullgraph']):.2f} | {mean_pts(r['pyg']):.2f} ± "
          f"{sd_pts(r['pyg']):.2f} | {delta:+.2f} | {se:.2f} | {delta / se if se else 0.0:+.1f} | {verdict(r)} | "
          f"{f'{pub[0]} ({pub[1]})' if pub else ''} | {r['seconds']:.0f} |", flush=flush)


def print_table(rows):
    print("\n| graph | model | norm | metric | seeds | fullgraph | PyG | Δ points | s.e. of Δ | z | ≥ PyG − 0.5 | "
          "published | s |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |")
    for r in rows:
        print_row(r)


if __name__ == "__main__":
    sys.exit(main())
