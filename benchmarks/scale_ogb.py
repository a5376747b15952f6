"""From papers100M's layout to training, end to end on this machine (issue 38 §4).

``python benchmarks/scale.py --from-ogb-layout SIZE`` (or this script with ``--size``) runs every
step as the real command line in its own subprocess (``_scale_run.run_command``: wall time, the
kernel's peak RSS of the step's largest process, the foreign load), and the disk each leaves:

1. **write**: a synthetic folder in ogbn-papers100M's exact binary layout
   (``fullgraph.data.synthetic.ogb``: R-MAT, directed, compressed ``.npz`` members);
2. **convert**: ``fullgraph convert --dataset FOLDER --out NATIVE`` (streamed, bounded memory);
3. **partition**: ``fullgraph partition --dataset NATIVE --partitioner fennel --parts P`` balanced
   for SAGE 3 x 128 (target: peak <= 12 B per node + 1 GiB);
4. **train** (``1e8`` only): ``fullgraph train --parallel graph --nprocs 4`` on those parts, SAGE
   3 x 128, 2 epochs: epoch time, peak per rank, bytes per epoch.

Sizes: ``1e8`` = scale 20 (1,048,576 nodes), 65,000,000 R-MAT draws stored as directed edges (about
1.1 x 10^8 once symmetrized: ``scale.py``'s 10^8 graph), 128 features, P = 4; ``1e9`` = scale 25
(33,554,432 nodes), 10^9 draws, 32 features, P = 16, converted and partitioned only (training it
is for a cluster); ``1e6`` = scale 14, 500,000 draws, 32 features, P = 4: a smoke test.

A step whose record is in ``WORK/steps.json`` with its output present is not run again
(``--workdir`` to resume a long run). At the end, the same table for the real papers100M on a
16-machine cluster, from ``fullgraph.plan``'s estimates (per-rank peak, halo bytes per epoch) with
the replication factor fennel reached here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from types import MappingProxyType

from _harness import REPO, print_header, write_json
from _scale_run import fg, first_error, run_command

SIZES = MappingProxyType({"1e6": (14, 500_000, 32, 4, True), "1e8": (20, 65_000_000, 128, 4, True),
                          "1e9": (25, 1_000_000_000, 32, 16, False)})
"""size -> (log2 nodes, R-MAT draws, features, parts, train)."""
SAGE = ("--model", "sage", "--layers", "3", "--hidden", "128")
PAPERS = MappingProxyType({"nodes": 111_059_956, "edges": 1_615_685_872, "features": 128, "classes": 172})
PARTITION_FIXED, PARTITION_PER_NODE = 2**30, 12
FENNEL_ONLY = (
    "import functools, sys, numpy as np; from pathlib import Path; "
    "from fullgraph.config import TrainConfig; from fullgraph.plan import model_memory_options, variable_bytes; "
    "from fullgraph.partition.balance import fennel_by_memory; "
    "cfg = TrainConfig.of(model='sage', layers=3, hidden=128); "
    "cost = functools.partial(variable_bytes, model_opts=model_memory_options(cfg)); "
    "a = fennel_by_memory(sys.argv[1], int(sys.argv[2]), 0, cost); "
    "np.save(Path(sys.argv[1]).parent / 'fennel.npy', a)")
"""The assignment alone, as ``fullgraph partition --partitioner fennel`` computes it (SAGE 3 x 128, seed 0),
in its own process: the partitioner's own peak, apart from the part files' writer."""


def _du(path: Path) -> int:
    """Bytes on disk under ``path`` (a folder or a file)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def _step(work: Path, name: str, cmd: list[str], output: Path, timeout: float, folder: Path | None = None) -> dict:
    """Run ``cmd`` unless ``steps.json`` already holds a good record of it (and ``output`` is there); the
    record, with the bytes the step left in ``folder`` (default: ``output``)."""
    book = work / "steps.json"
    done = json.loads(book.read_text()) if book.is_file() else {}
    if name in done and done[name]["rc"] == 0 and output.exists():
        print(f"{name}: done before ({done[name]['wall_s']:.0f} s), kept", flush=True)
        return done[name] | ({"disk_bytes": _du(folder)} if folder is not None and folder.exists() else {})
    r = run_command(cmd, timeout, work / "logs" / f"{name}.log", dict(os.environ, PYTHONPATH=str(REPO)))
    rec = {k: r[k] for k in ("rc", "wall_s", "peak_rss", "foreign_cores", "timed_out")}
    rec["disk_bytes"] = _du(folder or output)
    rec["work_disk_bytes"] = _du(work)  # everything the run holds on disk once this step is done
    rec["last_line"] = (r["output"].strip().splitlines() or [""])[-1][:300]
    if r["rc"] != 0:
        rec["error"] = first_error(r)
    done[name] = rec
    book.write_text(json.dumps(done, indent=1))
    print(f"{name}: {'ok' if r['rc'] == 0 else rec['error']} in {rec['wall_s']:.0f} s, peak "
          f"{rec['peak_rss'] / 2**20:.0f} MiB, disk {rec['disk_bytes'] / 2**30:.2f} GiB", flush=True)
    return rec


def run(size: str, work: Path, timeout: float, drop_input: bool = False) -> dict:
    scale, draws, feats, parts, train = SIZES[size]
    src, native, pdir, run_dir = work / "papers", work / "native", work / f"fennel{parts}", work / "run"
    steps = {"write": _step(work, "write", [sys.executable, "-c",
             "import sys; from fullgraph.data.synthetic.ogb import write_rmat_ogb_binary as w; "
             f"w(sys.argv[1], {scale}, {draws}, num_features={feats})", str(src)],
             src / "split" if src.exists() else native / "meta.json", timeout, src)}  # dropped once converted
    steps["convert"] = _step(work, "convert", fg("convert", "--dataset", str(src), "--out", str(native)),
                             native / "meta.json", timeout, native)
    if drop_input and steps["convert"]["rc"] == 0:  # the OGB folder is not read again
        shutil.rmtree(src, ignore_errors=True)
    steps["fennel"] = _step(work, "fennel", [sys.executable, "-c", FENNEL_ONLY, str(native), str(parts)],
                            work / "fennel.npy", timeout)
    steps["partition"] = _step(work, "partition", fg("partition", "--dataset", str(native), "--partitioner", "fennel",
                                                     "--parts", str(parts), "--out", str(pdir), *SAGE),
                               pdir / "partition.json", timeout, pdir)
    if train:
        steps["train"] = _step(work, "train", fg("train", "--dataset", str(native), "--parallel", "graph", "--nprocs",
                                                 str(parts), "--partition-dir", str(pdir), *SAGE, "--epochs", "2",
                                                 "--eval-every", "2", "--progress", "none", "--seed", "0",
                                                 "--comm-timeout", str(int(timeout)), "--out", str(run_dir),
                                                 "--overwrite"), run_dir / "summary.json", timeout, run_dir)
    meta = json.loads((native / "meta.json").read_text()) if (native / "meta.json").is_file() else {}
    part = json.loads((pdir / "partition.json").read_text()) if (pdir / "partition.json").is_file() else {}
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    n = 1 << scale
    return {"size": size, "nodes": n, "draws": draws, "features": feats, "parts": parts,
            "edges": meta.get("counts", {}).get("num_edges"), "alpha": part.get("replication_factor"),
            "partition_target": PARTITION_FIXED + PARTITION_PER_NODE * n, "steps": steps,
            "train": {k: summary.get(k) for k in ("epoch_time_s", "peak_rss_bytes_per_rank", "comm_bytes_per_epoch",
                                                  "test_acc", "estimated_peak_bytes")} if summary else None}


def cluster_estimate(alpha: float, parts: int = 16) -> dict:
    """papers100M on ``parts`` machines, one rank each, SAGE 3 x 128, balanced parts with replication
    ``alpha``: the planner's per-rank peak and halo bytes per epoch."""
    from fullgraph.comm.mesh import Mesh
    from fullgraph.models import build_model
    from fullgraph.plan.rank_memory import estimate_peak_bytes
    from fullgraph.parallel.registry import layout_volume
    from fullgraph.plan.volumes import ModelShape

    n, e, f, c = PAPERS["nodes"], 2 * PAPERS["edges"], PAPERS["features"], PAPERS["classes"]
    halo = int(alpha * n)
    peak = estimate_peak_bytes(nodes=n // parts, edges=e // parts, features=f, classes=c, model="sage", layers=3,
                               hidden=128, halo=halo // parts, distributed=True)
    shape = ModelShape.of("sage", build_model("sage", f, c, layers=3, hidden=128, dropout=0.5), f, c, False)
    volume = layout_volume(Mesh.for_mode("graph", parts), shape, nodes=n, halo_rows=halo, evaluate=False)
    return {"parts": parts, "alpha": alpha, "rank_peak_bytes": peak, "epoch_bytes": volume,
            "features_per_rank_bytes": 4 * f * (n + halo) // parts}


def report(r: dict, cluster: dict | None) -> None:
    print(f"\n{r['size']}: {r['nodes']:,} nodes, {r['draws']:,} R-MAT draws -> {r['edges'] or 0:,} directed edges "
          f"symmetrized, {r['features']} features, P = {r['parts']}")
    print(f"{'step':<10} {'wall s':>8} {'peak MiB':>9} {'disk GiB':>9} {'held GiB':>9}  note")
    for name, s in r["steps"].items():
        note = s.get("error", "")
        if name in ("fennel", "partition") and s["rc"] == 0 and r["alpha"] is not None:
            ok = s["peak_rss"] <= r["partition_target"]
            note = (f"alpha {r['alpha']:.3f}; target {r['partition_target'] / 2**20:.0f} MiB: "
                    f"{'PASS' if ok else 'FAIL'}")
        held = s.get("work_disk_bytes", 0) / 2**30
        print(f"{name:<10} {s['wall_s']:>8.0f} {s['peak_rss'] / 2**20:>9.0f} {s['disk_bytes'] / 2**30:>9.2f} "
              f"{held:>9.2f}  {note}")
    t = r.get("train")
    if t:
        peaks = t.get("peak_rss_bytes_per_rank") or []
        halo = sum(v for k, v in (t.get("comm_bytes_per_epoch") or {}).items() if k.startswith("halo"))
        print(f"train: epoch {t['epoch_time_s']:.1f} s, peak per rank {', '.join(f'{p / 2**30:.2f}' for p in peaks)} "
              f"GiB, halo {halo / 2**20:.0f} MiB per epoch, test accuracy {t.get('test_acc')}")
    if cluster:
        vol = sum(v for k, v in cluster["epoch_bytes"].items() if k.startswith("halo"))
        print(f"papers100M on a {cluster['parts']}-machine cluster (fullgraph.plan, SAGE 3 x 128, alpha "
              f"{cluster['alpha']:.3f}): peak per rank {cluster['rank_peak_bytes'] / 2**30:.1f} GiB (features "
              f"{cluster['features_per_rank_bytes'] / 2**30:.1f} GiB of it), halo {vol / 2**30:.1f} GiB per epoch")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1e8", choices=sorted(SIZES))
    ap.add_argument("--workdir", default=None, help="the work folder (a rerun resumes it; default /tmp/fg-ogb-SIZE)")
    ap.add_argument("--keep", action="store_true", help="keep the folders at the end")
    ap.add_argument("--timeout", type=float, default=7200.0, help="seconds per step")
    ap.add_argument("--json", default=None)
    ap.add_argument("--drop-input", action="store_true",
                    help="remove the OGB-layout folder once converted (its size stays in the write row)")
    a = ap.parse_args(argv)
    print_header()
    work = Path(a.workdir or f"/tmp/fg-ogb-{a.size}")
    work.mkdir(parents=True, exist_ok=True)
    r = run(a.size, work, a.timeout, a.drop_input)
    cluster = cluster_estimate(r["alpha"]) if r["alpha"] else None
    report(r, cluster)
    if a.json:
        write_json(a.json, {"run": r, "papers100M_cluster": cluster})
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(s["rc"] == 0 for s in r["steps"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
