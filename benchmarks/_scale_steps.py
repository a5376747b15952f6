"""The three kinds of command scale.py measures, each a record of the benchmark: generating an
R-MAT graph, partitioning it, and one training configuration on it (skipped where the memory it
would need, predicted from a smaller graph, does not fit)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from _harness import read_summary
from _scale_configs import CLASSES, CONFIGS, FEATURES, MIB, PARTITION_BYTES_PER_EDGE, SAGE, SIZES
from _scale_run import fg, first_error, mem_available, run_command


def step_generate(size: str, work: Path, a) -> dict:
    scale, draws = SIZES[size]
    out = work / f"rmat-{size}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = fg("generate", "rmat", "--scale", str(scale), "--edges", str(draws), "--features", str(FEATURES),
             "--classes", str(CLASSES), "--seed", "0", "--out", str(out))
    r = run_command(cmd, a.timeout, work / "logs" / f"generate-{size}.log", min_free=a.min_free)
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
    r = run_command(cmd, a.timeout, work / "logs" / f"partition-{size}-{parts}.log", env, min_free=a.min_free)
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


def _train_command(gen: dict, flags, extra: list[str], out: Path, a) -> list[str]:
    # --release-memory: peaks measure what a run needs, as in the results below (epochs get slower)
    return fg("train", "--dataset", gen["dataset"], "--release-memory", *flags, *extra, "--epochs", str(a.epochs),
              "--eval-every", str(a.epochs), "--progress", "none", "--comm-timeout", str(int(a.timeout)), "--seed", "0",
              *(["--threads", str(a.threads)] if a.threads else []), "--out", str(out), "--overwrite")  # a rerun


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
    env = dict(os.environ, FULLGRAPH_CACHE=str(work / "cache"))
    r = run_command(_train_command(gen, flags, extra, out, a), a.timeout, work / "logs" / f"train-{size}-{name}.log",
                    env, min_free=a.min_free)
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
