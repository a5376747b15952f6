"""The lent GPU's questions in one prepared command (issue 54). Each part runs as a process of its own
under its own time cap (``CAPS``), so that a slow part cannot starve the ones after it, and writes
``--out/<part>.json`` as soon as it ends (a part stopped at its cap keeps the rows it printed).

    python3 benchmarks/device_check.py --out $OUT                                  # on the lent machine
    python benchmarks/device_check.py --device cpu --scale 12 --edges 40000 --epochs 2 --max-layers 8 \
        --sweep-scale 12 --sweep-edges 40000 --out /tmp/dc                           # dry run here

* ``gpu_tests``: ``pytest -m "gpu and not shared_gpu"`` (tests/test_gpu.py: every model on CUDA, a rank over
  NCCL), and a short CUDA run of link prediction.
* ``speed``: one process, epoch time (CUDA-synchronized, median after warm-up) and the allocator's peak,
  fullgraph's GCN and SAGE 2 × 256 against PyG's ``GCNConv``/``SAGEConv`` over a CSR ``adj_t`` (its
  fastest form here) on the same device, on Coauthor-Physics (``--root``) and an R-MAT graph.
* ``deepest``: the deepest GCN of width 256 on the R-MAT graph that trains a step (forward, backward and
  Adam's step of the model on the whole graph), fullgraph's fused layer whole and with
  ``--recompute-segment ⌈√L⌉`` (only each segment's input kept) against PyG's ``GCNConv`` stack: layers
  doubled until a step runs out of memory (the depth has no other limit), then halved intervals down to
  1/16 of the depth found.
* ``cpu_sweep``: the CPU alone (``--device cpu``): ``single``, graph parallelism (``metis-memory``) and
  ``spmm-1d``, SAGE 3 × 128 on an R-MAT graph, P = 1, 2, 4, 8 with ``--threads`` cores/P, each run's
  epoch against ``fullgraph plan``'s estimate of it, and the plan's pick against the fastest run.
* ``profile``: ``torch.profiler``'s operators by device time, fullgraph's GCN and SAGE against PyG's on the
  R-MAT graph (where the first lease found fullgraph slower).
* ``precision``: bf16 against fp32 (fullgraph's ``--precision``): epoch time, peak and test accuracy of a
  short run of GCN 2 × 256 on Coauthor-Physics (measured in the first lease; not run by default).
* ``largest``: the largest R-MAT graph (2^26 nodes and 5·10^8 draws first, then halved) made on the device
  (``_device_graph``) that one GPU trains GCN and SAGE 3 × 128 on, its peak beside
  ``fullgraph.plan.device_peak_bytes`` (not run by default: the second call).
* ``shared_gpu``: every multi-rank layout with two ranks sharing the one GPU over gloo, against the same
  layout on the CPU (``pytest -m shared_gpu``; not run by default: the second call).
* ``accuracy``: issue 66's comparison on the device, ``accuracy_vs_pyg.py`` GCN 2 × 64 against PyG's
  ``GCNConv``, ``--acc-datasets`` over ``--acc-seeds`` (not run by default: a second call of its own).

The default parts' caps sum to ``CALL_BUDGET_S``, one call's share of a lease; the R-MAT graph is
generated once per call and kept in ``--out`` for the parts after the first.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

import torch

from _device_steps import deepest, fullgraph_step, graphs, model_step, on_device, pyg_step, sync, timed
from _harness import REPO, environment, print_header, write_json

CAPS = MappingProxyType({"gpu_tests": 150, "speed": 60, "deepest": 90, "cpu_sweep": 100, "profile": 50,
                         "precision": 60, "largest": 90, "shared_gpu": 150, "accuracy": 100})
"""Seconds each part may run, sized from the second lease's H200 (issue 65): ``pytest -m gpu`` took 136 s
(its two NCCL tests 54 and 59 s, each starting four CUDA processes); ``cpu_sweep`` took 105 s for its
first P on a 2^18-node graph, now 2^17 with two epochs; ``profile`` needed more than 35 s."""
DEFAULT_PARTS = ("gpu_tests", "speed", "deepest", "cpu_sweep", "profile")
CALL_BUDGET_S = 480
"""One call's seconds (issue 65: ≤ 8 minutes), which the default parts' caps must not exceed."""
SECOND_CALL = ("largest", "shared_gpu", "accuracy")
"""The parts of the lease's second call, made at once after the first on the still warm machine."""
LEASE_S, START_S = 900, 90
"""A session's device seconds, and what a machine's start takes of them (the device tool: one to two minutes)."""


def part_speed(args) -> dict:
    rows = []
    for name, graph in graphs(args, args.graphs.split(",")).items():
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
    found = graphs(args, args.graphs.split(","))
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


def part_deepest(args) -> dict:
    """The deepest GCN 256 wide that trains a step on the R-MAT graph: fullgraph's fused layer, the same
    with ``--recompute-segment ⌈√L⌉``, PyG's GCNConv stack; the time left is shared out between the
    three searches (the segmented one, the deepest and slowest, gets the most)."""
    graph = graphs(args, ("rmat",))["rmat"]
    end = time.monotonic() + CAPS["deepest"] - 10
    segment = lambda n: max(2, math.ceil(math.sqrt(n)))  # noqa: E731 - fewest kept activations near √L
    ready = on_device(graph, args.device)
    builds = {"fullgraph": (lambda n: model_step(ready, args.device, n), 0.25),
              "pyg": (lambda n: pyg_step(graph, "gcn", args.device, layers=n), 0.25),
              "fullgraph --recompute-segment": (lambda n: model_step(ready, args.device, n, segment(n)), 0.5)}
    out, left = {}, 1.0
    for name, (build, share) in builds.items():
        deadline = time.monotonic() + (end - time.monotonic()) * share / left
        left -= share
        out[name] = deepest(build, args.device, args.max_layers, deadline)
        print(name, json.dumps({k: v for k, v in out[name].items() if k != "probes"}), flush=True)
    if out["pyg"]["deepest"]:
        out["ratio"] = out["fullgraph"]["deepest"] / out["pyg"]["deepest"]
        out["ratio_segmented"] = out["fullgraph --recompute-segment"]["deepest"] / out["pyg"]["deepest"]
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
    for nprocs in (int(p) for p in args.sweep_procs.split(",")):
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
    end = time.monotonic() + CAPS["gpu_tests"] - 5
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu and not shared_gpu", "-p", "no:cacheprovider",
                           "tests/test_gpu.py"], cwd=REPO, capture_output=True, text=True, timeout=args.cap)
    out["pytest_gpu"] = {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-2000:]}
    print(json.dumps(out), flush=True)  # kept should the CLI run after it meet the part's cap
    # every model trains on CUDA in the tests above; a link task does not: one short run of it
    for flags in (["--model", "gcn", "--task", "link", "--edge-batch", "2000"],):
        cmd = [sys.executable, "-m", "fullgraph", "train", "--dataset", "synthetic", "--epochs", "5", "--device",
               args.device, "--progress", "none", *flags]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=max(1.0, end - time.monotonic()))
        out[" ".join(flags)] = {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-600:]}
        print(" ".join(flags), proc.returncode, flush=True)
    return out


def part_largest(args) -> dict:
    """Issue 65 item 4: the largest R-MAT graph one GPU trains GCN and SAGE 3 × 128 on (one step), made
    on the device (``_device_graph``, ``--largest-scale`` nodes' log2 and ``--largest-edges`` draws, both
    halved per step down), its allocator peak beside ``fullgraph.plan.device_peak_bytes``."""
    from _device_graph import device_rmat, gcn_block, mean_block
    from _device_steps import peak, peak_reset
    from fullgraph.plan import device_peak_bytes

    rows = []
    for model, norm_block in (("gcn", gcn_block), ("sage", mean_block)):
        for down in range(3):
            scale, draws = args.largest_scale - down, args.largest_edges >> down
            row, held = {"model": model, "scale": scale, "draws": draws}, None
            try:
                t0 = time.perf_counter()
                graph = device_rmat(scale, draws, num_features=128, num_classes=16, device=args.device)
                block = norm_block(graph)
                sync(args.device)
                row |= {"build_s": time.perf_counter() - t0, "nodes": graph.num_nodes, "edges": graph.num_edges}
                row["estimate"] = device_peak_bytes(nodes=graph.num_nodes, edges=graph.num_edges, features=128,
                                                    classes=16, model=model, layers=3, hidden=128)
                held = (block, graph.x, graph.train_rows, graph.y.index_select(0, graph.train_rows), 16)
                del graph  # its CSR: the trainer keeps a graph's own structure on the host
                peak_reset(args.device)
                t0 = time.perf_counter()
                model_step(held, args.device, 3, model=model, hidden=128)()
                sync(args.device)
                row |= {"ok": True, "step_s": time.perf_counter() - t0, "peak": peak(args.device)}
                row["peak_over_estimate"] = row["peak"] / row["estimate"] if row["peak"] else None
            except torch.OutOfMemoryError as e:
                e.__traceback__ = None
                row["ok"] = False
            finally:
                graph = block = held = None
                gc.collect()
                torch.cuda.empty_cache() if torch.cuda.is_available() else None
            rows.append(row)
            print(json.dumps(row), flush=True)
            if row["ok"]:
                break
    return {"rows": rows}


def part_shared_gpu(args) -> dict:
    """Issue 65 item 6: every multi-rank layout with two ranks sharing the one GPU over gloo, against the
    same layout on the CPU (``pytest -m shared_gpu``, tests/test_gpu.py)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "shared_gpu", "-p", "no:cacheprovider",
                           "tests/test_gpu.py"], cwd=REPO, capture_output=True, text=True,
                          timeout=CAPS["shared_gpu"] - 5)
    return {"rc": proc.returncode, "tail": (proc.stdout + proc.stderr)[-3000:]}


def part_accuracy(args) -> dict:
    """Issue 66 on the device: ``accuracy_vs_pyg.py`` GCN 2 × 64 against PyG's ``GCNConv`` (lr 0.01, weight
    decay 5e-4, dropout 0.5, 200 epochs, the best validation epoch's test accuracy), ``--acc-seeds`` on
    each of ``--acc-datasets``; the script writes its JSON after every seed, so a part stopped at its cap
    keeps the seeds done."""
    rows = {}
    end = time.monotonic() + CAPS["accuracy"] - 5
    for name in args.acc_datasets.split(","):
        dest = Path(args.out) / f"accuracy-{name}.json"
        cmd = [sys.executable, str(REPO / "benchmarks" / "accuracy_vs_pyg.py"), "--root", args.root, "--datasets", name,
               "--models", "gcn", "--norms", "none", "--layers", "2", "--hidden", "64", "--seeds", args.acc_seeds,
               "--epochs", str(args.acc_epochs), "--device", args.device, "--out", str(dest)]
        try:
            done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=max(1.0, end - time.monotonic()))
            rows[name] = {"rc": done.returncode, "tail": (done.stdout + done.stderr)[-1500:]}
        except subprocess.TimeoutExpired:
            rows[name] = {"rc": None, "error": "stopped at the part's cap"}
        rows[name]["result"] = json.loads(dest.read_text()) if dest.exists() else None
        print(name, json.dumps(rows[name]["rc"]), flush=True)
    return rows


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
    p.add_argument("--graphs", default="rmat,coauthor-physics", help="speed and precision: the graphs measured")
    p.add_argument("--scale", type=int, default=20, help="R-MAT: 2**scale nodes")
    p.add_argument("--edges", type=int, default=5_000_000, help="R-MAT edge draws (x2 once symmetrized)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--max-layers", type=int, default=1024, help="deepest: stop doubling here")
    p.add_argument("--sweep-scale", type=int, default=17, help="cpu_sweep's R-MAT: 2**scale nodes")
    p.add_argument("--sweep-edges", type=int, default=1_200_000)
    p.add_argument("--sweep-epochs", type=int, default=2)
    p.add_argument("--sweep-procs", default="1,2,4,8", help="cpu_sweep's process counts")
    p.add_argument("--largest-scale", type=int, default=26, help="largest: the first graph's 2**scale nodes")
    p.add_argument("--largest-edges", type=int, default=500_000_000, help="largest: its R-MAT draws (~2x edges)")
    p.add_argument("--acc-datasets", default="coauthor-physics", help="accuracy: the graphs, comma-separated")
    p.add_argument("--acc-seeds", default="0-31", help="accuracy: the seeds (accuracy_vs_pyg.py's form)")
    p.add_argument("--acc-epochs", type=int, default=200, help="accuracy: epochs (the issue's 200; fewer for a dry run)")
    p.add_argument("--cap", type=float, default=CAPS["gpu_tests"] - 25, help="seconds gpu_tests' pytest may take")
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
              "cpu_sweep": part_cpu_sweep, "profile": part_profile, "precision": part_precision,
              "largest": part_largest, "shared_gpu": part_shared_gpu, "accuracy": part_accuracy}[part](args)
    result["seconds"] = time.perf_counter() - t0
    write_json(out / f"{part}.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
