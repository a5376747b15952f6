"""The lent GPU's questions in one prepared command (issue 54), each part capped in time and written to
``--out`` as soon as it ends, so that a slow part cannot starve the ones after it.

    python benchmarks/device_check.py --out $OUT --parts gpu_tests,speed,precision   # on the lent machine
    python benchmarks/device_check.py --device cpu --scale 12 --edges 40000 --out /tmp/dc   # dry run here

* ``gpu_tests``: ``pytest -m gpu`` (tests/test_gpu.py), and a short CUDA run of the one layout a single
  GPU hosts, ``single``, for GCN, SAGE, GAT and link prediction (the multi-rank layouts take one GPU per
  rank under NCCL: one GPU hosts none of them).
* ``speed``: one process, epoch time (CUDA-synchronized, median after warm-up) and the allocator's peak,
  fullgraph's GCN and SAGE 2 × 256 against PyG's ``GCNConv``/``SAGEConv`` over a CSR ``adj_t`` (its
  fastest form here) on the same device, on Coauthor-Physics (``--root``) and an R-MAT graph.
* ``precision``: bf16 against fp32 (fullgraph's ``--precision``): epoch time, peak and test accuracy of a
  short run of GCN 2 × 256 on Coauthor-Physics.

* ``profile``: ``torch.profiler``'s operators by device time, fullgraph's GCN and SAGE against PyG's on the
  R-MAT graph (where the first lease found fullgraph slower).

Not here (issue 54's parts 3 and 5: the deepest GCN, the 16-core CPU sweep): left for a later lease.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
PARTS = ("gpu_tests", "speed", "precision", "profile")


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def peak_reset(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak(device) -> int | None:
    return int(torch.cuda.max_memory_allocated()) if torch.device(device).type == "cuda" else None


def timed(step, device, warmup: int, epochs: int) -> tuple[float, int | None]:
    """Median seconds of ``step()`` after ``warmup`` calls, and the allocator's peak over them all."""
    peak_reset(device)
    times = []
    for i in range(warmup + epochs):
        sync(device)
        t0 = time.perf_counter()
        step()
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times), peak(device)


def fullgraph_step(graph, model: str, device: str, precision: str = "fp32"):
    from fullgraph.config import TrainConfig
    from fullgraph.train.trainer import Trainer

    cfg = TrainConfig.of(model=model, layers=2, hidden=256, dropout=0.5, precision=precision, device=device,
                         progress="none", epochs=1)
    trainer = Trainer(cfg, graph).build()
    state = {"epoch": 0}

    def step():
        state["epoch"] += 1
        trainer.train_step(state["epoch"])

    return trainer, step


def pyg_step(graph, model: str, device: str):
    """PyG's two layers of ``model`` over a CSR ``adj_t`` (normalized once for GCN, as ``cached=True``)."""
    from torch_geometric.nn import GCNConv, SAGEConv
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch.nn import functional as F

    src, dst = graph.edges()
    x, y = graph.dense_x().to(device), graph.y.to(device)
    mask, n = graph.train_mask.to(device), graph.num_nodes
    ei = torch.stack([src, dst]).to(device)
    if model == "gcn":
        ei, w = gcn_norm(ei, None, n, add_self_loops=True)
        convs = [GCNConv(graph.num_features, 256, normalize=False), GCNConv(256, graph.num_classes, normalize=False)]
    else:
        w = torch.ones(ei.shape[1], device=device)
        convs = [SAGEConv(graph.num_features, 256), SAGEConv(256, graph.num_classes)]
    adj_t = torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), w, (n, n)).coalesce().to_sparse_csr()
    net = torch.nn.ModuleList(convs).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        h = F.relu(net[0](F.dropout(x, 0.5, True), adj_t))
        out = net[1](F.dropout(h, 0.5, True), adj_t)
        F.cross_entropy(out[mask], y[mask]).backward()
        opt.step()

    return step


def graphs(args) -> dict:
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph
    from fullgraph.data.synthetic import rmat

    out = {"rmat": rmat(args.scale, args.edges, seed=0)}
    try:
        out["coauthor-physics"] = load_graph(TrainConfig.of(dataset="coauthor-physics", root=args.root))
    except Exception as e:  # noqa: BLE001 - recorded, the other graph still measured
        print(f"coauthor-physics not loaded: {e}", file=sys.stderr)
    return out


def part_speed(args) -> dict:
    rows = []
    for name, graph in graphs(args).items():
        for model in ("gcn", "sage"):
            trainer, step = fullgraph_step(graph, model, args.device)
            t_fg, p_fg = timed(step, args.device, 2, args.epochs)
            del trainer, step
            try:
                t_pyg, p_pyg = timed(pyg_step(graph, model, args.device), args.device, 2, args.epochs)
            except Exception as e:  # noqa: BLE001 - PyG's side failing is a result too
                t_pyg, p_pyg = float("nan"), None
                print(f"pyg {model} on {name}: {e}", file=sys.stderr)
            rows.append({"graph": name, "nodes": graph.num_nodes, "edges": graph.num_edges, "model": model,
                         "fullgraph_s": t_fg, "pyg_s": t_pyg, "time_ratio": t_fg / t_pyg,
                         "fullgraph_peak": p_fg, "pyg_peak": p_pyg,
                         "peak_ratio": p_fg / p_pyg if p_fg and p_pyg else None})
            print(json.dumps(rows[-1]), flush=True)
            torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return {"rows": rows}


def part_precision(args) -> dict:
    graph = graphs(args).get("coauthor-physics") or graphs(args)["rmat"]
    rows = []
    for precision in ("fp32", "bf16"):
        trainer, step = fullgraph_step(graph, "gcn", args.device, precision)
        t, p = timed(step, args.device, 2, args.epochs)
        for epoch in range(args.epochs + 3, 60):  # a short run: 60 steps in all
            trainer.train_step(epoch)
        record = trainer.evaluate()
        rows.append({"graph": graph.name, "precision": precision, "epoch_s": t, "peak": p,
                     "test_acc_after_60": record["test_acc"], "val_acc_after_60": record["val_acc"]})
        print(json.dumps(rows[-1]), flush=True)
    return {"rows": rows}


def part_profile(args) -> dict:
    """Where a step's time goes on the R-MAT graph, fullgraph's GCN and SAGE against PyG's: ``torch.profiler``'s
    table of the operators by device time (self), 3 profiled steps after 2 unprofiled ones."""
    from torch.profiler import ProfilerActivity, profile

    graph = graphs(args)["rmat"]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    sort = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    out = {}
    for model in ("gcn", "sage"):
        _, step = fullgraph_step(graph, model, args.device)
        for name, fn in (("fullgraph", step), ("pyg", pyg_step(graph, model, args.device))):
            for _ in range(2):
                fn()
            sync(args.device)
            with profile(activities=activities) as prof:
                for _ in range(3):
                    fn()
                sync(args.device)
            out[f"{model}/{name}"] = prof.key_averages().table(sort_by=sort, row_limit=15, max_name_column_width=60)
            print(f"== {model}/{name}", out[f"{model}/{name}"], sep="\n", flush=True)
    return out


def part_gpu_tests(args) -> dict:
    """``pytest -m gpu`` and a short CUDA run of each model and task ``single`` trains."""
    out = {}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                           "tests/test_gpu.py"], cwd=REPO, capture_output=True, text=True, timeout=args.cap)
    out["pytest_gpu"] = {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-2000:]}
    runs = (["--model", "gcn"], ["--model", "sage"], ["--model", "gat", "--hidden", "64"],
            ["--model", "gcn", "--task", "link", "--edge-batch", "2000"])
    for flags in runs:
        cmd = [sys.executable, "-m", "fullgraph", "train", "--dataset", "synthetic", "--epochs", "5", "--device",
               args.device, "--progress", "none", *flags]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.cap)
        out[" ".join(flags)] = {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-600:]}
        print(" ".join(flags), proc.returncode, flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--device", default="cuda")
    p.add_argument("--root", default=str(REPO / ".devdata"))
    p.add_argument("--scale", type=int, default=20, help="R-MAT: 2**scale nodes")
    p.add_argument("--edges", type=int, default=5_000_000, help="R-MAT edge draws (x2 once symmetrized)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--cap", type=float, default=150.0, help="seconds each subprocess may take")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    (out / "environment.json").write_text(json.dumps(env))
    for part in args.parts.split(","):
        t0 = time.perf_counter()
        try:
            result = {"part_gpu_tests": part_gpu_tests, "part_speed": part_speed,
                      "part_precision": part_precision, "part_profile": part_profile}[f"part_{part}"](args)
        except Exception as e:  # noqa: BLE001 - one part's failure is written, the next part still runs
            result = {"error": f"{type(e).__name__}: {e}"}
        result["seconds"] = time.perf_counter() - t0
        (out / f"{part}.json").write_text(json.dumps(result, indent=1, default=str))
        print(f"== {part}: {result['seconds']:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
