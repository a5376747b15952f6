"""Typed links: fullgraph's R-GCN + DistMult against the same model in plain PyG, on one relation of HeCo's ACM.

    .venv/bin/python benchmarks/typed_links.py                          # ACM paper-author, 5 seeds, 100 epochs
    .venv/bin/python benchmarks/typed_links.py --seeds 1 --epochs 10    # a quick look

Issue 60 §3. Each seed splits ``paper___written_by___author`` once with
``fullgraph.data.typed.link_split.random_typed_link_split(acm, (0.85, 0.05, 0.10), seed)``: 85/5/10 of the
relation's edges, the held-out ones (and their ``rev_written_by`` edges) out of the encoder's graph, one
negative per held-out edge with its author replaced by another author who did not write the paper. Both
sides train on that encoder graph and score those pairs.

* **fullgraph**: ``Trainer`` with ``task="link", target_relation=..., model="rgcn", decoder="distmult"``, every
  training edge in one step per epoch (``edge_batch`` 0), one negative per positive (its tail corrupted within
  the author type), evaluated every epoch.
* **pyg**: ``hetero_accuracy.PygRGCN``'s form (an ``nn.Linear`` per featured type, an embedding table per
  featureless type: ACM's subjects) with ``RGCNConv(64, 64, R, aggr="mean")`` layers over ``edge_index`` and
  ``edge_type``, DistMult written out (``sum(h_u * w_r * h_v)``, ``w`` Glorot-drawn, as
  ``torch_geometric.nn.kge.DistMult`` scores), the same loss (binary cross-entropy over every training edge and
  one tail-corrupted negative each, drawn by torch's generator), Adam.

Both: 2 layers x 64, dropout ``--dropout``, Adam lr 0.01 without weight decay, ``--epochs`` epochs; the result
is the test ROC-AUC and MRR (each positive ranked against the relation's held-out negatives, the metric code
of ``fullgraph.tasks.link_metrics`` on both sides) of the first epoch of best validation ROC-AUC. Each
(system, seed) runs in a fresh interpreter, after 3 epochs of the same system on a small typed graph (the
imports and one-time set-up out of the measure): epoch time is the median training step after the first;
**train peak** the ``VmHWM`` of building, training and evaluating minus the RSS before it. Targets: fullgraph's mean test MRR and ROC-AUC >=
PyG's - 0.5 points; epoch time <= 0.5x and train peak <= 0.7x PyG's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import MappingProxyType

import torch
from torch import nn
from torch.nn import functional as F

from _harness import REPO, hwm_bytes, reset_hwm, rss_bytes, start_report, write_json

RELATION = "paper___written_by___author"
SETTINGS = MappingProxyType({"layers": 2, "hidden": 64, "lr": 0.01})


def split_of(seed: int):
    from fullgraph.data.formats.heco import load_heco
    from fullgraph.data.typed.link_split import random_typed_link_split, target_relations

    graph = load_heco(REPO.parent / "shared" / "data" / "heco_acm", name="acm")
    return random_typed_link_split(graph, (0.85, 0.05, 0.10), seed, target_relations(graph, RELATION))


def metrics(pos: torch.Tensor, neg: torch.Tensor) -> dict:
    from fullgraph.tasks.link_metrics import link_metric

    return {m: link_metric(m, pos, neg) for m in ("rocauc", "mrr")}


def run_fullgraph(enc, split, cfg: dict) -> dict:
    from fullgraph.config import TrainConfig
    from fullgraph.train.trainer import Trainer

    records, relation = [], split.relation_names[split.targets[0]]
    c = TrainConfig.of(task="link", target_relation=relation, model="rgcn", decoder="distmult", edge_batch=0,
                       negatives=1, epochs=cfg["epochs"], eval_every=1, seed=cfg["seed"], dropout=cfg["dropout"],
                       weight_decay=0.0, metric="rocauc", progress="none", threads=cfg["threads"], layers=SETTINGS["layers"],
                       hidden=SETTINGS["hidden"], lr=SETTINGS["lr"])
    rss, reset = rss_bytes(), reset_hwm()
    trainer = Trainer(c, enc, split=split, callbacks=[records.append])
    result = trainer.build().train()
    peak = hwm_bytes() - rss
    trainer.close()
    best = max((r for r in records if "val_metric" in r), key=lambda r: r["val_metric"])
    rel = best["by_relation"][relation]
    times = [r["epoch_time_s"] for r in records][1:]
    return {"test_rocauc": rel["test_rocauc"], "test_mrr": rel["test_mrr"], "best_epoch": best["epoch"],
            "epoch_time_s": statistics.median(times), "train_peak_bytes": peak, "hwm_reset": reset,
            "summary_test_rocauc": result.test_metric}


class PygEncoder(nn.Module):
    """hetero_accuracy.PygRGCN's input maps, then RGCNConv layers of the hidden width (no class layer)."""

    def __init__(self, types, hidden: int, layers: int, dropout: float):
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
        self.convs = nn.ModuleList(RGCNConv(hidden, hidden, types.num_relations, aggr="mean") for _ in range(layers))

    def forward(self, blocks, edge_index, edge_type):
        hs = []
        for lin, table, b in zip(self.lins, self.tables, blocks):
            hs.append(table if b is None else torch.sparse.mm(b, lin.weight.t()) + lin.bias if b.is_sparse else lin(b))
        h = torch.cat(hs)  # no dropout on the input maps' output, as fullgraph's R-GCN
        for i, conv in enumerate(self.convs):
            h = conv(h, edge_index, edge_type)
            if i < len(self.convs) - 1:
                h = F.dropout(F.relu(h), self.p, self.training)
        return h


def type_blocks(enc) -> list:
    """Each type's features as a sparse COO block of its own columns (None: featureless), cut from the
    graph's CSR features without a dense copy: what a PyG user's per-type ``x`` is."""
    types, x = enc.node_types, enc.x.to_sparse_coo().coalesce()
    rows, cols = x.indices()
    blocks = []
    for t in range(types.num_types):
        lo, hi, c0, c1 = types.offsets[t], types.offsets[t + 1], types.column_offsets[t], types.column_offsets[t + 1]
        if not types.widths[t]:
            blocks.append(None)
            continue
        keep = (rows >= lo) & (rows < hi)
        blocks.append(torch.sparse_coo_tensor(torch.stack([rows[keep] - lo, cols[keep] - c0]), x.values()[keep],
                                              (hi - lo, c1 - c0)).coalesce())
    return blocks


def run_pyg(enc, split, cfg: dict) -> dict:
    torch.manual_seed(cfg["seed"])
    rss, reset = rss_bytes(), reset_hwm()  # the inputs are built inside the measure, as fullgraph's Trainer builds its own
    types = enc.node_types
    src, dst = enc.edges()
    args = (type_blocks(enc), torch.stack([src, dst]), enc.edge_type)
    model = PygEncoder(types, SETTINGS["hidden"], SETTINGS["layers"], cfg["dropout"])
    rel = nn.Parameter(torch.empty(enc.num_relations, SETTINGS["hidden"]))
    nn.init.xavier_uniform_(rel)
    opt = torch.optim.Adam([*model.parameters(), rel], lr=SETTINGS["lr"])
    r = split.relation("train")
    lo, hi = (int(v) for v in split.ends[0, 3:5])
    pos = split.train
    score = lambda h, p, rr: (h[p[:, 0]] * rel[rr] * h[p[:, 1]]).sum(-1)  # noqa: E731
    labels = torch.cat([torch.ones(pos.shape[0]), torch.zeros(pos.shape[0])])
    best, times = {"val_rocauc": -1.0}, []
    for epoch in range(1, cfg["epochs"] + 1):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        h = model(*args)
        neg = torch.stack([pos[:, 0], torch.randint(lo, hi, (pos.shape[0],))], 1)
        loss = F.binary_cross_entropy_with_logits(torch.cat([score(h, pos, r), score(h, neg, r)]), labels)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        model.eval()
        with torch.no_grad():
            h = model(*args)
            got = {f: score(h, getattr(split, f), split.relation(f)) for f in ("val", "val_neg", "test", "test_neg")}
        val, test = metrics(got["val"], got["val_neg"]), metrics(got["test"], got["test_neg"])
        if val["rocauc"] > best["val_rocauc"]:
            best = {"val_rocauc": val["rocauc"], "test_rocauc": test["rocauc"], "test_mrr": test["mrr"], "best_epoch": epoch}
    return best | {"epoch_time_s": statistics.median(times[1:]), "train_peak_bytes": hwm_bytes() - rss,
                   "hwm_reset": reset}


def worker(cfg: dict) -> dict:
    """One (system, seed), after a warm-up of the same system on a small typed graph: the imports and
    one-time set-up of either side stay out of its train peak."""
    from fullgraph.data.synthetic.typed import typed_rmat
    from fullgraph.data.typed.link_split import random_typed_link_split

    torch.set_num_threads(cfg["threads"])
    run = run_fullgraph if cfg["system"] == "fullgraph" else run_pyg
    small = typed_rmat(400, 2000, num_types=3, num_relations=2, seed=1)
    run(*random_typed_link_split(small, (0.8, 0.1, 0.1), 0, (0,)), cfg | {"epochs": 3})
    enc, split = split_of(cfg["seed"])
    return {"system": cfg["system"], "seed": cfg["seed"], **run(enc, split, cfg)}


def spawn(cfg: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", json.dumps(cfg)], capture_output=True, text=True,
                         check=False)
    if out.returncode:
        raise RuntimeError(f"{cfg['system']} seed {cfg['seed']} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "typed_links.json")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    started, now, env, header = start_report("Typed links: R-GCN + DistMult, fullgraph against PyG (ACM)", args.threads)
    rows = []
    for seed in range(args.seeds):
        for system in ("fullgraph", "pyg"):
            row = spawn({"system": system, "seed": seed, "epochs": args.epochs, "dropout": args.dropout,
                         "threads": args.threads})
            rows.append(row)
            print(f"  {system:9} seed {seed}: test MRR {row['test_mrr']:.4f}  ROC-AUC {row['test_rocauc']:.4f}  "
                  f"(epoch {row['best_epoch']})  {row['epoch_time_s'] * 1e3:7.1f} ms/epoch  train peak "
                  f"{row['train_peak_bytes'] / 2**20:7.1f} MiB", flush=True)
    mean = {s: {k: statistics.mean(r[k] for r in rows if r["system"] == s)
                for k in ("test_mrr", "test_rocauc", "epoch_time_s", "train_peak_bytes")} for s in ("fullgraph", "pyg")}
    f, g = mean["fullgraph"], mean["pyg"]
    verdict = {"mrr": f["test_mrr"] >= g["test_mrr"] - 0.005, "rocauc": f["test_rocauc"] >= g["test_rocauc"] - 0.005,
               "time": f["epoch_time_s"] <= 0.5 * g["epoch_time_s"],
               "peak": f["train_peak_bytes"] <= 0.7 * g["train_peak_bytes"]}
    print(f"\nmean of {args.seeds} seeds, {args.epochs} epochs: test MRR {f['test_mrr']:.4f} vs {g['test_mrr']:.4f} "
          f"({100 * (f['test_mrr'] - g['test_mrr']):+.2f} points), ROC-AUC {f['test_rocauc']:.4f} vs "
          f"{g['test_rocauc']:.4f} ({100 * (f['test_rocauc'] - g['test_rocauc']):+.2f}); epoch time "
          f"{f['epoch_time_s'] / g['epoch_time_s']:.2f}x, train peak {f['train_peak_bytes'] / g['train_peak_bytes']:.2f}x")
    print("targets: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in verdict.items()))
    settings = {"seeds": args.seeds, "epochs": args.epochs, "dropout": args.dropout, "threads": args.threads, **SETTINGS}
    write_json(args.out, {"date": now, "environment": env, "header": header, "settings": settings,
                          "rows": rows, "mean": mean, "verdict": verdict,
                          "seconds": time.perf_counter() - started})
    return 0


if __name__ == "__main__":
    sys.exit(main())
