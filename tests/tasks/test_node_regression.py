"""Node regression (issue 62 §3): a number per node, trained on standardized targets, judged in their units.

The graph is Cora's structure and features with a number per node derived here: ``log(1 + in-degree)``
plus a tenth of the class id (a target the features and the structure both inform). The references are
written from the definitions: RMSE, MAE and R² over ``predict``'s numbers with numpy; the first step's
loss, the squared error of targets standardized by the training nodes' mean and (population) deviation,
over the model's output on the whole graph. Tolerances: metrics against ``predict``'s numbers 1e-6 (the file
holds float32, the metrics were summed from float64), ``evaluate``'s against the summary's 1e-9 (sums of the
same float64 numbers in another order); the loss LOSSES_REORDERED and gradients DENSE_REFERENCE_GRADS
(tests/_equality.py). Layouts: graph parallelism, SpMM 1D, 1.5D and 2D and tensor parallelism equal one process
(LOSSES_REORDERED over the epochs' losses); the pipeline equals its one-process simulation of the same chunks, and the hybrid 2 × 2 its
1 × 2 (docs/design.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fullgraph.cli import main
from fullgraph.tasks.regression import regression_metrics

from tests._equality import DENSE_REFERENCE_GRADS, LOSSES_REORDERED, assert_same, assert_same_losses, assert_same_state

SUMS = 1e-9


def definitions(pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    err = pred.astype(np.float64) - y.astype(np.float64)
    return {"rmse": float(np.sqrt((err ** 2).mean())), "mae": float(np.abs(err).mean()),
            "r2": float(1 - (err ** 2).sum() / ((y - y.mean()) ** 2).sum())}


def test_regression_metrics_of_sums_equal_their_definitions():
    rng = np.random.default_rng(0)
    y, pred = rng.normal(3, 2, 300), rng.normal(3, 2, 300)
    sums = lambda p, t: [((p - t) ** 2).sum(), np.abs(p - t).sum(), t.sum(), (t ** 2).sum(), t.size]  # noqa: E731
    got = regression_metrics(*sums(pred, y))
    assert got == pytest.approx(definitions(pred, y), abs=SUMS)
    halves = [a + b for a, b in zip(sums(pred[:120], y[:120]), sums(pred[120:], y[120:]))]
    assert regression_metrics(*halves) == pytest.approx(got, abs=SUMS)  # two ranks' sums: the same figures
    assert regression_metrics(*sums(y, y))["r2"] == pytest.approx(1.0)


@pytest.fixture(scope="module")
def numbers(tmp_path_factory, cora):
    """Cora as an edge-list folder with a number per node and no split files (a seeded 60/20/20 split)."""
    folder = tmp_path_factory.mktemp("numbers") / "cora-numbers"
    folder.mkdir()
    src, dst = cora.edges()
    np.savetxt(folder / "edges.txt", torch.stack([src, dst], 1).numpy(), fmt="%d")
    np.save(folder / "features.npy", cora.x.to_dense().numpy() if cora.x.layout != torch.strided else cora.x.numpy())
    degree = torch.bincount(dst, minlength=cora.num_nodes).double()
    y = (torch.log1p(degree) + 0.1 * cora.y.double()).numpy().astype(np.float32)
    np.save(folder / "labels.npy", y)
    return folder


def train(folder, out, *flags) -> int:
    return main(["train", "--dataset", str(folder), "--task", "node-regression", "--epochs", "6", "--hidden", "16",
                 "--out", str(out), "--progress", "none", "--threads", "1", *flags])


@pytest.fixture(scope="module")
def run(numbers, tmp_path_factory):
    out = tmp_path_factory.mktemp("regression") / "run"
    assert train(numbers, out, "--metric", "mae") == 0
    return out


def test_every_metric_in_the_targets_units_and_the_lowest_mae_selects(run, numbers, tmp_path):
    summary = json.loads((run / "summary.json").read_text())
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evaluated = [r for r in records if "metrics" in r]
    assert evaluated and all(set(r["metrics"]["val"]) == {"rmse", "mae", "r2"} for r in evaluated)
    best = min(evaluated, key=lambda r: (r["metrics"]["val"]["mae"], r["epoch"]))  # the lowest MAE, first
    assert summary["best_epoch"] == best["epoch"] and summary["metrics"] == best["metrics"]
    assert summary["test_metric"] == summary["metrics"]["test"]["mae"] and summary["test_acc"] is None
    assert main(["predict", "--run", str(run), "--out", str(tmp_path / "p")]) == 0
    pred = np.load(tmp_path / "p" / "predictions.npy")
    assert pred.dtype == np.float32 and not (tmp_path / "p" / "probabilities.npy").exists()
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    g = load_graph(TrainConfig.of(dataset=str(numbers), task="node-regression"))
    assert g.numeric and (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (1625, 542, 541)  # 60/20/20 of 2,708
    for split, mask in (("train", g.train_mask), ("val", g.val_mask), ("test", g.test_mask)):
        m = mask.numpy()
        assert summary["metrics"][split] == pytest.approx(definitions(pred[m], g.y.numpy()[m]), abs=1e-6), split


def test_evaluate_recomputes_every_metric_from_the_saved_model(run, capsys):
    summary = json.loads((run / "summary.json").read_text())
    capsys.readouterr()
    assert main(["evaluate", "--run", str(run), "--metric", "r2", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["metric"] == "r2" and record["test_metric"] == record["metrics"]["test"]["r2"]
    for split in ("train", "val", "test"):
        assert record["metrics"][split] == pytest.approx(summary["metrics"][split], abs=SUMS), split
    assert main(["evaluate", "--run", str(run), "--metric", "acc"]) == 2
    err = capsys.readouterr().err.strip()
    assert "with --task node-regression (got --metric acc, a node labels' metric)" in err and len(err.splitlines()) == 1
    (run.parent / "pairs.txt").write_text("0 1\n")
    assert main(["predict", "--run", str(run), "--pairs", str(run.parent / "pairs.txt"), "--out",
                 str(run.parent / "scored")]) == 2
    err = capsys.readouterr().err.strip()
    assert "for a link-prediction or edge run" in err and "trained with --task node-regression)" in err


def test_the_loss_is_the_squared_error_of_standardized_targets(numbers):
    import copy

    from fullgraph.config import TrainConfig
    from fullgraph.ops.dropout import keyed_dropout
    from fullgraph.train.trainer import Trainer

    cfg = TrainConfig.of(dataset=str(numbers), task="node-regression", hidden=16, dropout=0.5, progress="none")
    trainer = Trainer(cfg).build()
    e, m = trainer.engine, trainer.model
    ref = copy.deepcopy(m)
    y = e.y[e.train_mask].double().numpy()
    mean, std = y.mean(), y.std()  # the training nodes' mean and population deviation
    with keyed_dropout(0, 1):
        loss = e.task.loss(e, m, e.forward(m, 1, training=True), 1, 0)
        out = ref(e.block, e.x)[e.train_mask, 0]
        want = (out - torch.from_numpy((y - mean) / std).float()).square().mean()
    loss.backward(), want.backward()
    assert_same(loss.detach(), want.detach(), LOSSES_REORDERED, "loss")
    assert_same_state({k: p.grad for k, p in m.named_parameters()}, {k: p.grad for k, p in ref.named_parameters()},
                      DENSE_REFERENCE_GRADS, "gradients")
    trainer.close()


def losses(out) -> list[float]:
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("layout, flags", [
    ("graph", ["--nprocs", "2"]), ("spmm-1d", ["--nprocs", "2"]), ("tensor", ["--nprocs", "2"]),
    ("spmm-1.5d", ["--nprocs", "4", "--replication", "2"]), ("spmm-2d", ["--nprocs", "4"])])
def test_every_exact_layout_trains_numbers_as_one_process(numbers, run, tmp_path, layout, flags):
    out = tmp_path / layout
    assert train(numbers, out, "--parallel", layout, *flags, "--epochs", "3", "--metric", "mae") == 0
    assert_same_losses(losses(out), losses(run)[:3], LOSSES_REORDERED)
    assert set(json.loads((out / "summary.json").read_text())["metrics"]["test"]) == {"rmse", "mae", "r2"}


def test_the_pipeline_trains_numbers_as_its_one_process_simulation(numbers, tmp_path):
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    from tests.parallel.test_pipeline import prepare, simulate

    chunks = 4
    graph = load_graph(TrainConfig.of(dataset=str(numbers), task="node-regression"))
    _, _, cfile = prepare(graph, 1, chunks, tmp_path)  # the chunks the launcher draws (METIS, seed 0)
    out = tmp_path / "pipeline"
    assert train(numbers, out, "--parallel", "pipeline", "--nprocs", "2", "--epochs", "3", "--chunks", str(chunks)) == 0
    cfg = TrainConfig.of(dataset=str(numbers), task="node-regression", hidden=16, epochs=3, progress="none", threads=1)
    want, _, _ = simulate(graph, cfg, chunks, cfile)
    assert_same_losses(losses(out), want, LOSSES_REORDERED)


def test_the_hybrid_2x2_trains_numbers_as_its_1x2(numbers, tmp_path):
    """The hybrid's stages follow the one-stage run of the same parts and chunks (as for node labels)."""
    runs = {"2x2": ["--nprocs", "4", "--stages", "2"], "1x2": ["--nprocs", "2", "--stages", "1"]}
    for name, flags in runs.items():
        assert train(numbers, tmp_path / name, "--parallel", "hybrid", *flags, "--graph-ways", "2", "--chunks", "4",
                     "--epochs", "3") == 0
    assert_same_losses(losses(tmp_path / "2x2"), losses(tmp_path / "1x2"), LOSSES_REORDERED)


def test_integer_labels_train_as_numbers(tmp_path, shared_data):
    out = tmp_path / "cora"
    assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--task", "node-regression", "--epochs", "2",
                 "--hidden", "8", "--out", str(out), "--progress", "none"]) == 0
    assert set(json.loads((out / "summary.json").read_text())["metrics"]["val"]) == {"rmse", "mae", "r2"}


@pytest.mark.parametrize("flags, says", [
    (["--task", "node"], "labels.npy (got numbers with fractions, float32): a number per node trains --task "
                         "node-regression"),
    (["--task", "node-regression", "--metric", "acc"], "expected --metric auto or one of rmse, mae, r2 with --task "
                                                       "node-regression (got --metric acc, a node labels' metric)")])
def test_bad_combinations_are_one_line_and_exit_2(numbers, tmp_path, capsys, flags, says):
    capsys.readouterr()
    assert main(["train", "--dataset", str(numbers), *flags, "--epochs", "1", "--out", str(tmp_path / "r"),
                 "--progress", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


def test_a_graph_of_numbers_is_refused_a_classification_task(numbers):
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph
    from fullgraph.errors import InputError
    from fullgraph.train.trainer import Trainer

    graph = load_graph(TrainConfig.of(dataset=str(numbers), task="node-regression"))
    with pytest.raises(InputError, match="expected class labels with --task node .got a number per node, float "
                                         "labels.: train --task node-regression"):
        Trainer(TrainConfig.of(progress="none"), graph).build()


def test_pyg_float_targets_are_numbers_and_float_class_ids_stay_classes():
    from fullgraph.data.pyg_fields import labels

    got = labels(torch.tensor([0.5, float("nan"), 2.25]), 3)
    assert got.dtype == torch.float32 and torch.isnan(got[1]) and got[2] == 2.25
    assert labels(torch.tensor([[1.0], [float("nan")], [0.0]]), 3).tolist() == [1, -1, 0]  # OGB's float class ids


def test_a_pyg_data_of_numbers_trains_through_its_native_folder(tmp_path, monkeypatch):
    """``train_model(data=Data)`` with a float ``y`` writes the native folder with its numbers (``numeric_labels``)
    and trains regression on it; the folder read back holds the same numbers, bit for bit."""
    from torch_geometric.data import Data

    import fullgraph
    from fullgraph.data.formats.native_read import load_native

    monkeypatch.setenv("FULLGRAPH_CACHE", str(tmp_path / "cache"))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(300, 8, generator=g)
    masks = torch.randperm(300, generator=g).split([180, 60, 60])
    fields = {name: torch.zeros(300, dtype=torch.bool).index_fill_(0, m, True)
              for name, m in zip(("train_mask", "val_mask", "test_mask"), masks)}
    y = x[:, 0] * 0.5 + 0.1 * torch.randn(300, generator=g)
    data = Data(x=x, edge_index=torch.randint(0, 300, (2, 2000), generator=g), y=y, **fields)
    out = tmp_path / "run"
    result = fullgraph.train_model("gcn", data=data, task="node-regression", epochs=3, out=str(out), progress="none")
    assert result.metric == "rmse" and set(result.metrics["test"]) == {"rmse", "mae", "r2"}
    folder = Path(json.loads((out / "config.json").read_text())["dataset"])
    assert json.loads((folder / "meta.json").read_text())["counts"]["numeric_labels"] is True
    assert torch.equal(load_native(folder).y, y)
