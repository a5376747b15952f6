"""A knowledge graph at ogbl-wikikg2's size under graph parallelism: each rank's peak beside ``fullgraph plan``'s.

    .venv/bin/python benchmarks/kg_scale.py --work /tmp/kg-scale                       # wikikg2's size, P = 4
    .venv/bin/python benchmarks/kg_scale.py --work /tmp/kg-small --entities 200000 --triples 1000000   # a quick look

Issue 60 §3. ``data.synthetic_ogb_kg.write_synthetic_kg`` writes a folder in ogbl-wikikg2's layout (one
entity type, featureless; ``--relations`` relations; ``--triples`` triples, ``--held-out`` of each
relation's for validation and for test, each with ``--negatives`` corrupted tails and heads); then
``fullgraph plan --layout graph --nprocs P --json`` estimates each rank's peak, and ``fullgraph train
--parallel graph --nprocs P`` trains the basis-decomposed R-GCN + DistMult for ``--steps`` steps of
``--edge-batch`` positives and one evaluation (the launcher partitions with METIS first). Reported: the
times of each stage, each rank's ``peak_rss_bytes_per_rank`` against the plan's ``peak_bytes_per_rank``
(target: within 25%), and the test MRR after those steps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from _harness import REPO, read_summary, start_report, write_json

WIKIKG2 = (2_500_604, 535, 16_109_182)
"""ogbl-wikikg2's entities, relations and training triples."""


def options(args) -> list[str]:
    """What ``plan`` and ``train`` both take: the graph, the task and the basis-decomposed model."""
    return ["--dataset", str(args.work / "wikikg2"), "--task", "link", "--model", "rgcn", "--hidden", str(args.hidden),
            "--rgcn-decomposition", "bases", "--rgcn-bases", str(args.bases), "--decoder", "distmult",
            "--edge-batch", str(args.edge_batch)]


def timed(cmd: list[str], timeout: float) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=REPO)
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return time.perf_counter() - t0, out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--entities", type=int, default=WIKIKG2[0])
    p.add_argument("--relations", type=int, default=WIKIKG2[1])
    p.add_argument("--triples", type=int, default=WIKIKG2[2], help="training triples (the held-out ones come on top)")
    p.add_argument("--held-out", type=float, default=0.02)
    p.add_argument("--negatives", type=int, default=20)
    p.add_argument("--nprocs", type=int, default=4)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--bases", type=int, default=4)
    p.add_argument("--edge-batch", type=int, default=65536)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--timeout", type=float, default=5400)
    args = p.parse_args(argv)
    started, now, env, header = start_report("A knowledge graph at ogbl-wikikg2's size, graph parallel", 1)
    folder = args.work / "wikikg2"
    t0 = time.perf_counter()
    if not (folder / "split").is_dir():
        from fullgraph.data.synthetic.ogb_kg import write_synthetic_kg

        total = int(args.triples / (1 - 2 * args.held_out))
        counts = write_synthetic_kg(folder, "wikikg2", entities=args.entities, relations=args.relations,
                                    triples=total, negatives=args.negatives, held_out=args.held_out, shared=0.1)
        print(f"written: {counts} in {time.perf_counter() - t0:.0f} s", flush=True)
    plan_s, plan = timed([sys.executable, "-m", "fullgraph", "plan", *options(args), "--nprocs", str(args.nprocs),
                          "--layout", "graph", "--json"], args.timeout)
    row = json.loads(plan.stdout)["layouts"][0]
    planned = row["peak_bytes_per_rank"]
    print(f"plan: {plan_s:.0f} s; estimated peak per rank {planned / 2**20:,.0f} MiB", flush=True)
    out = args.work / "run"
    train_s, _ = timed([sys.executable, "-m", "fullgraph", "train", *options(args), "--metric", "mrr", "--parallel", "graph", "--nprocs",
                        str(args.nprocs), "--epochs", "1", "--steps-per-epoch", str(args.steps), "--progress", "none",
                        "--out", str(out), "--overwrite"], args.timeout)
    summary = read_summary(out)
    peaks = summary["peak_rss_bytes_per_rank"]
    ratios = [peak / planned for peak in peaks]
    print(f"train: {train_s:.0f} s (partition, {args.steps} steps, one evaluation); peak per rank "
          f"{', '.join(f'{b / 2**20:,.0f}' for b in peaks)} MiB = {', '.join(f'{r:.2f}' for r in ratios)} x the plan's; "
          f"test MRR {summary['test_metric']:.4f}")
    own = [peak / est for peak, est in zip(peaks, summary["estimated_peak_bytes_per_rank"]) if est]
    print(f"each rank against its own estimate (train's, the plan's for that rank): {', '.join(f'{r:.2f}' for r in own)}")
    verdict = all(0.75 <= r <= 1.25 for r in ratios)
    print(f"target (each rank within 25% of the plan): {'met' if verdict else 'MISSED'}")
    write_json(args.work / "kg_scale.json", {"date": now, "environment": env, "header": header,
                                             "settings": {k: str(v) for k, v in vars(args).items()},
                                             "planned_peak_bytes_per_rank": planned, "peaks": peaks, "ratios": ratios, "own_ratios": own,
                                             "plan_s": plan_s, "train_s": train_s, "summary": summary,
                                             "met": verdict, "seconds": time.perf_counter() - started})
    return 0


if __name__ == "__main__":
    sys.exit(main())
