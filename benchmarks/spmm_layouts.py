"""The algebraic layouts (CAGNET, MG-GCN): memory with and without buffer reuse, traffic against the
formulas, epoch times.

1. **Memory** (MG-GCN Fig. 12): peak RSS per process of a GCN of 2 to 64 layers, hidden 512, on a
   planted-partition graph (``--nodes``, 512 dense features), with the fused layer (one kept
   activation per layer: MG-GCN's buffer reuse) and with the same math as plain PyTorch ops
   (``--gcn-kernel autograd``), single process and ``spmm-1d`` with 4 processes. From the growth per
   layer it prints how many more layers the fused layer fits in the same memory.
2. **Traffic and time**: for P ∈ {4, 8, 9} every layout that fits P (1D; 1.5D with c = 2, or 3 for
   P = 9; 2D for square P, 3D for cubes), a 2-layer GCN (hidden 512), 3 epochs: the ledger's per-epoch
   ``spmm/*`` bytes next to ``fullgraph.plan.spmm_volume`` and the median epoch time.

Every run goes through ``fullgraph train`` in its own process (the graph is written once as an
edge-list folder), so peak RSS is that process's own; ``MALLOC_MMAP_THRESHOLD_`` is fixed at 64 KiB
for the runs, so that freed temporaries go back to the system and RSS follows the live tensors
(otherwise glibc keeps them cached and the fused layer looks like two activations per layer
instead of its one).

Usage::

    .venv/bin/python benchmarks/spmm_layouts.py
    .venv/bin/python benchmarks/spmm_layouts.py --depths 2,8,32 --no-traffic
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from _harness import print_header, train
from fullgraph.data.synthetic import planted_partition
from fullgraph.plan import gcn_product_widths, spmm_volume

MIB = 2 ** 20


def write_graph(folder: Path, nodes: int, features: int) -> tuple[int, int, int]:
    g = planted_partition(num_nodes=nodes, num_features=features, seed=0)
    src, dst = g.edges()
    np.savetxt(folder / "edges.txt", torch.stack([src, dst], 1).numpy(), fmt="%d")
    np.save(folder / "features.npy", g.dense_x().numpy())
    np.save(folder / "labels.npy", g.y.numpy())
    return g.num_nodes, g.num_edges, g.num_classes


def run(root: Path, args: list[str], timeout: int = 1800) -> dict | None:
    with tempfile.TemporaryDirectory(prefix="fg-spmm-bench-") as out:
        # glibc keeps freed large blocks in its heap (its mmap threshold grows as they are freed), so
        # RSS would count cached temporaries; a fixed threshold hands them back and RSS tracks live tensors
        env = os.environ | {"MALLOC_MMAP_THRESHOLD_": "65536"}
        r = train(["--dataset", "edgelist", "--root", str(root), "--progress", "none", *args], Path(out),
                  timeout=timeout, env=env)
    if "error" in r:
        print(f"    failed ({r['returncode']}): {r['output_tail'][-300:]}")
        return None
    return r["summary"]


def memory_sweep(root: Path, a: argparse.Namespace) -> None:
    """Peak RSS per process by depth, fused layer against plain ops, single and spmm-1d x4; then the
    growth per layer of each and how many more layers the fused one fits."""
    print("\n== peak RSS per process (MiB): fused layer / plain autograd ops")
    print(f"  {'layers':>6}  {'single fused':>12}  {'single plain':>12}  {'1d x4 fused':>11}  {'1d x4 plain':>11}")
    series = {}
    for L in [int(d) for d in a.depths.split(",")]:
        cells = []
        for layout in (["--parallel", "single"], ["--parallel", "spmm-1d", "--nprocs", "4"]):
            for kernel in ("fused", "autograd"):
                s = run(root, [*layout, "--layers", str(L), "--hidden", str(a.hidden), "--epochs", "2",
                               "--eval-every", "2", "--gcn-kernel", kernel])
                rss = max(s["peak_rss_bytes_per_rank"]) / MIB if s else float("nan")
                series.setdefault((layout[1], kernel), []).append((L, rss))
                cells.append(rss)
        print(f"  {L:>6}  {cells[0]:>12.0f}  {cells[1]:>12.0f}  {cells[2]:>11.0f}  {cells[3]:>11.0f}",
              flush=True)
    for layout in ("single", "spmm-1d"):
        slopes = {}
        for kernel in ("fused", "autograd"):
            pts = series[(layout, kernel)]
            (l0, r0), (l1, r1) = pts[0], pts[-1]
            slopes[kernel] = (r1 - r0) / (l1 - l0) if l1 > l0 else float("nan")
        print(f"  {layout}: {slopes['fused']:.1f} MiB per layer fused, {slopes['autograd']:.1f} plain: the "
              f"fused layer fits {slopes['autograd'] / slopes['fused']:.2f}x the layers in the same memory "
              f"(MG-GCN Fig. 12: about 2.5x)")


def layouts_for(P: int) -> list[tuple[str, int]]:
    """Every algebraic layout that fits ``P`` processes, with its replication or grid side."""
    layouts = [("spmm-1d", 1)]
    c = 3 if P == 9 else 2
    if P % c == 0 and c * c <= P:
        layouts.append(("spmm-1.5d", c))
    if int(P ** 0.5) ** 2 == P:
        layouts.append(("spmm-2d", int(P ** 0.5)))
    if round(P ** (1 / 3)) ** 3 == P:
        layouts.append(("spmm-3d", round(P ** (1 / 3))))
    return layouts


def traffic_sweep(root: Path, a: argparse.Namespace, n: int, edges: int, classes: int) -> None:
    """Each layout's per-epoch ``spmm/*`` bytes against ``spmm_volume``, and its epoch time."""
    print("\n== per-epoch training traffic (MiB, summed over ranks): measured / formula; epoch time")
    widths = gcn_product_widths([a.features, a.hidden, classes], sparse_input=False)
    nnz = edges + n
    for P in [int(p) for p in a.nprocs.split(",")]:
        for mode, c in layouts_for(P):
            extra = ["--replication", str(c)] if mode == "spmm-1.5d" else []
            s = run(root, ["--parallel", mode, "--nprocs", str(P), "--layers", "2", "--hidden", str(a.hidden),
                           "--epochs", "3", "--eval-every", "3", *extra])
            want = spmm_volume(mode, widths, n, P, nnz, replication=c if mode == "spmm-1.5d" else 1)
            got = s["comm_bytes_per_epoch"] if s else {}
            cells = "  ".join(f"{k.split('/')[1]} {got.get(k, 0) / MIB:.1f}/{want[k] / MIB:.1f}"
                              f"{'' if got.get(k, 0) == want[k] else ' !'}" for k in want)
            t = f"{s['epoch_time_s'] * 1e3:.0f} ms" if s else "-"
            print(f"  P={P} {mode:<9} c={c}:  {cells};  {t}", flush=True)
    print("  ('!' marks a measured volume that differs from the formula)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--features", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--depths", default="2,4,8,16,32,64")
    ap.add_argument("--nprocs", default="4,8,9")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-traffic", action="store_true")
    a = ap.parse_args()
    print_header()
    with tempfile.TemporaryDirectory(prefix="fg-spmm-graph-") as tmp:
        root = Path(tmp) / "graph"
        root.mkdir()
        n, edges, classes = write_graph(root, a.nodes, a.features)
        print(f"graph: planted partition, {n} nodes, {edges} directed edges, {a.features} dense features, "
              f"{classes} classes; GCN hidden {a.hidden}, dropout 0.5")
        if not a.no_memory:
            memory_sweep(root, a)
        if not a.no_traffic:
            traffic_sweep(root, a, n, edges, classes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
