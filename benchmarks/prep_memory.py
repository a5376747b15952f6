"""Preparation with bounded memory: time and peak RSS of each step from an R-MAT graph to the
partition folder, in bytes per directed edge.

Each step runs in a fresh process (``--step``, started by this script), reading what the step
before it wrote to a work folder, so that every peak is the step's own:

1. **generate**: ``fullgraph.data.synthetic.rmat(scale, edges, num_features)``: the edge draws,
   the symmetric CSR without repeats or self loops, labels, features, split, and the ``Graph``'s
   checks; then, timed apart, ``Graph.fingerprint()`` and ``write_native`` (the dataset folder
   ``fullgraph generate`` writes, read by the next steps).
2. **partition**: ``partition_nodes(graph, parts, "metis")`` (or ``--method``) on the graph loaded
   from that folder (``load_native``: memory-mapped, int32 edge ids widened to int64 once).
   METIS's own share is the time inside ``pymetis.part_graph``.
3. **write**: ``PartitionBook.build`` and ``save_partition`` (every part file, streamed and hashed)
   for the parts of step 2.
4. **command**: ``fullgraph partition --dataset FOLDER --parts P --out ...`` (through
   ``fullgraph.cli.main`` in this process, with METIS timed as above): loading, the exact check of
   the structure, METIS, the book and the part files. Its **process peak** (imports and loading
   included) is the figure the budget is about: at most 60 bytes per directed edge plus one copy
   of the features. It also checks that its part files are byte for byte those of step 3.

For each step it prints the wall and CPU time, the process's RSS high-water mark (``VmHWM``), the
RSS before the step's work (interpreter, imports and, for steps 2-3, the loaded graph), the rise
above that, and ``bytes/edge``: the peak less one copy of the features, per directed edge of the
final graph. The high-water mark is reset just before the measured work of steps 1-3
(``/proc/self/clear_refs`` 5, Linux >= 4.0); step 4 reports its whole process. Features are
memory-mapped in steps 2-4: their pages count in RSS once read (the graph's finiteness check reads
them all).

Its latest results are in ``benchmarks/README.md`` ("Preparation memory").

Usage::

    .venv/bin/python benchmarks/prep_memory.py --scale 17 --edges 600000       # ~10^6 edges, ~1 min
    .venv/bin/python benchmarks/prep_memory.py --scale 20 --edges 6000000      # ~10^7 edges, minutes
    .venv/bin/python benchmarks/prep_memory.py --scale 23 --edges 50000000 --method random  # 10^8
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import hwm_bytes as hwm, print_header, reset_hwm as try_reset_hwm, rss_bytes as rss, write_json


MIB = 2**20
STEPS = ("generate", "partition", "write", "command")


# ------------------------------------------------------------------------------ memory readings
def reset_hwm() -> None:
    """Every peak here is a step's own only after this reset: a step that cannot reset stops
    rather than report a peak that includes its loading."""
    if not try_reset_hwm():
        raise SystemExit("cannot reset the RSS high-water mark (/proc/self/clear_refs 5 needs Linux >= 4.0)")


class Clock:
    """Wall and CPU seconds (this process, every thread) since it was made."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


# ------------------------------------------------------------------------------ the steps
def _timed_metis() -> dict:
    """Wrap ``pymetis.part_graph`` so that the wall and CPU time spent inside METIS is recorded."""
    import pymetis

    box = {"metis_s": 0.0, "metis_cpu_s": 0.0}
    inner = pymetis.part_graph

    def part_graph(*args, **kwargs):
        clock = Clock()
        try:
            return inner(*args, **kwargs)
        finally:
            wall, cpu = clock.read()
            box["metis_s"] += wall
            box["metis_cpu_s"] += cpu

    pymetis.part_graph = part_graph
    return box


def _generate(rec: dict, a: argparse.Namespace, folder: Path):
    from fullgraph.data.formats.native import write_native
    from fullgraph.data.synthetic import rmat

    rec["rss_before"] = rss()
    reset_hwm()
    clock = Clock()
    g = rmat(a.scale, a.edges, num_features=a.features, seed=a.seed)
    rec["time_s"], rec["cpu_s"] = clock.read()
    rec["peak"] = hwm()
    clock = Clock()
    g.fingerprint()
    rec["fingerprint_s"] = clock.read()[0]
    clock = Clock()
    write_native(g, folder, preprocessed=True, source="benchmarks/prep_memory.py")
    rec["write_native_s"] = clock.read()[0]
    rec["process_peak"] = hwm()
    return g


def _partition(rec: dict, a: argparse.Namespace, g, work: Path) -> None:
    """METIS (or ``--method``) alone, on the graph loaded before the reset."""
    import numpy as np

    from fullgraph.partition.partitioners import partition_nodes

    box = _timed_metis()
    reset_hwm()
    clock = Clock()
    node_part = partition_nodes(g, a.parts, a.method, seed=a.seed)
    rec["time_s"], rec["cpu_s"] = clock.read()
    rec.update(box)
    np.save(work / "node_part.npy", node_part.numpy())


def _write(rec: dict, a: argparse.Namespace, g, work: Path) -> None:
    """The book and the part files, from the node assignment the partition step saved."""
    import numpy as np
    import torch

    from fullgraph.partition import PartitionBook, save_partition

    node_part = torch.from_numpy(np.load(work / "node_part.npy"))
    reset_hwm()
    clock = Clock()
    book = PartitionBook.build(g, node_part)
    rec["build_s"] = clock.read()[0]
    rec["peak_build"] = hwm()
    save_partition(book, g, work / "parts-write", {"method": a.method, "seed": a.seed, "weight": "nodes"})
    rec["time_s"], rec["cpu_s"] = clock.read()


def _command(rec: dict, a: argparse.Namespace, folder: Path, work: Path) -> None:
    """``fullgraph partition`` in this process, from a fresh cache (so METIS runs)."""
    from fullgraph.cli import main as fullgraph_main

    os.environ["FULLGRAPH_CACHE"] = str(work / "cache")  # a fresh cache: METIS runs
    box = _timed_metis()
    rec["rss_before"] = rss()
    clock = Clock()
    argv = ["partition", "--dataset", str(folder), "--parts", str(a.parts), "--seed", str(a.seed),
            "--partitioner", a.method, "--out", str(work / "parts-command")]
    code = fullgraph_main(argv)
    if code != 0:
        raise SystemExit(f"fullgraph {' '.join(argv)} exited with {code}")
    rec["time_s"], rec["cpu_s"] = clock.read()
    rec.update(box)
    rec["peak"] = rec["process_peak"] = hwm()
    if (work / "parts-write").is_dir():
        rec["same_files_as_write"] = all(
            (work / "parts-write" / f"part-{i}" / "part.pt").read_bytes()
            == (work / "parts-command" / f"part-{i}" / "part.pt").read_bytes() for i in range(a.parts))


def run_step(step: str, a: argparse.Namespace, work: Path) -> dict:
    """One step in this process; numpy, torch and the native format are imported first, so that
    they belong to every step's baseline alike."""
    for module in ("numpy", "torch", "fullgraph.data.formats.native"):
        importlib.import_module(module)
    from fullgraph.data.formats.native_read import load_native

    rec: dict = {"step": step}
    folder = work / "graph"
    if step == "generate":
        g = _generate(rec, a, folder)
    elif step in ("partition", "write"):
        g = load_native(folder)
        rec["rss_before"] = rss()
        (_partition if step == "partition" else _write)(rec, a, g, work)
        rec["peak"] = rec["process_peak"] = hwm()
    elif step == "command":
        _command(rec, a, folder, work)
        g = load_native(folder)
    else:
        raise SystemExit(f"unknown step {step!r}")
    rec["edges"], rec["nodes"] = g.num_edges, g.num_nodes
    rec["feature_bytes"] = g.x.numel() * g.x.element_size()
    return rec


# ------------------------------------------------------------------------------ the driver
def pymetis_version() -> str:
    """pymetis and the width of METIS's indices, which decides METIS's bytes per edge."""
    import numpy as np

    try:
        import pymetis

        return (f"pymetis {importlib.metadata.version('pymetis')} "
                f"(METIS idx_t {np.dtype(pymetis.zero_copy_dtype()).name})")
    except Exception:  # noqa: BLE001
        return "pymetis missing"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=17, help="2**scale nodes (default 17)")
    ap.add_argument("--edges", type=int, default=600_000,
                    help="R-MAT edge draws; about twice as many directed edges after symmetrizing")
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--method", default="metis",
                    help="partitioner of steps 2 and 4 (default metis; 'random' measures the book and the "
                         "part files of a graph too large for METIS here, with a far larger halo)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, in order, from {', '.join(STEPS)}")
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one, removed at the end)")
    ap.add_argument("--json", default=None, help="also write the records to this file")
    ap.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: run one step here
    a = ap.parse_args()
    if a.step is not None:
        print("RESULT " + json.dumps(run_step(a.step, a, Path(a.work))), flush=True)
        return 0

    steps = a.steps.split(",")
    print_header(machine_extra=[f"load average {os.getloadavg()[0]:.1f}"], versions_extra=[pymetis_version()])
    print(f"R-MAT scale {a.scale} ({2**a.scale} nodes), {a.edges} edge draws, {a.features} features, "
          f"{a.parts} parts by {a.method}{' (volume objective)' if a.method == 'metis' else ''}, seed {a.seed}; "
          f"steps: {', '.join(steps)}")
    ctx = tempfile.TemporaryDirectory(prefix="fg-prep-") if a.work is None else None
    work = Path(ctx.name if ctx else a.work)
    work.mkdir(parents=True, exist_ok=True)
    records = []
    try:
        for step in steps:
            cmd = [sys.executable, __file__, "--step", step, "--work", str(work), "--scale", str(a.scale),
                   "--edges", str(a.edges), "--features", str(a.features), "--parts", str(a.parts),
                   "--method", a.method, "--seed", str(a.seed)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                print(f"{step}: failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
                return 1
            rec = json.loads(lines[-1][len("RESULT "):])
            records.append(rec)
            report(rec)
    finally:
        if ctx is not None:
            ctx.cleanup()
    if a.json:
        write_json(a.json, records)
    return 0


def report(r: dict) -> None:
    e, fx = r["edges"], r["feature_bytes"]
    rise = r["peak"] - r["rss_before"]
    notes = []
    if r.get("metis_s"):
        notes.append(f"METIS {r['metis_s']:.1f} s wall, {r['metis_cpu_s']:.1f} s CPU "
                     f"({100 * r['metis_s'] / r['time_s']:.0f}% of the step's wall time)")
    if "build_s" in r:
        notes.append(f"book build {r['build_s']:.1f} s (peak {r['peak_build'] / MIB:.0f} MiB)")
    if "fingerprint_s" in r:
        notes.append(f"then fingerprint {r['fingerprint_s']:.1f} s, write_native {r['write_native_s']:.1f} s "
                     f"(process peak {r['process_peak'] / MIB:.0f} MiB)")
    if r.get("same_files_as_write") is not None:
        notes.append(f"part files identical to step 'write': {r['same_files_as_write']}")
    print(f"{r['step']:>9}: {r['nodes']} nodes, {e} directed edges, features {fx / MIB:.0f} MiB; "
          f"{r['time_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU")
    for note in notes:
        print(f"{'':>11}{note}")
    print(f"{'':>11}peak {r['peak'] / MIB:.0f} MiB = {(r['peak'] - fx) / e:.1f} bytes/edge + features; "
          f"before the step {r['rss_before'] / MIB:.0f} MiB; rise {rise / MIB:.0f} MiB = {rise / e:.1f} bytes/edge")


if __name__ == "__main__":
    sys.exit(main())
