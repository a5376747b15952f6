"""Typed edge tasks (issue 62 §2 across graph kinds): a typed folder whose one relation's edge file names a label
column (``src dst label``) trains ``--task edge`` with a typed encoder (R-GCN).

What is proved: the labelled edges are that file's rows with each end made a global id by its type's offset in
the graph's node order (the labelled node type first, the others by name), and the label column is no layer's
input (the graph equals the folder without it); ``fullgraph convert`` keeps them beside the graph; graph parallelism (P = 2) trains the same losses as one
process; a second labelled relation, or a third column that is no label, is one line and exit 2.

Tolerance: LOSSES_REORDERED for a layout against one process (tests/_equality.py says why).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fullgraph.cli import main
from fullgraph.config import TrainConfig

from tests._equality import assert_same_losses

PAPERS, AUTHORS = 60, 40


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Papers (features, two classes) cite papers and are written by authors (features); each authorship is
    labelled 1 where the author's first feature is positive, else 0, every sixth one NaN."""
    rng = np.random.default_rng(3)
    path = tmp_path_factory.mktemp("typed-edges") / "g"
    path.mkdir()
    pf, af = rng.standard_normal((PAPERS, 4)).astype(np.float32), rng.standard_normal((AUTHORS, 3)).astype(np.float32)
    np.save(path / "paper_feat.npy", pf)
    np.save(path / "author_feat.npy", af)
    np.save(path / "labels.npy", np.arange(PAPERS) % 2)
    cites = np.unique(rng.integers(0, PAPERS, (150, 2)), axis=0)
    np.savetxt(path / "paper__cites__paper.txt", cites[cites[:, 0] != cites[:, 1]], fmt="%d")
    wrote = np.unique(np.stack([rng.integers(0, PAPERS, 220), rng.integers(0, AUTHORS, 220)], 1), axis=0)
    label = (af[wrote[:, 1], 0] > 0).astype(float)
    label[::6] = np.nan
    rows = "\n".join(f"{p},{a},{lab:g}" for (p, a), lab in zip(wrote, label))
    (path / "paper__written_by__author.csv").write_text("src,dst,label\n" + rows + "\n")
    return path, wrote, label


def test_the_labelled_relation_gives_global_pairs_and_no_input(folder, tmp_path):
    from fullgraph.data.formats.typed_folder import load_typed_folder
    from fullgraph.data.load import load_edge_split

    path, wrote, label = folder
    split = load_edge_split(TrainConfig.of(dataset=str(path), task="edge", model="rgcn"))
    keep = ~np.isnan(label)
    types = load_typed_folder(path).node_types
    assert types.names[0] == "paper" and types.offsets[types.index("author")] == PAPERS
    assert torch.equal(split.pairs, torch.from_numpy(wrote[keep] + [0, PAPERS]))
    assert torch.equal(split.y, torch.from_numpy(label[keep].astype(np.int64))) and split.x is None
    bare = tmp_path / "bare"  # the same folder, the label column left out
    bare.mkdir()
    for f in path.iterdir():
        (bare / f.name).symlink_to(f) if f.suffix != ".csv" else None
    np.savetxt(bare / "paper__written_by__author.txt", wrote, fmt="%d")
    assert load_typed_folder(bare).fingerprint() == load_typed_folder(path).fingerprint()


def test_convert_keeps_the_labelled_edges_beside_the_graph(folder, tmp_path):
    from fullgraph.data.load import load_edge_split

    path = folder[0]
    assert main(["convert", "--dataset", str(path), "--out", str(tmp_path / "native")]) == 0
    cfg = TrainConfig.of(dataset=str(path), task="edge", model="rgcn")
    want, got = load_edge_split(cfg), load_edge_split(cfg.with_options(dataset=str(tmp_path / "native")))
    assert all(torch.equal(getattr(got, k), getattr(want, k)) for k in ("pairs", "y", "train", "val", "test"))


def train(path, out, *flags) -> list[float]:
    assert main(["train", "--dataset", str(path), "--task", "edge", "--model", "rgcn", "--hidden", "8", "--epochs",
                 "3", "--edge-batch", "60", "--progress", "none", "--threads", "1", "--out", str(out), *flags]) == 0
    return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_graph_parallel_typed_edges_equal_one_process(folder, tmp_path):
    path = folder[0]
    want = train(path, tmp_path / "one")
    got = train(path, tmp_path / "two", "--parallel", "graph", "--nprocs", "2")
    assert_same_losses(got, want, what="typed edge task (R-GCN), graph P = 2 against one process")


@pytest.mark.parametrize("change, says", [
    ("second", "expected one edge file with a label column ('src dst label') in the typed folder"),
    ("weight", "expected the header of"),
])
def test_bad_typed_labels_are_one_line_and_exit_2(folder, tmp_path, capsys, change, says):
    path = tmp_path / "g"
    path.mkdir()
    for f in folder[0].iterdir():
        (path / f.name).symlink_to(f)
    if change == "second":
        (path / "paper__cites__paper.txt").unlink()
        (path / "paper__cites__paper.csv").write_text("src,dst,label\n0,1,1\n2,3,0\n")
    else:
        (path / "paper__cites__paper.txt").unlink()
        (path / "paper__cites__paper.csv").write_text("src,dst,weight\n0,1,1\n2,3,0\n")
    capsys.readouterr()
    assert main(["train", "--dataset", str(path), "--task", "edge", "--model", "rgcn", "--epochs", "1", "--progress",
                 "none", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err
