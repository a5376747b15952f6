"""Per-epoch traffic of graph parallelism, the pipeline and the hybrid, by model depth (GNNPipe
Tables 5 and 7), and epoch times on this machine.

For every graph, model and depth it prints the analytic training traffic of the three layouts,
computed from the real METIS partitions, and, for the depths and models in ``--measure-*``, the
bytes the ledger recorded in a real ``fullgraph train`` run with ``--nprocs`` processes (halo and
pipe categories, both directions, summed over ranks; the median epoch) and its epoch time::

    graph    (1 × P):  2 · (L-1) · Σ|halo_P| · H · 4
    pipeline (P × 1):  2 · (P-1) · N · H · 4                      (× 2 for GCNII: H0 travels too)
    hybrid   (S × W):  2 · (L-1) · Σ|halo_W| · H · 4 + 2 · (S-1) · N · H · 4   (same × 2 on the pipe term)

``L-1``, not GNNPipe's ``L``: the first layer reads input features, which every part holds for its
halo nodes, so nothing moves for it. The weight-gradient all-reduce (graph and hybrid only) is not
part of GNNPipe's analysis and is printed apart. Paper numbers: GNNPipe Table 7 (GCNII, 8 GPUs,
METIS, hidden 100 on Physics and 1000 on Squirrel; its "GB" are GiB: the pipeline figures 0.36
and 0.54 are exactly 2·7·N·H·4·2 bytes in GiB).

Usage::

    .venv/bin/python benchmarks/pipeline_vs_graph.py                     # analytic table + default measurements
    .venv/bin/python benchmarks/pipeline_vs_graph.py --measure-depths 8,32,128 --measure-models gcn,sage,gcnii,resgcn+
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from types import MappingProxyType

from _harness import REPO, print_header, train

from fullgraph.comm.mesh import Mesh
from fullgraph.config import TrainConfig
from fullgraph.parallel.schedule import stage_bounds
from fullgraph.parallel.registry import layout_volume
from fullgraph.plan import ModelShape
from fullgraph.parallel.setup import prepare_partition_dir
from fullgraph.partition.store import load_meta
from fullgraph.data.load import load_graph

HIDDEN = MappingProxyType({"squirrel": 1000, "coauthor-physics": 100})
PAPER_TABLE7 = MappingProxyType({  # GCNII, GiB per epoch: graph by depth 8..128, and the pipeline (flat in depth)
    "squirrel": ({8: 1.22, 16: 2.32, 32: 4.53, 64: 8.95, 128: 17.80}, 0.54),
    "coauthor-physics": ({8: 0.25, 16: 0.46, 32: 0.88, 64: 1.71, 128: 3.38}, 0.36),
})
GIB = 2 ** 30
TRAFFIC = ("halo/fwd", "halo/bwd", "pipe/fwd", "pipe/bwd")


def analytic(n: int, halo_p: int, halo_w: int, layers: int, hidden: int, model: str, P: int, S: int) -> dict:
    """The formulas above, from the planner's one source of volumes (``fullgraph.parallel.registry.layout_volume``)."""
    shape = ModelShape(input_widths=(hidden,) * layers, params=0, h0_width=hidden if model == "gcnii" else 0)
    out = {}
    for mode, stages, halo in (("graph", 1, halo_p), ("pipeline", P, 0), ("hybrid", S, halo_w)):
        mesh = Mesh.for_mode(mode, P, stages=stages if mode == "hybrid" else 0)
        starts = [a for a, _ in stage_bounds(layers, mesh.stages)[1:]]
        volume = layout_volume(mesh, shape, nodes=n, halo_rows=halo, stage_starts=starts, evaluate=False)
        out[mode] = sum(volume.get(c, 0) for c in TRAFFIC)
    return out


def measure(dataset: str, root: str, model: str, layers: int, hidden: int, mode: str, P: int, S: int,
            epochs: int, timeout: int) -> dict | None:
    with tempfile.TemporaryDirectory(prefix="fg-pipe-bench-") as out:
        flags = ["--parallel", mode, "--nprocs", str(P)]
        if mode == "hybrid":
            flags += ["--stages", str(S), "--graph-ways", str(P // S)]
        r = train(["--dataset", dataset, "--root", str(Path(root).resolve()), "--model", model, "--layers",
                   str(layers), "--hidden", str(hidden), "--epochs", str(epochs), "--eval-every", str(epochs),
                   "--dropout", "0.5", "--lr", "0.001", "--progress", "none", "--comm-timeout", "600", *flags],
                  Path(out), timeout=timeout)
    if "error" in r:
        print(f"    {mode} run failed ({r['returncode']}): {r['output_tail'][-300:]}")
        return None
    summary = r["summary"]
    comm = summary["comm_bytes_per_epoch"]
    return {"bytes": sum(comm.get(c, 0) for c in TRAFFIC), "allreduce": comm.get("grad/allreduce", 0),
            "epoch_s": summary["epoch_time_s"], "bubble": summary.get("bubble_fraction")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--graphs", default="squirrel,coauthor-physics")
    ap.add_argument("--models", default="gcn,sage,gcnii,resgcn+")
    ap.add_argument("--depths", default="8,16,32,64,128")
    ap.add_argument("--nprocs", type=int, default=8)
    ap.add_argument("--hybrid-stages", type=int, default=4)
    ap.add_argument("--measure-depths", default="8,32", help="depths to run for real ('' for none)")
    ap.add_argument("--measure-models", default="gcn,gcnii")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per measured run (median epoch reported)")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()
    P, S = args.nprocs, args.hybrid_stages
    depths = [int(d) for d in args.depths.split(",")]
    mdepths = {int(d) for d in args.measure_depths.split(",") if d}
    mmodels = set(args.measure_models.split(",")) if args.measure_depths else set()
    print_header()
    print(f"layouts: graph 1x{P}, pipeline {P}x1, hybrid {S}x{P // S}; METIS parts; traffic = halo + pipe, "
          f"both directions, all ranks, GiB per epoch (analytic / measured)")
    for name in args.graphs.split(","):
        cfg = TrainConfig.of(dataset=name, root=args.root)
        graph = load_graph(cfg)
        halo = {}
        for parts in (P, P // S):
            meta = load_meta(prepare_partition_dir(cfg, parts, graph=graph))
            halo[parts] = sum(int(s["halo"]) for s in meta["part_stats"])
        n, hidden = graph.num_nodes, HIDDEN.get(name, 100)
        print(f"\n== {name}: N = {n}, hidden {hidden}; replication factor {halo[P] / n:.3f} ({P} parts), "
              f"{halo[P // S] / n:.3f} ({P // S} parts)")
        print(f"  {'model':<8} {'L':>4}  {'graph':>15}  {'pipeline':>15}  {'hybrid':>15}  {'paper g/p':>11}  "
              f"{'epoch s g/p/h':>20}  {'bubble p/h':>11}")
        for model in args.models.split(","):
            for L in depths:
                a = analytic(n, halo[P], halo[P // S], L, hidden, model, P, S)
                meas = {}
                if L in mdepths and model in mmodels:
                    for mode in ("graph", "pipeline", "hybrid"):
                        meas[mode] = measure(name, args.root, model, L, hidden, mode, P, S, args.epochs, args.timeout)
                cells = []
                for mode in ("graph", "pipeline", "hybrid"):
                    m = meas.get(mode)
                    got = f"{m['bytes'] / GIB:.3f}" if m else "-"
                    if m and m["bytes"] != a[mode]:
                        got += "!"
                    cells.append(f"{a[mode] / GIB:.3f}/{got:>6}")
                paper = ""
                if model == "gcnii" and name in PAPER_TABLE7:
                    g, p = PAPER_TABLE7[name]
                    paper = f"{g.get(L, float('nan')):.2f}/{p:.2f}"
                times = "/".join(f"{meas[m]['epoch_s']:.2f}" if meas.get(m) else "-" for m in ("graph", "pipeline",
                                                                                               "hybrid"))
                bub = "/".join(f"{meas[m]['bubble']:.2f}" if meas.get(m) and meas[m]["bubble"] is not None else "-"
                               for m in ("pipeline", "hybrid"))
                print(f"  {model:<8} {L:>4}  {cells[0]:>15}  {cells[1]:>15}  {cells[2]:>15}  {paper:>11}  "
                      f"{times:>20}  {bub:>11}", flush=True)
    print("\n'!' marks a measured volume that differs from the analytic one.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
