"""Threads against load: one process's epoch at each thread count while other processes keep cores busy.

A loaded 2-core machine ran one process 4 times slower on its default thread count (all cores) than on
``--threads 1`` (issue 50 §5). This script measures how threads and load interact, to choose the default
from: for each number B of busy background processes (0 .. cores; each spins on a core in pure Python,
``while True: pass``) and each thread count T (1 .. cores, and ``auto``: what
``fullgraph.machine_load.default_threads`` picks at that moment), it runs ``fullgraph train --threads T``
(the real command, a fresh process) for a few epochs of a fixed model and reads the median epoch.
Rounds are interleaved (every B and T once per round), so that the machine's own other work falls on
all cells alike; each cell reports its median over the rounds and its least and most.

What is busy besides the spinners is measured too: ``busy`` is the cores other processes kept busy
over 0.25 s before each run (``machine_load.busy_cores``, spinners included), ``load`` the 1-minute
load average.

    .venv/bin/python benchmarks/threads_under_load.py                      # Coauthor-Physics GCN 2 x 256
    .venv/bin/python benchmarks/threads_under_load.py --repeats 5 --busy 0,1,2 --threads 1,2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import print_header, train, write_json

SPIN = "while True: pass"
"""A background process that keeps one core busy and does nothing else (no memory, no I/O)."""


def start_spinners(n: int) -> tuple[subprocess.Popen, ...]:
    """``n`` busy processes, each on a core of its own while the scheduler lets it."""
    return tuple(subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n))


def stop_spinners(procs: tuple[subprocess.Popen, ...]) -> None:
    """End the spinners this script started (by their own handles, nothing else)."""
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=10)


def run_cell(a, threads: int, busy: int) -> dict:
    """One ``fullgraph train`` of the fixed model on ``threads`` threads; its median epoch (after the
    first) and the machine's state just before it."""
    from fullgraph.machine_load import busy_cores

    others = busy_cores(0.25)
    load = os.getloadavg()[0]
    argv = ["--dataset", a.dataset, "--model", a.model, "--layers", str(a.layers), "--hidden", str(a.hidden),
            "--epochs", str(a.epochs), "--eval-every", str(a.epochs), "--threads", str(threads),
            "--progress", "none"]
    if a.root:
        argv += ["--root", str(Path(a.root).resolve())]
    with tempfile.TemporaryDirectory(prefix="fg-threads-load-") as tmp:
        got = train(argv, Path(tmp) / "run", timeout=a.timeout)
    cell = {"spinners": busy, "threads": threads, "busy_cores": others, "load": load}
    if "error" in got:
        return cell | {"error": got["error"]}
    return cell | {"epoch_s": got["summary"]["epoch_time_s"]}


def one_round(a, rnd: int, thread_counts: tuple[int, ...], busy_levels: tuple[int, ...]) -> list[dict]:
    """Every (busy, threads) cell once, ``auto`` included: the spinners start, settle for a second, and
    stay for all the thread counts of their level."""
    from fullgraph.machine_load import default_threads

    cells = []
    for busy in busy_levels:
        spinners = start_spinners(busy)
        try:
            time.sleep(1.0)
            auto = default_threads(1)
            for t in (*thread_counts, "auto"):
                cell = run_cell(a, auto if t == "auto" else t, busy) | {"round": rnd, "setting": str(t)}
                cells.append(cell)
                print(f"round {rnd}: {busy} busy, threads {t}{f' ({auto})' if t == 'auto' else ''}: "
                      f"{cell.get('epoch_s', cell.get('error'))} (busy {cell['busy_cores']}, "
                      f"load {cell['load']:.2f})", flush=True)
        finally:
            stop_spinners(spinners)
    return cells


def summarize(cells: list[dict], thread_counts: tuple[int, ...], busy_levels: tuple[int, ...]) -> list[dict]:
    """Per busy level and setting: the median epoch over the rounds, its least and most, the threads
    ``auto`` took, and the busy cores measured."""
    rows = []
    for busy in busy_levels:
        for setting in (*map(str, thread_counts), "auto"):
            mine = [c for c in cells if c["spinners"] == busy and c["setting"] == setting and "epoch_s" in c]
            if not mine:
                continue
            times = [c["epoch_s"] for c in mine]
            rows.append({"spinners": busy, "setting": setting, "threads": sorted({c["threads"] for c in mine}),
                         "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
                         "busy_cores": statistics.median(c["busy_cores"] or 0.0 for c in mine),
                         "load": statistics.median(c["load"] for c in mine), "runs": len(mine)})
    return rows


def table(rows: list[dict], thread_counts: tuple[int, ...]) -> list[str]:
    """The Markdown table: one line per busy level, the epoch per thread count, and the ratios against
    one thread (above 1: slower than one thread)."""
    one = {r["spinners"]: r["median_s"] for r in rows if r["setting"] == "1"}
    head = (["spinners", "busy cores (measured)", "load"] + [f"T={t} epoch s, median (least-most)" for t in thread_counts]
            + [f"T={t} / T=1" for t in thread_counts if t != 1] + ["auto: T", "auto epoch s", "auto / T=1"])
    lines = ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    for busy in sorted(one):
        by = {r["setting"]: r for r in rows if r["spinners"] == busy}
        first = next(iter(by.values()))
        cells = [str(busy), f"{first['busy_cores']:.1f}", f"{first['load']:.1f}"]
        cells += [f"{by[str(t)]['median_s']:.3f} ({by[str(t)]['min_s']:.3f}-{by[str(t)]['max_s']:.3f})"
                  if str(t) in by else "-" for t in thread_counts]
        cells += [f"{by[str(t)]['median_s'] / one[busy]:.2f}" if str(t) in by else "-" for t in thread_counts if t != 1]
        auto = by.get("auto")
        cells += ([",".join(map(str, auto["threads"])), f"{auto['median_s']:.3f}", f"{auto['median_s'] / one[busy]:.2f}"]
                  if auto else ["-", "-", "-"])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def main() -> int:
    cores = os.cpu_count() or 1
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="coauthor-physics")
    p.add_argument("--root", default=None, help="data root (default: fullgraph's)")
    p.add_argument("--model", default="gcn")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--epochs", type=int, default=10, help="epochs per run (the median after the first is kept)")
    p.add_argument("--threads", default=",".join(map(str, range(1, cores + 1))), help="thread counts (default 1..cores)")
    p.add_argument("--busy", default=",".join(map(str, range(cores + 1))), help="busy background processes "
                                                                                 "(default 0..cores)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take")
    p.add_argument("--out", default="runs/threads_under_load.json")
    a = p.parse_args()
    thread_counts, busy_levels = _ints(a.threads), _ints(a.busy)
    started = time.perf_counter()
    print_header(machine_extra=[f"load {os.getloadavg()[0]:.2f} at start"])
    print(f"config: {a.dataset}, {a.model} {a.layers} x {a.hidden}, {a.epochs} epochs per run (median epoch after "
          f"the first), threads {thread_counts} and auto, busy background processes {busy_levels}, "
          f"{a.repeats} interleaved rounds", flush=True)
    cells = [c for r in range(a.repeats) for c in one_round(a, r, thread_counts, busy_levels)]
    rows = summarize(cells, thread_counts, busy_levels)
    print("\n" + "\n".join(table(rows, thread_counts)))
    out = write_json(a.out, {"config": vars(a), "cells": cells, "summary": rows,
                             "total_s": time.perf_counter() - started})
    print(f"\n{sum('error' in c for c in cells)} failed runs; wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
