"""Heterogeneous graphs: the built-in R-GCN through fullgraph's Trainer against the same R-GCN in plain PyG.

    .venv/bin/python benchmarks/hetero_accuracy.py --out-dir benchmarks/results/hetero     # ~12 min, 2 busy cores
    .venv/bin/python benchmarks/hetero_accuracy.py --graphs dblp --pyg-init fullgraph \
        --out-dir benchmarks/results/hetero                                              # ~10 min: the ablation
    .venv/bin/python benchmarks/hetero_accuracy.py --graphs acm --seeds 0,1 --epochs 50   # a quick look

HeCo's ACM and DBLP (``fullgraph.data.formats.heco.load_heco``: reverse relations added, the published
split of 20 training nodes per class, 1,000 validation and 1,000 test nodes), one typed graph each,
given to both sides as it is (features unnormalized, as ``fullgraph train`` loads a HeCo folder).

* **fullgraph**: ``Trainer(TrainConfig.of(model="rgcn", ...), graph)``, one process: a linear map per
  node type to ``hidden`` (Glorot weight blocks, a bias per type), a learned embedding per node of a
  featureless type (ACM's subjects, DBLP's conferences), then R-GCN layers (``rgcn.py``).
* **PyG**: what a PyG user writes for the same model: a ``torch.nn.Linear(F_t, hidden)`` per featured
  type (its default initialization; a sparse block is multiplied by ``torch.sparse.mm`` with the same
  weight and bias), an ``nn.Parameter`` table per featureless type (PyG's ``glorot`` over its shape, as
  fullgraph draws it since 2026-11-29; ±sqrt(6 / 2 hidden) before), concatenated in the graph's id order; then ``RGCNConv(hidden, hidden, R,
  aggr="mean")`` layers, the last to the classes, ReLU and dropout between them, over the global
  ``edge_index`` (``graph.edges()``) and ``edge_type`` (``graph.edge_type``).

Both: full batch, Adam, the same depth, width, dropout, learning rate, weight decay and epochs, every
epoch evaluated, the test accuracy and test Macro-F1 of the epoch of best validation accuracy (the
first such epoch; fullgraph's default selection). Seeds set each side's initial weights and dropout.
Before training, fullgraph's initial weights are copied into the PyG model and the two forwards compared
(``same_model``: the largest |difference| of the logits). ``--pyg-init fullgraph`` starts the PyG model
from fullgraph's initial weights under each seed instead of its own draw, which takes the input maps'
initialization out of the comparison (written to ``accuracy_fullgraph_init.*``). Target: fullgraph's mean
test accuracy and Macro-F1 >= PyG's - 0.5 points. Beside them: HAN's Macro-F1 with 20 labels per class as
the HeCo paper reports it (Wang et al., KDD 2021; other model and tuning: an anchor, not a target), or
"not found" where the look-up did not find the table (``HAN_MACRO_F1``; benchmarks/README.md says where).
"""

from __future__ import annotations

import argparse
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

from _harness import REPO, start_report, write_json

GRAPHS = ("acm", "dblp")
SETTINGS = MappingProxyType({"layers": 2, "hidden": 64, "dropout": 0.5, "lr": 0.01, "weight_decay": 5e-4})
TOLERANCE = 0.5  # points: fullgraph's mean may trail PyG's by at most this much
CHECKPOINTS = (5, 10, 25, 50, 75, 100, 150, 200)  # epochs at which the mean validation curve is printed
DENSE_SHARE = 0.02  # a feature block with more non-zeros than this is multiplied dense on the PyG side
HAN_SOURCE = ("Wang, Liu, Han, Shi, 'Self-supervised Heterogeneous Graph Neural Network with Co-contrastive "
              "Learning', KDD 2021, arXiv 2105.09111: the node classification table, row HAN, Ma-F1, 20 labels per "
              "class")
HAN_MACRO_F1 = MappingProxyType({"acm": None, "dblp": None})  # None: not found (benchmarks/README.md says where looked)


# ---------------------------------------------------------------- metrics
def macro_f1(pred: torch.Tensor, y: torch.Tensor) -> float:
    """F1 per class, averaged over the classes present in ``y`` or ``pred`` (scikit-learn's ``average="macro"``)."""
    classes = torch.unique(torch.cat([y, pred]))
    f1s = []
    for c in classes:
        tp = int(((pred == c) & (y == c)).sum())
        fp, fn = int(((pred == c) & (y != c)).sum()), int(((pred != c) & (y == c)).sum())
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return sum(f1s) / len(f1s)


def scores(logits: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(accuracy, Macro-F1) of ``logits`` against ``y``."""
    pred = logits.argmax(-1)
    return float((pred == y).float().mean()), macro_f1(pred, y)


# ---------------------------------------------------------------- the PyG side
def pyg_inputs(graph) -> dict:
    """Each type's feature block (dense, or sparse COO where mostly zeros; None: featureless), the global
    ``edge_index`` and ``edge_type``: what the PyG model reads."""
    types, x = graph.node_types, graph.x
    x = x.to_dense() if x.layout != torch.strided else x
    off, cols, blocks = types.offsets, types.column_offsets, []
    for t in range(types.num_types):
        if not types.widths[t]:
            blocks.append(None)
            continue
        b = x[off[t] : off[t + 1], cols[t] : cols[t + 1]].contiguous()
        blocks.append(b if float((b != 0).float().mean()) > DENSE_SHARE else b.to_sparse())
    src, dst = graph.edges()
    return {"blocks": blocks, "edge_index": torch.stack([src, dst]), "edge_type": graph.edge_type}


class PygRGCN(nn.Module):
    """A ``Linear`` per featured type, an embedding table per featureless type, then ``RGCNConv`` layers."""

    def __init__(self, types, hidden: int, classes: int, layers: int, dropout: float):
        from torch_geometric.nn import RGCNConv
        from torch_geometric.nn.inits import glorot

        super().__init__()
        self.p = dropout
        self.lins = nn.ModuleList(nn.Linear(w, hidden) if w else nn.Identity() for w in types.widths)
        # a featureless type's table drawn by PyG's own glorot over its shape, as fullgraph draws it
        tables = [torch.empty(0 if w else n, hidden) for n, w in zip(types.counts, types.widths)]
        for t in tables:
            glorot(t)  # in place (it returns None); an empty table stays empty
        self.tables = nn.ParameterList(nn.Parameter(t if t.numel() else torch.empty(0)) for t in tables)
        dims = [hidden] * layers + [classes]
        self.convs = nn.ModuleList(RGCNConv(dims[i], dims[i + 1], types.num_relations, aggr="mean")
                                   for i in range(layers))

    def forward(self, blocks, edge_index, edge_type):
        hs = []
        for lin, table, b in zip(self.lins, self.tables, blocks):
            if b is None:
                hs.append(table)
            elif b.layout == torch.sparse_coo:
                hs.append(torch.sparse.mm(b, lin.weight.t()) + lin.bias)
            else:
                hs.append(lin(b))
        h = torch.cat(hs)
        for i, conv in enumerate(self.convs):
            h = conv(h, edge_index, edge_type)
            if i < len(self.convs) - 1:
                h = F.dropout(F.relu(h), self.p, self.training)
        return h


def train_pyg(graph, inputs: dict, s: dict, epochs: int, seed: int, start=None) -> dict:
    """Full-batch training; the test accuracy and Macro-F1 at the first epoch of best validation accuracy.
    ``start``: a fullgraph R-GCN whose weights the model starts from (``--pyg-init fullgraph``)."""
    torch.manual_seed(seed)
    model = PygRGCN(graph.node_types, s["hidden"], graph.num_classes, s["layers"], s["dropout"])
    if start is not None:
        copy_weights(start, model, graph.node_types)
    opt = torch.optim.Adam(model.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    y, tr, va, te = graph.y, graph.train_mask, graph.val_mask, graph.test_mask
    args = (inputs["blocks"], inputs["edge_index"], inputs["edge_type"])
    best, curve = {"val_acc": -1.0}, []
    for epoch in range(1, epochs + 1):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(*args)[tr], y[tr]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(*args)
        val_acc = scores(logits[va], y[va])[0]
        curve.append(val_acc)
        if val_acc > best["val_acc"]:
            test_acc, test_f1 = scores(logits[te], y[te])
            best = {"val_acc": val_acc, "test_acc": test_acc, "test_macro_f1": test_f1, "best_epoch": epoch}
    return best | {"val_curve": curve}


# ---------------------------------------------------------------- the fullgraph side
def fullgraph_config(s: dict, epochs: int, seed: int, threads: int, model: str = "rgcn") -> TrainConfig:
    return TrainConfig.of(model=model, epochs=epochs, seed=seed, metric="acc", progress="none", threads=threads, **s)


def train_fullgraph(graph, s: dict, epochs: int, seed: int, threads: int, model: str = "rgcn") -> dict:
    """``Trainer`` in one process, selecting by validation accuracy; Macro-F1 from the selected weights."""
    curve = []
    trainer = Trainer(fullgraph_config(s, epochs, seed, threads, model), graph,
                      callbacks=[lambda record: curve.append(record["val_acc"]) if "val_acc" in record else None])
    try:
        result = trainer.build().train()  # leaves the selected epoch's weights in the model
        e = trainer.engine
        trainer.model.eval()
        with torch.no_grad():
            logits = e.forward(trainer.model, 0, training=False).float()
        test = e.eval_masks()[2]
        test_acc, test_f1 = scores(logits[test], e.y[test])
    finally:
        trainer.close()
    if abs(test_acc - result.test_acc) > 1e-6:
        raise RuntimeError(f"expected the selected weights to give the selected epoch's test accuracy "
                           f"{result.test_acc:.4f} (got {test_acc:.4f})")
    return {"val_acc": result.val_acc, "test_acc": result.test_acc, "test_macro_f1": test_f1,
            "best_epoch": result.best_epoch, "val_curve": curve, "epoch_time_s": result.epoch_time_s}


def fullgraph_initial(graph, s: dict, seed: int, threads: int):
    """The R-GCN ``Trainer`` builds under ``seed`` (its initial weights), and its logits in eval mode."""
    trainer = Trainer(fullgraph_config(s, 1, seed, threads), graph)
    try:
        m, e = trainer.build().model, trainer.engine
        m.eval()
        with torch.no_grad():
            return m, e.forward(m, 0, training=False).float()
    finally:
        trainer.close()


@torch.no_grad()
def copy_weights(m, theirs: PygRGCN, types) -> PygRGCN:
    """fullgraph's R-GCN ``m`` into ``theirs``: weight blocks and type biases into the ``Linear`` maps, a
    featureless type's embedding rows plus its bias into its table, every layer's weights as they are."""
    cols, inp = types.column_offsets, m.input
    for t in range(types.num_types):
        if types.widths[t]:
            theirs.lins[t].weight.copy_(inp.weight[cols[t] : cols[t + 1]].t())
            theirs.lins[t].bias.copy_(inp.bias[t])
        else:
            b = int(inp.table_base[t])
            theirs.tables[t].copy_(inp.embedding[b : b + types.counts[t]] + inp.bias[t])
    for conv, layer in zip(theirs.convs, m.layers):
        conv.weight.copy_(layer.relation_weights())
        conv.root.copy_(layer.root)
        conv.bias.copy_(layer.bias)
    return theirs


def same_model(graph, inputs: dict, s: dict, threads: int) -> float:
    """fullgraph's initial R-GCN copied into ``PygRGCN``: the largest |difference| of the two forwards' logits."""
    m, ours = fullgraph_initial(graph, s, 0, threads)
    theirs = PygRGCN(graph.node_types, s["hidden"], graph.num_classes, s["layers"], s["dropout"]).eval()
    with torch.no_grad():
        pyg = copy_weights(m, theirs, graph.node_types)(inputs["blocks"], inputs["edge_index"], inputs["edge_type"])
    return float((pyg - ours).abs().max())


# ---------------------------------------------------------------- the table
def summary(runs: list[dict], key: str) -> tuple[float, float]:
    """Mean and standard deviation over seeds, in points."""
    vals = [100.0 * r[key] for r in runs]
    return statistics.mean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0


def run_graph(args, name: str) -> dict:
    t0 = time.perf_counter()
    graph = load_heco(Path(args.root) / f"heco_{name}", labels_per_class=20, name=name)
    inputs, s = pyg_inputs(graph), dict(SETTINGS)
    row = {"graph": name, "types": graph.node_types.describe(), "nodes": graph.num_nodes,
           "edges": graph.num_edges, "relations": graph.node_types.num_relations, "classes": graph.num_classes,
           "split": [int(m.sum()) for m in (graph.train_mask, graph.val_mask, graph.test_mask)],
           "same_model_max_abs_diff": same_model(graph, inputs, s, args.threads), "seconds": {}}
    print(f"\n== {name}: {row['types']}; {row['edges']:,} directed edges, {row['relations']} relations; split "
          f"{row['split']}; same model, max |Δ logits| {row['same_model_max_abs_diff']:.2e}", flush=True)
    for side in ("fullgraph", "pyg"):
        t1, row[side] = time.perf_counter(), []
        for seed in args.seeds:
            own = side == "pyg" and args.pyg_init == "fullgraph"  # PyG from fullgraph's initial weights
            start = fullgraph_initial(graph, s, seed, args.threads)[0] if own else None
            r = (train_fullgraph(graph, s, args.epochs, seed, args.threads) if side == "fullgraph"
                 else train_pyg(graph, inputs, s, args.epochs, seed, start))
            row[side].append(r)
            print(f"   {side:<9} seed {seed}: test acc {100 * r['test_acc']:.2f}, Macro-F1 "
                  f"{100 * r['test_macro_f1']:.2f} (best epoch {r['best_epoch']}, val {100 * r['val_acc']:.2f})",
                  flush=True)
        row["seconds"][side] = time.perf_counter() - t1
    row |= verdicts(row)
    row["han_macro_f1"] = HAN_MACRO_F1[name]
    row["seconds"]["total"] = time.perf_counter() - t0
    print_curves(row, args.epochs)
    return row


def verdicts(row: dict) -> dict:
    out = {}
    for key in ("test_acc", "test_macro_f1"):
        ours, theirs = summary(row["fullgraph"], key)[0], summary(row["pyg"], key)[0]
        out[f"delta_{key}"] = ours - theirs
        out[f"pass_{key}"] = ours >= theirs - TOLERANCE
    return out


def print_curves(row: dict, epochs: int) -> None:
    """Mean validation accuracy over seeds at a few epochs, and the best epochs: has it converged?"""
    at = [e for e in CHECKPOINTS if e <= epochs]
    print(f"   mean val acc at epochs {at}:")
    for side in ("fullgraph", "pyg"):
        mean = [100 * statistics.mean(r["val_curve"][e - 1] for r in row[side]) for e in at]
        best = [r["best_epoch"] for r in row[side]]
        print(f"   {side:<9} " + " ".join(f"{v:6.2f}" for v in mean) + f"; best epochs {best}", flush=True)


def table(rows: list[dict], pyg_init: str) -> list[str]:
    pyg = "PyG R-GCN (`RGCNConv`)" + (", from fullgraph's initial weights" if pyg_init == "fullgraph" else "")
    lines = [f"| graph | metric | fullgraph R-GCN | {pyg} | Δ points | ≥ PyG − 0.5 | HAN, HeCo paper |",
             "| --- | --- | ---: | ---: | ---: | --- | ---: |"]
    for r in rows:
        for key, label in (("test_acc", "accuracy"), ("test_macro_f1", "Macro-F1")):
            (om, osd), (pm, psd) = summary(r["fullgraph"], key), summary(r["pyg"], key)
            han = r["han_macro_f1"] if key == "test_macro_f1" else ""
            han = "not found" if han is None else han
            lines.append(f"| {r['graph'].upper()} | {label} | {om:.2f} ± {osd:.2f} | {pm:.2f} ± {psd:.2f} | "
                         f"{r[f'delta_{key}']:+.2f} | {'PASS' if r[f'pass_{key}'] else 'FAIL'} | {han} |")
    return lines


def han_line() -> str:
    found = any(v is not None for v in HAN_MACRO_F1.values())
    why = "" if found else " (not found by the look-up: benchmarks/README.md says where)"
    return f"HAN Macro-F1: {HAN_SOURCE}{why}"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=os.environ.get("FULLGRAPH_DATA") or str(REPO.parent / "shared" / "data"),
                   help="the folder holding heco_acm/ and heco_dblp/")
    p.add_argument("--graphs", default=",".join(GRAPHS), help=f"subset of {','.join(GRAPHS)}")
    p.add_argument("--seeds", default="0,1,2,3,4", help="seeds, at least 2 (default: 0..4)")
    p.add_argument("--epochs", type=int, default=100, help="epochs per run (default: 100)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads of both sides (default: 1; the VM is shared, and one thread suffers least)")
    p.add_argument("--pyg-init", choices=("pyg", "fullgraph"), default="pyg",
                   help="the PyG model's initial weights: its own draw (default), or fullgraph's under the same "
                        "seed (the input maps' initialization out of the comparison; written to "
                        "accuracy_fullgraph_init.*)")
    p.add_argument("--out-dir", default="runs/hetero", help="where accuracy.json and accuracy.md go")
    args = p.parse_args(argv)
    args.graphs, args.seeds = args.graphs.split(","), [int(v) for v in args.seeds.split(",")]
    if set(args.graphs) - set(GRAPHS):
        p.error(f"expected graphs among {', '.join(GRAPHS)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    started, now, env, header = start_report("R-GCN accuracy on heterogeneous graphs, fullgraph against PyG", args.threads)
    print(f"config:   {dict(SETTINGS)}; Adam; {args.epochs} epochs, every one evaluated; selection: best validation "
          f"accuracy; seeds {args.seeds}; 20 labels per class; PyG's initial weights: {args.pyg_init}'s; target Δ >= "
          f"-{TOLERANCE} points", flush=True)
    rows = [run_graph(args, name) for name in args.graphs]
    lines, han = table(rows, args.pyg_init), han_line()
    print("\n" + "\n".join(lines) + f"\n\n{han}")
    out, stem = Path(args.out_dir), "accuracy" if args.pyg_init == "pyg" else "accuracy_fullgraph_init"
    result = {"date": now, "header": header, "machine": env["machine"], "versions": env["versions"],
              "args": vars(args), "settings": dict(SETTINGS), "tolerance_points": TOLERANCE,
              "han_source": HAN_SOURCE, "rows": rows, "total_s": time.perf_counter() - started}
    write_json(out / f"{stem}.json", result)
    (out / f"{stem}.md").write_text("\n".join([f"R-GCN accuracy, {now}", "", *header, "", *lines, "",
                                                han, ""]))
    print(f"total {result['total_s'] / 60:.1f} min; wrote {out / stem}.json and .md")
    return 0 if all(r["pass_test_acc"] and r["pass_test_macro_f1"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
