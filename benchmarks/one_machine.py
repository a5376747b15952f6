"""``fullgraph plan`` for one machine against real runs on it (issue 36 §4): for P = 2 and 4 ranks on this
machine, every layout the plan lists, its estimate next to the epoch ``fullgraph train`` measures.

Each round plans every P on one machine (the default: ranks share the cores, talk over shared memory)
and, for the comparison, as P machines of one rank each on the old default network (10 Gbit/s, 50 µs;
what the plan assumed before ``--machines``), then trains every layout once, ``--epochs`` epochs with an
evaluation each. The machine's CPU is shared with other work that comes and goes: ``--repeats`` rounds,
interleaved, and each cell keeps its quietest round, the least of its runs and the least of its
estimates (the plan's timings suffer the same noise).

What is compared: the training step, ``summary.json``'s ``epoch_time_s`` (the median over epochs 2..),
against the plan's ``epoch_s - eval_s``; and the epoch with its evaluation (the median of
``epoch_time_s + eval_time_s`` over epochs 2.. of ``metrics.jsonl``) against the plan's ``epoch_s``.

    .venv/bin/python benchmarks/one_machine.py                                    # cora, P = 2, 4
    .venv/bin/python benchmarks/one_machine.py --dataset synthetic --repeats 3 --out runs/bench_one_machine_synth.json
    .venv/bin/python benchmarks/one_machine.py --probe --repeats 5      # the measurements of plan.machines
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import REPO, print_header, train, write_json


def plan(a, nprocs: int, cluster: bool) -> dict[str, dict]:
    """``fullgraph plan --json``'s rows by layout: one machine, or (``cluster``) one machine per rank on
    the old default network, its kernels timed on the threads the plan gave a rank before ``--machines``
    (this machine's cores over P)."""
    flags = ["--machines", str(nprocs), "--bandwidth-gbps", "10", "--latency-us", "50", "--threads",
             str(max(1, (os.cpu_count() or 1) // nprocs))] if cluster else []
    cmd = [sys.executable, "-m", "fullgraph", "plan", "--dataset", a.dataset, "--root", a.root, "--nprocs",
           str(nprocs), "--json", *flags]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True).stdout
    result = json.loads(out)
    return {r["layout"]: r | {"setting": result["setting"]} for r in result["layouts"] if r["nprocs"] == nprocs}


def train_flags(options: dict) -> list[str]:
    """``fullgraph train``'s flags for a layout's options (``--parallel`` and its mesh)."""
    return [x for k, v in options.items() for x in (f"--{k.replace('_', '-')}", str(v))]


def measure(a, nprocs: int, options: dict) -> dict:
    """One ``fullgraph train`` of the layout: its median training step and median epoch with evaluation."""
    argv = ["--dataset", a.dataset, "--root", a.root, "--nprocs", str(nprocs), *train_flags(options),
            "--epochs", str(a.epochs), "--eval-every", "1", "--progress", "none"]
    load = os.getloadavg()[0]  # the machine's other work, as the run starts
    with tempfile.TemporaryDirectory(prefix="fg-one-machine-") as tmp:
        got = train(argv, Path(tmp) / "run", timeout=a.timeout)
    if "error" in got:
        return {"error": got["error"], "load": load}
    epochs = [m["epoch_time_s"] + m.get("eval_time_s", 0.0) for m in got["metrics"]]
    return {"train_s": got["summary"]["epoch_time_s"], "epoch_s": statistics.median(epochs[1:] or epochs),
            "load": load, "command": "fullgraph train " + " ".join(argv) + " --out RUN"}


def new_cell(nprocs: int, layout: str, row: dict) -> dict:
    return {"nprocs": nprocs, "layout": layout, "options": row["options"], "plans": [], "cluster_plans": [],
            "runs": []}


def one_round(a, cells: dict, nprocs: int) -> None:
    """Plan P on one machine (and as P machines), then train every layout the plan lists, once."""
    here, apart = plan(a, nprocs, False), plan(a, nprocs, True)
    for layout, row in here.items():
        if a.layouts and layout not in a.layouts.split(","):
            continue
        c = cells.setdefault((nprocs, layout), new_cell(nprocs, layout, row))
        c["plans"].append({k: row[k] for k in ("epoch_s", "eval_s", "compute_s", "comm_s", "bubble_s")})
        c["cluster_plans"].append({k: apart[layout][k] for k in ("epoch_s", "eval_s")})
        c["runs"].append(measure(a, nprocs, row["options"]))
        print(json.dumps({"nprocs": nprocs, "layout": layout, "plan": c["plans"][-1], "run": c["runs"][-1]}),
              flush=True)


def summarize(c: dict) -> dict:
    """A cell's quietest estimate and run (the least of each), and their ratios."""
    ok = [r for r in c["runs"] if "error" not in r]
    best = min(c["plans"], key=lambda p: p["epoch_s"])
    old = min(c["cluster_plans"], key=lambda p: p["epoch_s"])
    out = {"plan_train_s": best["epoch_s"] - best["eval_s"], "plan_epoch_s": best["epoch_s"],
           "old_plan_train_s": old["epoch_s"] - old["eval_s"]}
    if ok:
        out |= {"train_s": min(r["train_s"] for r in ok), "epoch_s": min(r["epoch_s"] for r in ok),
                "train_range": [min(r["train_s"] for r in ok), max(r["train_s"] for r in ok)],
                "command": ok[0]["command"]}
        out |= {"ratio_train": out["plan_train_s"] / out["train_s"], "ratio_epoch": out["plan_epoch_s"] / out["epoch_s"],
                "old_ratio_train": out["old_plan_train_s"] / out["train_s"]}
    else:
        out["error"] = c["runs"][-1]["error"]
    return out


def table(cells: list[dict]) -> list[str]:
    """The Markdown table: per P and layout, measured against planned, training step and whole epoch."""
    lines = ["| P | layout | measured train ms, least (most) | plan train ms | plan/measured | measured epoch+eval ms "
             "| plan epoch ms | plan/measured | old plan train ms (P machines, 10 Gbit/s) | old/measured |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in cells:
        s = c["summary"]
        if "error" in s:
            lines.append(f"| {c['nprocs']} | {c['layout']} | failed: {s['error'][:60]} | "
                         f"{1e3 * s['plan_train_s']:.3g} | - | - | {1e3 * s['plan_epoch_s']:.3g} | - | - | - |")
            continue
        lo, hi = s["train_range"]
        lines.append(f"| {c['nprocs']} | {c['layout']} | {1e3 * lo:.3g} ({1e3 * hi:.3g}) | {1e3 * s['plan_train_s']:.3g} "
                     f"| {s['ratio_train']:.2f} | {1e3 * s['epoch_s']:.3g} | {1e3 * s['plan_epoch_s']:.3g} "
                     f"| {s['ratio_epoch']:.2f} | {1e3 * s['old_plan_train_s']:.3g} | {s['old_ratio_train']:.2f} |")
    return lines


def probe(repeats: int) -> None:
    """The measurements ``plan.machines``' constants come from, under ``torchrun`` on this machine: gloo
    between two local processes (``probes/link.py``) and what an exchange costs ranks busy computing,
    2 and 4 of them (``probes/sync.py``), ``repeats`` times each, interleaved."""
    here = Path(__file__).resolve().parent / "probes"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    for r in range(repeats):
        for n, script, extra in ((2, "link.py", ["10"]), (2, "sync.py", []), (4, "sync.py", [])):
            done = subprocess.run([*torchrun, f"--nproc-per-node={n}", str(here / script), *extra], cwd=REPO,
                                  capture_output=True, text=True, timeout=600)
            last = (done.stdout.strip().splitlines() or ["(no output) " + done.stderr[-300:]])[-1]
            print(f"* round {r + 1}, {n} ranks, {script}: {last}", flush=True)


def merged(files: list[str]) -> dict:
    """The cells of several runs' JSON files, their plans and runs pooled per (P, layout)."""
    cells: dict = {}
    for f in files:
        for c in json.loads(Path(f).read_text())["cells"]:
            into = cells.setdefault((c["nprocs"], c["layout"]), {**c, "plans": [], "cluster_plans": [], "runs": []})
            for k in ("plans", "cluster_plans", "runs"):
                into[k] += c[k]
    return cells


def report(cells: dict, header, out: str) -> int:
    """Each cell summarized (``summarize``), written to ``out`` and printed as a table with its commands."""
    rows = [c | {"summary": summarize(c)} for c in cells.values()]
    write_json(out, {"header": header, "cells": rows})
    print("\n".join(["", *table(rows), ""]))
    for c in rows:
        if "command" in c["summary"]:
            print(f"    {c['summary']['command']}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--root", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--nprocs", default="2,4", help="the P to plan and run, comma-separated")
    ap.add_argument("--layouts", default="", help="only these layouts (as the plan labels them), comma-separated")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3, help="rounds, interleaved; each cell keeps its least")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", default="runs/bench_one_machine.json")
    ap.add_argument("--probe", action="store_true", help="only measure the links and exchanges (probe())")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="only pool the rounds of earlier runs' JSON files "
                                                                "into one table (each cell its least), written to --out")
    a = ap.parse_args()
    a.root = str(Path(a.root).resolve())
    if a.merge:
        return report(merged(a.merge), json.loads(Path(a.merge[0]).read_text())["header"], a.out)
    header = print_header()
    if a.probe:
        probe(a.repeats)
        return 0
    cells: dict = {}
    for _ in range(a.repeats):
        for p in [int(x) for x in a.nprocs.split(",")]:
            one_round(a, cells, p)
            write_json(a.out, {"header": header, "cells": list(cells.values())})
    return report(cells, header, a.out)


if __name__ == "__main__":
    sys.exit(main())
