"""``--log-tensorboard DIR`` (issue 36 §3): the event file read back holds, per epoch, what
``metrics.jsonl`` holds (loss, learning rate, gradient norm, metrics, bytes per ledger category), and
each rank's peak memory at the end; rank 0 alone writes."""

from __future__ import annotations

import json

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from fullgraph.cli import main


def scalars(folder) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_the_event_file_holds_the_runs_numbers(tmp_path, shared_data):
    run, tb = tmp_path / "run", tmp_path / "tb"
    assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--parallel", "graph", "--nprocs", "2",
                 "--epochs", "4", "--eval-every", "2", "--clip-grad-norm", "1", "--lr-schedule", "cosine",
                 "--progress", "none", "--out", str(run), "--log-tensorboard", str(tb)]) == 0
    got = scalars(tb)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for name in ("loss", "lr", "grad_norm", "epoch_time_s"):
        assert [s for s, _ in got[name]] == [1, 2, 3, 4]
        assert [v for _, v in got[name]] == pytest.approx([r[name] for r in records], rel=1e-6)  # float32 events
    assert [s for s, _ in got["val_metric"]] == [2, 4]
    assert [v for _, v in got["comm/halo/fwd"]] == pytest.approx([r["comm_bytes"]["halo/fwd"] for r in records])
    summary = json.loads((run / "summary.json").read_text())
    for rank in (0, 1):
        assert got[f"memory/peak_rss_rank{rank}"] == [(4, pytest.approx(summary["peak_rss_bytes_per_rank"][rank],
                                                                          rel=1e-6))]
    assert len(list(tb.iterdir())) == 1  # one event file: rank 0's


def test_every_metric_of_the_task_is_a_scalar(tmp_path, shared_data):
    run, tb = tmp_path / "run", tmp_path / "tb"
    assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--epochs", "2", "--hidden", "8",
                 "--progress", "none", "--out", str(run), "--log-tensorboard", str(tb)]) == 0
    got = scalars(tb)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for split in ("train", "val", "test"):
        for name in ("acc", "macro-f1", "micro-f1"):
            assert [v for _, v in got[f"metrics/{split}/{name}"]] == pytest.approx(
                [r["metrics"][split][name] for r in records], rel=1e-6)
