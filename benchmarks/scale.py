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
    .venv/bin/python benchmarks/scale.py --sizes 1e6 --configs all
    .venv/bin/python benchmarks/scale.py --sizes 1e7 --configs single,graph2,graph4 --timeout 1200 \
        --predict-from runs/bench_scale_1e6.json
    .venv/bin/python benchmarks/scale.py --sizes 1e8 --workdir /big/disk/scale --timeout 7200
    .venv/bin/python benchmarks/scale.py --report runs/bench_scale_1e7.json,runs/more.json   # tables only

The tables are printed as Markdown (and every record is written as JSON); where they belong in a
document, a person pastes them: the script edits no document itself.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from _harness import REPO, environment, print_header, write_json
from _scale_configs import (CLASSES, CONFIGS, EXTRA_CONFIGS, FEATURES, MIB, PREP, SIZES, singles_first)
from _scale_run import import_baseline, mem_available
from _scale_steps import step_generate, step_partition, step_train
from _scale_tables import comm_text, contended, est_text, merge, mib, render, verdict


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


def _parser() -> argparse.ArgumentParser:
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
    p.add_argument("--json", default=None, help="every record, as JSON (default runs/bench_scale_SIZES.json; "
                                                "written after every command)")
    p.add_argument("--report", default=None, metavar="JSON[,JSON]",
                   help="measure nothing: print the tables of saved --json files (merged: a later file's row "
                        "replaces an earlier one's)")
    return p


def parse_args(argv=None):
    p = _parser()
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
    a.train_configs = singles_first(c for c in CONFIGS if c in names)
    a.parts = sorted({CONFIGS[c][2] for c in a.train_configs if CONFIGS[c][2]} | ({2, 4} if "partition" in names
                                                                                  else set()))
    a.min_free = a.min_free_gib * 2**30
    return a


def _from_ogb_layout(a) -> int:
    """``--from-ogb-layout SIZE``: scale_ogb.py's run, with this script's folder, timeout and JSON flags."""
    import scale_ogb

    return scale_ogb.main(["--size", a.from_ogb_layout, "--timeout", str(a.timeout),
                           *(["--workdir", a.workdir] if a.workdir else []), *(["--keep"] if a.keep else []),
                           *(["--json", a.json] if a.json else [])])


def config_line(a) -> str:
    """What this invocation measures, in one line (printed, and kept in the JSON)."""
    sizes = ", ".join(f"{s} (R-MAT scale {SIZES[s][0]}, {SIZES[s][1]:,} draws)" for s in a.size_list)
    return (f"configuration: sizes {sizes}; "
            f"{FEATURES} features, {CLASSES} classes, seed 0; partitions ({a.partitioner}"
            f"{f', METIS on {a.metis_sample:g} of the edges' if a.metis_sample < 1 else ''}) P = "
            f"{', '.join(map(str, a.parts)) or 'none'}; training runs: {', '.join(a.train_configs) or 'none'}; "
            f"{a.epochs} epochs, evaluation at the last; threads {a.threads or 'default'}; "
            f"timeout {a.timeout:.0f} s per command")


def earlier_runs(predict_from: str) -> list[dict]:
    """The training records of ``--predict-from`` files, each with its graph's edge count."""
    history = []
    for path in filter(None, predict_from.split(",")):
        old = json.loads(Path(path).read_text())
        edges = {r["size"]: r.get("edges") for r in old.get("prep", []) if r.get("step") == "generate"}
        history += [dict(r, edges=r.get("edges") or edges.get(r["size"])) for r in old.get("train", [])]
    return history


def save(result: dict, json_path: Path) -> None:
    """Write ``result`` without the commands' output and the back-references to their graph."""
    slim = dict(result)
    for key in ("prep", "train"):
        slim[key] = [{k: v for k, v in r.items() if k not in ("output", "gen")} for r in result[key]]
    write_json(json_path, slim)


def prepare(size: str, work: Path, a, result: dict, checkpoint) -> tuple[dict, dict[int, dict]] | None:
    """Generate the graph of ``size`` and its partitions, printing a line for each; None where the
    graph could not be made."""
    gen = step_generate(size, work, a)
    gen["gen"] = gen
    result["prep"].append(gen)
    if "error" in gen:
        print(f"  generate: FAILED: {gen['error']}", flush=True)
        checkpoint()
        return None
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
        checkpoint()
    return gen, pdirs


def train_all(size: str, gen: dict, pdirs: dict, work: Path, a, result: dict, checkpoint) -> None:
    """Every chosen training configuration on the graph of ``size``, a line for each."""
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
        checkpoint()


def measure(a, work: Path, result: dict, checkpoint) -> None:
    """Each size in turn: its graph, partitions and training runs; a size's folders go before the next."""
    for size in a.size_list:
        print(f"=== {size}: R-MAT scale {SIZES[size][0]}, {SIZES[size][1]:,} draws ===", flush=True)
        made = prepare(size, work, a, result, checkpoint)
        if made is None:
            continue
        train_all(size, *made, work, a, result, checkpoint)
        if not a.keep:  # the next size needs the disk more than this one's folders
            for path in work.glob(f"rmat-{size}*"):
                shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(work / "cache", ignore_errors=True)


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.from_ogb_layout:
        return _from_ogb_layout(a)
    if a.report:
        render(merge([json.loads(Path(f).read_text()) for f in a.report.split(",") if f]))
        return 0
    started = time.perf_counter()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"scale.py, {when}", flush=True)
    header = machine_lines()  # printed as it is taken
    config = config_line(a)
    print(config, flush=True)
    own_tmp = a.workdir is None
    work = Path(tempfile.mkdtemp(prefix="fg-scale-") if own_tmp else a.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder: {work}{' (kept)' if a.keep else ' (removed at the end)'}", flush=True)
    a.baseline = import_baseline(a.timeout, work / "logs" / "baseline.log", a.min_free)
    a.history = earlier_runs(a.predict_from)
    print(f"import baseline (peak RSS of a process importing torch and fullgraph's training modules): "
          f"{mib(a.baseline)} MiB\n", flush=True)
    command = " ".join(["benchmarks/scale.py", *(argv if argv is not None else sys.argv[1:])])
    result = {"when": when, "command": command, "header": header, "config": config, "baseline": a.baseline,
              "prep": [], "train": []}
    json_path = Path(a.json or REPO / "runs" / f"bench_scale_{'_'.join(a.size_list)}.json")
    checkpoint = functools.partial(save, result, json_path)
    try:
        measure(a, work, result, checkpoint)
    finally:
        checkpoint()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    result["checks"] = render(result)
    failed = [r for r in result["prep"] + result["train"] if "error" in r and not r.get("skipped")]
    skipped = [r for r in result["train"] if r.get("skipped")]
    result["total_s"] = time.perf_counter() - started
    checkpoint()
    print(f"\n{len(failed)} failed or timed-out commands, {len(skipped)} skipped; "
          f"total {result['total_s'] / 60:.1f} min; wrote {json_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
