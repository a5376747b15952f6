"""A typed graph's run from the command line (issue 52 §2): R-GCN on HeCo's ACM trains, its ``model.pt``
records the node types and evaluates to the metrics the run reported; ``predict`` writes the labelled
type's predictions and every node's embedding, the same from one process and from two; a model built for
other types is refused in one line; an untyped graph is refused for ``--model rgcn`` before training."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fullgraph.cli import main

TRAIN = ["--model", "rgcn", "--layers", "2", "--hidden", "8", "--epochs", "3", "--progress", "none", "--threads", "1"]


@pytest.fixture(scope="module")
def run(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("typed") / "run"
    assert main(["train", "--dataset", "acm", "--root", str(shared_data), "--out", str(out), *TRAIN]) == 0
    return out


def test_model_file_records_the_types_and_evaluates_as_the_run_reported(run, capsys):
    saved = torch.load(run / "model.pt", weights_only=True)
    types = saved["model_args"]["node_types"]
    assert types["names"] == ["paper", "author", "subject"] and types["widths"] == [1902, 1902, 0]
    assert any(k.endswith("embedding") for k in saved["state_dict"])  # the subjects' learned rows
    summary = json.loads((run / "summary.json").read_text())
    capsys.readouterr()
    assert main(["evaluate", "--run", str(run)]) == 0
    assert f"test {summary['test_acc']:.4f}" in capsys.readouterr().out


def test_predict_writes_the_labelled_type_and_every_embedding(run, tmp_path):
    assert main(["predict", "--run", str(run), "--out", str(tmp_path / "one"), "--embeddings"]) == 0
    pred, proba = np.load(tmp_path / "one/predictions.npy"), np.load(tmp_path / "one/probabilities.npy")
    assert pred.shape == (4019,) and proba.shape == (4019, 3)  # the papers, in their own ids
    assert np.load(tmp_path / "one/embeddings.npy").shape == (11246, 8)  # papers, authors, subjects
    assert main(["predict", "--run", str(run), "--out", str(tmp_path / "two"), "--parallel", "graph",
                 "--nprocs", "2"]) == 0
    assert np.array_equal(np.load(tmp_path / "two/predictions.npy"), pred)


def test_rgcn_on_a_graph_of_one_type_is_one_line_exit_2(shared_data, tmp_path, capsys):
    """Issue 63 §11: say what is missing (relations, or node types where the edges have relations) and how to
    give it, in the user's words rather than the normalization's."""
    out = tmp_path / "cora"
    assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--out", str(out), *TRAIN]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected each edge to carry its relation for R-GCN" in err[0], err
    assert "typed folder" in err[0] and "relation-mean" not in err[0] and not (out / "model.pt").exists()
    folder = tmp_path / "typed_edges"  # an edge list with a type column: relations, but no node types
    folder.mkdir()
    (folder / "edges.txt").write_text("src dst type\n" + "".join(f"{i} {(i + 1) % 40} {i % 4}\n" for i in range(40)))
    (folder / "labels.txt").write_text("".join(f"{i % 2}\n" for i in range(40)))
    np.save(folder / "features.npy", np.ones((40, 2), dtype=np.float32))
    assert main(["train", "--dataset", str(folder), "--out", str(tmp_path / "run"), *TRAIN]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected node types for --model rgcn" in err[0], err
    assert "whatever relations its edges carry" in err[0] and "typed folder" in err[0], err


def test_graph_parallel_embeddings_resume_bit_for_bit_and_model_pt_holds_the_whole_table(tmp_path):
    """Under --parallel graph each rank keeps its own venues' embedding rows and their Adam moments
    (``parallel.owned``): a checkpoint names them per rank, so a run stopped after 2 epochs and resumed to
    4 trains the same bits as 4 in one go, and ``model.pt`` holds the whole table in node order."""
    from fullgraph.data.formats.native import write_native
    from tests.models.test_rgcn import small_typed
    from tests.cli.test_inputs import stopped_and_resumed

    write_native(small_typed(), tmp_path / "typed")  # three types, the venues without features
    common = ["--dataset", str(tmp_path / "typed"), "--parallel", "graph", "--nprocs", "2", "--feature-norm", "none",
              "--checkpoint-every", "2", *TRAIN[:-6], "--progress", "none"]
    whole, part = stopped_and_resumed(common, tmp_path)
    assert whole["input.embedding"].shape == (6, 8)  # every venue's row, put back together
    assert all(torch.equal(whole[k], part[k]) for k in whole)
