"""time_to_accuracy.py's graphs and its fullgraph runs.

* :func:`prepare` turns a benchmark graph name into the ``--dataset`` (and ``--root``) flags that
  ``fullgraph train`` takes: a known dataset by name (its standard split), or a native dataset folder
  written once under ``WORK/data`` for the graphs that need another split (the dense 60/20/20 split
  of the Amazon/Coauthor graphs) or that are generated (the planted-partition graph).
* :func:`run_fullgraph` runs the real command ``python -m fullgraph train ... --out DIR`` and reads
  its ``metrics.jsonl`` while it runs: it ends the run (the whole process group, ranks included) as
  soon as the epochs and evaluations written so far add up to the time limit.
* :func:`curve_stats` turns a run's epochs into what the table reports (same for every method).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import MappingProxyType

from _harness import REPO, read_metrics

# name: (fullgraph dataset, split) — split None: the dataset's own; "dense": 60/20/20 of the labelled
# nodes (seed 0); a float: the planted graph with that fraction of nodes in training (10% validation)
GRAPHS = MappingProxyType({
    "physics-sparse": ("coauthor-physics", None),
    "computers-sparse": ("amazon-computers", None),
    "tolokers": ("tolokers", None),
    "physics-dense": ("coauthor-physics", "dense"),
    "computers-dense": ("amazon-computers", "dense"),
    "planted-1pct": ("planted", 0.01),
    "planted-50pct": ("planted", 0.50),
})
# the generated graph: 10^6 nodes, average degree 10.5 -> >= 10^7 directed edges after symmetrizing
PLANTED = MappingProxyType(dict(num_nodes=1_000_000, num_classes=5, avg_degree=10.5, homophily=0.7, num_features=64))


def prepare(name: str, root: str, work: Path) -> list[str]:
    """``fullgraph train``'s data flags for the benchmark graph ``name`` (writing its folder once)."""
    dataset, split = GRAPHS[name]
    if split is None:
        return ["--dataset", dataset, "--root", root]
    folder = work / "data" / name
    if not (folder / "meta.json").is_file():
        _write(name, dataset, split, root, folder)
    return ["--dataset", str(folder)]


def _write(name: str, dataset: str, split, root: str, folder: Path) -> None:
    import numpy as np
    import torch

    from fullgraph.config import TrainConfig
    from fullgraph.data.formats.native import write_native
    from fullgraph.data.load import feature_norm_of, load_raw_graph
    from fullgraph.data.synthetic import planted_partition

    rng = np.random.default_rng(0)
    if dataset == "planted":
        g = planted_partition(**PLANTED, seed=0, name=name)
        fractions, norm = (split, 0.1), "none"
        source = f"planted_partition({dict(PLANTED)}, seed=0), split {split:.0%}/10%/rest (seed 0)"
    else:
        cfg = TrainConfig.of(dataset=dataset, root=root)
        g, fractions, norm = load_raw_graph(cfg), (0.6, 0.2), feature_norm_of(cfg)
        source = f"{dataset}, split 60/20/20 of the labelled nodes (seed 0)"
    labelled = np.flatnonzero(g.y.numpy() >= 0) if g.y.dim() == 1 else np.arange(g.num_nodes)
    order = rng.permutation(labelled)
    cut = np.cumsum([int(f * len(order)) for f in fractions])
    masks = [np.zeros(g.num_nodes, dtype=bool) for _ in range(3)]
    for m, part in zip(masks, np.split(order, cut)):
        m[part] = True
    g.train_mask, g.val_mask, g.test_mask = (torch.from_numpy(m) for m in masks)
    g.name = name
    folder.parent.mkdir(parents=True, exist_ok=True)
    write_native(g, folder, preprocessed=True, feature_norm=norm, source=source)
    print(f"  wrote {folder} ({g.num_nodes:,} nodes, {g.num_edges:,} edges; {source})", flush=True)


def load_for_pyg(data_flags: list[str]):
    """The fullgraph ``Graph`` ``fullgraph train`` reads for these flags (features normalized as it does)."""
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    opts = dict(zip((f[2:] for f in data_flags[::2]), data_flags[1::2]))
    return load_graph(TrainConfig.of(**opts))


# ---------------------------------------------------------------- fullgraph runs
def _elapsed(epochs: list[dict]) -> float:
    return sum(e.get("epoch_time_s", 0.0) + e.get("eval_time_s", 0.0) for e in epochs)


def _end(proc) -> None:
    """Stop the run's whole process group (the launcher and its ranks)."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_fullgraph(argv: list[str], out: Path, *, time_limit: float, setup_limit: float) -> dict:
    """Run ``fullgraph train ARGV --out OUT``; stop it once its epochs and evaluations took
    ``time_limit`` s (or its whole wall ``time_limit + setup_limit``). Returns the epochs read back,
    the outside wall time, and ``stopped`` (None, ``"time limit"`` or ``"wall limit"``) or ``error``."""
    if out.exists():  # an earlier attempt's metrics.jsonl would read as this run's epochs
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cmd = [sys.executable, "-m", "fullgraph", "train", *argv, "--out", str(out), "--overwrite"]
    log = open(out / "output.log", "w")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    stopped = None
    try:
        while proc.poll() is None:
            time.sleep(0.5)
            if _elapsed(read_metrics(out)) > time_limit or time.perf_counter() - t0 > time_limit + setup_limit:
                stopped = "time limit" if _elapsed(read_metrics(out)) > time_limit else "wall limit"
                _end(proc)
    except BaseException:  # this driver stopped: its run (ranks included) goes with it
        _end(proc)
        raise
    wall = time.perf_counter() - t0
    log.close()
    epochs = read_metrics(out)
    rec = {"cmd": cmd, "wall_s": wall, "stopped": stopped, "epochs": epochs,
           "setup_s": wall - _elapsed(epochs)}
    if proc.returncode != 0 and stopped is None:
        tail = (out / "output.log").read_text().strip().splitlines()[-5:]
        rec["error"] = f"exit status {proc.returncode}: " + " | ".join(tail)
    summary = out / "summary.json"
    if summary.is_file():
        s = json.loads(summary.read_text())
        rec.update(metric=s.get("metric"), peak_rss_bytes=s.get("peak_rss_bytes"))
    elif epochs:
        rec["metric"] = epochs[0].get("metric")
    return rec


def fullgraph_has(flag: str) -> bool:
    """Whether ``fullgraph train`` takes ``flag`` (``--prune`` lands on main during this work)."""
    out = subprocess.run([sys.executable, "-m", "fullgraph", "train", "--help"], cwd=REPO, capture_output=True,
                         text=True).stdout
    return any(word.strip("[],|") == flag for word in out.split())


# ---------------------------------------------------------------- what the table reports
def curve_stats(epochs: list[dict], target: float | None = None) -> dict:
    """Best validation (first epoch reaching it), its test metric, the wall time to it (every
    epoch's training and evaluation from the first on, set-up excluded), and the time to ``target``
    (inf when never reached)."""
    t, best, out = 0.0, None, {"time_to_target_s": float("inf")}
    for e in epochs:
        t += e.get("epoch_time_s", 0.0) + e.get("eval_time_s", 0.0)
        v = e.get("val_metric")
        if v is None:
            continue
        if best is None or v > best["best_val"]:
            best = {"best_val": v, "test": e.get("test_metric"), "time_to_best_s": t, "best_epoch": e["epoch"]}
        if target is not None and v >= target and out["time_to_target_s"] == float("inf"):
            out["time_to_target_s"] = t
    out.update(best or {"best_val": float("nan"), "test": float("nan"), "time_to_best_s": float("inf"),
                        "best_epoch": None})
    out["n_epochs"], out["train_eval_s"] = len(epochs), t
    return out
