"""A folder of edges and features, no labels, trains ``--task link`` (issue 62 §1): the labels are optional
wherever no task reads them. One process, graph parallelism and the hybrid (one chunk) train it to the same
losses, and the pipeline trains it; a node task
on it, and ids past its feature rows, are one line and exit status 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fullgraph.cli import main
from tests._equality import assert_same_losses

NODES = 120


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Two planted communities of 60 nodes, features that half tell them apart, and no labels."""
    rng = np.random.default_rng(0)
    side = np.arange(NODES) // (NODES // 2)
    src, dst = rng.integers(0, NODES, (2, 1500))
    keep = (side[src] == side[dst]) | (rng.random(1500) < 0.1)
    path = tmp_path_factory.mktemp("unlabelled")
    np.savetxt(path / "edges.txt", np.stack([src[keep], dst[keep]], 1), fmt="%d")
    np.save(path / "features.npy", (rng.standard_normal((NODES, 6)) + side[:, None]).astype(np.float32))
    return path


def run(folder, out, *flags) -> tuple[dict, list[float]]:
    """The run's summary and its losses, epoch by epoch."""
    assert main(["train", "--dataset", str(folder), "--task", "link", "--hidden", "16", "--epochs", "4",
                 "--dropout", "0", "--progress", "none", "--threads", "1", "--out", str(out), *flags]) == 0
    losses = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    return json.loads((out / "summary.json").read_text()), losses


def test_a_folder_without_labels_trains_links_in_every_process_count(folder, tmp_path):
    one, losses = run(folder, tmp_path / "one")
    assert one["graph"]["nodes"] == NODES and set(one["metrics"]["test"]) >= {"rocauc", "mrr"}
    assert "classes" not in one["graph"] and "train" not in one["graph"]  # (the placeholders no link task reads)
    assert one["graph"]["pairs"]["train"] > 0
    two, losses_two = run(folder, tmp_path / "two", "--parallel", "graph", "--nprocs", "2")
    assert two["nprocs"] == 2 and len(losses) == 4
    assert_same_losses(losses_two, losses, what="graph P = 2 against one process, no labels")
    # GNNPipe's layouts read no labels either: the hybrid's one stage of two ways with one chunk is exact
    hybrid, losses_hybrid = run(folder, tmp_path / "hybrid", "--parallel", "hybrid", "--nprocs", "2", "--stages", "1",
                                "--graph-ways", "2", "--chunks", "1")
    assert_same_losses(losses_hybrid, losses, what="hybrid 1 x 2, one chunk, against one process, no labels")
    pipeline, _ = run(folder, tmp_path / "pipeline", "--parallel", "pipeline", "--nprocs", "2", "--chunks", "2")
    assert pipeline["nprocs"] == 2 and set(pipeline["metrics"]["test"]) >= {"rocauc", "mrr"}


def test_node_labels_need_labels(folder, tmp_path, capsys):
    assert main(["train", "--dataset", str(folder), "--epochs", "1", "--progress", "none",
                 "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert "expected one of labels.npy" in err and "--task link trains a folder without labels" in err
    assert len(err.splitlines()) == 1


def test_ids_past_the_feature_rows_are_named(folder, tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "edges.txt").write_text("0 1\n1 2\n2 500\n")
    np.save(bad / "features.npy", np.zeros((NODES, 3), dtype=np.float32))
    assert main(["train", "--dataset", str(bad), "--task", "link", "--epochs", "1", "--progress", "none",
                 "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"expected node ids in [0, {NODES}) (one per feature row)" in err and len(err.splitlines()) == 1
