"""OGB's knowledge-graph layouts (issue 60 §2): ogbl-biokg (typed entities, ids local to their types)
and ogbl-wikikg2 (one entity type), read from synthetic folders of their files (``data.synthetic_ogb_kg``).

Checked against the files themselves (read here with ``torch.load`` and gzip, not through the reader):
the encoder's graph holds each training triple and its reverse relation's edge, a pair in two
relations twice; the split holds every triple with its relation and each held-out triple's own
``tail_neg`` and ``head_neg`` rows in global ids; MRR ranks the true tail among the one and the true
head among the other, averaged, as OGB's examples score the two batches; a damaged or hostile split file is one line, exit 2.
"""

from __future__ import annotations

import gzip
import json
import pickle

import numpy as np
import pytest
import torch

from fullgraph.cli import main
from fullgraph.data.detect import detect, load_path
from fullgraph.data.formats.ogb_kg import load_ogb_kg
from fullgraph.data.synthetic.ogb_kg import write_synthetic_kg
from fullgraph.errors import InputError


@pytest.fixture(scope="module")
def kgs(tmp_path_factory):
    root = tmp_path_factory.mktemp("kg")
    for layout in ("biokg", "wikikg2"):
        write_synthetic_kg(root / layout, layout, entities=500, relations=6, triples=3000, negatives=7, seed=1)
    return root


def _offsets(folder) -> dict:
    path = folder / "raw" / "num-node-dict.csv.gz"
    if not path.is_file():
        return {"entity": 0}
    names, counts = gzip.open(path, "rt").read().split()
    return dict(zip(names.split(","), np.cumsum([0] + [int(c) for c in counts.split(",")])[:-1].tolist()))


def _want_triples(folder, split: str) -> tuple[np.ndarray, dict]:
    """The split file's triples in global ids (biokg: local id + its type's offset), and the file."""
    d = torch.load(folder / "split" / ("random" if "bio" in folder.name else "time") / f"{split}.pt", weights_only=False)
    off = _offsets(folder)
    shift = lambda key: np.array([off[t] for t in d[key]]) if f"{key}" in d else 0  # noqa: E731
    head = d["head"] + (shift("head_type") if "head_type" in d else 0)
    tail = d["tail"] + (shift("tail_type") if "tail_type" in d else 0)
    return np.stack([head, d["relation"], tail], 1), d


@pytest.mark.parametrize("layout", ["biokg", "wikikg2"])
def test_the_graph_and_the_split_are_the_files(kgs, layout):
    folder = kgs / layout
    assert detect(folder).kind == "ogb_kg"
    graph, split = load_ogb_kg(folder)
    R = graph.num_relations // 2
    train, _ = _want_triples(folder, "train")
    src, dst = graph.edges()
    got = set(zip(src.tolist(), graph.edge_type.tolist(), dst.tolist()))
    want = {(h, r, t) for h, r, t in train.tolist() if h != t} | {(t, r + R, h) for h, r, t in train.tolist() if h != t}
    assert got == want and graph.num_edges == len(want)  # a loop stays out of the graph, as preprocess leaves them
    pairs = src * graph.num_nodes + dst
    assert pairs.unique().numel() < graph.num_edges  # some pairs stand in two relations
    assert torch.equal(torch.from_numpy(train[:, [0, 2]]), split.train)
    assert torch.equal(torch.from_numpy(train[:, 1]), split.relation("train"))
    for name, table in (("valid", "val"), ("test", "test")):
        held, d = _want_triples(folder, name)  # each positive ranked twice: tails corrupted, then heads
        assert torch.equal(torch.from_numpy(np.concatenate([held[:, [0, 2]]] * 2)), getattr(split, table))
        shift = {end: np.array([_offsets(folder)[t] for t in d[f"{end}_type"]])[:, None] if "tail_type" in d else 0
                 for end in ("head", "tail")}
        tails, heads = d["tail_neg"] + shift["tail"], d["head_neg"] + shift["head"]
        k = tails.shape[1]
        assert split.per_positive == k == 7
        want = np.concatenate([np.stack([np.repeat(held[:, 0], k), tails.reshape(-1)], 1),
                               np.stack([heads.reshape(-1), np.repeat(held[:, 2], k)], 1)])
        assert torch.equal(getattr(split, f"{table}_neg"), torch.from_numpy(want))
        assert torch.equal(split.relation(f"{table}_neg"), torch.from_numpy(np.repeat(np.concatenate([held[:, 1]] * 2), k)))
    with pytest.raises(InputError, match="knowledge-graph layout\\): train it with --task link"):
        load_path(folder)


def test_mrr_ranks_the_true_ends_among_their_given_negatives(kgs, tmp_path, capsys):
    """A trained run's test MRR and Hits@K, recomputed from its model's scores of the test triples and
    each triple's own negatives as OGB's evaluator ranks them (ties: the mean of the two ranks), the
    head-batch and the tail-batch averaged."""
    from fullgraph.train.apply import _setup

    folder = kgs / "wikikg2"
    out = tmp_path / "run"
    assert main(["train", "--dataset", str(folder), "--task", "link", "--model", "rgcn", "--hidden", "8", "--epochs", "2",
                 "--decoder", "distmult", "--metric", "mrr", "--out", str(out), "--progress", "none", "--threads", "1"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    _, model, engine, _ = _setup(str(out), None, None, "cpu")
    split = engine.task.split
    with torch.no_grad():
        h = engine.forward(model, 0, training=False)
        score = lambda pairs, rel: (h[pairs[:, 0]] * model.decoder.relation[rel] * h[pairs[:, 1]]).sum(-1)  # noqa: E731
        held, d = _want_triples(folder, "test")
        held, rel = torch.from_numpy(held[:, [0, 2]]), torch.from_numpy(held[:, 1])
        pos = score(held, rel).double()
        tails = torch.stack([held[:, :1].expand(-1, 7), torch.from_numpy(d["tail_neg"])], -1).view(-1, 2)
        heads = torch.stack([torch.from_numpy(d["head_neg"]), held[:, 1:].expand(-1, 7)], -1).view(-1, 2)
        neg = [score(pairs, rel.repeat_interleave(7)).double().view(-1, 7) for pairs in (tails, heads)]
    rank = torch.cat([1 + 0.5 * ((n > pos[:, None]).sum(1) + (n >= pos[:, None]).sum(1)).double() for n in neg])
    assert summary["test_metric"] == pytest.approx(float((1 / rank).mean()), abs=1e-9)
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    by = next(line for line in lines if line["epoch"] == summary["best_epoch"])["by_relation"]  # the model's epoch
    r0 = torch.cat([rel, rel]) == 0
    assert by["entity___0___entity"]["test_mrr"] == pytest.approx(float((1 / rank[r0]).mean()), abs=1e-9)
    assert by["entity___0___entity"]["test_hits@20"] == 1.0  # 7 negatives each: every rank is at most 8


@pytest.mark.parametrize("args, words", [
    (["--link-split", "0.8,0.1,0.1"], "no --link-split with"),
    (["--target-relation", "entity___0___entity"], "no --target-relation with"),
])
def test_a_kg_folder_keeps_its_own_split(kgs, args, words, capsys, tmp_path):
    code = main(["train", "--dataset", str(kgs / "wikikg2"), "--task", "link", "--model", "rgcn", "--epochs", "1",
                 "--progress", "none", "--out", str(tmp_path / "r"), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and words in err and len(err.splitlines()) == 1, err


class _Hostile:
    def __reduce__(self):
        return (print, ("ran code from a split file",))


@pytest.mark.parametrize("damage, words", [
    (lambda d: d.pop("relation"), "expected the key 'relation'"),
    (lambda d: d.update(tail_neg=d["tail_neg"][:, 0]), "tail_neg'] to be integer ids \\[n, K\\]"),
    (lambda d: d.pop("head_neg"), "expected the key 'head_neg'"),
    (lambda d: d.update(head_neg=d["head_neg"][:, :3]), "as many head_neg as tail_neg per triple"),
    (lambda d: d.update(head_neg=d["head_neg"] + 10_000), "head_neg'\\] ids within each relation's head type"),
    (lambda d: d.update(relation=d["relation"] + 100), "expected relation ids in \\[0, 6\\)"),
    (lambda d: d.update(tail=d["tail"] + 10_000), "ids within each relation's tail type"),
    (lambda d: d.update(head_type=["protein"] * len(d["head"])), "to name each relation's head type"),
    (lambda d: d.update(hostile=_Hostile()), "read without running code"),
])
def test_a_split_file_that_is_not_what_ogb_writes_is_one_line(kgs, tmp_path, damage, words):
    import shutil

    folder = shutil.copytree(kgs / "biokg", tmp_path / "biokg")
    path = folder / "split" / "random" / "valid.pt"
    d = torch.load(path, weights_only=False)
    damage(d)
    torch.save(d, path) if "hostile" not in d else path.write_bytes(pickle.dumps(d))
    with pytest.raises(InputError, match=words) as e:
        load_ogb_kg(folder)
    assert "\n" not in str(e.value)
