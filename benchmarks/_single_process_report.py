"""single_process.py's printed report: the setup it measured under, one table per configuration,
and the summaries of the ratios to the better PyG form and of fullgraph's precisions."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from types import MappingProxyType

from _harness import print_header

LABELS = MappingProxyType({"fullgraph": "fullgraph", "pyg-edge_index": "PyG edge_index",
                           "pyg-adj_t": "PyG adj_t (CSR)"})
# depth -> metric -> the largest allowed ratio fullgraph / better PyG form
TARGETS = MappingProxyType({2: MappingProxyType({"time": 0.6, "memory": 0.7}), 32: MappingProxyType({"memory": 0.5})})
MIB = 1 << 20


def targets_json() -> dict:
    """:data:`TARGETS` as plain dicts, for the JSON result."""
    return {depth: dict(limits) for depth, limits in TARGETS.items()}


def verdict(depth: int, metric: str, ratio: float) -> str:
    limit = TARGETS.get(depth, {}).get(metric)
    if limit is None:
        return "(no target)"
    return f"(target <= {limit:.1f}: {'PASS' if ratio <= limit else 'FAIL'})"


def cpu_low_precision() -> str:
    """What this CPU and torch's oneDNN offer for bf16/fp16 products (the flags decide their speed)."""
    import torch

    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        pass
    have = [f for f in ("avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16") if f in flags] or ["none of them"]
    yes = lambda ok: "yes" if ok else "no"  # noqa: E731
    return (f"low-precision CPU flags: {' '.join(have)} (of avx512_bf16 avx512_fp16 amx_bf16 amx_fp16); oneDNN bf16 "
            f"{yes(torch.ops.mkldnn._is_mkldnn_bf16_supported())}, fp16 {yes(torch.ops.mkldnn._is_mkldnn_fp16_supported())}"
            f"; torch CPU capability {torch.backends.cpu.get_cpu_capability()}")


def print_setup(args, env: dict, plan: dict) -> None:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"fullgraph single-process benchmark, {now}")
    print_header(env, threads=args.threads, machine_extra=[f"1-min load average at start {os.getloadavg()[0]:.2f}",
                                                          cpu_low_precision()])
    print(f"config:   {', '.join(m.upper() for m in args.models)}, hidden 256, dropout 0.5 on the input and after "
          "every hidden layer's ReLU, no residuals,")
    print("          Adam lr 0.01 (no weight decay), cross-entropy averaged over the train nodes, seed 0;")
    print(f"          graphs {', '.join(args.graphs)}; depths {', '.join(map(str, args.depths))}; per run: "
          + "; ".join(f"{d} layers: {w} warm-up + up to {e} timed epochs" for d, (w, e) in plan.items()))
    print(f"          (timing stops once the timed epochs took {args.budget_s:g} s, after at least {args.min_epochs});"
          " epoch time = median wall time of the timed epochs; cpu = median process CPU time (all threads)")
    print(f"          synthetic (rmat): R-MAT scale {args.rmat_scale} ({1 << args.rmat_scale} nodes), "
          f"{args.rmat_edges} edge draws, symmetrized, 128 dense features, 16 classes, 10/10/80% split")
    print("          Coauthor-Physics: per-class split 20/30/rest (seed 0); Tolokers: published split 0")
    print("systems:  fullgraph: fused GCN layers over a Block; input features as fullgraph reads them "
          "(kept sparse below 10% non-zero, e.g. Coauthor-Physics)")
    print("          PyG edge_index: GCNConv(cached=True), message passing over edge_index [2, E], dense x")
    print("          PyG adj_t: GCNConv(cached=True) over a torch.sparse CSR adj_t "
          "(ToSparseTensor(layout=torch.sparse_csr)), dense x")
    print("memory:   each run in its own process; after one step of the system on a tiny graph (imports, one-time")
    print("          initialisation) and loading the graph (fullgraph's loader, the same for all), the RSS high-water")
    print("          mark is reset (/proc/self/clear_refs 5); train peak = high-water mark after conversion to the")
    print("          system's form + model + all epochs, minus the RSS just before the reset; process peak = the")
    print("          whole process's high-water mark (imports and loading included)")
    print("ratios:   fullgraph / the better PyG form for that metric; targets (GCN, fp32): 2 layers time <= 0.6 and")
    print("          memory <= 0.7, 32 layers memory <= 0.5")
    print(f"precision: fullgraph in {', '.join(args.precisions)} (PyG: fp32, GCN only); as `fullgraph train --precision`:"
          " bf16/fp16 autocast the dense")
    print("          products, sparse products (CSR) run in fp32 on inputs cast up, weights/grads/Adam stay fp32; fp16 scales")
    print("          the loss (2^16, halved and the step skipped on overflow); each precision / fullgraph fp32", flush=True)


def print_graph_line(info: dict) -> None:
    print(f"\n== {info['name']}: {info['nodes']:,} nodes, {info['edges']:,} directed edges (no self loops), "
          f"{info['features']:,} features ({info['x_layout']}, {100 * info['x_density']:.2f}% non-zero), "
          f"{info['classes']} classes, {info['train_nodes']:,} train nodes", flush=True)


def print_table(model: str, depth: int, runs: dict, rat: dict, prec: list[dict]) -> None:
    print(f"-- {model.upper()} {depth} layers, hidden 256")
    print(f"   {'system':<17}{'epoch (s)':>10}{'min..max (s)':>15}{'cpu (s)':>9}{'epochs':>7}"
          f"{'train peak (MiB)':>18}{'process peak (MiB)':>20}{'load':>6}{'last loss':>11}")
    sweep = sum(key.startswith("fullgraph") for key in runs) > 1
    for key, r in runs.items():
        cfg = r["config"]
        name = LABELS[cfg["system"]] + (f" {cfg['precision']}" if sweep and cfg["system"] == "fullgraph" else "")
        if "error" in r:
            print(f"   {name:<17} failed: {r['error']}")
            continue
        t = r["epoch_times_s"]
        print(f"   {name:<17}{r['epoch_time_s']:>10.3f}{f'{min(t):.3f}..{max(t):.3f}':>15}"
              f"{r['epoch_cpu_s']:>9.3f}{len(t):>7}{r['train_peak_bytes'] / MIB:>18.1f}"
              f"{r['process_peak_bytes'] / MIB:>20.1f}{max(r['load_avg_1min']):>6.1f}{r['losses'][-1]:>11.4f}")
    for metric in ("time", "memory"):
        if metric in rat:
            q = rat[metric]
            print(f"   fullgraph / best PyG {metric:<6}: {q['ratio']:.3f}x vs {LABELS[q['against']]} "
                  f"{verdict(depth, metric, q['ratio'])}")
    for row in prec if sweep else []:
        if row["precision"] == "fp32":
            continue
        cells = [f"{m} {row['vs_fp32'][m]:.3f}x" for m in ("time", "memory") if m in row["vs_fp32"]]
        cells += [f"{m} {q['ratio']:.3f}x vs best PyG" for m, q in row["vs_pyg"].items()]
        if row["skipped_steps"]:
            cells.append(f"{row['skipped_steps']} of {row['steps']} steps skipped (fp16 overflow)")
        print(f"   fullgraph {row['precision']} / fullgraph fp32: " + ", ".join(cells))
    sys.stdout.flush()


def print_summary(rows: list[dict]) -> None:
    rows_pyg = [row for row in rows if row["ratios"]]
    if rows_pyg:
        print("\n== summary: fullgraph / better PyG form")
        print(f"   {'graph':<18}{'layers':>7}{'time':>9}{'':<27}{'memory':>9}")
    for row in rows_pyg:
        rat, depth = row["ratios"], row["depth"]
        cells = []
        for metric in ("time", "memory"):
            q = rat.get(metric)
            cells.append("   n/a" + " " * 27 if q is None else f"{q['ratio']:>7.3f}x {verdict(depth, metric, q['ratio']):<26}")
        print(f"   {row['graph']:<18}{depth:>7}  {cells[0]}{cells[1]}")
    if any(len(row["precisions"]) > 1 for row in rows):
        print_precision_summary(rows)


def print_precision_summary(rows: list[dict]) -> None:
    print("\n== summary: fullgraph per precision (ratios to fullgraph fp32 and to the better PyG form, fp32 GCN)")
    print(f"   {'graph':<18}{'model':>6}{'layers':>7}{'prec':>6}{'epoch (s)':>10}{'cpu (s)':>9}{'peak (MiB)':>11}"
          f"{'t/fp32':>8}{'m/fp32':>8}{'t/PyG':>8}{'m/PyG':>8}{'skipped':>9}")
    ratio = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    for row in rows:
        for p in row["precisions"]:
            pyg = p["vs_pyg"]
            print(f"   {row['graph']:<18}{row['model']:>6}{row['depth']:>7}{p['precision']:>6}{p['epoch_time_s']:>10.3f}"
                  f"{p['epoch_cpu_s']:>9.3f}{p['train_peak_bytes'] / MIB:>11.1f}{ratio(p['vs_fp32'].get('time')):>8}"
                  f"{ratio(p['vs_fp32'].get('memory')):>8}{ratio(pyg.get('time', {}).get('ratio')):>8}"
                  f"{ratio(pyg.get('memory', {}).get('ratio')):>8}{p['skipped_steps']:>5} / {p['steps']}")
