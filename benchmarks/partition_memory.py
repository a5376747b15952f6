"""Writing a partition folder: the in-memory writer against the streaming one, peak memory per node
and per edge.

Both writers make the same folder from the same native dataset folder and node → part assignment:

* **memory**: ``load_native`` (memory-mapped arrays, edge ids widened to int64), then
  ``PartitionBook.build`` and ``save_partition``: what ``fullgraph partition`` does today once it has
  the assignment;
* **stream**: ``save_partition_streaming`` (:mod:`fullgraph.partition.stream_store`): plain reads of
  blocks, one part's arrays at a time.

Each runs in a fresh process started by this script, and its peak is the kernel's account of that
child (``os.wait4``'s ``ru_maxrss``): imports included, and every page of a memory map that was read
(the in-memory writer's features and structure count there; the page cache the streaming writer
reads through does not). Linux also counts in it the RSS of the process the child was started from,
so the driver never imports torch, and prints its own peak as the floor it sets. The child also reports its RSS after the imports, so that the table shows
the writer's own rise above them. The dataset folder is made first by ``fullgraph generate rmat``
(also measured), and the assignment is ``partition_nodes(graph, P, "random", seed)`` (drawn once, in
a child, and kept as int16, the type a streaming partitioner hands over). The script checks that
the two folders are the same: ``partition.json`` equal and every part file equal byte for byte.

Per node and per edge: the peak divided by the graph's nodes, or by its directed edges. The
streaming writer's peak is mostly the largest part's own file (its feature rows: with a random
assignment nearly every node is in the halo of every part), so the table gives that part's local
nodes, local edges and file size too.

Usage::

    .venv/bin/python benchmarks/partition_memory.py                            # scale 20, ~10^7 edges
    .venv/bin/python benchmarks/partition_memory.py --scale 16 --edges 300000  # a quick look
    .venv/bin/python benchmarks/partition_memory.py --work /tmp/pm --keep      # reuse the folder
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import REPO, environment, hwm_bytes, print_header, rss_bytes, write_json

MIB = 2**20
WRITERS = ("memory", "stream")


# ------------------------------------------------------------------------------ the children
def child(step: str, a: argparse.Namespace, work: Path) -> dict:
    """One measured step, run in this (fresh) process; returns what the driver prints."""
    import numpy as np
    import torch

    from fullgraph.data.formats.native_read import load_native
    from fullgraph.partition import PartitionBook, partition_nodes, save_partition
    from fullgraph.partition.stream_store import save_partition_streaming

    folder, meta = work / "graph", {"method": "random", "seed": a.seed, "weight": "nodes"}
    rec = {"step": step, "rss_imports": rss_bytes()}
    t0 = time.perf_counter()
    if step == "assign":
        node_part = partition_nodes(load_native(folder), a.parts, "random", seed=a.seed)
        np.save(work / "node_part.npy", node_part.numpy().astype(np.int16))
    elif step == "memory":
        g = load_native(folder)
        node_part = torch.from_numpy(np.load(work / "node_part.npy").astype(np.int64))
        save_partition(PartitionBook.build(g, node_part), g, work / "parts-memory", meta)
    elif step == "stream":
        node_part = np.load(work / "node_part.npy")
        save_partition_streaming(folder, node_part, work / "parts-stream", meta)
    else:
        raise SystemExit(f"unknown step {step!r}")
    rec["wall_s"] = time.perf_counter() - t0
    return rec


def run_child(cmd: list[str], log: Path) -> dict:
    """Run ``cmd`` with its output in ``log``; its wall time, exit status, peak RSS (``ru_maxrss``,
    KiB on Linux) and the record it printed, if any."""
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here: usage is this child's own
    code = os.waitstatus_to_exitcode(status)
    text = log.read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
    rec = json.loads(lines[-1][len("RESULT "):]) if lines else {}
    return rec | {"returncode": code, "peak": usage.ru_maxrss * 1024, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "process_wall_s": time.perf_counter() - t0, "tail": text[-1500:]}


# ------------------------------------------------------------------------------ the driver
def same_folders(a: Path, b: Path) -> bool:
    """``partition.json`` equal and every part file equal byte for byte (compared in blocks)."""
    doc = json.loads((a / "partition.json").read_text())
    if doc != json.loads((b / "partition.json").read_text()):
        return False
    for entry in doc["files"]:
        with open(a / entry["path"], "rb") as fa, open(b / entry["path"], "rb") as fb:
            while True:
                x, y = fa.read(1 << 24), fb.read(1 << 24)
                if x != y:
                    return False
                if not x:
                    break
    return True


def graph_counts(work: Path) -> dict:
    meta = json.loads((work / "graph" / "meta.json").read_text())["counts"]
    return {"nodes": meta["num_nodes"], "edges": meta["num_edges"], "features": meta["num_features"]}


def largest_part(work: Path, features: int) -> dict:
    doc = json.loads((work / "parts-stream" / "partition.json").read_text())
    big = max(doc["part_stats"], key=lambda r: r["inner"] + r["halo"])
    size = next(f["bytes"] for f in doc["files"] if f["part"] == big["part"])
    return {"part": big["part"], "local_nodes": big["inner"] + big["halo"], "local_edges": big["edges"],
            "file_bytes": size, "feature_bytes": (big["inner"] + big["halo"]) * features * 4,
            "replication_factor": doc["replication_factor"]}


def report(rec: dict, counts: dict) -> str:
    n, e = counts["nodes"], counts["edges"]
    peak, rise = rec["peak"], rec["peak"] - rec.get("rss_imports", 0)
    return (f"{rec['step']:>9} {rec.get('wall_s', rec['process_wall_s']):8.1f} {rec['cpu_s']:7.1f} "
            f"{peak / MIB:9.0f} {peak / n:9.0f} {peak / e:8.1f} {rise / MIB:9.0f} {rise / n:9.0f} {rise / e:8.1f}")


def generate(a: argparse.Namespace, work: Path) -> dict | None:
    """``fullgraph generate rmat`` into ``work/graph`` (skipped when ``--keep`` finds it there)."""
    if a.keep and (work / "graph" / "meta.json").is_file():
        return None
    cmd = [sys.executable, "-m", "fullgraph", "generate", "rmat", "--scale", str(a.scale), "--edges",
           str(a.edges), "--features", str(a.features), "--seed", str(a.seed), "--out", str(work / "graph")]
    rec = run_child(cmd, work / "generate.log") | {"step": "generate"}
    if rec["returncode"] != 0:
        raise SystemExit(f"generate failed ({rec['returncode']}): {rec['tail']}")
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=20, help="2**scale nodes (default 20)")
    ap.add_argument("--edges", type=int, default=5_150_000,
                    help="R-MAT edge draws (default 5150000: about 10^7 directed edges after symmetrizing)")
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="reuse the dataset folder found in --work")
    ap.add_argument("--json", default=None, help="also write the records to this file")
    ap.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: run one step here
    a = ap.parse_args()
    if a.step is not None:
        print("RESULT " + json.dumps(child(a.step, a, Path(a.work))), flush=True)
        return 0
    # torch's numbers are read in a child: a child's ru_maxrss counts the RSS of the process it was
    # started from (Linux keeps the larger of the two at exec), so this driver must stay small
    print_header(environment(isolated=True), machine_extra=[f"load average {os.getloadavg()[0]:.1f}"])
    ctx = tempfile.TemporaryDirectory(prefix="fg-partmem-") if a.work is None else None
    work = Path(ctx.name if ctx else a.work)
    work.mkdir(parents=True, exist_ok=True)
    try:
        return drive(a, work)
    finally:
        if ctx is not None:
            ctx.cleanup()


def drive(a: argparse.Namespace, work: Path) -> int:
    records = [r for r in [generate(a, work)] if r is not None]
    counts = graph_counts(work)
    print(f"R-MAT scale {a.scale}: {counts['nodes']} nodes, {counts['edges']} directed edges, {a.features} "
          f"features; {a.parts} parts, random assignment (seed {a.seed})")
    for step in ("assign", *WRITERS):
        cmd = [sys.executable, __file__, "--step", step, "--work", str(work), "--parts", str(a.parts),
               "--seed", str(a.seed)]
        rec = run_child(cmd, work / f"{step}.log")
        if rec["returncode"] != 0 or "wall_s" not in rec:
            print(f"{step}: failed ({rec['returncode']}): {rec['tail']}")
            return 1
        records.append(rec)
    big = largest_part(work, counts["features"])
    same = same_folders(work / "parts-memory", work / "parts-stream")
    print(f"{'step':>9} {'wall s':>8} {'CPU s':>7} {'peak MiB':>9} {'B/node':>9} {'B/edge':>8} "
          f"{'rise MiB':>9} {'B/node':>9} {'B/edge':>8}")
    for rec in records:
        print(report(rec, counts))
    print(f"largest part ({big['part']}): {big['local_nodes']} local nodes, {big['local_edges']} local edges, "
          f"file {big['file_bytes'] / MIB:.0f} MiB (features {big['feature_bytes'] / MIB:.0f} MiB); replication "
          f"factor {big['replication_factor']:.2f}; the two folders identical: {same}")
    print(f"this driver's own peak, a floor under every child's: {hwm_bytes() / MIB:.0f} MiB")
    if a.json:
        write_json(a.json, {"counts": counts, "largest_part": big, "identical": same,
                            "records": [{k: v for k, v in r.items() if k != "tail"} for r in records]})
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
