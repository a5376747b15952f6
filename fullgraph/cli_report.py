"""``fullgraph report RUN [RUN ...] --out DIR``: figures and a side-by-side table of training runs.

It reads what every run writes (``metrics.jsonl``, one line per epoch, and ``summary.json``) and draws,
with matplotlib (the ``plot`` extra):

* ``loss.png`` — training loss against epoch and against wall time;
* ``metric.png`` — validation and test metric against epoch and against wall time;
* ``epoch_time.png`` — the median epoch split into compute, communication wait and pipeline bubble;
* ``bytes.png`` — bytes per epoch by ledger category;
* ``memory.png`` — peak memory of every rank, measured, with the estimate beside it;

and ``summary.md``, one row per run. Runs are named by their folder.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from fullgraph.errors import InputError

__all__ = ["add_report_command", "cmd_report", "read_run", "summary_table", "FIGURES"]

FIGURES = ("loss.png", "metric.png", "epoch_time.png", "bytes.png", "memory.png")
MIB = 2 ** 20


def add_report_command(sub) -> None:
    p = sub.add_parser("report", help="figures and a summary table of one or more training runs",
                       description="Draw loss, metric, epoch-time, traffic and memory figures of training runs "
                                   "(folders written by 'fullgraph train --out') and a Markdown table comparing them.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders holding metrics.jsonl and summary.json")
    p.add_argument("--out", required=True, help="folder for the figures and summary.md (made if missing)")


def read_run(folder: str) -> dict:
    """A run's summary and epochs; an ``InputError`` naming what is missing or unreadable."""
    path = Path(folder)
    try:
        summary = json.loads((path / "summary.json").read_text())
        epochs = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines() if line.strip()]
    except FileNotFoundError as e:
        raise InputError(f"expected a run folder with summary.json and metrics.jsonl (got {folder}: no "
                         f"{Path(e.filename).name}; is it a finished 'fullgraph train --out' run?)") from None
    except ValueError as e:
        raise InputError(f"expected JSON in the run folder {folder} ({e})") from None
    if not epochs:
        raise InputError(f"expected at least one epoch in {path / 'metrics.jsonl'} (got none)")
    return {"name": path.resolve().name, "summary": summary, "epochs": epochs}


def cmd_report(args: argparse.Namespace) -> int:
    runs = [read_run(r) for r in args.runs]
    names = [r["name"] for r in runs]
    for i, r in enumerate(runs):  # two runs of the same folder name stay apart
        if names.count(r["name"]) > 1:
            r["name"] = f"{r['name']} ({i + 1})"
    try:
        import matplotlib
    except ImportError:
        raise InputError("expected matplotlib for 'fullgraph report' (install it: pip install 'fullgraph[plot]')") from None
    matplotlib.use("Agg")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"expected --out to be a folder (got the file {out})")
    out.mkdir(parents=True, exist_ok=True)
    for name, draw in zip(FIGURES, (_loss, _metric, _epoch_time, _bytes, _memory)):
        draw(runs).savefig(out / name, dpi=110, bbox_inches="tight")
    (out / "summary.md").write_text("\n".join(summary_table(runs)) + "\n")
    print(f"wrote {', '.join(FIGURES)} and summary.md to {out}")
    return 0


def _wall(epochs: list[dict]) -> list[float]:
    t, out = 0.0, []
    for e in epochs:
        t += e.get("epoch_time_s", 0.0) + e.get("eval_time_s", 0.0)
        out.append(t)
    return out


def _against_epoch_and_time(runs, keys: list[tuple[str, str]], ylabel: str, title: str):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for r in runs:
        ep = r["epochs"]
        for key, style in keys:
            pts = [(e["epoch"], t, e[key]) for e, t in zip(ep, _wall(ep)) if e.get(key) is not None]
            if not pts:
                continue
            label = r["name"] + (f" {key.split('_')[0]}" if len(keys) > 1 else "")
            axes[0].plot([p[0] for p in pts], [p[2] for p in pts], style, label=label)
            axes[1].plot([p[1] for p in pts], [p[2] for p in pts], style, label=label)
    for ax, xlabel in zip(axes, ("epoch", "wall time (s, training and evaluation)")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.suptitle(title)
    return fig


def _loss(runs):
    return _against_epoch_and_time(runs, [("loss", "-")], "training loss", "Loss")


def _metric(runs):
    from fullgraph.train.metrics import METRIC_NAMES

    metric = METRIC_NAMES.get(runs[0]["summary"].get("metric", "acc"), "metric")
    return _against_epoch_and_time(runs, [("val_metric", "-"), ("test_metric", "--")], metric,
                                   f"Validation (solid) and test (dashed) {metric}")


def epoch_split(r: dict) -> dict[str, float]:
    """The median epoch's seconds: compute, communication wait (less the bubble) and bubble."""
    ep = r["epochs"][1:] or r["epochs"]  # the first epoch carries start-up costs
    med = lambda k: statistics.median(e.get(k, 0.0) for e in ep)  # noqa: E731
    bubble = statistics.median(statistics.mean(e["stage_bubble_s"]) if e.get("stage_bubble_s") else 0.0
                               for e in ep)
    if "comm_time_s" not in ep[0]:  # one process: all of it is compute
        return {"compute": med("epoch_time_s"), "communication": 0.0, "bubble": 0.0}
    return {"compute": med("compute_time_s"), "communication": max(0.0, med("comm_time_s") - bubble),
            "bubble": bubble}


def _stacked(runs, parts: list[dict[str, float]], ylabel: str, title: str):
    import matplotlib.pyplot as plt

    from fullgraph.comm.ledger import CATEGORIES

    order = {k: i for i, k in enumerate(CATEGORIES)}
    keys = sorted(dict.fromkeys(k for p in parts for k in p), key=lambda k: order.get(k, -1))
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(runs) + 3), 4))
    bottom = [0.0] * len(runs)
    x = range(len(runs))
    colors = plt.get_cmap("tab20").colors  # one colour per category (ledger order), up to 20
    for i, k in enumerate(keys):
        vals = [p.get(k, 0.0) for p in parts]
        ax.bar(x, vals, bottom=bottom, label=k, color=colors[i % len(colors)])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(list(x), [r["name"] for r in runs], rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if keys:
        ax.legend(fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left")
    else:  # one-process runs move nothing
        ax.text(0.5, 0.5, "nothing to show (one-process runs)", transform=ax.transAxes, ha="center")
    return fig


def _epoch_time(runs):
    return _stacked(runs, [epoch_split(r) for r in runs], "seconds", "Median epoch")


def _bytes(runs):
    parts = [{k: v / MIB for k, v in r["summary"].get("comm_bytes_per_epoch", {}).items()} for r in runs]
    return _stacked(runs, parts, "MiB per epoch (all ranks)", "Bytes moved per epoch, by ledger category")


def _memory(runs):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(runs) + 3), 4))
    x = 0
    ticks = []
    for r in runs:
        s = r["summary"]
        peaks = s.get("peak_rss_bytes_per_rank") or [s["peak_rss_bytes"]]
        est = s.get("estimated_peak_bytes_per_rank") or [s.get("estimated_peak_bytes")] * len(peaks)
        for i, p in enumerate(peaks):
            ax.bar(x, p / MIB, color="C0", label="measured" if x == 0 else None)
            if i < len(est) and est[i]:
                ax.plot([x - 0.4, x + 0.4], [est[i] / MIB] * 2, color="C3", label="estimated" if x == 0 else None)
            ticks.append((x, str(i)))
            x += 1
        ax.text(x - 1 - (len(peaks) - 1) / 2, -0.14, r["name"], transform=ax.get_xaxis_transform(), ha="center",
                fontsize=9)
        x += 1
    ax.set_xticks([t[0] for t in ticks], [t[1] for t in ticks], fontsize=8)
    ax.set_ylabel("peak memory (MiB)")
    ax.set_title("Peak memory of each rank (numbered), by run")
    ax.legend(fontsize=8)
    return fig


def summary_table(runs: list[dict]) -> list[str]:
    out = ["| run | graph | model | layout | epochs | best epoch | val | test | metric | epoch s | "
           "compute / comm / bubble s | MiB/epoch | peak MiB/rank |",
           "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: |"]
    for r in runs:
        s, split = r["summary"], epoch_split(r)
        layout = s["parallel"] + (f" x{s['nprocs']}" if s.get("nprocs", 1) > 1 else "")
        peak = max(s.get("peak_rss_bytes_per_rank") or [s["peak_rss_bytes"]])
        nbytes = sum(s.get("comm_bytes_per_epoch", {}).values())
        out.append(f"| {r['name']} | {s['dataset']} | {s['model']} {s['layers']}x{s['hidden']} | {layout} | "
                   f"{s['epochs_run']} | {s['best_epoch']} | {s['val_metric']:.4f} | {s['test_metric']:.4f} | "
                   f"{s.get('metric', 'acc')} | {s['epoch_time_s']:.3g} | {split['compute']:.3g} / "
                   f"{split['communication']:.3g} / {split['bubble']:.3g} | {nbytes / MIB:.2f} | {peak / MIB:.0f} |")
    return out
