"""Link prediction: test ROC-AUC and epoch time of fullgraph's GCN link predictor against PyG's own recipe.

    .venv/bin/python benchmarks/link_accuracy.py                                  # Cora, CiteSeer, PubMed, 5 seeds
    .venv/bin/python benchmarks/link_accuracy.py --only pyg                      # the peer's side alone
    .venv/bin/python benchmarks/link_accuracy.py --datasets cora --seeds 2 --epochs 20   # a quick look

Issue 53 §3. Each (dataset, seed) is split once by ``fullgraph.data.link_split.random_link_split(graph,
(0.85, 0.05, 0.10), seed)``: the undirected edges shuffled and cut 85/5/10, the held-out ones taken out of
the encoder's graph in both directions, one negative per held-out positive among the whole graph's
non-edges. fullgraph draws its split with the run's seed by the same function, so both sides score the
same pairs. Graphs are loaded as ``fullgraph train`` loads them (Planetoid features row-normalized, as
PyG's ``NormalizeFeatures``).

* **PyG**: ``examples/link_pred.py`` of PyTorch Geometric: ``GCNConv(F, 128) → ReLU → GCNConv(128, out)``,
  decoder ``(z[src] * z[dst]).sum(-1)``, Adam (lr 0.01, no weight decay), 100 epochs; every epoch encodes
  over the training edges (both directions), draws ``negative_sampling(train edge_index, num_nodes,
  num_neg_samples=#training positives, method="sparse")`` afresh and takes ``BCEWithLogitsLoss`` (mean) over
  the training positives (each undirected edge once, as ``RandomLinkSplit(is_undirected=True,
  add_negative_train_samples=False)`` gives them) and those negatives. Evaluated every epoch; the result is
  the test ROC-AUC of the first epoch of best validation ROC-AUC. Differences from the example: output
  width 128 (the issue's 2 × 128; the example uses 64); ROC-AUC by ``fullgraph.tasks.metrics.roc_auc`` on
  the logits (the example takes scikit-learn's on their sigmoid, which ties saturated scores: recorded as
  ``test_auc_sigmoid``); the GCN normalization (PyG's ``gcn_norm``, self-loops added) computed once and
  the layers built with ``normalize=False``, which is what ``GCNConv(cached=True)`` does after its first
  call, here for each form of the adjacency in ``--pyg-forms`` (``adj_t``: a transposed torch.sparse CSR
  matrix, ``ToSparseTensor``; ``edge_index``: edge list and weights). The example's ``RandomLinkSplit``
  encodes its test pairs over training *and* validation edges; by default the test pairs are encoded over
  the training edges here, as fullgraph's encoder graph holds them (``--test-encoder train+val``: the
  example's way).
* **fullgraph**: ``fullgraph.api.train_model("gcn", task="link", link_split="0.85,0.05,0.10", decoder="dot",
  metric="rocauc", ...)`` with the same depth, width, dropout 0, learning rate, weight decay 0 (fullgraph's
  default is 5e-4, hence given) and epochs, evaluated every epoch; its ``test_metric`` and
  ``epoch_time_s``.

Epoch time: the training step only (forward, negative draw, loss, backward, optimizer step; the evaluation
apart), median over the epochs after the first, as fullgraph's ``epoch_time_s``; the PyG time is the
fastest form's. Seeds set the initial weights and the negative draws on each side. Targets: fullgraph's
mean test ROC-AUC ≥ PyG's − 0.5 points, and its epoch time ≤ 0.5 × PyG's, in the same run and threads.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import traceback
from pathlib import Path
from types import MappingProxyType

import numpy as np
import torch
from torch.nn import functional as F

from fullgraph.config import TrainConfig
from fullgraph.data.link_split import random_link_split
from fullgraph.data.load import load_graph
from fullgraph.tasks.metrics import roc_auc

from _harness import REPO, start_report, write_json

DATASETS = ("cora", "citeseer", "pubmed")
FRACTIONS = (0.85, 0.05, 0.10)
SETTINGS = MappingProxyType({"layers": 2, "hidden": 128, "out": 128, "dropout": 0.0, "lr": 0.01,
                             "weight_decay": 0.0})
FORMS = ("adj_t", "edge_index")
AUC_TOLERANCE = 0.5  # points: fullgraph's mean test ROC-AUC may trail PyG's by at most this much
TIME_TARGET = 0.5  # fullgraph's epoch time over PyG's fastest form's, at most


# ---------------------------------------------------------------- the PyG side
def pyg_adjacency(src: torch.Tensor, dst: torch.Tensor, n: int, form: str):
    """The GCN-normalized adjacency (self-loops added) in ``form``: ``(adj_t, None)`` or ``(edge_index, weight)``."""
    from torch_geometric import transforms as T
    from torch_geometric.data import Data
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    edge_index = torch.stack([src, dst])
    if form == "edge_index":
        return gcn_norm(edge_index, None, n, add_self_loops=True)
    adj_t = T.ToSparseTensor(layout=torch.sparse_csr)(Data(edge_index=edge_index, num_nodes=n)).adj_t
    return gcn_norm(adj_t, None, n, add_self_loops=True)


def pyg_inputs(graph, seed: int, forms, test_encoder: str) -> dict:
    """The split of ``seed`` and what the PyG model reads: features, the training ``edge_index`` that the
    negatives avoid, the adjacency of each form for training/validation and for test, the scored pairs."""
    enc, split = random_link_split(graph, FRACTIONS, seed)
    n = graph.num_nodes
    src, dst = enc.edges()
    keep = src != dst
    src, dst = src[keep], dst[keep]
    out = {"x": graph.dense_x().float(), "train_edge_index": torch.stack([src, dst]), "num_nodes": n,
           "pos": split.train.t().contiguous(), "fingerprint": split.fingerprint(),
           "sizes": split.sizes() | {"encoder_edges": enc.num_edges},
           "adj": {f: pyg_adjacency(src, dst, n, f) for f in forms}}
    if test_encoder == "train+val":  # RandomLinkSplit's test_data: validation edges join the message passing
        v = split.val
        tsrc, tdst = torch.cat([src, v[:, 0], v[:, 1]]), torch.cat([dst, v[:, 1], v[:, 0]])
        out["test_adj"] = {f: pyg_adjacency(tsrc, tdst, n, f) for f in forms}
    else:
        out["test_adj"] = out["adj"]
    for part in ("val", "test"):
        pairs = torch.cat([getattr(split, part), getattr(split, f"{part}_neg")]).t().contiguous()
        labels = np.r_[np.ones(getattr(split, part).shape[0]), np.zeros(getattr(split, f"{part}_neg").shape[0])]
        out[part] = (pairs, labels)
    return out


class PygLinkNet(torch.nn.Module):
    """``examples/link_pred.py``'s ``Net``: two ``GCNConv`` (over a normalized adjacency) and a dot decoder."""

    def __init__(self, in_dim: int, hidden: int, out: int):
        from torch_geometric.nn import GCNConv

        super().__init__()
        self.conv1 = GCNConv(in_dim, hidden, normalize=False)
        self.conv2 = GCNConv(hidden, out, normalize=False)

    def encode(self, x, adj, weight):
        return self.conv2(self.conv1(x, adj, weight).relu(), adj, weight)

    @staticmethod
    def decode(z, pairs):
        return (z[pairs[0]] * z[pairs[1]]).sum(-1)


def pyg_step(model, opt, inp: dict, adj, weight) -> float:
    """One training epoch of the example: encode, fresh negatives, BCE over positives and negatives, step."""
    from torch_geometric.utils import negative_sampling

    model.train()
    opt.zero_grad()
    z = model.encode(inp["x"], adj, weight)
    pos = inp["pos"]
    neg = negative_sampling(edge_index=inp["train_edge_index"], num_nodes=inp["num_nodes"],
                            num_neg_samples=pos.shape[1], method="sparse")
    logits = model.decode(z, torch.cat([pos, neg], 1))
    labels = torch.cat([torch.ones(pos.shape[1]), torch.zeros(neg.shape[1])])
    loss = F.binary_cross_entropy_with_logits(logits, labels)
    loss.backward()
    opt.step()
    return float(loss)


@torch.no_grad()
def pyg_scores(model, inp: dict, form: str) -> dict:
    """Validation and test logits (numpy), each over its encoder graph (encoded once where they are one)."""
    model.eval()
    z = model.encode(inp["x"], *inp["adj"][form])
    zt = z if inp["test_adj"] is inp["adj"] else model.encode(inp["x"], *inp["test_adj"][form])
    return {"val": model.decode(z, inp["val"][0]).numpy(), "test": model.decode(zt, inp["test"][0]).numpy()}


def train_pyg(inp: dict, form: str, epochs: int, seed: int) -> dict:
    """Full-batch training; the test ROC-AUC of the first epoch of best validation ROC-AUC, and the times."""
    torch.manual_seed(seed)
    random.seed(seed)  # negative_sampling draws with Python's random.sample
    s = SETTINGS
    model = PygLinkNet(inp["x"].shape[1], s["hidden"], s["out"])
    opt = torch.optim.Adam(model.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    adj, weight = inp["adj"][form]
    best, times, evals, curve = {"val_auc": -1.0}, [], [], []
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        pyg_step(model, opt, inp, adj, weight)
        t1 = time.perf_counter()
        out = pyg_scores(model, inp, form)
        val = roc_auc(out["val"], inp["val"][1])
        evals.append(time.perf_counter() - t1)
        times.append(t1 - t0)
        curve.append(val)
        if val > best["val_auc"]:
            sig = torch.sigmoid(torch.from_numpy(out["test"])).numpy()
            best = {"val_auc": val, "test_auc": roc_auc(out["test"], inp["test"][1]),
                    "test_auc_sigmoid": roc_auc(sig, inp["test"][1]), "best_epoch": epoch}
    return best | {"epoch_time_s": statistics.median(times[1:] or times),
                   "eval_time_s": statistics.median(evals[1:] or evals), "val_curve": curve}


# ---------------------------------------------------------------- the fullgraph side
def train_fullgraph(args, name: str, seed: int) -> dict:
    """One fullgraph link-prediction run through ``train_model``; the split's fingerprint is checked
    against ours where the run reports it."""
    from fullgraph.api import train_model

    s, evals = SETTINGS, []
    r = train_model("gcn", dataset=name, root=args.root, task="link", link_split=",".join(f"{f:g}" for f in FRACTIONS),
                    layers=s["layers"], hidden=s["hidden"], dropout=s["dropout"], lr=s["lr"],
                    weight_decay=s["weight_decay"], epochs=args.epochs, eval_every=1, seed=seed, decoder="dot",
                    metric="rocauc", threads=args.threads, progress="none",
                    callbacks=[lambda rec: evals.append(rec["eval_time_s"]) if "eval_time_s" in rec else None])
    return {"val_auc": r.val_metric, "test_auc": r.test_metric, "best_epoch": r.best_epoch,
            "epoch_time_s": r.epoch_time_s, "eval_time_s": statistics.median(evals[1:] or evals) if evals else None,
            "reported": json.dumps({"graph": r.graph, "config": r.config}, default=str)}


# ---------------------------------------------------------------- one dataset
def run_dataset(args, name: str) -> dict:
    graph = load_graph(TrainConfig.of(dataset=name, root=args.root))  # as fullgraph train loads it
    pyg = {f: [] for f in args.pyg_forms} if args.only != "fullgraph" else {}
    row = {"dataset": name, "nodes": graph.num_nodes, "directed_edges": graph.num_edges, "pyg": pyg,
           "fullgraph": [], "errors": [], "splits": []}
    print(f"\n== {name}: {graph.num_nodes:,} nodes, {graph.num_edges:,} directed edges", flush=True)
    for seed in args.seeds:
        if args.only == "fullgraph":  # the split only, to check fullgraph's against it
            enc, split = random_link_split(graph, FRACTIONS, seed)
            row["splits"].append({"seed": seed, "fingerprint": split.fingerprint(), **split.sizes(),
                                  "encoder_edges": enc.num_edges})
        else:
            inp = pyg_inputs(graph, seed, args.pyg_forms, args.test_encoder)
            row["splits"].append({"seed": seed, "fingerprint": inp["fingerprint"], **inp["sizes"]})
            for form in args.pyg_forms:
                r = train_pyg(inp, form, args.epochs, seed)
                pyg[form].append(r)
                print(f"   pyg/{form:<10} seed {seed}: test AUC {100 * r['test_auc']:.2f} (sigmoid "
                      f"{100 * r['test_auc_sigmoid']:.2f}; best epoch {r['best_epoch']}, val "
                      f"{100 * r['val_auc']:.2f}); epoch {1e3 * r['epoch_time_s']:.1f} ms, eval "
                      f"{1e3 * r['eval_time_s']:.1f} ms", flush=True)
        if args.only != "pyg":
            row["fullgraph"].append(fullgraph_seed(args, name, seed, row))
    return row | verdicts(row)


def guarded_dataset(args, name: str) -> dict:
    """``run_dataset``, or a row holding the error where the graph does not load or a side breaks (the
    other graphs still run; the exit status says it failed)."""
    load = os.getloadavg()[0]
    try:
        row = run_dataset(args, name)
    except Exception as e:  # noqa: BLE001 - recorded, printed, and a failed exit status
        traceback.print_exc()
        row = {"dataset": name, "pyg": {}, "fullgraph": [], "errors": [f"{type(e).__name__}: {e}"]}
    return row | {"load_1min": [load, os.getloadavg()[0]]}


def fullgraph_seed(args, name: str, seed: int, row: dict) -> dict | None:
    """fullgraph under ``seed``, or None with the error kept in ``row['errors']`` (the PyG side still reports)."""
    try:
        r = train_fullgraph(args, name, seed)
    except Exception as e:  # noqa: BLE001 - recorded and turned into a failed run
        row["errors"].append(f"seed {seed}: {type(e).__name__}: {e}")
        print(f"   fullgraph  seed {seed}: FAILED {type(e).__name__}: {e}", flush=True)
        return None
    ours = next(s for s in row["splits"] if s["seed"] == seed)
    # the same split: by fingerprint where fullgraph reports one, else (weaker) by the encoder graph's edge count
    r["same_split"] = ("fingerprint" if ours["fingerprint"] in r["reported"] else
                       "edge count" if f'"edges": {ours["encoder_edges"]},' in r["reported"] else "differs")
    del r["reported"]
    print(f"   fullgraph  seed {seed}: test AUC {100 * r['test_auc']:.2f} (best epoch {r['best_epoch']}, val "
          f"{100 * r['val_auc']:.2f}); epoch {1e3 * r['epoch_time_s']:.1f} ms; same split by {r['same_split']}",
          flush=True)
    if r["same_split"] == "differs":
        row["errors"].append(f"seed {seed}: fullgraph's encoder graph is not this split's ({ours['encoder_edges']} "
                             f"edges)")
    return r


def auc_summary(runs: list[dict]) -> tuple[float, float]:
    """Mean and standard deviation of the test ROC-AUC over seeds, in points."""
    vals = [100.0 * r["test_auc"] for r in runs]
    return statistics.mean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0


def epoch_time(runs: list[dict]) -> float:
    """The median over seeds of each run's median epoch time, in seconds."""
    return statistics.median(r["epoch_time_s"] for r in runs)


def verdicts(row: dict) -> dict:
    out = {}
    if row["pyg"]:
        first = next(iter(row["pyg"]))
        out["pyg_auc_form"] = first  # the first form's AUC is the reference (the forms differ by rounding)
        out["pyg_auc"] = auc_summary(row["pyg"][first])
        out["pyg_time_form"] = min(row["pyg"], key=lambda f: epoch_time(row["pyg"][f]))
        out["pyg_epoch_s"] = epoch_time(row["pyg"][out["pyg_time_form"]])
        out["pyg_auc_by_form"] = {f: auc_summary(rs) for f, rs in row["pyg"].items()}
        out["pyg_epoch_s_by_form"] = {f: epoch_time(rs) for f, rs in row["pyg"].items()}
    ok = [r for r in row["fullgraph"] if r is not None]
    if ok and not row["errors"]:
        out["fullgraph_auc"], out["fullgraph_epoch_s"] = auc_summary(ok), epoch_time(ok)
    if "pyg_auc" in out and "fullgraph_auc" in out:
        out["delta_auc"] = out["fullgraph_auc"][0] - out["pyg_auc"][0]
        out["pass_auc"] = out["delta_auc"] >= -AUC_TOLERANCE
        out["time_ratio"] = out["fullgraph_epoch_s"] / out["pyg_epoch_s"]
        out["pass_time"] = out["time_ratio"] <= TIME_TARGET
    return out


# ---------------------------------------------------------------- the table
def table(rows: list[dict]) -> list[str]:
    lines = ["| graph | fullgraph test AUC | PyG test AUC | Δ points | ≥ PyG − 0.5 | fullgraph epoch ms | "
             "PyG epoch ms (form) | ratio | ≤ 0.5× |",
             "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        ours = f"{r['fullgraph_auc'][0]:.2f} ± {r['fullgraph_auc'][1]:.2f}" if "fullgraph_auc" in r else (
            "failed" if r["errors"] else "not run")
        theirs = f"{r['pyg_auc'][0]:.2f} ± {r['pyg_auc'][1]:.2f}" if "pyg_auc" in r else "not run"
        our_ms = f"{1e3 * r['fullgraph_epoch_s']:.1f}" if "fullgraph_epoch_s" in r else "–"
        their_ms = f"{1e3 * r['pyg_epoch_s']:.1f} ({r['pyg_time_form']})" if "pyg_epoch_s" in r else "–"
        if "delta_auc" in r:
            delta, ratio = f"{r['delta_auc']:+.2f}", f"{r['time_ratio']:.2f}"
            pa, pt = ("PASS" if r[k] else "FAIL" for k in ("pass_auc", "pass_time"))
        else:
            delta = pa = ratio = pt = "–"
        lines.append(f"| {r['dataset']} | {ours} | {theirs} | {delta} | {pa} | {our_ms} | {their_ms} | {ratio} | {pt} |")
    return lines


def form_lines(rows: list[dict]) -> list[str]:
    """The load, every PyG form's AUC and epoch time, and any errors."""
    out = []
    for r in rows:
        out.append(f"* {r['dataset']}: 1-min load {r['load_1min'][0]:.2f} at its start, {r['load_1min'][1]:.2f} at "
                   f"its end")
        for f in r.get("pyg_auc_by_form", {}):
            (m, sd), ms = r["pyg_auc_by_form"][f], 1e3 * r["pyg_epoch_s_by_form"][f]
            out.append(f"* {r['dataset']}, PyG over `{f}`: test AUC {m:.2f} ± {sd:.2f}, epoch {ms:.1f} ms")
        out += [f"* {r['dataset']}, error: {e}" for e in r["errors"]]
    return out


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=os.environ.get("FULLGRAPH_DATA") or str(REPO.parent / "shared" / "data"),
                   help="the data folder (default $FULLGRAPH_DATA, else <repo>/../shared/data)")
    p.add_argument("--datasets", default=",".join(DATASETS), help=f"subset of {','.join(DATASETS)}")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0 .. N-1 (default 5)")
    p.add_argument("--epochs", type=int, default=100, help="epochs per run (default 100, as PyG's example)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of both sides (default 1)")
    p.add_argument("--only", choices=("both", "pyg", "fullgraph"), default="both", help="which side(s) to run")
    p.add_argument("--pyg-forms", default=",".join(FORMS),
                   help="PyG adjacency forms, the first giving the reference AUC (default adj_t,edge_index)")
    p.add_argument("--test-encoder", choices=("train", "train+val"), default="train",
                   help="the edges PyG encodes the test pairs over: the training edges (fullgraph's encoder "
                        "graph; default) or training and validation edges (RandomLinkSplit's test_data)")
    p.add_argument("--out-dir", default="benchmarks/results/link", help="where accuracy.json and accuracy.md go")
    args = p.parse_args(argv)
    args.datasets, args.pyg_forms = args.datasets.split(","), args.pyg_forms.split(",")
    args.seeds = list(range(args.seeds))
    if set(args.datasets) - set(DATASETS) or set(args.pyg_forms) - set(FORMS) or not args.seeds:
        p.error(f"expected datasets among {DATASETS}, forms among {FORMS} and at least one seed")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    started, now, env, header = start_report("link prediction, GCN + dot decoder, fullgraph against PyG's examples/link_pred.py", args.threads)
    config = (f"config:   {dict(SETTINGS)}; Adam; link split {FRACTIONS} by random_link_split(seed); {args.epochs} "
              f"epochs, every one evaluated; selection: first best validation ROC-AUC; seeds {args.seeds}; sides "
              f"{args.only}; PyG forms {args.pyg_forms} (gcn_norm once, normalize=False: cached=True's work); PyG test "
              f"encoder: {args.test_encoder} edges; targets Δ AUC ≥ -{AUC_TOLERANCE} points, epoch ≤ {TIME_TARGET}×")
    print(config, flush=True)
    out, rows = Path(args.out_dir), []
    result = {"date": now, "header": header, "config": config, "machine": env["machine"], "versions": env["versions"],
              "args": vars(args), "settings": dict(SETTINGS), "fractions": FRACTIONS,
              "auc_tolerance_points": AUC_TOLERANCE, "time_target": TIME_TARGET, "rows": rows}
    for name in args.datasets:
        rows.append(guarded_dataset(args, name))
        write_json(out / "accuracy.json", result | {"total_s": time.perf_counter() - started})  # kept as it goes
    lines, extra = table(rows), form_lines(rows)
    print("\n" + "\n".join(lines + [""] + extra))
    result["total_s"] = time.perf_counter() - started
    write_json(out / "accuracy.json", result)
    (out / "accuracy.md").write_text("\n".join([f"Link prediction (GCN, dot decoder), {now}", "", *header, config, "",
                                                *lines, "", *extra, ""]))
    print(f"total {result['total_s'] / 60:.1f} min; wrote {out / 'accuracy'}.json and .md")
    failed = any(r["errors"] for r in rows) or any(not (r.get("pass_auc", True) and r.get("pass_time", True))
                                                   for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
