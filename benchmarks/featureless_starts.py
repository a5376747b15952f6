"""Featureless node types: which start of their learned rows trains R-GCN best.

    .venv/bin/python benchmarks/featureless_starts.py                      # ACM and DBLP, 5 seeds, ~25 min
    .venv/bin/python benchmarks/featureless_starts.py --graphs acm --seeds 0 --epochs 20    # a quick look

Issue 61 §3. A node type without features starts from a learned row per node (an embedding table) or from
nothing. How that table is drawn decides what the model can learn: rows far larger than the graph's
signal let the model memorise the training nodes through their own rows within a few epochs. Each start
below trains the built-in R-GCN (``Trainer``, one process, ``hetero_accuracy.SETTINGS``: 2 x 64, dropout
0.5, Adam lr 0.01, weight decay 5e-4) on HeCo's ACM and DBLP in two forms:

* **as published**: the types with features keep them; ACM's subjects and DBLP's conferences are
  featureless;
* **featureless**: every feature removed, so every type starts from its table (structure alone).

Starts (the table of type ``t`` is ``[count_t, hidden]``):

* ``square``: uniform in ±sqrt(6 / (2 hidden)), the Glorot bound of a square hidden map (the
  draw of ``--featureless embedding`` before this benchmark);
* ``glorot``: Glorot over the table's own shape, ±sqrt(6 / (count_t + hidden)), as PyG's examples draw a
  featureless type's ``Parameter`` (``torch_geometric.nn.inits.glorot``): ``--featureless embedding``'s
  draw since, the best on average;
* ``linear``: what ``torch.nn.Linear(count_t, hidden)`` on one-hot rows draws, ±1/sqrt(count_t)
  (``--featureless one-hot``'s draw since);
* ``zeros``: no table: the type's bias alone (``--featureless zeros``).

The table is redrawn after ``Trainer.build`` under each seed, before the first step; everything else
(weights, dropout, splits) is the seed's. Result: the test accuracy of the first epoch of best validation
accuracy, mean and standard error over the seeds; the start with the best mean over the four cases is
what ``--featureless embedding`` should draw (``models/rgcn.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics

import torch

from fullgraph.config import TrainConfig
from fullgraph.data.formats.heco import load_heco
from fullgraph.ops.node_types import NodeTypes
from fullgraph.train.trainer import Trainer

from _harness import REPO, start_report, write_json

from hetero_accuracy import SETTINGS  # one source for the settings of the R-GCN comparison

STARTS = ("square", "glorot", "linear", "zeros")
FORMS = ("published", "featureless")


def without_features(graph):
    """``graph`` with every node type featureless (one all-ones column, as a knowledge graph's folder holds)."""
    t = graph.node_types
    types = NodeTypes(t.names, t.counts, (0,) * t.num_types, t.relations, t.labelled)
    return dataclasses.replace(graph, x=torch.ones(graph.num_nodes, 1), node_types=types)


@torch.no_grad()
def redraw(model, start: str, seed: int) -> None:
    """Draw each featureless type's table rows per ``start`` (module docstring), from ``seed``."""
    table, types = model.input.embedding, model.input.types
    if table is None:
        return
    gen = torch.Generator().manual_seed(10_000 + seed)
    base = model.input.table_base.tolist()
    for t, b in enumerate(base):
        if b < 0:
            continue
        n, h = types.counts[t], table.shape[1]
        bound = {"square": math.sqrt(6.0 / (2 * h)), "glorot": math.sqrt(6.0 / (n + h)),
                 "linear": 1.0 / math.sqrt(n)}[start]
        table[b : b + n] = (torch.rand(n, h, generator=gen) * 2 - 1) * bound


def run(graph, start: str, seed: int, epochs: int, threads: int) -> float:
    cfg = TrainConfig.of(model="rgcn", epochs=epochs, seed=seed, metric="acc", progress="none", threads=threads,
                         featureless="zeros" if start == "zeros" else "embedding", **SETTINGS)
    trainer = Trainer(cfg, graph)
    try:
        trainer.build()
        redraw(trainer.model, start, seed)
        return trainer.train().test_acc
    finally:
        trainer.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graphs", default="acm,dblp")
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "featureless_starts.json"))
    args = p.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    started, now, env, header = start_report("Featureless node types: R-GCN's start of their rows", args.threads)
    print(f"config:   {dict(SETTINGS)}; {args.epochs} epochs; seeds {seeds}; selection: best validation accuracy")
    rows, means = [], {s: [] for s in STARTS}
    for name in args.graphs.split(","):
        published = load_heco(REPO.parent / "shared" / "data" / f"heco_{name}", name=name)
        for form in FORMS:
            graph = published if form == "published" else without_features(published)
            cells = []
            for start in STARTS:
                accs = [100 * run(graph, start, seed, args.epochs, args.threads) for seed in seeds]
                se = statistics.stdev(accs) / math.sqrt(len(accs)) if len(accs) > 1 else float("nan")
                rows.append({"graph": name, "form": form, "start": start, "test_acc": accs,
                             "mean": statistics.mean(accs), "se": se})
                means[start].append(statistics.mean(accs))
                cells.append(f"{start} {statistics.mean(accs):6.2f} ± {se:4.2f}")
            print(f"  {name:<5} {form:<12} " + "   ".join(cells), flush=True)
    overall = {s: statistics.mean(v) for s, v in means.items()}
    print("mean over the cases: " + "   ".join(f"{s} {v:6.2f}" for s, v in overall.items()))
    write_json(args.out, {"date": now, "environment": env, "header": header, "rows": rows, "overall": overall,
                          "epochs": args.epochs, "seeds": seeds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
