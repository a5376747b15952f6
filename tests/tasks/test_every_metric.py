"""Every metric of a task at once (issue 62 §4): ``metrics.jsonl``, ``summary.json`` and ``evaluate`` report
each of the task's metrics under its own name, ``--metric`` picks the one that selects (and ``evaluate
--metric`` the one printed first), a metric of another task is one line and exit 2, and a validation or
test set under 30 items is warned of at start.

The references are written here from the definitions, over the run's own predictions (``predict``) or
scores: per-class loops for F1, every (positive, negative) pair for ROC-AUC and reciprocal ranks, a sort
for Hits@K. Counts give exact figures (tolerance 1e-12); ROC-AUC and MRR are sums of halves and
reciprocals in another order (1e-9).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fullgraph.cli import main
from fullgraph.tasks.link_metrics import LINK_METRICS, rank_of, shared_rank
from fullgraph.tasks.metrics import NODE_METRICS, class_counts, macro_f1

EXACT, SUMS = 1e-12, 1e-9


def f1_by_class(pred: np.ndarray, truth: np.ndarray) -> float:
    """Macro-F1 from its definition: each class seen in the labels or predictions, its F1, their mean."""
    scores = []
    for c in sorted(set(pred.tolist()) | set(truth.tolist())):
        tp = int(((pred == c) & (truth == c)).sum())
        fp = int(((pred == c) & (truth != c)).sum())
        fn = int(((pred != c) & (truth == c)).sum())
        scores.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def auc_by_pairs(pos: np.ndarray, neg: np.ndarray) -> float:
    """The share of (positive, negative) pairs the positive wins, ties one half."""
    diff = pos[:, None] - neg[None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size)


def test_macro_f1_of_counts_equals_its_definition():
    torch.manual_seed(0)
    logits, y = torch.randn(200, 7), torch.randint(0, 5, (200,))  # class 5 never a label, sometimes predicted
    logits[:, 6] = -1e9  # class 6 neither a label nor predicted: not in the mean
    got = macro_f1(class_counts(logits, y, 7), 7)
    assert got == pytest.approx(f1_by_class(logits.argmax(1).numpy(), y.numpy()), abs=EXACT)
    halves = [a + b for a, b in zip(class_counts(logits[:70], y[:70], 7), class_counts(logits[70:], y[70:], 7))]
    assert macro_f1(halves, 7) == pytest.approx(got, abs=EXACT)  # counts of two ranks summed: the same figure


def test_macro_f1_of_labels_equals_the_mean_over_labels():
    torch.manual_seed(1)
    logits, y = torch.randn(50, 4), (torch.rand(50, 4) > 0.6).float()
    pred, truth = (logits > 0).numpy(), y.numpy() > 0.5
    want = np.mean([2 * (p & t).sum() / (2 * (p & t).sum() + (p & ~t).sum() + (~p & t).sum())
                    for p, t in zip(pred.T, truth.T) if (p | t).any()])
    assert macro_f1(class_counts(logits, y, 4), 4) == pytest.approx(want, abs=EXACT)


def test_shared_rank_equals_the_comparison_with_every_negative():
    torch.manual_seed(2)
    pos, neg = torch.randint(0, 20, (300,)).double(), torch.randint(0, 20, (500,)).double()  # many ties
    assert torch.equal(shared_rank(pos, neg), rank_of(pos, neg.view(1, -1).expand(300, -1)))


@pytest.fixture(scope="module")
def cora_run(tmp_path_factory, shared_data):
    out = tmp_path_factory.mktemp("every-metric") / "run"
    assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--epochs", "6", "--hidden", "16",
                 "--metric", "macro-f1", "--out", str(out), "--progress", "none", "--threads", "1"]) == 0
    return out


def test_node_labels_report_every_metric_by_name(cora_run, tmp_path, shared_data):
    summary = json.loads((cora_run / "summary.json").read_text())
    records = [json.loads(line) for line in (cora_run / "metrics.jsonl").read_text().splitlines()]
    evaluated = [r for r in records if "metrics" in r]
    assert evaluated and all(set(r["metrics"]["val"]) == {"acc", "macro-f1", "micro-f1"} for r in evaluated)
    best = max(evaluated, key=lambda r: (r["metrics"]["val"]["macro-f1"], -r["epoch"]))  # selected by --metric
    assert summary["best_epoch"] == best["epoch"] and summary["metrics"] == best["metrics"]
    assert summary["test_metric"] == summary["metrics"]["test"]["macro-f1"]
    assert main(["predict", "--run", str(cora_run), "--out", str(tmp_path / "p")]) == 0
    pred = np.load(tmp_path / "p" / "predictions.npy")
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    g = load_graph(TrainConfig.of(dataset="cora", root=str(shared_data)))
    for split, mask in (("val", g.val_mask), ("test", g.test_mask)):
        m, truth = mask.numpy(), g.y.numpy()
        want = summary["metrics"][split]
        assert want["macro-f1"] == pytest.approx(f1_by_class(pred[m], truth[m]), abs=EXACT), split
        assert want["acc"] == want["micro-f1"] == pytest.approx((pred[m] == truth[m]).mean(), abs=EXACT), split


def test_evaluate_reports_any_metric_of_the_task(cora_run, capsys):
    summary = json.loads((cora_run / "summary.json").read_text())
    capsys.readouterr()
    assert main(["evaluate", "--run", str(cora_run), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["metrics"]["test"] == summary["metrics"]["test"]
    assert main(["evaluate", "--run", str(cora_run), "--metric", "rocauc", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)  # seven classes: ROC-AUC computed because it is asked for
    assert record["metric"] == "rocauc" and record["test_metric"] == record["metrics"]["test"]["rocauc"]
    assert 0.0 < record["test_metric"] <= 1.0
    assert main(["evaluate", "--run", str(cora_run), "--metric", "acc"]) == 0
    out = capsys.readouterr().out
    assert "accuracy train" in out and "Macro-F1" in out and "micro-F1" in out
    assert main(["evaluate", "--run", str(cora_run), "--metric", "mrr"]) == 2
    err = capsys.readouterr().err.strip()
    assert "with --task node (got --metric mrr, a links' metric)" in err and len(err.splitlines()) == 1


def test_two_classes_report_roc_auc_too(tmp_path, shared_data):
    out = tmp_path / "run"
    assert main(["train", "--dataset", "tolokers", "--root", str(shared_data), "--epochs", "2", "--hidden", "8",
                 "--out", str(out), "--progress", "none", "--threads", "1"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metric"] == "rocauc" and set(summary["metrics"]["test"]) == set(NODE_METRICS)
    assert main(["predict", "--run", str(out), "--out", str(tmp_path / "p")]) == 0
    proba = np.load(tmp_path / "p" / "probabilities.npy")[:, 1]
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    g = load_graph(TrainConfig.of(dataset="tolokers", root=str(shared_data)))
    m, y = g.test_mask.numpy(), g.y.numpy()
    want = auc_by_pairs(proba[m & (y == 1)].astype(np.float64), proba[m & (y == 0)].astype(np.float64))
    assert summary["metrics"]["test"]["rocauc"] == pytest.approx(want, abs=1e-6)  # float32 probabilities: ties differ


def test_links_report_every_metric_and_no_accuracy(tmp_path, shared_data, capsys):
    out = tmp_path / "run"
    assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--task", "link", "--hidden", "16",
                 "--epochs", "3", "--out", str(out), "--progress", "none", "--threads", "1"]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evaluated = [r for r in records if "metrics" in r]
    assert evaluated and not any(k.endswith("_acc") for r in records for k in r)  # ROC-AUC no longer as "accuracy"
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["metrics"]["val"]) == set(LINK_METRICS) and summary["val_acc"] is None
    from fullgraph.train.apply import _setup

    cfg, model, engine, _ = _setup(str(out), None, None, "cpu")
    model.eval()
    with torch.no_grad():
        h = engine.forward(model, 0, training=False)
        pos, neg = (model.decoder(h[p[:, 0]], h[p[:, 1]]).double().numpy() for p in (engine.task.split.val,
                                                                                     engine.task.split.val_neg))
    want = summary["metrics"]["val"]
    assert want["rocauc"] == pytest.approx(auc_by_pairs(pos, neg), abs=SUMS)
    ranks = 1 + (neg[None, :] > pos[:, None]).sum(1) + 0.5 * (neg[None, :] == pos[:, None]).sum(1)
    assert want["mrr"] == pytest.approx(np.mean(1 / ranks), abs=SUMS)
    for k in (20, 50, 100):
        assert want[f"hits@{k}"] == pytest.approx(np.mean(pos > np.sort(neg)[::-1][k - 1]), abs=EXACT)


@pytest.mark.parametrize("flags, warned", [
    (["--task", "link", "--link-split", "0.9,0.005,0.095", "--hidden", "16"], "the validation set has 26 positive pairs"),
    ([], None)])
def test_a_split_under_30_items_is_warned_of_at_start(tmp_path, shared_data, caplog, flags, warned):
    import logging

    with caplog.at_level(logging.WARNING, logger="fullgraph"):
        assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--epochs", "1", *flags,
                     "--out", str(tmp_path / "r"), "--progress", "none", "--threads", "1"]) == 0
    lines = [r.getMessage() for r in caplog.records if "under 30" in r.getMessage()]
    assert lines == ([f"{warned}: under 30, one of them moves its figures by more than 3 points"] if warned else [])


@pytest.mark.parametrize("layout", ["graph", "pipeline", "spmm-1d", "tensor"])
def test_every_layouts_counts_make_the_single_process_figures(tmp_path, shared_data, capsys, layout):
    """Two ranks' class counts, summed, give the figures one process computes from the same weights."""
    out = tmp_path / "run"
    assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--parallel", layout, "--nprocs", "2",
                 "--epochs", "3", "--hidden", "16", "--metric", "macro-f1", "--out", str(out), "--progress", "none"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    capsys.readouterr()
    assert main(["evaluate", "--run", str(out), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    for split in ("train", "val", "test"):
        assert record["metrics"][split] == summary["metrics"][split], split  # counts: exact


@pytest.mark.parametrize("command", [["plan", "--nprocs", "2"], ["datasets"]])
def test_only_train_and_evaluate_take_a_metric(command, capsys):
    """``--metric`` is the train and evaluate commands' alone: another command refuses it rather than ignoring it."""
    assert main([*command, "--metric", "acc"]) == 2
    assert "unrecognized arguments: --metric acc" in capsys.readouterr().err
