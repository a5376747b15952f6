"""The lent GPU's questions in one prepared command (issue 54). Each part runs as a process of its own
under its own time cap (``CAPS``), so that a slow part cannot starve the ones after it, and writes
``--out/<part>.json`` as soon as it ends (a part stopped at its cap keeps the rows it printed).

    python3 benchmarks/device_check.py --out $OUT                                  # on the lent machine
    python benchmarks/device_check.py --device cpu --scale 12 --edges 40000 --epochs 2 --max-layers 8 \
        --sweep-scale 12 --sweep-edges 40000 --out /tmp/dc                           # dry run here

* ``gpu_tests``: ``pytest -m gpu`` (tests/test_gpu.py), and a short CUDA run of the one layout a single
  GPU hosts, ``single``, for GCN, SAGE, GAT and link prediction (the multi-rank layouts take one GPU per
  rank under NCCL: one GPU hosts none of them).
* ``speed``: one process, epoch time (CUDA-synchronized, median after warm-up) and the allocator's peak,
  fullgraph's GCN and SAGE 2 × 256 against PyG's ``GCNConv``/``SAGEConv`` over a CSR ``adj_t`` (its
  fastest form here) on the same device, on Coauthor-Physics (``--root``) and an R-MAT graph.
* ``deepest``: the deepest GCN of width 256 on the R-MAT graph that trains a step, fullgraph's fused
  layer with and without ``--recompute`` against PyG's ``GCNConv`` stack: layers doubled until a step
  runs out of memory, then halved intervals down to 1/16 of the depth found.
* ``cpu_sweep``: the CPU alone (``--device cpu``): ``single``, graph parallelism (``metis-memory``) and
  ``spmm-1d``, SAGE 3 × 128 on an R-MAT graph, P = 1, 2, 4, 8 with ``--threads`` cores/P, each run's
  epoch against ``fullgraph plan``'s estimate of it, and the plan's pick against the fastest run.
* ``profile``: ``torch.profiler``'s operators by device time, fullgraph's GCN and SAGE against PyG's on the
  R-MAT graph (where the first lease found fullgraph slower).
* ``precision``: bf16 against fp32 (fullgraph's ``--precision``): epoch time, peak and test accuracy of a
  short run of GCN 2 × 256 on Coauthor-Physics (measured in the first lease; not run by default).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

import torch

from _harness import REPO, environment, print_header, write_json

CAPS = MappingProxyType({"gpu_tests": 90, "speed": 60, "deepest": 70, "cpu_sweep": 105, "profile": 35, "precision": 60})
"""Seconds each part may run (the defaults, in this order, sum to the 6 minutes the issue allows)."""
DEFAULT_PARTS = ("gpu_tests", "speed", "deepest", "cpu_sweep", "profile")


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


def fullgraph_step(graph, model: str, device: str, precision: str = "fp32", layers: int = 2, **options):
    from fullgraph.config import TrainConfig
    from fullgraph.train.trainer import Trainer

    cfg = TrainConfig.of(model=model, layers=layers, hidden=256, dropout=0.5, precision=precision, device=device,
                         progress="none", epochs=1, **options)
    trainer = Trainer(cfg, graph).build()
    state = {"epoch": 0}

    def step():
        state["epoch"] += 1
        trainer.train_step(state["epoch"])

    return trainer, step


def pyg_step(graph, model: str, device: str, layers: int = 2):
    """PyG's ``layers`` layers of ``model`` (width 256) over a CSR ``adj_t`` (normalized once for GCN, as
    ``cached=True``)."""
    from torch_geometric.nn import GCNConv, SAGEConv
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch.nn import functional as F

    src, dst = graph.edges()
    x, y = graph.dense_x().to(device), graph.y.to(device)
    mask, n = graph.train_mask.to(device), graph.num_nodes
    ei = torch.stack([src, dst]).to(device)
    widths = [graph.num_features] + [256] * (layers - 1) + [graph.num_classes]
    if model == "gcn":
        ei, w = gcn_norm(ei, None, n, add_self_loops=True)
        convs = [GCNConv(a, b, normalize=False) for a, b in zip(widths, widths[1:])]
    else:
        w = torch.ones(ei.shape[1], device=device)
        convs = [SAGEConv(a, b) for a, b in zip(widths, widths[1:])]
    adj_t = torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), w, (n, n)).coalesce().to_sparse_csr()
    net = torch.nn.ModuleList(convs).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        h = x
        for conv in net[:-1]:
            h = F.relu(conv(F.dropout(h, 0.5, True), adj_t))
        out = net[-1](F.dropout(h, 0.5, True), adj_t)
        F.cross_entropy(out[mask], y[mask]).backward()
        opt.step()

    return step


def graphs(args, names=("rmat", "coauthor-physics")) -> dict:
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph
    from fullgraph.data.synthetic import rmat

    out = {"rmat": rmat(args.scale, args.edges, seed=0)} if "rmat" in names else {}
    try:
        if "coauthor-physics" in names:
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
    found = graphs(args)
    graph = found.get("coauthor-physics") or found["rmat"]
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

    graph = graphs(args, ("rmat",))["rmat"]
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


def _fits(build, device) -> dict:
    """One training step of the model ``build()`` makes: its seconds and peak, or that memory ran out."""
    t0, step = time.perf_counter(), None
    try:
        peak_reset(device)
        step = build()
        step()
        sync(device)
        return {"ok": True, "s": time.perf_counter() - t0, "peak": peak(device)}
    except torch.OutOfMemoryError as e:
        e.__traceback__ = None  # its frames hold the step's tensors
        return {"ok": False, "s": time.perf_counter() - t0}
    finally:
        del step
        gc.collect()
        torch.cuda.empty_cache() if torch.cuda.is_available() else None


def deepest(build, device, max_layers: int, deadline: float) -> dict:
    """The most layers ``build(layers)`` trains a step with: doubled from 4 until a step fails (or
    ``max_layers``), then the interval halved until it is within 1/16 of the depth found."""
    probes, ok, bad, layers = [], 0, None, 4
    while layers <= max_layers and time.monotonic() < deadline:
        probes.append({"layers": layers, **_fits(lambda: build(layers), device)})
        print(json.dumps(probes[-1]), flush=True)
        if not probes[-1]["ok"]:
            bad = layers
            break
        ok, layers = layers, layers * 2
    while bad is not None and bad - ok > max(1, ok // 16) and time.monotonic() < deadline:
        mid = (ok + bad) // 2
        probes.append({"layers": mid, **_fits(lambda: build(mid), device)})
        print(json.dumps(probes[-1]), flush=True)
        ok, bad = (mid, bad) if probes[-1]["ok"] else (ok, mid)
    return {"deepest": ok, "first_failed": bad, "capped": bad is None, "probes": probes}


def part_deepest(args) -> dict:
    """The deepest GCN 256 wide that trains a step on the R-MAT graph: fullgraph fused, fused with
    ``--recompute``, PyG's GCNConv stack; the time left is shared out between the three searches."""
    graph = graphs(args, ("rmat",))["rmat"]
    end = time.monotonic() + CAPS["deepest"] - 10
    builds = {"fullgraph": lambda n: fullgraph_step(graph, "gcn", args.device, layers=n)[1],
              "fullgraph --recompute": lambda n: fullgraph_step(graph, "gcn", args.device, layers=n, recompute=True)[1],
              "pyg": lambda n: pyg_step(graph, "gcn", args.device, layers=n)}
    out = {}
    for i, (name, build) in enumerate(builds.items()):
        out[name] = deepest(build, args.device, args.max_layers,
                            time.monotonic() + (end - time.monotonic()) / (len(builds) - i))
        print(name, json.dumps({k: v for k, v in out[name].items() if k != "probes"}), flush=True)
    if out["pyg"]["deepest"]:
        out["ratio"] = out["fullgraph"]["deepest"] / out["pyg"]["deepest"]
    return out


def _fg(*argv, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fullgraph", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def part_cpu_sweep(args) -> dict:
    """The CPU alone: single, graph (metis-memory) and spmm-1d, SAGE 3 × 128 on an R-MAT graph, P = 1, 2,
    4, 8 ranks of cores/P threads; each run's training epoch against ``fullgraph plan``'s estimate."""
    work = Path(tempfile.mkdtemp(prefix="fg-sweep-"))
    data = work / "rmat"
    gen = _fg("generate", "rmat", "--scale", str(args.sweep_scale), "--edges", str(args.sweep_edges), "--features",
              "128", "--classes", "16", "--seed", "0", "--out", str(data), timeout=120)
    if gen.returncode != 0:
        return {"error": gen.stderr[-800:]}
    cores = os.cpu_count() or 1
    model = ["--model", "sage", "--layers", "3", "--hidden", "128"]
    os.environ["FULLGRAPH_CACHE"] = str(work / "cache")  # the partition cut for the plan is the one the run trains on
    rows = []
    for nprocs in (1, 2, 4, 8):
        threads = max(1, cores // nprocs)
        common = ["--dataset", str(data), *model, "--threads", str(threads)]
        plan = _fg("plan", *common, "--nprocs", str(nprocs), "--partitioner", "metis-memory", "--json", timeout=300)
        planned = json.loads(plan.stdout) if plan.returncode == 0 else {"layouts": [], "recommendation": plan.stderr[-300:]}
        pick = planned["recommendation"]
        planned = {r["layout"]: r for r in planned["layouts"] if r["nprocs"] == nprocs}
        for layout in (("single",) if nprocs == 1 else ("graph", "spmm-1d")):
            run = work / f"run-{layout}-{nprocs}"
            flags = [] if nprocs == 1 else ["--parallel", layout, "--nprocs", str(nprocs)]
            flags += ["--partitioner", "metis-memory"] if layout == "graph" else []
            done = _fg("train", *common, *flags, "--device", "cpu", "--epochs", str(args.sweep_epochs), "--eval-every",
                       str(args.sweep_epochs), "--progress", "none", "--out", str(run), timeout=300)
            row = {"nprocs": nprocs, "layout": layout, "threads": threads, "rc": done.returncode}
            if done.returncode == 0:
                row["train_s"] = json.loads((run / "summary.json").read_text())["epoch_time_s"]
            else:
                row["error"] = done.stderr[-400:]
            if layout in planned:
                row["plan_train_s"] = planned[layout]["epoch_s"] - planned[layout]["eval_s"]
                row["plan_over_measured"] = row["plan_train_s"] / row["train_s"] if "train_s" in row else None
            row["plan_pick"] = pick
            rows.append(row)
            print(json.dumps(row), flush=True)
    base = next((r["train_s"] for r in rows if r["layout"] == "single" and "train_s" in r), None)
    for r in rows:
        if base and "train_s" in r:
            r["speedup"] = base / r["train_s"]
            r["efficiency"] = r["speedup"] / r["nprocs"]
    return {"cores": cores, "graph": {"scale": args.sweep_scale, "edge_draws": args.sweep_edges}, "rows": rows}


def part_gpu_tests(args) -> dict:
    """``pytest -m gpu`` and a short CUDA run of each model and task ``single`` trains."""
    out = {}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                           "tests/test_gpu.py"], cwd=REPO, capture_output=True, text=True, timeout=args.cap)
    out["pytest_gpu"] = {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-2000:]}
    print(json.dumps(out), flush=True)  # kept should the CLI runs after it meet the part's cap
    runs = (["--model", "gcn"], ["--model", "sage"], ["--model", "gat", "--hidden", "64"],
            ["--model", "gcn", "--task", "link", "--edge-batch", "2000"])
    for flags in runs:
        cmd = [sys.executable, "-m", "fullgraph", "train", "--dataset", "synthetic", "--epochs", "5", "--device",
               args.device, "--progress", "none", *flags]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.cap)
        out[" ".join(flags)] = {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-600:]}
        print(" ".join(flags), proc.returncode, flush=True)
    return out


def run_part(part: str, argv: list[str], out: Path) -> dict:
    """``part`` in a child process of its own, stopped at its cap; what it printed is kept either way."""
    t0 = time.perf_counter()
    cmd = [sys.executable, __file__, *argv, "--parts", part, "--child"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=CAPS[part])
        printed, rc = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as e:
        printed = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr))
        rc = None
    if rc != 0 or not (out / f"{part}.json").exists():  # the child did not write its own: say why
        result = {"error": f"stopped at its cap of {CAPS[part]} s" if rc is None else f"exit status {rc}",
                  "printed": printed[-4000:]}
        (out / f"{part}.json").write_text(json.dumps(result, indent=1))
    with open(out / "log.txt", "a") as log:
        log.write(f"== {part} ({time.perf_counter() - t0:.1f} s, cap {CAPS[part]} s, rc {rc})\n{printed}\n")
    return {"part": part, "seconds": time.perf_counter() - t0, "rc": rc}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--parts", default=",".join(DEFAULT_PARTS), help=f"of {', '.join(CAPS)}")
    p.add_argument("--device", default="cuda")
    p.add_argument("--root", default=str(REPO / ".devdata"))
    p.add_argument("--scale", type=int, default=20, help="R-MAT: 2**scale nodes")
    p.add_argument("--edges", type=int, default=5_000_000, help="R-MAT edge draws (x2 once symmetrized)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--max-layers", type=int, default=1024, help="deepest: stop doubling here")
    p.add_argument("--sweep-scale", type=int, default=18, help="cpu_sweep's R-MAT: 2**scale nodes")
    p.add_argument("--sweep-edges", type=int, default=2_500_000)
    p.add_argument("--sweep-epochs", type=int, default=3)
    p.add_argument("--cap", type=float, default=60.0, help="seconds each gpu_tests subprocess may take")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.child:
        env = environment()
        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        env |= {"cuda": torch.version.cuda, "gpu": gpu}
        print_header(env, machine_extra=[f"GPU {gpu or 'none'}, CUDA {torch.version.cuda}"])
        write_json(out / "environment.json", env)
        argv = [a for a in (sys.argv[1:] if argv is None else argv)]
        drop = argv.index("--parts") if "--parts" in argv else None
        argv = argv if drop is None else argv[:drop] + argv[drop + 2:]
        for part in args.parts.split(","):
            print(json.dumps(run_part(part, argv, out)), flush=True)
        return 0
    part = args.parts
    t0 = time.perf_counter()
    result = {"gpu_tests": part_gpu_tests, "speed": part_speed, "deepest": part_deepest,
              "cpu_sweep": part_cpu_sweep, "profile": part_profile, "precision": part_precision}[part](args)
    result["seconds"] = time.perf_counter() - t0
    write_json(out / f"{part}.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
