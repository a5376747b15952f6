"""Converting ogbn-papers100M's binary layout in bounded memory (issue 38 §2).

For each size, a synthetic folder in papers100M's exact layout (``fullgraph.data.synthetic.ogb``:
R-MAT structure, directed, deflate-compressed ``.npz`` members, 128 float32 features, 1.4% of the
nodes labelled, NaN elsewhere) is written, then converted by the real command line in its own
subprocess::

    fullgraph convert --dataset FOLDER --out NATIVE

and measured: wall time, and the peak RSS the kernel reports for it (``os.wait4``'s ``ru_maxrss``,
which counts the driver's own RSS too: so the driver imports nothing heavy before the runs).
Target: peak <= 1.5 GiB + 24 bytes per node, whatever E. Sizes keep papers100M's sparsity
(1.6 B edges on 111 M nodes: 14.5 per node): ``1e6`` = 2^16 nodes, ``1e7`` = 2^19, ``1e8`` = 2^23.

From the rows with full read blocks (>= 10^7 edges), the peak is fitted as ``a + b N`` and extrapolated to
papers100M (N = 111,059,956, E = 1,615,685,872), with the disk the conversion needs: the input, the
native folder, and the edge spill (``write_native_edges``: 8 bytes per stored direction of an edge,
twice over while the spill is split into buckets).

Edge data (issue 51): ``--edge-features 0,8`` converts each size once per count of edge features,
the folder's ``edge_feat`` member then holding that many float32 per edge, kept by the converter as
edge data (``edge_attr.npy``, through the on-disk sort). Every graph of the run is then made of
distinct draws (a graph with edge features lists each edge once), so the rows of one size have the
same edges. ``--parts P`` also writes each converted folder as P random parts with the streaming part
writer (``save_partition_streaming``, in its own process, measured the same way).

Usage: ``python benchmarks/convert_memory.py [--sizes 1e6,1e7,1e8] [--work DIR] [--keep]
[--edge-features 0,8] [--parts 4]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

from _harness import GIB, REPO, print_header, write_json

SIZES = MappingProxyType({"1e5": 12, "1e6": 16, "1e7": 19, "1e8": 23})
"""Edges -> log2 of the node count (papers100M's ~14.5 edges per node)."""
PAPERS = MappingProxyType({"nodes": 111_059_956, "edges": 1_615_685_872, "features": 128})
FEATURES = 128
TARGET_FIXED, TARGET_PER_NODE = 1.5 * GIB, 24


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _timed(cmd: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (bytes) and the last output line of ``cmd`` in a subprocess."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed: {out.strip().splitlines()[-1:]}")
    return time.perf_counter() - t0, usage.ru_maxrss * 1024, (out.strip().splitlines() or [""])[-1]


def run_size(label: str, work: Path, keep: bool, edge_features: int = 0, distinct: bool = False,
             parts: int = 0) -> dict:
    scale, edges = SIZES[label], int(float(label))
    tag = f"{label}-e{edge_features}" if distinct else label
    src, dst, prt = work / f"papers-{tag}", work / f"native-{tag}", work / f"parts-{tag}"
    for folder in (src, dst, prt):
        shutil.rmtree(folder, ignore_errors=True)
    write = [sys.executable, "-c", "import sys; from fullgraph.data.synthetic.ogb import write_rmat_ogb_binary as w; "
             f"w(sys.argv[1], {scale}, {edges}, num_features={FEATURES}, edge_features={edge_features}, "
             f"distinct={distinct})", str(src)]
    t_write, rss_write, _ = _timed(write)
    t, peak, line = _timed([sys.executable, "-m", "fullgraph", "convert", "--dataset", str(src), "--out", str(dst)])
    n = 1 << scale
    stored = _stored_edges(dst)
    row = {"size": label, "nodes": n, "edges": edges, "stored_edges": stored, "features": FEATURES,
           "edge_features": edge_features, "write_s": round(t_write, 1),
           "write_peak_bytes": rss_write, "input_bytes": _du(src), "native_bytes": _du(dst), "convert_s": round(t, 1),
           "peak_bytes": peak, "bytes_per_node": peak / n, "bytes_per_edge": peak / edges,
           "target_bytes": TARGET_FIXED + TARGET_PER_NODE * n, "convert_line": line}
    row["pass"] = peak <= row["target_bytes"]
    if parts:
        code = ("import sys, numpy as np; from fullgraph.partition.stream_store import save_partition_streaming as s; "
                f"s(sys.argv[1], np.random.default_rng(0).integers(0, {parts}, {n}).astype(np.int8), sys.argv[2])")
        t_parts, peak_parts, _ = _timed([sys.executable, "-c", code, str(dst), str(prt)])
        row |= {"parts": parts, "parts_s": round(t_parts, 1), "parts_peak_bytes": peak_parts,
                "parts_bytes_per_edge": peak_parts / stored}
    if not keep:
        for folder in (src, dst, prt):
            shutil.rmtree(folder, ignore_errors=True)
    return row


def _stored_edges(folder: Path) -> int:
    import json

    return int(json.loads((folder / "meta.json").read_text())["counts"]["num_edges"])


FULL_BLOCKS = 10**7
"""From this many edges on, every read block is full (64 MiB), so the blocks' temporaries are a
constant: smaller rows measure the interpreter and partial blocks, not the slope."""


def extrapolate(rows: list[dict]) -> dict | None:
    """Peak ~ a + b N fitted to the rows with full blocks (the writer holds arrays of N, never of E:
    two int64 and three bool per node, 19 bytes), extrapolated to papers100M with its disk."""
    full = [r for r in rows if r["edges"] >= FULL_BLOCKS]
    if len(full) < 2:
        return None
    import numpy as np

    a = np.array([[1.0, r["nodes"]] for r in full])
    coef, *_ = np.linalg.lstsq(a, np.array([r["peak_bytes"] for r in full], dtype=float), rcond=None)
    n, e, f = PAPERS["nodes"], PAPERS["edges"], PAPERS["features"]
    stored = 2 * e  # both directions, before duplicates go
    native = 8 * (n + 1) + 4 * stored + 4 * n * f + 8 * n + 3 * n
    return {"fixed_bytes": coef[0], "per_node": coef[1], "papers100M_peak_bytes": float(coef @ [1, n]),
            "papers100M_target_bytes": TARGET_FIXED + TARGET_PER_NODE * n,
            "papers100M_native_bytes": native, "papers100M_spill_peak_bytes": 2 * 8 * stored}


def report(rows: list[dict], fit: dict | None) -> None:
    print(f"\n{'size':>5} {'nodes':>10} {'edges':>12} {'e.feat':>6} {'write s':>8} {'convert s':>9} {'peak MiB':>9} "
          f"{'B/node':>7} {'B/edge':>7} {'target MiB':>10} {'verdict':>7}")
    for r in rows:
        print(f"{r['size']:>5} {r['nodes']:>10,} {r['edges']:>12,} {r['edge_features']:>6} {r['write_s']:>8} "
              f"{r['convert_s']:>9} {r['peak_bytes'] / 2**20:>9.0f} {r['bytes_per_node']:>7.1f} "
              f"{r['bytes_per_edge']:>7.2f} {r['target_bytes'] / 2**20:>10.0f} {'PASS' if r['pass'] else 'FAIL':>7}")
    if any("parts" in r for r in rows):
        print(f"\nstreamed part writer (random parts; B/edge per stored directed edge):\n{'size':>5} {'e.feat':>6} "
              f"{'stored edges':>13} {'parts':>5} {'s':>6} {'peak MiB':>9} {'B/edge':>7}")
        for r in rows:
            if "parts" in r:
                print(f"{r['size']:>5} {r['edge_features']:>6} {r['stored_edges']:>13,} {r['parts']:>5} "
                      f"{r['parts_s']:>6} {r['parts_peak_bytes'] / 2**20:>9.0f} {r['parts_bytes_per_edge']:>7.2f}")
    if fit:
        print(f"\nfit over the rows of >= {FULL_BLOCKS:.0e} edges: peak = {fit['fixed_bytes'] / 2**20:.0f} MiB + "
              f"{fit['per_node']:.1f} B/node (the writer's arrays of N: 19 B/node)")
        print(f"papers100M (N = {PAPERS['nodes']:,}, E = {PAPERS['edges']:,}): peak ~{fit['papers100M_peak_bytes'] / GIB:.1f}"
              f" GiB (target {fit['papers100M_target_bytes'] / GIB:.1f} GiB); disk: native folder "
              f"~{fit['papers100M_native_bytes'] / 1e9:.0f} GB, edge spill up to "
              f"~{fit['papers100M_spill_peak_bytes'] / 1e9:.0f} GB beside it, plus the input (~57 GB of features "
              "+ the edge list)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1e6,1e7,1e8")
    ap.add_argument("--work", default=None, help="where the folders go (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the folders")
    ap.add_argument("--json", default=None, help="write the results here too")
    ap.add_argument("--edge-features", default=None,
                    help="comma-separated counts of float32 features per edge (e.g. 0,8): each size converted once "
                         "per count, over the same distinct edges")
    ap.add_argument("--parts", type=int, default=0, help="also write each folder as this many random parts, streamed")
    a = ap.parse_args()
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="convert-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    counts = [int(k) for k in a.edge_features.split(",")] if a.edge_features else [0]
    for label in a.sizes.split(","):
        for k in counts:
            rows.append(run_size(label, work, a.keep, k, distinct=a.edge_features is not None, parts=a.parts))
            print(f"{label} ({k} edge features): {rows[-1]['convert_line']}", flush=True)
    fit = extrapolate([r for r in rows if r["edge_features"] == counts[0]])
    print_header()  # after the runs: it imports torch, whose pages a child would count in its peak
    report(rows, fit)
    if a.json:
        write_json(a.json, {"rows": rows, "fit": fit})
    return 0 if all(r["pass"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
