"""The seeded link split (``--link-split``), its file, and one process's link loss against its formula.

The split follows PyG's ``RandomLinkSplit(is_undirected=True)``: each undirected edge lands in exactly
one of train / val / test, held-out edges leave the encoder's graph in both directions, val and test
get one negative per positive, none of them an edge of the whole graph.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from fullgraph.config import TrainConfig
from fullgraph.data.graph import Graph
from fullgraph.data.link_split import LinkSplit, edge_keys, parse_link_split, random_link_split
from fullgraph.data.load import load_link_graph
from fullgraph.errors import InputError
from fullgraph.train.trainer import Trainer


def keys_of(pairs: torch.Tensor, n: int) -> set[int]:
    return set(edge_keys(pairs[:, 0].numpy(), pairs[:, 1].numpy(), n).tolist())


@pytest.fixture(scope="module")
def cora(shared_data):
    from fullgraph.data.load import load_graph

    return load_graph(TrainConfig.of(dataset="cora", root=str(shared_data)))


def test_split_covers_every_edge_once_and_removes_held_out_edges_both_ways(cora):
    graph, split = random_link_split(cora, (0.85, 0.05, 0.10), seed=3)
    n = cora.num_nodes
    src, dst = cora.edges()
    every = keys_of(torch.stack([src, dst], 1)[src != dst], n)
    train, val, test = (keys_of(getattr(split, f), n) for f in ("train", "val", "test"))
    assert train | val | test == every and not (train & val or train & test or val & test)
    assert len(val) == int(0.05 * len(every)) and len(test) == int(0.10 * len(every))
    gs, gd = graph.edges()
    kept = keys_of(torch.stack([gs, gd], 1), n)
    assert kept == train  # held-out pairs gone in both directions, every training pair kept
    assert graph.num_edges == 2 * len(train)  # Cora is symmetric: both directions of each training edge
    for neg in (split.val_neg, split.test_neg):
        assert not keys_of(neg, n) & every and bool((neg[:, 0] != neg[:, 1]).all())
    assert split.val_neg.shape == split.val.shape and split.test_neg.shape == split.test.shape
    again = random_link_split(cora, (0.85, 0.05, 0.10), seed=3)[1]
    assert again.fingerprint() == split.fingerprint()
    assert random_link_split(cora, (0.85, 0.05, 0.10), seed=4)[1].fingerprint() != split.fingerprint()


def test_split_carries_edge_data_with_its_edges():
    src = torch.tensor([0, 1, 1, 2, 2, 3, 3, 0])
    dst = torch.tensor([1, 0, 2, 1, 3, 2, 0, 3])
    weight = torch.arange(8, dtype=torch.float32)
    g = Graph.from_edges(src, dst, 4, edge_weight=weight, x=torch.eye(4), y=torch.tensor([0, 1, 0, 1]),
                         train_mask=torch.tensor([1, 0, 0, 0]).bool(), val_mask=torch.tensor([0, 1, 0, 0]).bool(),
                         test_mask=torch.tensor([0, 0, 1, 1]).bool())
    graph, split = random_link_split(g, (0.5, 0.25, 0.25), seed=0)
    by_pair = {(int(s), int(d)): float(w) for s, d, w in zip(src, dst, weight)}
    gs, gd = graph.edges()
    assert [by_pair[(int(s), int(d))] for s, d in zip(gs, gd)] == graph.edge_weight.tolist()
    assert split.train.shape[0] == 2 and graph.num_edges == 4


def test_split_file_round_trip(cora, tmp_path):
    _, split = random_link_split(cora, (0.85, 0.05, 0.10), seed=0)
    back = LinkSplit.load(split.save(tmp_path / "s.npz"))
    assert back.fingerprint() == split.fingerprint() and back.name == split.name
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="link split file"):
        LinkSplit.load(tmp_path / "bad.npz")


@pytest.mark.parametrize("text, message", [
    ("0.8,0.1,0.2", "sum to 1"), ("0,0.5,0.5", "leave training edges"), ("0.9,0.1", "three fractions"),
    ("a,b,c", "three fractions"), ("1.5,-0.25,-0.25", "three fractions")])
def test_bad_link_split_is_refused(text, message):
    with pytest.raises(InputError, match=message):
        parse_link_split(text)


def test_pairs_out_of_range_are_refused():
    ok = torch.zeros((1, 2), dtype=torch.int64)
    with pytest.raises(InputError, match=r"in \[0, 3\)"):
        LinkSplit(3, torch.tensor([[0, 3]]), ok, ok, ok, ok)
    with pytest.raises(InputError, match="at least one training edge"):
        LinkSplit(3, torch.zeros((0, 2), dtype=torch.int64), ok, ok, ok, ok)


def test_one_process_loss_is_the_binary_cross_entropy_of_the_step_pairs(shared_data):
    """The first step's loss, recomputed from the model's embeddings and the drawn pairs with the
    textbook formula: mean over B positives and B·k negatives of softplus(-s) or softplus(s)."""
    cfg = TrainConfig.of(dataset="cora", root=str(shared_data), task="link", edge_batch=1000, negatives=2,
                         decoder="mlp", dropout=0.0, epochs=1, progress="none", threads=1)
    graph, split = load_link_graph(cfg)
    trainer = Trainer(cfg, graph, split=split).build()
    model, e, task = trainer.model, trainer.engine, trainer.task
    with torch.no_grad():
        h = model(e.block, e.x)
        pairs, labels = task.step_pairs(1, 0)
        s = model.decoder(h[pairs[:, 0]], h[pairs[:, 1]])
    assert pairs.shape[0] == 3000 and int(labels.sum()) == 1000
    want = float(torch.cat([F.softplus(-s[:1000]), F.softplus(s[1000:])]).mean())
    model.train()
    with torch.no_grad():
        got = float(task.loss(e, model, h, 1, 0))
    assert got == pytest.approx(want, rel=1e-6)
    assert task.steps(1) == int(np.ceil(split.train.shape[0] / 1000))
    assert torch.equal(task.step_pairs(1, 1)[0], task.step_pairs(1, 1)[0])  # keyed: drawn the same again
    assert not torch.equal(task.step_pairs(1, 1)[0], task.step_pairs(2, 1)[0])


def test_evaluation_scores_in_chunks_as_in_one_piece(shared_data, monkeypatch):
    import fullgraph.tasks.link as link

    cfg = TrainConfig.of(dataset="cora", root=str(shared_data), task="link", epochs=1, progress="none", threads=1)
    graph, split = load_link_graph(cfg)
    trainer = Trainer(cfg, graph, split=split).build()
    whole = trainer.evaluate()
    monkeypatch.setattr(link, "EVAL_PAIRS", 100)  # 263 + 263 validation pairs: three chunks each
    assert trainer.evaluate() == whole


def test_the_memory_estimate_counts_a_steps_pairs(shared_data, capsys):
    """1,000 negatives per positive make 4.5 million pairs a step: about 9 GiB of pair rows at width 64, which
    the estimate counts before the first epoch (and the same run with one negative fits)."""
    from fullgraph.cli import main

    common = ["train", "--dataset", "cora", "--root", str(shared_data), "--task", "link", "--epochs", "1",
              "--memory-limit", "2", "--progress", "none"]
    assert main([*common, "--negatives", "1000"]) == 2
    err = capsys.readouterr().err
    assert "expected the estimated peak memory to fit in 2.00 GiB" in err and len(err.strip().splitlines()) == 1
    assert main([*common, "--negatives", "1"]) == 0
