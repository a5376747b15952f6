"""``fullgraph report RUN [RUN ...] --out DIR``: figures and a side-by-side table of training runs.

It reads what every run writes (``metrics.jsonl``, one line per epoch, and ``summary.json``) and draws,
with matplotlib (the ``plot`` extra):

* ``loss.png`` — training loss against epoch and against wall time;
* ``metric.png`` — validation and test metric against epoch and against wall time;
* ``epoch_time.png`` — the median epoch split into compute, communication wait and pipeline bubble;
* ``bytes.png`` — bytes per epoch by ledger category;
* ``memory.png`` — peak memory of every rank, measured, with the estimate beside it;

and ``summary.md``, one row per run. Runs are named by their folder, and each keeps one colour in every
figure (its lines, its bars' outline or fill, its name under the bars), so a run is found at a glance.
Legends sit outside the axes, where they hide no curve. The wall-time axes start at the end of each
run's first epoch: that epoch carries the start-up (allocation, caches, kernel choice), often many
times a later epoch, and would squeeze the curves into a corner; the figure says what was left out.
Times below a microsecond print as 0: such a time is timer noise, not a cost.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from fullgraph.errors import InputError

__all__ = ["cmd_report", "read_run", "summary_table", "figures", "seconds", "FIGURES"]

FIGURES = ("loss.png", "metric.png", "epoch_time.png", "bytes.png", "memory.png")
MIB = 2 ** 20


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


def cmd_report(args: argparse.Namespace, argv: list[str] = ()) -> int:
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
    import matplotlib.pyplot as plt

    for name, fig in figures(runs).items():
        fig.savefig(out / name, dpi=110, bbox_inches="tight")  # "tight" takes in the legends outside the axes
        plt.close(fig)
    (out / "summary.md").write_text("\n".join(summary_table(runs)) + "\n")
    print(f"wrote {', '.join(FIGURES)} and summary.md to {out}")
    return 0


def seconds(t: float) -> str:
    """A time for the table and the figures: three significant digits, and 0 below a microsecond (what
    a timer reads for no work, which ``1e-09`` would dress up as a measurement)."""
    return "0" if abs(t) < 1e-6 else f"{t:.3g}"


def figures(runs: list[dict]) -> dict[str, object]:
    """Every figure of the report, by file name (``FIGURES``), each run drawn in its own colour."""
    for r, color in zip(runs, _palette(len(runs))):
        r["color"] = color
    return {name: draw(runs) for name, draw in zip(FIGURES, (_loss, _metric, _epoch_time, _bytes, _memory))}


def _palette(n: int) -> list[str]:
    """``n`` distinct colours, as hex: matplotlib's ten (``C0``..``C9``), then tab20's, then a hue circle."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    if n <= 20:
        return [to_hex(c) for c in colormaps["tab10" if n <= 10 else "tab20"].colors[:n]]
    return [to_hex(colormaps["hsv"](i / n)) for i in range(n)]


def _run_artist(artist, r: dict) -> None:
    """Tag an artist as the run's (``gid``), so the figure can be checked for the run's colour."""
    artist.set_gid(f"run:{r['name']}")


def _wall(epochs: list[dict]) -> list[float]:
    """Seconds (training and evaluation) from the end of the first epoch to the end of each epoch; the
    first epoch's own, its start-up, stays out (``_warmup``)."""
    t, out = 0.0, []
    for e in epochs[1:]:
        t += e.get("epoch_time_s", 0.0) + e.get("eval_time_s", 0.0)
        out.append(t)
    return [0.0, *out]


def _warmup(e: dict) -> float:
    return e.get("epoch_time_s", 0.0) + e.get("eval_time_s", 0.0)


def _against_epoch_and_time(runs, keys: list[tuple[str, str]], ylabel: str, title: str):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for r in runs:
        ep = r["epochs"]
        for key, style in keys:
            pts = [(i, e["epoch"], t, e[key]) for i, (e, t) in enumerate(zip(ep, _wall(ep))) if e.get(key) is not None]
            if not pts:
                continue
            label = r["name"] + (f" {key.split('_')[0]}" if len(keys) > 1 else "")
            first = [0] if pts[0][0] == 0 else []  # the first epoch, at 0 on the time axis: marked
            lines = [axes[0].plot([p[1] for p in pts], [p[3] for p in pts], style, color=r["color"], label=label)[0],
                     axes[1].plot([p[2] for p in pts], [p[3] for p in pts], style, color=r["color"], marker="o",
                                  markevery=first, fillstyle="none")[0]]
            for line in lines:
                _run_artist(line, r)
    for ax, xlabel in zip(axes, ("epoch", "wall time after the first epoch (s, training and evaluation)")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    warm = ", ".join(f"{r['name']} {seconds(_warmup(r['epochs'][0]))} s" for r in runs)
    axes[1].set_title(f"first epoch (o, at 0) left out of the time axis; its start-up took: {warm}",
                      fontsize=8, wrap=True)
    axes[1].legend(*axes[0].get_legend_handles_labels(), fontsize=8, bbox_to_anchor=(1.02, 1), loc="upper left",
                   borderaxespad=0)
    fig.suptitle(title)
    return fig


def _loss(runs):
    return _against_epoch_and_time(runs, [("loss", "-")], "training loss", "Loss")


def _metric(runs):
    from fullgraph.tasks.metrics import METRIC_NAMES

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
    # one pastel colour per category (ledger order), apart from the runs' saturated ones: a run is its outline
    colors = plt.get_cmap("Pastel1").colors + plt.get_cmap("Pastel2").colors + plt.get_cmap("Set3").colors
    for i, k in enumerate(keys):
        vals = [p.get(k, 0.0) for p in parts]
        bars = ax.bar(x, vals, bottom=bottom, label=k, color=colors[i % len(colors)],
                      edgecolor=[r["color"] for r in runs], linewidth=1.5)
        for bar, r in zip(bars, runs):
            _run_artist(bar, r)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(list(x), [r["name"] for r in runs], rotation=20, ha="right")
    for tick, r in zip(ax.get_xticklabels(), runs):
        tick.set_color(r["color"])
        _run_artist(tick, r)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if keys:
        ax.legend(fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left", borderaxespad=0)
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
            bar = ax.bar(x, p / MIB, color=r["color"], edgecolor=r["color"],
                         label="measured (bar, the run's colour)" if x == 0 else None)[0]
            _run_artist(bar, r)
            if i < len(est) and est[i]:
                ax.plot([x - 0.4, x + 0.4], [est[i] / MIB] * 2, color="black", label="estimated" if x == 0 else None)
            ticks.append((x, str(i)))
            x += 1
        _run_artist(ax.text(x - 1 - (len(peaks) - 1) / 2, -0.14, r["name"], transform=ax.get_xaxis_transform(),
                            ha="center", fontsize=9, color=r["color"]), r)
        x += 1
    ax.set_xticks([t[0] for t in ticks], [t[1] for t in ticks], fontsize=8)
    ax.set_ylabel("peak memory (MiB)")
    ax.set_title("Peak memory of each rank (numbered), by run")
    ax.legend(fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left", borderaxespad=0)
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
                   f"{s.get('metric', 'acc')} | {seconds(s['epoch_time_s'])} | {seconds(split['compute'])} / "
                   f"{seconds(split['communication'])} / {seconds(split['bubble'])} | {nbytes / MIB:.2f} | "
                   f"{peak / MIB:.0f} |")
    return out
