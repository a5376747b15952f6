"""``--prune`` against full training: rows and non-zeros computed, and the training step's time.

For each graph and split, one process trains the same model (default GraphSAGE 3 x 256, LayerNorm,
the issue's model family) twice over, full and pruned, and times their training steps alternately
(one full step, one pruned step, ...) so that both see the same machine, and reports the fastest step
of each (as ``timeit`` does: on a shared machine the others are the fastest plus what other processes
took); evaluation is left out (it is the full forward in both). The work is counted two ways: rows × layers (the issue's measure),
and the non-zeros of Â the rows aggregate over (``fullgraph.plan.pruned``).

    python benchmarks/prune.py                          # Coauthor-Physics, Amazon-Computers, Tolokers
    python benchmarks/prune.py --graphs coauthor-physics --steps 20 --hidden 256

A split is the dataset's standard one, or with ``:dense`` a seeded 60/20/20 split of the nodes.
"""

from __future__ import annotations

import argparse
import statistics
import time

from _harness import finish, print_header


def _graph(name: str, root: str | None):
    import torch

    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    dataset, _, split = name.partition(":")
    g = load_graph(TrainConfig.of(dataset=dataset, root=root))
    if split == "dense":  # 60/20/20 of the nodes, seeded
        order = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(0))
        a, b = int(0.6 * g.num_nodes), int(0.8 * g.num_nodes)
        masks = [torch.zeros(g.num_nodes, dtype=torch.bool) for _ in range(3)]
        for m, idx in zip(masks, (order[:a], order[a:b], order[b:])):
            m[idx] = True
        g.train_mask, g.val_mask, g.test_mask = masks
    return g


def measure(name: str, args) -> dict:
    from fullgraph.config import TrainConfig
    from fullgraph.plan.pruned import pruned_counts
    from fullgraph.train.trainer import Trainer

    g = _graph(name, args.root)
    opts = dict(model=args.model, layers=args.layers, hidden=args.hidden, norm="layer", dropout=0.5, progress="none")
    trainers = {prune: Trainer(TrainConfig.of(**opts, prune=prune), g).build() for prune in (False, True)}
    times = {False: [], True: []}
    for step in range(args.warmup + args.steps):
        for prune, t in trainers.items():
            t0 = time.perf_counter()
            t.train_step(step + 1)
            if step >= args.warmup:  # the first steps build what later ones reuse and fault the heap in
                times[prune].append(time.perf_counter() - t0)
    counts = pruned_counts(g, trainers[True].model.norm, args.layers)
    rows = counts.total_rows()
    nnz = [sum(n) for n in counts.nnz]
    full_nnz = int(g.indptr[-1]) + (g.num_nodes if trainers[True].model.norm == "gcn" else 0)
    full, pruned = min(times[False]), min(times[True])  # the least disturbed step of each (as timeit)
    return {"graph": name, "nodes": g.num_nodes, "train": int(g.train_mask.sum()), "rows_per_layer": rows,
            "rows_ratio": args.layers * g.num_nodes / sum(rows), "nnz_ratio": args.layers * full_nnz / sum(nnz),
            "step_s": {"full": full, "pruned": pruned}, "time_ratio": full / pruned,
            "median_step_s": {k: statistics.median(v) for k, v in (("full", times[False]), ("pruned", times[True]))},
            "steps_s": {"full": times[False], "pruned": times[True]}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graphs", default="coauthor-physics,coauthor-physics:dense,amazon-computers,"
                                       "amazon-computers:dense,tolokers")
    p.add_argument("--root", default=None, help="data root (default: fullgraph's)")
    p.add_argument("--model", default="sage")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--steps", type=int, default=10, help="timed training steps of each")
    p.add_argument("--warmup", type=int, default=2, help="untimed training steps of each, first")
    p.add_argument("--out", default="benchmarks/results/prune.json")
    args = p.parse_args()
    started = time.perf_counter()
    print_header(machine_extra=[f"model {args.model} {args.layers} x {args.hidden}, LayerNorm, dropout 0.5, "
                                f"fastest of {args.steps} training steps, alternated"])
    print("| graph | nodes | train | rows per layer (pruned) | rows x | nnz x | full step s | pruned step s | time x |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    results = []
    for name in args.graphs.split(","):
        r = measure(name, args)
        results.append(r)
        print(f"| {name} | {r['nodes']} | {r['train']} | {r['rows_per_layer']} | {r['rows_ratio']:.2f} | "
              f"{r['nnz_ratio']:.2f} | {r['step_s']['full']:.3f} | {r['step_s']['pruned']:.3f} | "
              f"{r['time_ratio']:.2f} |", flush=True)
    checks = [c for r in results if r["graph"] == "coauthor-physics" for c in (
        {"check": "Coauthor-Physics, standard split: rows x layers computed, full / pruned >= 3",
         "value": r["rows_ratio"], "pass": r["rows_ratio"] >= 3.0},
        {"check": "Coauthor-Physics, standard split: training step time, full / pruned >= 3",
         "value": r["time_ratio"], "pass": r["time_ratio"] >= 3.0})]
    return finish({"config": vars(args), "results": results, "checks": checks}, args.out, 0, started)


if __name__ == "__main__":
    raise SystemExit(main())
