"""Typed links (issue 60 §2): ``--task link --target-relation SRC___REL___DST`` on a heterogeneous graph.

The graph is tests/models/test_rgcn_multi_relation.py's: two thousand (paper, author) pairs are both
``writes`` and ``reviews`` edges, so holding out a ``writes`` edge must leave the same pair's ``reviews``
edge in the encoder's graph. Checked: the split against its definition (PyG's ``RandomLinkSplit`` with
reverse edge types), negatives within the corrupted end's type, the relation-aware decoders against
independent formulas (PyG's ``kge`` models, complex numbers), one process's loss against the textbook
formula, graph parallelism against one process (dropout on, several steps), and the refusals.

Tolerances: FLOAT32_FEW_OPS for a decoder's score against the same formula in another order;
LOSSES_REORDERED and WEIGHTS_REORDERED for a layout against one process (tests/_equality.py says why).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from fullgraph.config import TrainConfig
from fullgraph.data.typed.link_split import random_typed_link_split, target_relations
from fullgraph.errors import InputError
from fullgraph.partition import PartitionBook, partition_nodes, save_partition
from fullgraph.plan.link import link_epoch_volume
from fullgraph.tasks import task_for
from fullgraph.tasks.decoders import build_decoder
from fullgraph.train.trainer import Trainer

from tests._equality import FLOAT32_FEW_OPS, assert_same, assert_same_losses, assert_same_state
from tests.distributed import run_ranks
from tests.models.test_rgcn_multi_relation import two_relation_graph

WRITES, REVIEWS = "paper___writes___author", "paper___reviews___author"
EPOCHS, HIDDEN = 3, 8


@pytest.fixture(scope="module")
def graph():
    return two_relation_graph(papers=200, authors=150, pairs=2500, both=2000)


def triples(g) -> set:
    src, dst = g.edges()
    return set(zip(src.tolist(), dst.tolist(), g.edge_type.tolist()))


def test_split_holds_out_triples_with_their_reverses_and_keeps_the_other_relations(graph):
    targets = target_relations(graph, f"{WRITES},{REVIEWS}")
    enc, split = random_typed_link_split(graph, (0.8, 0.1, 0.1), seed=3, targets=targets)
    rel = {name: i for i, name in enumerate(split.relation_names)}
    rev = {rel[WRITES]: rel["author___rev_writes___paper"], rel[REVIEWS]: rel["author___rev_reviews___paper"]}
    before, after = triples(graph), triples(enc)
    for r in targets:  # every edge of a target relation in exactly one table, each table its own share
        every = {(s, d) for s, d, t in before if t == r}
        got = {f: {tuple(p) for p in getattr(split, f)[split.relation(f) == r].tolist()} for f in ("train", "val", "test")}
        assert got["train"] | got["val"] | got["test"] == every and sum(map(len, got.values())) == len(every)
        assert len(got["val"]) == int(0.1 * len(every)) == len(got["test"])
        for s, d in got["val"] | got["test"]:  # gone with its reverse; the pair's other relation stays
            assert (s, d, r) not in after and (d, s, rev[r]) not in after
        for s, d in got["train"]:
            assert (s, d, r) in after and (d, s, rev[r]) in after
    held = {(s, d, int(r)) for f in ("val", "test") for (s, d), r in zip(getattr(split, f).tolist(), split.relation(f))}
    assert after == before - held - {(d, s, rev[r]) for s, d, r in held}
    shared = [(s, d) for s, d, r in held if r == rel[WRITES] and (s, d, rel[REVIEWS]) in before]
    assert shared and all((s, d, rel[REVIEWS]) in after or (s, d, rel[REVIEWS]) in held for s, d in shared)
    for f in ("val_neg", "test_neg"):  # tails corrupted within the author type, never an edge of the relation
        neg, r = getattr(split, f), split.relation(f)
        pos = getattr(split, f[:-4])
        assert torch.equal(neg[:, 0], pos[:, 0]) and torch.equal(r, split.relation(f[:-4]))
        assert bool(((neg[:, 1] >= 200) & (neg[:, 1] < 350)).all())
        assert not {(s, d, int(t)) for (s, d), t in zip(neg.tolist(), r)} & before
    again = random_typed_link_split(graph, (0.8, 0.1, 0.1), seed=3, targets=targets)[1]
    assert again.fingerprint() == split.fingerprint()


def test_split_file_round_trip_keeps_the_relations(graph, tmp_path):
    split = random_typed_link_split(graph, (0.8, 0.1, 0.1), 0, target_relations(graph, WRITES), corrupt="both")[1]
    back = type(split).load(split.save(tmp_path / "s.npz"))
    assert back.fingerprint() == split.fingerprint() and back.typed and back.relation_names == split.relation_names
    heads = (split.val_neg[:, 0] != split.val[:, 0])  # corrupt both: some heads replaced, within the paper type
    assert bool(heads.any()) and bool((split.val_neg[heads, 0] < 200).all())


def test_training_negatives_corrupt_within_the_type_keyed_by_the_step(graph):
    enc, split = random_typed_link_split(graph, (0.8, 0.1, 0.1), 0, target_relations(graph, WRITES))
    cfg = TrainConfig.of(task="link", target_relation=WRITES, negatives=3, edge_batch=500, corrupt="both")
    task = task_for(cfg, split)
    pairs, labels, rel = task.step_triples(1, 0)
    assert pairs.shape[0] == 2000 and int(labels.sum()) == 500 and bool((rel == rel[0]).all())
    neg = pairs[500:]
    assert bool((neg[:, 0] < 200).all()) and bool(((neg[:, 1] >= 200) & (neg[:, 1] < 350)).all())
    pos = pairs[:500].repeat_interleave(3, 0)
    kept = (neg == pos).sum(1)
    assert bool((kept >= 1).all()) and bool((neg[:, 0] != pos[:, 0]).any()) and bool((neg[:, 1] != pos[:, 1]).any())
    assert torch.equal(task.step_triples(1, 0)[0], pairs) and not torch.equal(task.step_triples(2, 0)[0], pairs)


def test_relation_decoders_equal_their_formulas():
    pyg = pytest.importorskip("torch_geometric.nn.kge")
    torch.manual_seed(0)
    n, width, R = 12, 6, 3
    h = F.normalize(torch.randn(n, width), dim=-1)
    head, tail, rel = torch.randint(0, n, (20,)), torch.randint(0, n, (20,)), torch.randint(0, R, (20,))
    ours = build_decoder("distmult", width, R)
    theirs = pyg.DistMult(n, R, width)
    with torch.no_grad():
        theirs.node_emb.weight.copy_(h)
        theirs.rel_emb.weight.copy_(ours.relation)
    assert_same(ours(h[head], h[tail], rel), theirs(head, rel, tail), FLOAT32_FEW_OPS, "DistMult")
    ours = build_decoder("transe", width, R)
    theirs = pyg.TransE(n, R, width, margin=1.0, p_norm=2.0)  # it normalizes the node rows: unit rows here
    with torch.no_grad():
        theirs.node_emb.weight.copy_(h)
        theirs.rel_emb.weight.copy_(ours.relation)
    # PyG's score is the negative distance (its margin sits in its loss): ours less our learned margin
    assert_same(ours(h[head], h[tail], rel) - ours.margin, theirs(head, rel, tail), FLOAT32_FEW_OPS, "TransE")
    ours = build_decoder("rotate", width, R)
    z = torch.complex(h[:, : width // 2].double(), h[:, width // 2:].double())  # the paper's score, with complex numbers
    rot = torch.polar(torch.ones_like(ours.relation.double()), ours.relation.double().detach())
    want = 1.0 - (z[head] * rot[rel] - z[tail]).abs().sum(-1)
    assert_same(ours(h[head], h[tail], rel).double(), want, FLOAT32_FEW_OPS, "RotatE")
    with pytest.raises(InputError, match="even embedding width"):
        build_decoder("rotate", 5, R)
    with pytest.raises(InputError, match="typed links .* --decoder distmult"):
        build_decoder("distmult", width)


def config(**extra) -> dict:
    return dict(task="link", target_relation=WRITES, model="rgcn", layers=2, hidden=HIDDEN, heads=2, dropout=0.5,
                decoder="distmult", edge_batch=800, negatives=2, epochs=EPOCHS, eval_every=EPOCHS, seed=0,
                lr=0.01) | extra


@pytest.fixture(scope="module")
def link(graph):
    return random_typed_link_split(graph, (0.8, 0.1, 0.1), 0, target_relations(graph, WRITES))


def test_one_process_loss_is_the_binary_cross_entropy_of_the_triples(link):
    """The first step's loss, recomputed from the encoder's rows, the drawn triples and DistMult's
    formula written out: the mean of softplus(-s) over positives and softplus(s) over negatives."""
    enc, split = link
    trainer = Trainer(TrainConfig.of(**config(dropout=0.0), progress="none", threads=1), enc, split=split).build()
    model, e, task = trainer.model, trainer.engine, trainer.task
    with torch.no_grad():
        h = model(e.block, e.x)
        pairs, labels, rel = task.step_triples(1, 0)
        s = (h[pairs[:, 0]] * model.decoder.relation[rel] * h[pairs[:, 1]]).sum(-1)
        pos = int(labels.sum())
        want = float(torch.cat([F.softplus(-s[:pos]), F.softplus(s[pos:])]).mean())
        got = float(task.loss(e, model, h, 1, 0))
    assert got == pytest.approx(want, rel=1e-6) and task.steps(1) == int(np.ceil(split.train.shape[0] / 800))


@pytest.fixture(scope="module")
def single(link):
    """One process's run of each encoder (R-GCN, HGT), trained once."""
    enc, split = link
    runs = {}

    def run(model: str):
        if model not in runs:
            trainer = Trainer(TrainConfig.of(**config(model=model), progress="none", threads=1), enc, split=split)
            result = trainer.build().train()
            runs[model] = torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict(), result
        return runs[model]
    return run


@pytest.mark.parametrize("model", ["rgcn", "hgt"])
def test_graph_parallel_typed_links_equal_one_process(link, single, tmp_path, model):
    """METIS P = 2: the same losses and weights (the decoder's relation vectors and the authors'
    embeddings included), the same test metric, and the pair exchange what ``plan.link`` counts."""
    enc, split = link
    link_file = str(split.save(tmp_path / "split.npz"))
    node_part = partition_nodes(enc, 2, method="metis", seed=0)
    save_partition(PartitionBook.build(enc, node_part), enc, tmp_path / "parts", {"method": "metis", "parts": 2, "seed": 0})
    runs = [{"name": "metis", "partition_dir": str(tmp_path / "parts"),
             "config": config(link_file=link_file, model=model)}]
    got = run_ranks("train_runs", 2, {"runs": runs}, tmp_path)["metis"]
    losses, state, result = single(model)
    assert any(k == "decoder.relation" for k in state)
    assert_same_losses(got["losses"], losses, what="graph P = 2 typed link losses")
    assert_same_state(got["state"], state, what="graph P = 2 typed link weights")
    # a ranking metric over scores equal up to float32 sums' order: two near-tied candidates may swap (HGT: 8e-6)
    assert got["test_metric"] == pytest.approx(result.test_metric, abs=1e-4)
    task = task_for(TrainConfig.of(**config()), split)
    planned = sorted(link_epoch_volume(task, epoch, node_part, HIDDEN, 2)["link/fwd"] for epoch in range(1, EPOCHS + 1))
    assert got["comm"]["link/fwd"] == planned[EPOCHS // 2] > 0


def test_the_hybrid_trains_typed_links_as_one_process(link, single, tmp_path):
    """One stage of two graph ways with one chunk (no history: exact training), R-GCN and DistMult: the
    last stage's ways exchange the pairs' rows of their parts and score each triple by its relation."""
    from tests.parallel.test_pipeline import prepare

    enc, split = link
    _, pdir, cfile = prepare(enc, 2, 1, tmp_path)
    run = config(link_file=str(split.save(tmp_path / "split.npz")), model="rgcn", parallel="hybrid", stages=1,
                 graph_ways=2, chunks=1, partition_dir=pdir, chunk_file=cfile)
    got = run_ranks("chunked_runs", 2, {"runs": [{"name": "hybrid", "config": run}]}, tmp_path)["hybrid"]
    losses, state, result = single("rgcn")
    assert_same_losses(got["losses"], losses, what="hybrid 1x2 typed link losses")
    assert_same_state(got["state"], state, what="hybrid 1x2 typed link weights")
    assert got["test_metric"] == pytest.approx(result.test_metric, abs=1e-4)


@pytest.mark.parametrize("target, match", [
    ("paper___likes___author", r"name relations of two-relations as SRC___REL___DST \(got paper___likes___author"),
    ("", r"expected --target-relation SRC___REL___DST"),
])
def test_bad_target_relations_are_one_line(graph, target, match):
    from fullgraph.data.load import load_link_graph

    with pytest.raises(InputError, match=match) as e:
        if target:
            target_relations(graph, target)
        else:
            import fullgraph.data.load as load

            orig = load.load_raw_graph
            load.load_raw_graph = lambda cfg: graph
            try:
                load_link_graph(TrainConfig.of(task="link"))
            finally:
                load.load_raw_graph = orig
    assert "\n" not in str(e.value)


def test_a_target_relation_on_an_untyped_graph_or_without_held_out_edges_is_refused(graph):
    with pytest.raises(InputError, match="carry relations with --target-relation"):
        target_relations(graph.without_edge_data(), WRITES)
    with pytest.raises(InputError, match=r"leave relation paper___writes___author training, validation and test"):
        random_typed_link_split(graph, (0.9998, 0.0001, 0.0001), 0, target_relations(graph, WRITES))


ACM_TARGET = "paper___written_by___author"


@pytest.fixture(scope="module")
def acm_run(tmp_path_factory, shared_data):
    from fullgraph.cli import main

    out = tmp_path_factory.mktemp("acm-links") / "run"
    assert main(["train", "--dataset", str(shared_data / "heco_acm"), "--task", "link", "--target-relation", ACM_TARGET,
                 "--model", "rgcn", "--hidden", "8", "--epochs", "2", "--decoder", "transe", "--out", str(out),
                 "--progress", "none", "--threads", "1"]) == 0
    return out


def test_evaluate_and_predict_a_typed_link_run(acm_run, tmp_path, capsys):
    """``evaluate`` gives back the selected epoch and each relation's metrics; ``predict --pairs`` scores
    triples whose relation is named or numbered alike."""
    import json

    from fullgraph.cli import main

    summary = json.loads((acm_run / "summary.json").read_text())
    last = json.loads((acm_run / "metrics.jsonl").read_text().splitlines()[-1])
    assert set(last["by_relation"]) == {ACM_TARGET} and last["by_relation"][ACM_TARGET]["test_rocauc"] == last["test_metric"]
    capsys.readouterr()
    assert main(["evaluate", "--run", str(acm_run), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["test_metric"] == pytest.approx(summary["test_metric"], abs=1e-9)
    assert record["by_relation"][ACM_TARGET]["test_mrr"] > 0
    (tmp_path / "p.txt").write_text(f"0 4100 {ACM_TARGET}\n0 4100 0\n5 4200 0\n")
    assert main(["predict", "--run", str(acm_run), "--pairs", str(tmp_path / "p.txt"), "--out", str(tmp_path / "o")]) == 0
    scores = np.load(tmp_path / "o" / "scores.npy")
    assert scores.shape == (3,) and scores[0] == scores[1] != scores[2]
    (tmp_path / "two.txt").write_text("0 4100\n")
    assert main(["predict", "--run", str(acm_run), "--pairs", str(tmp_path / "two.txt"), "--out", str(tmp_path / "x")]) == 2
    assert "[n, 3] (src, dst, relation" in capsys.readouterr().err
    (tmp_path / "turned.txt").write_text(f"0 4100 0\n4100 0 {ACM_TARGET}\n")  # an author offered as the paper
    assert main(["predict", "--run", str(acm_run), "--pairs", str(tmp_path / "turned.txt"), "--out", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"row 2: author 4100 and paper 0 for {ACM_TARGET}" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "y").exists()


@pytest.mark.parametrize("args, words", [
    (["--target-relation", "paper___likes___author"], "name relations of heco_acm as SRC___REL___DST"),
    ([], "expected --target-relation SRC___REL___DST with --task link on heco_acm"),
    (["--target-relation", ACM_TARGET, "--decoder", "rotate", "--hidden", "7"], "even embedding width"),
    (["--target-relation", ACM_TARGET, "--link-split", "0.99995,0.00004,0.00001"], "leave relation " + ACM_TARGET),
])
def test_bad_typed_link_options_exit_2_with_one_line(args, words, capsys, tmp_path, shared_data):
    from fullgraph.cli import main

    code = main(["train", "--dataset", str(shared_data / "heco_acm"), "--task", "link", "--model", "rgcn", "--epochs",
                 "1", "--progress", "none", "--out", str(tmp_path / "r"), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "r").exists()


def test_relation_decoders_and_target_relations_refused_on_untyped_links(capsys, tmp_path, shared_data):
    from fullgraph.cli import main

    for extra, words in ((["--decoder", "distmult"], "expected typed links"),
                         (["--target-relation", "a___b___c"], "carry relations with --target-relation")):
        code = main(["train", "--dataset", "cora", "--root", str(shared_data), "--task", "link", "--epochs", "1",
                     "--progress", "none", "--out", str(tmp_path / "r"), *extra])
        err = capsys.readouterr().err.strip()
        assert code == 2 and words in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("mode", ["spmm-1d", "tensor"])
def test_operator_layouts_train_typed_links_as_one_process(shared_data, tmp_path, mode):
    """A typed graph's links under the layouts that distribute Â itself, with an encoder that reads no
    relation (GCN) and the DistMult decoder that does: the same losses and weights as one process."""
    from fullgraph.data.load import load_link_graph

    cfg = dict(dataset=str(shared_data / "heco_acm"), task="link", target_relation=ACM_TARGET, model="gcn", layers=2,
               hidden=HIDDEN, dropout=0.5, decoder="distmult", edge_batch=5000, epochs=2, eval_every=2, seed=0, lr=0.01)
    enc, split = load_link_graph(TrainConfig.of(**cfg))
    trainer = Trainer(TrainConfig.of(**cfg, progress="none", threads=1), enc, split=split)
    ref = trainer.build().train()
    link_file = str(split.save(tmp_path / "split.npz"))
    task = "spmm_runs" if mode == "spmm-1d" else "tensor_runs"
    run = cfg | {"link_file": link_file} | ({"parallel": "spmm-1d"} if mode == "spmm-1d" else {})
    got = run_ranks(task, 2, {"runs": [{"name": mode, "config": run}]}, tmp_path)[mode]
    assert_same_losses(got["losses"], ref.losses, what=f"{mode} typed link losses")
    assert_same_state(got["state"], trainer.model.state_dict(), what=f"{mode} typed link weights")


def test_steps_per_epoch_caps_an_epoch_at_its_first_slices(link):
    """``--steps-per-epoch``: the epoch's first slices of its shuffle, the same pairs as without the cap."""
    enc, split = link
    whole = task_for(TrainConfig.of(**config()), split)
    capped = task_for(TrainConfig.of(**config(steps_per_epoch=1)), split)
    assert whole.steps(1) == int(np.ceil(split.train.shape[0] / 800)) > 1 and capped.steps(1) == 1
    assert torch.equal(capped.step_triples(2, 0)[0], whole.step_triples(2, 0)[0])
    assert task_for(TrainConfig.of(**config(steps_per_epoch=99)), split).steps(1) == whole.steps(1)
    with pytest.raises(InputError, match="steps_per_epoch"):
        TrainConfig.of(**config(steps_per_epoch=-1))


def test_plan_takes_the_rgcn_options(shared_data, capsys, monkeypatch):
    """``fullgraph plan`` plans the R-GCN ``train`` would run: its estimate measures the model built with the
    run's decomposition (``plan.measured``), not one with whole relation weights."""
    import json

    import fullgraph.machine_load
    import fullgraph.plan.measured as measured
    from fullgraph.cli import main
    from fullgraph.plan.layer_timer import LayerTimer

    monkeypatch.setattr(LayerTimer, "_timed", lambda self, fn: 1e-3)
    monkeypatch.setattr(fullgraph.machine_load, "busy_cores", lambda *a, **k: 0.0)
    asked, measure = [], measured.measured_memory
    monkeypatch.setattr(measured, "measured_memory", lambda model, options, *a: asked.append(options) or measure(model, options, *a))
    flags = ["plan", "--dataset", str(shared_data / "heco_acm"), "--task", "link", "--target-relation", ACM_TARGET,
             "--model", "rgcn", "--hidden", "64", "--nprocs", "1", "--json"]
    peaks = []
    for extra in ([], ["--rgcn-decomposition", "bases", "--rgcn-bases", "2", "--featureless", "one-hot"]):
        assert main(flags + extra) == 0
        peaks.append(json.loads(capsys.readouterr().out)["layouts"][0]["peak_bytes_per_rank"])
    assert {(o["rgcn_decomposition"], o["rgcn_bases"], o["featureless"]) for o in asked} == {
        ("none", 0, "embedding"), ("bases", 2, "one-hot")} and peaks[0] != peaks[1]
    assert main(flags + ["--rgcn-bases", "2"]) == 2
    assert "rgcn_bases >= 1 with --rgcn-decomposition" in capsys.readouterr().err
