"""Edge tasks (issue 62 §2): a class (``--task edge``) or a number (``--task edge-regression``) per labelled edge,
read from an edge list's ``label`` column, split by ``--edge-split``, predicted by the MLP decoder from the two
ends' embeddings, under every layout that scores pairs.

What is proved: the label column is the edges' labels and no layer's input; the split is seeded, disjoint and
covers the labelled edges; ``--edge-holdout`` takes exactly the held-out edges out of the encoder's graph;
one process's loss is the cross-entropy (or the squared error of standardized
targets) written out from the encoder's rows and the decoder's weights; ``evaluate``'s metrics are numpy's of
``predict``'s outputs; graph parallelism, ``spmm-1d`` and the hybrid with one chunk train the same losses as
one process (dropout on, several steps an epoch); bad input is one line and exit status 2.

Tolerances: FLOAT32_FEW_OPS for a loss written out in another order; LOSSES_REORDERED for a layout against
one process; 1e-5 for metrics from float32 predictions against float64 sums (tests/_equality.py says why).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from fullgraph.cli import main
from fullgraph.config import TrainConfig

from tests._equality import FLOAT32_FEW_OPS, assert_same, assert_same_losses

NODES, SIDES = 150, 3


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Three planted communities of 50 nodes, features that tell them apart, no node labels, and a label per
    edge: 0 within a community, 1 across, 2 within the third (a class); or a number, the distance of the
    two ends' feature means (numbers). Every tenth edge has no label (NaN)."""
    rng = np.random.default_rng(0)
    side = np.arange(NODES) // (NODES // SIDES)
    src, dst = rng.integers(0, NODES, (2, 1800))
    keep = src != dst
    src, dst = src[keep], dst[keep]
    x = (rng.standard_normal((NODES, 6)) + side[:, None]).astype(np.float32)
    classes = (side[src] != side[dst]).astype(float) + (side[src] == 2) * (side[dst] == 2) * 2.0
    numbers = np.abs(x[src].mean(1) - x[dst].mean(1))
    path = tmp_path_factory.mktemp("edge-labels")
    for name, label in (("classes", classes), ("numbers", numbers)):
        (path / name).mkdir()
        label = label.copy()
        label[::10] = np.nan
        np.save(path / name / "features.npy", x)
        rows = "\n".join(f"{s},{d},{lab:.6g}" for s, d, lab in zip(src, dst, label))
        (path / name / "edges.csv").write_text("src,dst,label\n" + rows + "\n")
    return path


def cfg_of(folder, task="edge", **extra) -> TrainConfig:
    return TrainConfig.of(dataset=str(folder), task=task, hidden=16, epochs=3, edge_batch=500, seed=0, progress="none",
                          threads=1, **extra)


def test_the_label_column_labels_the_edges_and_no_layer_reads_it(folder):
    from fullgraph.data.load import load_edge_split, load_graph

    cfg = cfg_of(folder / "classes")
    graph, split = load_graph(cfg), load_edge_split(cfg)
    assert graph.edge_attr is None and graph.edge_weight is None  # the label is no feature
    text = (folder / "classes" / "edges.csv").read_text().splitlines()[1:]
    listed = np.array([[float(v) for v in line.split(",")] for line in text])
    labelled = listed[~np.isnan(listed[:, 2])]
    assert torch.equal(split.pairs, torch.from_numpy(labelled[:, :2].astype(np.int64)))
    assert torch.equal(split.y, torch.from_numpy(labelled[:, 2].astype(np.int64))) and split.num_classes == 3
    parts = torch.cat([split.train, split.val, split.test])
    assert torch.equal(parts.sort().values, torch.arange(len(labelled)))  # disjoint, covering
    n = len(labelled)
    assert (split.train.numel(), split.val.numel()) == (int(0.8 * n), int(0.9 * n) - int(0.8 * n))
    again = load_edge_split(cfg)
    other = load_edge_split(cfg.with_options(seed=1))
    assert torch.equal(again.train, split.train) and not torch.equal(other.train, split.train)


def test_edge_holdout_takes_the_validation_and_test_edges_out_of_the_encoders_graph(folder):
    from fullgraph.data.load import load_edge_split, load_graph

    cfg = cfg_of(folder / "classes")
    whole, held = load_graph(cfg), load_graph(cfg.with_options(edge_holdout=True))
    split = load_edge_split(cfg)
    key = lambda g: {(int(u), int(v)) for u, v in zip(*g.edges())}  # noqa: E731
    out = {(int(u), int(v)) for u, v in split.pairs[torch.cat([split.val, split.test])]}
    out |= {(v, u) for u, v in out}
    assert key(held) == key(whole) - out and key(whole) & out  # both directions of each held-out edge, no other


@pytest.mark.parametrize("task", ["edge", "edge-regression"])
def test_one_process_loss_is_written_out_from_the_rows_and_the_decoder(folder, task):
    """The first step's loss from the encoder's rows, the step's edges and the MLP's weights written out:
    the mean cross-entropy of ``W2 relu(W1 [h_u, h_v] + b1) + b2``, or the mean squared error of the
    targets standardized by the training edges' mean and population deviation."""
    from fullgraph.train.trainer import Trainer

    trainer = Trainer(cfg_of(folder / ("classes" if task == "edge" else "numbers"), task, dropout=0.0)).build()
    model, e, t = trainer.model, trainer.engine, trainer.task
    with torch.no_grad():
        h = model(e.block, e.x)
        rows = t.step_rows(1, 0)
        pairs, y = t.split.pairs[rows], t.split.y[rows]
        d = model.decoder
        z = torch.relu(torch.cat([h[pairs[:, 0]], h[pairs[:, 1]]], 1) @ d.hidden.weight.T + d.hidden.bias)
        logits = z @ d.out.weight.T + d.out.bias
        if task == "edge":
            want = F.cross_entropy(logits, y)
        else:
            train = t.split.y[t.split.train].double()
            target = (y.double() - train.mean()) / train.std(unbiased=False)
            want = (logits[:, 0].double() - target).square().mean()
        got = t.loss(e, model, h, 1, 0)
    assert t.steps(1) == int(np.ceil(t.split.train.numel() / 500)) > 1
    assert_same(got.double(), want.double(), FLOAT32_FEW_OPS, f"{task} loss")


def train(folder, out, task="edge", *flags) -> tuple[dict, list[float]]:
    assert main(["train", "--dataset", str(folder), "--task", task, "--hidden", "16", "--epochs", "4",
                 "--edge-batch", "500", "--progress", "none", "--threads", "1", "--out", str(out), *flags]) == 0
    losses = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    return json.loads((out / "summary.json").read_text()), losses


@pytest.fixture(scope="module")
def single(folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("edge-runs")
    return {task: (out / task, *train(folder / name, out / task, task))
            for task, name in (("edge", "classes"), ("edge-regression", "numbers"))}


@pytest.mark.parametrize("task", ["edge", "edge-regression"])
def test_evaluate_computes_numpys_metrics_of_predicts_outputs(folder, single, task, tmp_path, capsys):
    from fullgraph.data.load import load_edge_split

    run, summary, _ = single[task]
    name = "classes" if task == "edge" else "numbers"
    split = load_edge_split(cfg_of(folder / name, task))
    pairs, y = split.part("test")
    np.savetxt(tmp_path / "pairs.txt", pairs.numpy(), fmt="%d")
    assert main(["predict", "--run", str(run), "--pairs", str(tmp_path / "pairs.txt"), "--out", str(tmp_path / "p")]) == 0
    pred = np.load(tmp_path / "p" / "predictions.npy")
    capsys.readouterr()
    assert main(["evaluate", "--run", str(run), "--json"]) == 0
    test = json.loads(capsys.readouterr().out)["metrics"]["test"]
    y = y.numpy().astype(np.float64)
    if task == "edge":
        assert test["acc"] == pytest.approx(float((pred == y).mean()), abs=1e-12)
        f1 = [2 * ((pred == c) & (y == c)).sum() / ((pred == c).sum() + (y == c).sum()) for c in range(3)
              if (pred == c).any() or (y == c).any()]
        assert test["macro-f1"] == pytest.approx(float(np.mean(f1)), abs=1e-12)
        assert np.load(tmp_path / "p" / "probabilities.npy").shape == (len(y), 3)
    else:
        err = pred.astype(np.float64) - y
        assert test["rmse"] == pytest.approx(float(np.sqrt((err ** 2).mean())), abs=1e-5)
        assert test["mae"] == pytest.approx(float(np.abs(err).mean()), abs=1e-5)
        assert test["r2"] == pytest.approx(float(1 - (err ** 2).sum() / ((y - y.mean()) ** 2).sum()), abs=1e-5)
    assert set(summary["metrics"]["test"]) == set(test) and summary["graph"]["labelled_edges"]["test"] == len(y)


@pytest.mark.parametrize("task, flags", [
    ("edge", ["--parallel", "graph", "--nprocs", "2"]),
    ("edge", ["--parallel", "spmm-1d", "--nprocs", "2", "--model", "gcn"]),
    ("edge", ["--parallel", "hybrid", "--nprocs", "2", "--stages", "1", "--graph-ways", "2", "--chunks", "1"]),
    ("edge-regression", ["--parallel", "graph", "--nprocs", "2"]),
    ("edge", ["--parallel", "graph", "--nprocs", "2", "--edge-holdout"]),
], ids=["graph", "spmm-1d", "hybrid-1x2", "regression-graph", "holdout-graph"])
def test_every_layout_trains_edges_as_one_process(folder, single, task, flags, tmp_path):
    """Dropout 0.5, two steps an epoch; the hybrid with one chunk reads no history (exact training)."""
    name = "classes" if task == "edge" else "numbers"
    _, _, want = single[task]
    if "--edge-holdout" in flags:  # its own one-process run, on the graph without the held-out edges
        _, want = train(folder / name, tmp_path / "one", task, "--edge-holdout")
    summary, got = train(folder / name, tmp_path / "run", task, *flags)
    assert summary["nprocs"] == 2
    assert_same_losses(got, want, what=f"{task} {' '.join(flags[:2])} against one process")


@pytest.mark.parametrize("where, flags, says", [
    ("plain", ["--task", "edge"], "expected a column named label or edge_label in the header line of"),
    ("numbers", ["--task", "edge"], "a number per edge trains --task edge-regression"),
    ("classes", ["--task", "edge", "--edge-split", "1,0,0"], "to leave every part some of the"),
    ("classes", ["--edge-split", "0.5,0.25,0.25"], "expected --edge-split only with --task edge (got --task node)"),
    ("classes", ["--edge-holdout"], "expected --edge-holdout only with --task edge (got --task node)"),
    ("classes", ["--task", "edge", "--metric", "rocauc"], "expected --metric auto or one of acc, macro-f1, micro-f1"),
    ("classes", ["--task", "edge", "--decoder", "dot"], "expected --decoder mlp or a user's FILE.py:build with an edge"),
    ("classes", ["--task", "edge", "--edge-split", "0.5,0.5"], "expected --edge-split as three fractions"),
])
def test_bad_edge_input_is_one_line_and_exit_2(folder, tmp_path, capsys, where, flags, says):
    if where == "plain":
        (tmp_path / "plain").mkdir()
        np.save(tmp_path / "plain" / "features.npy", np.zeros((4, 2), dtype=np.float32))
        (tmp_path / "plain" / "edges.txt").write_text("0 1\n1 2\n2 3\n")
    root = tmp_path / "plain" if where == "plain" else folder / where
    capsys.readouterr()
    assert main(["train", "--dataset", str(root), *flags, "--epochs", "1", "--progress", "none",
                 "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err
