"""Scale: R-MAT graphs of about 10^6, 10^7 and 10^8 directed edges, from generation to training.

Every step is the real command line in its own subprocess, so every time and every peak is that
command's own:

1. **generate**: ``fullgraph generate rmat --scale S --edges E --features 100 --classes 16 --seed 0
   --out DIR``. Its own summary line (time, peak RSS) is parsed, and the benchmark measures the
   subprocess too: wall time and the peak RSS the kernel reports for it (``os.wait4``'s
   ``ru_maxrss``: the largest process of the tree that was waited for).
2. **partition**: ``fullgraph partition --dataset DIR --parts P --out PDIR`` (METIS), P = 2 and 4
   (the parts the graph-parallel runs need). Target: the peak is at most 60 bytes per directed edge
   plus one copy of the features (``N * F * 4`` bytes); the bound and PASS/FAIL are printed.
3. **training**: ``fullgraph train --dataset DIR ... --epochs E --eval-every E --progress none
   --out RUN``; ``RUN/summary.json`` gives ``epoch_time_s`` (median over epochs after the first),
   ``peak_rss_bytes_per_rank``, ``comm_bytes_per_epoch`` (median per category, summed over ranks)
   and, where the trainer writes them, ``estimated_peak_bytes*`` (printed beside the measured peak).
   Configurations (``--configs``):

   ==============  ============================================================================
   ``single``      one process, GraphSAGE 3 x 128 (the reference for the memory ratios)
   ``graph2``      ``--parallel graph --nprocs 2 --partition-dir PDIR``, SAGE 3 x 128, p = 1
   ``graph2-bns``  the same at ``--boundary-rate 0.1``
   ``graph4``      ``--nprocs 4``, p = 1
   ``graph4-bns``  ``--nprocs 4``, p = 0.1
   ``pipeline``    ``--parallel pipeline --nprocs 4``, GCN 8 x 128 (the launcher partitions and
                   chunks into ``$FULLGRAPH_CACHE``, a folder under the work folder)
   ``hybrid``      ``--parallel hybrid --nprocs 4 --stages 2 --graph-ways 2``, GCN 8 x 128
   ``spmm-1d``     ``--parallel spmm-1d --nprocs 4``, GCN 3 x 128
   ``single-gcn8`` one process, GCN 8 x 128 (reference of pipeline and hybrid; only when named or
                   with ``--configs all``)
   ``single-gcn3`` one process, GCN 3 x 128 (reference of spmm-1d; likewise)
   ==============  ============================================================================

   Targets: largest-rank peak of graph parallelism over the single-process peak <= 0.6 at P = 2 and
   <= 0.35 at P = 4 (p = 1).

Peaks include the interpreter with torch and fullgraph imported (a few hundred MiB, the same for
every process). That fixed cost dominates at 10^6 edges, so next to every verdict on the process
peak the benchmark prints the same figure above the **import baseline** (the peak RSS of a process
that only imports what ``fullgraph train`` imports), and a verdict on that. Bytes per edge are
``(peak - one copy of the features) / directed edges``.

A run that fails, is refused, or passes ``--timeout`` is reported as such (with the first line of
its error) and the benchmark goes on; so is one killed because the machine's available memory fell
below ``--min-free-gib``. A training run whose memory, extrapolated by edge count from the same
configuration on a smaller graph (earlier in this invocation, or in ``--predict-from`` JSON files),
would not fit in 90% of the available memory is skipped and says so. Timings record the foreign CPU
load (processes outside this benchmark's tree) and are marked ``CONTENDED`` when it exceeded 0.2
cores on average.

Sizes (``--sizes``; R-MAT draws, then symmetrized, deduplicated, self loops dropped):
``1e6`` = scale 17, 530,000 draws (1,009,740 directed edges); ``1e7`` = scale 20, 5,150,000 draws
(9,995,848); ``1e8`` = scale 20, 65,000,000 draws (112,433,920; average degree 107, between
ogbn-products' 51 and Reddit's 490); ``1e5`` = scale 14, 52,000 draws (96,594), a smoke test.
Features: 100 float32 columns, 16 classes. The 10^8-edge graph keeps 2^20 nodes: at scale 23
(8.4M nodes, 51M draws, 100M edges) one SAGE 3 x 128 activation is 4.3 GB and the features 3.4 GB,
so four ranks need more than 26 GB before any halo row, and no layout that keeps activations fits a
24 GiB machine (benchmarks/README.md, "10^8 edges"). ``--partitioner metis-memory`` partitions for
the graph-parallel runs' model (SAGE 3 x 128).

Usage::

    .venv/bin/python benchmarks/scale.py                                   # 1e6 and 1e7, default configs
    .venv/bin/python benchmarks/scale.py --sizes 1e5 --epochs 2            # smoke test, ~5 min on 2 cores
    .venv/bin/python benchmarks/scale.py --sizes 1e6 --configs all --readme   # and write the README block
    .venv/bin/python benchmarks/scale.py --sizes 1e7 --configs single,graph2,graph4 --timeout 1200 \
        --predict-from runs/bench_scale_1e6.json
    .venv/bin/python benchmarks/scale.py --sizes 1e8 --workdir /big/disk/scale --timeout 7200 --readme
    .venv/bin/python benchmarks/scale.py --report runs/bench_scale_1e7.json,runs/more.json --readme
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from _harness import (CLK_TCK, REPO, Sampler, environment, print_header, process_table, process_tree, read_summary,
                      write_json)

README = Path(__file__).resolve().parent / "README.md"
MIB = 2**20
MB = 1e6

# size label -> (R-MAT scale, edge draws)
SIZES = {"1e5": (14, 52_000), "1e6": (17, 530_000), "1e7": (20, 5_150_000), "1e8": (20, 65_000_000)}
FEATURES, CLASSES = 100, 16
PARTITION_BYTES_PER_EDGE = 60  # target: partition peak <= 60 B/edge + one copy of the features
RATIO_TARGETS = {2: 0.6, 4: 0.35}  # largest graph-parallel rank peak / single-process peak, p = 1
FOREIGN_BUSY_CORES = 0.2

SAGE = ["--model", "sage", "--layers", "3", "--hidden", "128"]
GCN8 = ["--model", "gcn", "--layers", "8", "--hidden", "128"]
GCN3 = ["--model", "gcn", "--layers", "3", "--hidden", "128"]
# name -> (label, processes, partition parts needed, flags)
CONFIGS = {
    "single": ("single, SAGE 3x128", 1, None, [*SAGE]),
    "graph2": ("graph P=2 p=1, SAGE 3x128", 2, 2, [*SAGE, "--parallel", "graph", "--nprocs", "2",
                                                   "--boundary-rate", "1"]),
    "graph2-bns": ("graph P=2 p=0.1, SAGE 3x128", 2, 2, [*SAGE, "--parallel", "graph", "--nprocs", "2",
                                                         "--boundary-rate", "0.1"]),
    "graph4": ("graph P=4 p=1, SAGE 3x128", 4, 4, [*SAGE, "--parallel", "graph", "--nprocs", "4",
                                                   "--boundary-rate", "1"]),
    "graph4-bns": ("graph P=4 p=0.1, SAGE 3x128", 4, 4, [*SAGE, "--parallel", "graph", "--nprocs", "4",
                                                         "--boundary-rate", "0.1"]),
    "pipeline": ("pipeline 4x1, GCN 8x128", 4, None, [*GCN8, "--parallel", "pipeline", "--nprocs", "4"]),
    "hybrid": ("hybrid 2x2, GCN 8x128", 4, None, [*GCN8, "--parallel", "hybrid", "--nprocs", "4", "--stages", "2",
                                                  "--graph-ways", "2"]),
    "spmm-1d": ("spmm-1d P=4, GCN 3x128", 4, None, [*GCN3, "--parallel", "spmm-1d", "--nprocs", "4"]),
    # single-process references of the GCN runs (not in the default set)
    "single-gcn8": ("single, GCN 8x128", 1, None, [*GCN8]),
    "single-gcn3": ("single, GCN 3x128", 1, None, [*GCN3]),
}
EXTRA_CONFIGS = ("single-gcn8", "single-gcn3")
# the single-process run each layout is compared with (same model)
REFERENCE = {"graph2": "single", "graph2-bns": "single", "graph4": "single", "graph4-bns": "single",
             "pipeline": "single-gcn8", "hybrid": "single-gcn8", "spmm-1d": "single-gcn3"}
PREP = ("generate", "partition")
COMM_SHORT = {"grad/allreduce": "grad", "sample/index": "index"}


# ----------------------------------------------------------------------------- machine and versions
def machine_lines() -> list[str]:
    """The shared header (taken in a child interpreter: this driver never imports torch, leaving the
    memory to the commands it measures), with the memory available now and the commit measured."""
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "fullgraph"], cwd=REPO,
                           capture_output=True, text=True)
    commit = git.stdout.strip() or "?"
    if dirty.stdout.strip():
        commit += " (+ uncommitted changes under fullgraph/)"
    return print_header(environment(isolated=True),
                        machine_extra=[f"{mem_available() / 2**30:.1f} GiB available at start"],
                        versions_extra=[f"fullgraph git {commit}"])


# ----------------------------------------------------------------------------- watching a process tree
class Watch(Sampler):
    """While a command runs: the peak of the summed RSS of its process tree (sampled), and the CPU
    used by processes outside this benchmark's tree (foreign load, in cores)."""

    def __init__(self, child: int, period_s: float = 0.5, min_free: float = 0.0):
        self.child, self.period, self.min_free = child, period_s, min_free
        self.low_memory: float | None = None  # MemAvailable when it fell below min_free
        self.tree_peak = 0
        self.foreign: list[float] = []
        self._page = os.sysconf("SC_PAGE_SIZE")
        super().__init__()

    def _run(self):
        prev, t_prev = process_table(), time.monotonic()
        while not self._stop.wait(self.period):
            now, t_now = process_table(), time.monotonic()
            kid = process_tree(now, self.child) if self.child in now else set()
            self.tree_peak = max(self.tree_peak, sum(now[p][2] for p in kid) * self._page)
            mine = process_tree(now, os.getpid()) | process_tree(prev, os.getpid())
            ticks = sum(row[1] - prev[p][1] for p, row in now.items() if p not in mine and p in prev)
            self.foreign.append(ticks / CLK_TCK / max(t_now - t_prev, 1e-3))
            prev, t_prev = now, t_now
            avail = mem_available()
            if avail < self.min_free and self.low_memory is None:
                self.low_memory = avail
                try:
                    os.killpg(self.child, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    @property
    def foreign_mean(self) -> float:
        return statistics.fmean(self.foreign) if self.foreign else 0.0


def mem_available() -> float:
    """The kernel's estimate of memory available for new work, bytes."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable")) * 1024.0
    except (OSError, StopIteration):
        return float("inf")


MIN_FREE = [0.0]  # bytes; set from --min-free-gib


def run_command(cmd: list[str], timeout: float, log: Path, env: dict | None = None) -> dict:
    """Run ``cmd`` in its own session with stdout/stderr to ``log``; kill the whole session after
    ``timeout`` s. Returns exit status, wall time, kernel peak RSS (``ru_maxrss`` of the process and
    its waited-for descendants), sampled peak of the tree's summed RSS, foreign load and output."""
    log.parent.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    with open(log, "w") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        timed_out = False
        with Watch(proc.pid, min_free=MIN_FREE[0]) as watch:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() - t0 > timeout:
                    timed_out = True
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    _, status, usage = os.wait4(proc.pid, 0)
                    break
                time.sleep(0.2)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
    text = log.read_text(errors="replace")
    return {"cmd": cmd, "rc": proc.returncode, "timed_out": timed_out, "wall_s": wall,
            "peak_rss": usage.ru_maxrss * 1024, "tree_rss_peak": watch.tree_peak,
            "foreign_cores": watch.foreign_mean, "low_memory": watch.low_memory, "load1_start": load0,
            "load1_end": os.getloadavg()[0],
            "output": text}


def first_error(r: dict) -> str:
    """The line that says what went wrong (the first error line, else the last line of output)."""
    if r["timed_out"]:
        return f"TIMEOUT after {r['wall_s']:.0f} s"
    if r.get("low_memory") is not None:
        return (f"killed by the benchmark after {r['wall_s']:.0f} s: the machine had {r['low_memory'] / 2**30:.2f} GiB "
                f"available (tree RSS {r['tree_rss_peak'] / 2**30:.1f} GiB)")
    lines = [ln.strip() for ln in r["output"].splitlines() if ln.strip()]
    pick = next((ln for ln in lines if re.search(r"error|Error|Killed|killed|refus|MemoryError|failed", ln)
                 and not ln.startswith("File ")), None)
    pick = pick or (lines[-1] if lines else "no output")
    sig = f" (signal {-r['rc']})" if r["rc"] < 0 else ""
    return f"exit status {r['rc']}{sig}: {pick[:200]}"


def import_baseline(timeout: float, log: Path) -> int:
    """Peak RSS of a process that only imports what ``fullgraph train`` imports."""
    code = ("import torch, numpy, fullgraph.cli, fullgraph.train.trainer, fullgraph.parallel.setup, "
            "fullgraph.partition")
    r = run_command([sys.executable, "-c", code], timeout, log)
    return r["peak_rss"] if r["rc"] == 0 else 0


# ----------------------------------------------------------------------------- the steps
def fg(*args: str) -> list[str]:
    return [sys.executable, "-m", "fullgraph", *args]


def step_generate(size: str, work: Path, a) -> dict:
    scale, draws = SIZES[size]
    out = work / f"rmat-{size}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = fg("generate", "rmat", "--scale", str(scale), "--edges", str(draws), "--features", str(FEATURES),
             "--classes", str(CLASSES), "--seed", "0", "--out", str(out))
    r = run_command(cmd, a.timeout, work / "logs" / f"generate-{size}.log")
    rec = {"size": size, "step": "generate", "scale": scale, "draws": draws, "dataset": str(out), **r}
    meta = out / "meta.json"
    if r["rc"] != 0 or not meta.is_file():
        rec["error"] = first_error(r)
        return rec
    counts = json.loads(meta.read_text())["counts"]
    rec["nodes"], rec["edges"] = counts["num_nodes"], counts["num_edges"]
    rec["feature_bytes"] = counts["num_nodes"] * counts["num_features"] * 4
    m = re.search(r"in ([0-9.]+) s, peak RSS ([0-9.]+) MiB", r["output"])
    if m:
        rec["self_time_s"], rec["self_peak"] = float(m.group(1)), float(m.group(2)) * MIB
    rec["disk_bytes"] = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    return rec


def step_partition(size: str, parts: int, gen: dict, work: Path, a) -> dict:
    out = work / f"rmat-{size}-{a.partitioner}{parts}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = fg("partition", "--dataset", gen["dataset"], "--parts", str(parts), "--partitioner", a.partitioner,
             "--metis-sample", f"{a.metis_sample:g}", "--out", str(out), *SAGE)
    env = dict(os.environ, FULLGRAPH_CACHE=str(work / "cache"))
    r = run_command(cmd, a.timeout, work / "logs" / f"partition-{size}-{parts}.log", env)
    rec = {"size": size, "step": "partition", "parts": parts, "partitioner": a.partitioner,
           "metis_sample": a.metis_sample, "pdir": str(out), **r}
    if r["rc"] != 0 or not (out / "partition.json").is_file():
        rec["error"] = first_error(r)
        return rec
    m = re.search(r"replication factor ([0-9.]+)", r["output"])
    rec["alpha"] = float(m.group(1)) if m else None
    m = re.search(r"\(([0-9.]+) s: \S+ ([0-9.]+) s, book ([0-9.]+) s, files ([0-9.]+) s\)", r["output"])
    if m:  # the partition command's own split of its time
        rec["phases_s"] = {"total": float(m.group(1)), "partitioner": float(m.group(2)),
                           "book": float(m.group(3)), "files": float(m.group(4))}
    rec["bound"] = PARTITION_BYTES_PER_EDGE * gen["edges"] + gen["feature_bytes"]
    return rec


def predicted_memory(name: str, gen: dict, history: list[dict], baseline: int) -> tuple[float, str] | None:
    """The summed RSS a training run will need, from the largest smaller graph on which the same
    config ran (or was killed for memory): the part above the per-process import baseline scales with
    the number of edges. Σ RSS counts pages shared between ranks once per rank, so this errs high."""
    best = None
    for r in history:
        if r.get("step") != "train" or r.get("config") != name or not r.get("edges") or r["edges"] >= gen["edges"]:
            continue
        if "error" in r and r.get("low_memory") is None:
            continue
        if best is None or r["edges"] > best["edges"]:
            best = r
    if best is None or not best.get("tree_rss_peak"):
        return None
    procs = best["nprocs"] + (1 if best["nprocs"] > 1 else 0)  # the ranks and the launcher
    fixed = procs * baseline
    return fixed + max(best["tree_rss_peak"] - fixed, 0) * gen["edges"] / best["edges"], best["size"]


def step_train(size: str, name: str, gen: dict, pdirs: dict, work: Path, a) -> dict:
    label, nprocs, parts, flags = CONFIGS[name]
    rec = {"size": size, "step": "train", "config": name, "label": label, "nprocs": nprocs, "edges": gen["edges"]}
    out = work / "runs" / f"{size}-{name}"
    shutil.rmtree(out, ignore_errors=True)
    extra = []
    if parts is not None:
        prec = pdirs.get(parts)
        if prec is None or "error" in prec:
            rec["error"] = f"no {parts}-part partition ({prec['error'] if prec else 'not made'})"
            return rec
        extra = ["--partition-dir", prec["pdir"]]
    guess = predicted_memory(name, gen, a.history, a.baseline)
    if guess is not None and guess[0] > 0.9 * mem_available():
        rec["error"] = (f"skipped: predicted memory {guess[0] / 2**30:.1f} GiB (Σ RSS at {guess[1]}, scaled by the "
                        f"edge count) > 90% of the {mem_available() / 2**30:.1f} GiB available")
        rec["skipped"] = True
        return rec
    # --release-memory: peaks measure what a run needs, as in the results below (epochs get slower)
    cmd = fg("train", "--dataset", gen["dataset"], "--release-memory", *flags, *extra, "--epochs", str(a.epochs),
             "--eval-every", str(a.epochs), "--progress", "none", "--comm-timeout", str(int(a.timeout)), "--seed", "0",
             *(["--threads", str(a.threads)] if a.threads else []), "--out", str(out), "--overwrite")  # a rerun
    env = dict(os.environ, FULLGRAPH_CACHE=str(work / "cache"))
    r = run_command(cmd, a.timeout, work / "logs" / f"train-{size}-{name}.log", env)
    rec.update(r)
    s = read_summary(out)
    if r["rc"] != 0 or s is None:
        rec["error"] = first_error(r)
        return rec
    peaks = s.get("peak_rss_bytes_per_rank") or [s.get("peak_rss_bytes", 0)]
    rec |= {"epoch_time_s": s.get("epoch_time_s"), "peaks": peaks, "max_peak": max(peaks),
            "comm": s.get("comm_bytes_per_epoch") or {}, "alpha": s.get("replication_factor"),
            "bubble": s.get("bubble_fraction"), "test_acc": s.get("test_acc"),
            "estimates": {k: v for k, v in s.items() if k.startswith("estimated_peak_bytes")}}
    return rec


# ----------------------------------------------------------------------------- formatting
def mib(b) -> str:
    return "-" if b is None else f"{b / MIB:,.0f}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def contended(r: dict) -> str:
    load = r.get("foreign_cores", 0)
    return f" CONTENDED {load:.1f}" if load > FOREIGN_BUSY_CORES else ""


def est_text(est: dict) -> str:
    """The summary's estimate(s): a number, a per-rank list (its largest) or a dict of parts."""
    vals = []
    for k, v in est.items():
        if isinstance(v, (int, float)):
            vals.append(v)
        elif isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
            vals.append(max(v))
        elif isinstance(v, dict) and "total" in v and isinstance(v["total"], (int, float)):
            vals.append(v["total"])
    return mib(max(vals)) if vals else "-"


def comm_text(comm: dict) -> str:
    items = [(k, v) for k, v in sorted(comm.items()) if v and v >= 0.05 * MB]  # drops meta/metrics, eval/reduce
    if not items:
        return "-"
    return ", ".join(f"{COMM_SHORT.get(k, k)} {v / MB:,.1f}" for k, v in items)


def prep_table(recs: list[dict], baseline: int) -> list[str]:
    lines = ["| graph | step | time s | peak MiB | B/edge | above import B/edge | bound MiB (60 B/edge + X) "
             "| peak ≤ bound | above import ≤ bound |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in recs:
        gen = r["gen"]
        q = r.get("metis_sample", 1.0)
        step = "generate" if r["step"] == "generate" else \
            f"partition P={r['parts']} ({r.get('partitioner', 'metis')}{f', q = {q:g}' if q < 1 else ''})"
        if "error" in r:
            lines.append(f"| {r['size']} | {step} | {r['wall_s']:.1f} | | | | | FAILED: {r['error']} | |")
            continue
        e, fx = gen["edges"], gen["feature_bytes"]
        per_edge = (r["peak_rss"] - fx) / e
        above = (r["peak_rss"] - baseline - fx) / e
        if r["step"] == "partition":
            bound = r["bound"]
            v1, v2 = verdict(r["peak_rss"] <= bound), verdict(r["peak_rss"] - baseline <= bound)
            note = f"α = {r['alpha']:.3f}" if r.get("alpha") is not None else ""
            step += f", {note}" if note else ""
            ph = r.get("phases_s")
            if ph:
                step += (f"; {r.get('partitioner', 'metis')} {ph['partitioner']:.0f} s "
                         f"({100 * ph['partitioner'] / r['wall_s']:.0f}% of the command), book {ph['book']:.0f} s, "
                         f"files {ph['files']:.0f} s")
        else:
            bound, v1, v2 = None, "", ""
            if r.get("self_time_s") is not None:
                step += f" (own line: {r['self_time_s']:.1f} s, {mib(r['self_peak'])} MiB)"
        lines.append(f"| {r['size']} | {step} | {r['wall_s']:.1f}{contended(r)} | {mib(r['peak_rss'])} | "
                     f"{per_edge:.0f} | {above:.0f} | {mib(bound)} | {v1} | {v2} |")
    return lines


def train_table(recs: list[dict], singles: dict, baseline: int) -> list[str]:
    lines = ["| graph | run | epoch s | largest rank peak MiB | estimate MiB | command peak MiB | Σ RSS MiB "
             "| ranks MiB | comm MB/epoch (Σ ranks) | largest / single (same model) | above import | target |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- |"]
    for r in recs:
        if "error" in r:
            what = "skipped" if r.get("skipped") or r["error"].startswith("skipped") else "FAILED"
            lines.append(f"| {r['size']} | {r['label']} | {what} | | | | | | {r['error']} | | | |")
            continue
        single = singles.get((r["size"], REFERENCE.get(r["config"])))
        ratio = ratio2 = None
        if single:
            ratio = r["max_peak"] / single
            ratio2 = (r["max_peak"] - baseline) / (single - baseline) if single > baseline else None
        target = ""
        if ratio is not None and r["config"] in ("graph2", "graph4"):
            t = RATIO_TARGETS[r["nprocs"]]
            target = f"≤ {t}: {verdict(ratio <= t)}" + (f" / above import {verdict(ratio2 <= t)}" if ratio2 else "")
        ranks = " ".join(mib(p) for p in r["peaks"]) if len(r["peaks"]) > 1 else ""
        lines.append(
            f"| {r['size']} | {r['label']} | {r['epoch_time_s']:.2f}{contended(r)} | {mib(r['max_peak'])} | "
            f"{est_text(r['estimates'])} | {mib(r['peak_rss'])} | {mib(r['tree_rss_peak'])} | {ranks} | "
            f"{comm_text(r['comm'])} | "
            f"{'' if ratio is None else f'{ratio:.2f}'} | {'' if ratio2 is None else f'{ratio2:.2f}'} | {target} |")
    return lines


def checks(prep: list[dict], train: list[dict], singles: dict, baseline: int) -> list[str]:
    out = []
    for r in prep:
        if r["step"] == "partition" and "error" not in r:
            e = r["gen"]["edges"]
            out.append(f"{verdict(r['peak_rss'] <= r['bound'])}  partition {r['size']} P={r['parts']}: peak "
                       f"{mib(r['peak_rss'])} MiB <= 60 B x {e:,} edges + features = {mib(r['bound'])} MiB "
                       f"(above the import baseline: {mib(r['peak_rss'] - baseline)} MiB, "
                       f"{verdict(r['peak_rss'] - baseline <= r['bound'])})")
    for r in train:
        if r.get("config") in ("graph2", "graph4") and "error" not in r and singles.get((r["size"], "single")):
            s, t = singles[(r["size"], "single")], RATIO_TARGETS[r["nprocs"]]
            ratio, ratio2 = r["max_peak"] / s, (r["max_peak"] - baseline) / max(s - baseline, 1)
            out.append(f"{verdict(ratio <= t)}  {r['size']} graph P={r['nprocs']} largest rank / single = "
                       f"{mib(r['max_peak'])} / {mib(s)} MiB = {ratio:.3f} (target <= {t}); above the import "
                       f"baseline {ratio2:.3f} ({verdict(ratio2 <= t)})")
    return out


# ----------------------------------------------------------------------------- README section
SECTION_BEGIN, SECTION_END = "<!-- scale.py results: begin -->", "<!-- scale.py results: end -->"


def write_readme(blocks: dict[str, list[str]], readme: Path = README) -> None:
    """Replace (or add) one block per size between ``<!-- scale.py SIZE -->`` markers inside the
    results section, so that a rerun of one size leaves the others alone."""
    text = readme.read_text()
    if SECTION_BEGIN not in text:
        text = text.rstrip("\n") + f"\n\n### Scale results (`scale.py --readme` writes this part)\n\n" \
                                   f"{SECTION_BEGIN}\n{SECTION_END}\n"
    head, rest = text.split(SECTION_BEGIN, 1)
    body, tail = rest.split(SECTION_END, 1)
    for size in sorted(blocks, key=float):
        b, e = f"<!-- scale.py {size} -->", f"<!-- /scale.py {size} -->"
        block = b + "\n" + "\n".join(blocks[size]) + "\n" + e
        if b in body and e in body:
            pre, post = body.split(b, 1)
            body = pre + block + post.split(e, 1)[1]
        else:
            # keep blocks in size order
            later = [s for s in SIZES if float(s) > float(size) and f"<!-- scale.py {s} -->" in body]
            if later:
                pre, post = body.split(f"<!-- scale.py {later[0]} -->", 1)
                body = pre + block + "\n\n" + f"<!-- scale.py {later[0]} -->" + post
            else:
                body = body.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(head + SECTION_BEGIN + "\n" + body.strip("\n") + "\n" + SECTION_END + tail)


# ----------------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1e6,1e7", help=f"comma-separated, of {', '.join(SIZES)}")
    p.add_argument("--from-ogb-layout", default=None, metavar="SIZE",
                   help="instead: papers100M's layout -> convert -> partition (fennel) -> train (scale_ogb.py)")
    p.add_argument("--epochs", type=int, default=2, help="epochs of every training run (evaluated once, at the end)")
    p.add_argument("--configs", default="default",
                   help=f"comma-separated subset of {', '.join((*PREP, *CONFIGS))}; 'default' = all but "
                        f"{', '.join(EXTRA_CONFIGS)} (single-process references of the GCN layouts), 'all' = every "
                        "one. generate always runs; partition runs for the parts a chosen graph config needs")
    p.add_argument("--predict-from", default="", metavar="JSON[,JSON]",
                   help="earlier --json files whose runs on smaller graphs predict the memory of a run here; a run "
                        "predicted not to fit the available memory is skipped (runs of smaller sizes in this "
                        "invocation predict too)")
    p.add_argument("--min-free-gib", type=float, default=1.5,
                   help="kill a command when the machine's available memory falls below this (the machine is "
                        "shared: better a failed row than the kernel's OOM killer choosing a victim)")
    p.add_argument("--workdir", default=None,
                   help="where graphs, partitions and runs go (default: a temporary folder; the 10^8-edge graph "
                        "alone is about 4 GiB, each partition of it as much again)")
    p.add_argument("--keep", action="store_true", help="keep the work folder (default: removed at the end)")
    p.add_argument("--partitioner", default="metis",
                   help="of 'fullgraph partition' for the graph-parallel runs (default metis: balanced by node "
                        "count; metis-degree balances by degree, metis-memory by each rank's estimated memory "
                        "for SAGE 3 x 128)")
    p.add_argument("--metis-sample", type=float, default=1.0,
                   help="--metis-sample of 'fullgraph partition': METIS sees this share of the edges (default 1)")
    p.add_argument("--threads", type=int, default=0,
                   help="--threads of every training run (default 0: fullgraph's own default, all cores for a "
                        "single process and cores / P for each of P ranks)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per subprocess before it is killed")
    p.add_argument("--readme", action="store_true", help="write the tables into benchmarks/README.md")
    p.add_argument("--readme-path", default=str(README), help=argparse.SUPPRESS)
    p.add_argument("--json", default=None, help="every record, as JSON (default runs/bench_scale_SIZES.json; "
                                                "written after every command)")
    p.add_argument("--report", default=None, metavar="JSON[,JSON]",
                   help="measure nothing: print the tables of saved --json files (merged: a later file's row "
                        "replaces an earlier one's), and with --readme write them")
    a = p.parse_args(argv)
    a.size_list = [s.strip() for s in a.sizes.split(",") if s.strip()]
    bad = [s for s in a.size_list if s not in SIZES]
    if bad:
        p.error(f"unknown size(s) {bad}; choose from {', '.join(SIZES)}")
    if a.configs in ("default", "all"):
        names = [*PREP, *(c for c in CONFIGS if a.configs == "all" or c not in EXTRA_CONFIGS)]
    else:
        names = [c.strip() for c in a.configs.split(",") if c.strip()]
    bad = [c for c in names if c not in CONFIGS and c not in PREP]
    if bad:
        p.error(f"unknown config(s) {bad}; choose from {', '.join((*PREP, *CONFIGS))}")
    a.train_configs = sorted((c for c in CONFIGS if c in names), key=lambda c: CONFIGS[c][1] > 1)  # singles first
    a.parts = sorted({CONFIGS[c][2] for c in a.train_configs if CONFIGS[c][2]} | ({2, 4} if "partition" in names
                                                                                  else set()))
    return a


def merge(results: list[dict]) -> dict:
    """Several saved runs as one: a later file's row replaces an earlier one for the same size and
    step (generate; partition P) or configuration; the header and baseline are the first file's, and
    the commands of all are listed."""
    out = dict(results[0], prep=[], train=[])
    out["command"] = " + ".join(r.get("command", "benchmarks/scale.py") for r in results)
    out["config"] = " + ".join(dict.fromkeys(r["config"] for r in results))
    out["header"] = list(dict.fromkeys(line for r in results for line in r["header"]))
    prep, train = {}, {}
    for res in results:
        for r in res.get("prep", []):
            prep[(r["size"], r["step"], r.get("parts"))] = r
        for r in res.get("train", []):
            train[(r["size"], r["config"])] = r
    out["prep"] = list(prep.values())
    order = {c: i for i, c in enumerate(sorted(CONFIGS, key=lambda c: CONFIGS[c][1] > 1))}
    out["train"] = sorted(train.values(), key=lambda r: (float(r["size"]), order.get(r["config"], 99)))
    return out


def render(result: dict, readme: Path | None = None) -> list[str]:
    """Print the tables and checks of ``result`` (a finished or a saved run) and, with ``readme``,
    write one block per size into it. Returns the check lines."""
    baseline = result["baseline"]
    gens = {r["size"]: r for r in result["prep"] if r["step"] == "generate"}
    for r in result["prep"]:
        r["gen"] = gens.get(r["size"], r)
    singles = {(r["size"], r["config"]): r["max_peak"] for r in result["train"]
               if r.get("nprocs") == 1 and "error" not in r}
    prep, train = result["prep"], result["train"]
    print("\n=== preparation: time and peak RSS of each command (bytes/edge = (peak - features) / directed edges) ===")
    for line in prep_table(prep, baseline):
        print(line)
    if train:
        print("\n=== training: summary.json of each run (comm = median per epoch, summed over ranks, MB) ===")
        for line in train_table(train, singles, baseline):
            print(line)
    print("\n  " + LEGEND.format(baseline=mib(baseline), busy=FOREIGN_BUSY_CORES))
    lines = checks(prep, train, singles, baseline)
    if lines:
        print("\n=== checks ===")
        for line in lines:
            print("  " + line)
    if readme is not None:
        notes = [*result["header"], result["config"], f"import baseline: {mib(baseline)} MiB"]
        blocks = {}
        for size in dict.fromkeys(r["size"] for r in prep):
            sp = [r for r in prep if r["size"] == size]
            st = [r for r in train if r["size"] == size]
            mine = [c for c in lines if f" {size} " in c]
            blocks[size] = [f"**{size}** ({result['when']}; `{result.get('command', 'benchmarks/scale.py')}`)", "",
                            *[f"* {n}" for n in notes], "", *prep_table(sp, baseline), "",
                            *(train_table(st, singles, baseline) + [""] if st else []),
                            LEGEND.format(baseline=mib(baseline), busy=FOREIGN_BUSY_CORES),
                            *(["", "Checks:", "", *[f"* {c}" for c in mine]] if mine else [])]
        write_readme(blocks, readme)
        print(f"\nwrote {len(blocks)} table(s) into {readme}")
    return lines


LEGEND = ("peak MiB / command peak = ru_maxrss of the command (largest process of its tree, launcher included); "
          "largest rank peak = summary.json; Σ RSS = sampled peak of the summed RSS of the tree (shared pages "
          "counted once per process); 'above import' subtracts the import baseline {baseline} MiB per process; "
          "CONTENDED x = other processes used x > {busy} cores on average during the run. 'largest / single': the "
          "largest rank's peak over the single-process peak of the same model (SAGE 3x128 for the graph runs; GCN "
          "8x128 for pipeline and hybrid, GCN 3x128 for spmm-1d, when --configs includes single-gcn8 / single-gcn3).")


def _from_ogb_layout(a) -> int:
    """``--from-ogb-layout SIZE``: scale_ogb.py's run, with this script's folder, timeout and JSON flags."""
    import scale_ogb

    return scale_ogb.main(["--size", a.from_ogb_layout, "--timeout", str(a.timeout),
                           *(["--workdir", a.workdir] if a.workdir else []), *(["--keep"] if a.keep else []),
                           *(["--json", a.json] if a.json else [])])


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.from_ogb_layout:
        return _from_ogb_layout(a)
    MIN_FREE[0] = a.min_free_gib * 2**30
    if a.report:
        render(merge([json.loads(Path(f).read_text()) for f in a.report.split(",") if f]),
               Path(a.readme_path) if a.readme else None)
        return 0
    started = time.perf_counter()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"scale.py, {when}", flush=True)
    header = machine_lines()  # printed as it is taken
    sizes = ", ".join(f"{s} (R-MAT scale {SIZES[s][0]}, {SIZES[s][1]:,} draws)" for s in a.size_list)
    config_line = (f"configuration: sizes {sizes}; "
                   f"{FEATURES} features, {CLASSES} classes, seed 0; partitions ({a.partitioner}"
                   f"{f', METIS on {a.metis_sample:g} of the edges' if a.metis_sample < 1 else ''}) P = "
                   f"{', '.join(map(str, a.parts)) or 'none'}; training runs: {', '.join(a.train_configs) or 'none'}; "
                   f"{a.epochs} epochs, evaluation at the last; threads {a.threads or 'default'}; "
                   f"timeout {a.timeout:.0f} s per command")
    print(config_line, flush=True)
    own_tmp = a.workdir is None
    work = Path(tempfile.mkdtemp(prefix="fg-scale-") if own_tmp else a.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder: {work}{' (kept)' if a.keep else ' (removed at the end)'}", flush=True)

    baseline = import_baseline(a.timeout, work / "logs" / "baseline.log")
    a.baseline = baseline
    a.history = []
    for path in filter(None, a.predict_from.split(",")):
        old = json.loads(Path(path).read_text())
        edges = {r["size"]: r.get("edges") for r in old.get("prep", []) if r.get("step") == "generate"}
        a.history += [dict(r, edges=r.get("edges") or edges.get(r["size"])) for r in old.get("train", [])]
    print(f"import baseline (peak RSS of a process importing torch and fullgraph's training modules): "
          f"{mib(baseline)} MiB\n", flush=True)
    command = " ".join(["benchmarks/scale.py", *(argv if argv is not None else sys.argv[1:])])
    result = {"when": when, "command": command, "header": header, "config": config_line, "baseline": baseline,
              "prep": [], "train": []}
    json_path = Path(a.json or REPO / "runs" / f"bench_scale_{'_'.join(a.size_list)}.json")

    def save():
        slim = dict(result)
        for key in ("prep", "train"):
            slim[key] = [{k: v for k, v in r.items() if k not in ("output", "gen")} for r in result[key]]
        write_json(json_path, slim)

    try:
        for size in a.size_list:
            print(f"=== {size}: R-MAT scale {SIZES[size][0]}, {SIZES[size][1]:,} draws ===", flush=True)
            gen = step_generate(size, work, a)
            gen["gen"] = gen
            result["prep"].append(gen)
            if "error" in gen:
                print(f"  generate: FAILED: {gen['error']}", flush=True)
                save()
                continue
            print(f"  generate: {gen['nodes']:,} nodes, {gen['edges']:,} directed edges, "
                  f"{gen['disk_bytes'] / MIB:,.0f} MiB on disk; {gen['wall_s']:.1f} s, peak {mib(gen['peak_rss'])} MiB"
                  f" = {(gen['peak_rss'] - gen['feature_bytes']) / gen['edges']:.0f} B/edge + features"
                  f"{contended(gen)}", flush=True)
            pdirs: dict[int, dict] = {}
            for parts in a.parts:
                pr = step_partition(size, parts, gen, work, a)
                pr["gen"] = gen
                pdirs[parts] = pr
                result["prep"].append(pr)
                if "error" in pr:
                    print(f"  partition P={parts}: FAILED: {pr['error']}", flush=True)
                else:
                    print(f"  partition P={parts}: {pr['wall_s']:.1f} s, peak {mib(pr['peak_rss'])} MiB "
                          f"(bound {mib(pr['bound'])} MiB: {verdict(pr['peak_rss'] <= pr['bound'])}), "
                          f"α {pr.get('alpha')}{contended(pr)}", flush=True)
                save()
            for name in a.train_configs:
                tr = step_train(size, name, gen, pdirs, work, a)
                result["train"].append(tr)
                a.history.append(tr)
                if "error" in tr:
                    print(f"  {CONFIGS[name][0]}: {'' if tr.get('skipped') else 'FAILED: '}{tr['error']}", flush=True)
                else:
                    print(f"  {CONFIGS[name][0]}: {tr['epoch_time_s']:.2f} s/epoch, largest rank peak "
                          f"{mib(tr['max_peak'])} MiB (estimate {est_text(tr['estimates'])}), ranks "
                          f"{' '.join(mib(p) for p in tr['peaks'])} MiB; comm/epoch {comm_text(tr['comm'])} MB; "
                          f"wall {tr['wall_s']:.0f} s, foreign load {tr['foreign_cores']:.2f} cores{contended(tr)}",
                          flush=True)
                save()
            if not a.keep:  # the next size needs the disk more than this one's folders
                for path in work.glob(f"rmat-{size}*"):
                    shutil.rmtree(path, ignore_errors=True)
                shutil.rmtree(work / "cache", ignore_errors=True)
    finally:
        save()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)

    lines = render(result, Path(a.readme_path) if a.readme else None)
    failed = [r for r in result["prep"] + result["train"] if "error" in r and not r.get("skipped")]
    skipped = [r for r in result["train"] if r.get("skipped")]
    result["checks"] = lines
    result["total_s"] = time.perf_counter() - started
    save()
    print(f"\n{len(failed)} failed or timed-out commands, {len(skipped)} skipped; "
          f"total {result['total_s'] / 60:.1f} min; wrote {json_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
