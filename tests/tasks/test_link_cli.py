"""``fullgraph train --task link``, then ``evaluate`` and ``predict`` of the run (issue 53 §2, acceptance):
the selected epoch's metrics come back from ``model.pt``, given pairs are scored as the decoder scores
them, every node's embedding is written, and each bad input is one line with exit status 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fullgraph.cli import main

EPOCHS = 4


@pytest.fixture(scope="module")
def run(tmp_path_factory, shared_data):
    out = tmp_path_factory.mktemp("link-run") / "run"
    assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--task", "link", "--model", "sage",
                 "--hidden", "16", "--epochs", str(EPOCHS), "--decoder", "mlp", "--edge-batch", "3000",
                 "--metric", "hits@20", "--out", str(out), "--progress", "none", "--threads", "1"]) == 0
    return out


def test_evaluate_reproduces_the_selected_epoch(run, capsys):
    summary = json.loads((run / "summary.json").read_text())
    assert summary["metric"] == "hits@20" and 0.0 < summary["test_metric"] <= 1.0
    capsys.readouterr()
    assert main(["evaluate", "--run", str(run), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    for split in ("val", "test"):
        assert record[f"{split}_metric"] == pytest.approx(summary[f"{split}_metric"], abs=1e-6)
    assert main(["evaluate", "--run", str(run)]) == 0
    assert "Hits@20" in capsys.readouterr().out


def test_predict_scores_pairs_and_writes_embeddings(run, tmp_path):
    from fullgraph.train.model_file import load_model

    pairs = np.array([[0, 1], [5, 2707], [10, 10]])
    np.save(tmp_path / "pairs.npy", pairs)
    (tmp_path / "pairs.txt").write_text("0 1\n5,2707\n# a comment\n10 10\n")
    assert main(["predict", "--run", str(run), "--pairs", str(tmp_path / "pairs.npy"), "--embeddings",
                 "--out", str(tmp_path / "p")]) == 0
    scores = np.load(tmp_path / "p" / "scores.npy")
    h = np.load(tmp_path / "p" / "embeddings.npy")
    model, _ = load_model(run)
    with torch.no_grad():
        want = model.decoder(torch.from_numpy(h[pairs[:, 0]]), torch.from_numpy(h[pairs[:, 1]])).numpy()
    assert h.shape == (2708, 16) and np.allclose(scores, want, atol=1e-6)
    assert np.allclose(np.load(tmp_path / "p" / "probabilities.npy"), 1 / (1 + np.exp(-scores)), atol=1e-6)
    assert main(["predict", "--run", str(run), "--pairs", str(tmp_path / "pairs.txt"), "--out", str(tmp_path / "t")]) == 0
    assert np.allclose(np.load(tmp_path / "t" / "scores.npy"), scores, atol=1e-6)


@pytest.mark.parametrize("content, words", [("0 1\n3 99999\n", "in [0, 2708)"), ("0 1 2\n", "pairs [n, 2]"),
                                            ("0 x\n", "integer pairs"), ("0.5 1\n", "integer node ids")])
def test_bad_pairs_exit_2_with_one_line(run, tmp_path, content, words, capsys):
    (tmp_path / "bad.txt").write_text(content)
    assert main(["predict", "--run", str(run), "--pairs", str(tmp_path / "bad.txt"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o" / "scores.npy").exists()


@pytest.mark.parametrize("name, content", [("empty.txt", ""), ("comment.txt", "# src dst\n"), ("empty.npy", None)])
def test_no_pairs_at_all_is_one_line_without_numpys_warnings(run, tmp_path, name, content, capsys):
    """An empty ``--pairs`` file (text, or a ``[0, 2]`` array): one line that says so, no warning before it."""
    import warnings

    path = tmp_path / name
    np.save(path, np.zeros((0, 2), dtype=np.int64)) if content is None else path.write_text(content)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["predict", "--run", str(run), "--pairs", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "to hold at least one pair 'src dst' (got none)" in err and len(err.splitlines()) == 1, err
    assert not [w for w in seen if issubclass(w.category, UserWarning)]


def test_predict_of_a_link_run_needs_pairs_or_embeddings(run, tmp_path, capsys):
    assert main(["predict", "--run", str(run), "--out", str(tmp_path / "o")]) == 2
    assert "--pairs FILE or --embeddings" in capsys.readouterr().err


@pytest.mark.parametrize("args, words", [
    (["--task", "link", "--link-split", "0.8,0.1,0.2"], "sum to 1"),
    (["--task", "link", "--link-split", "0,0.5,0.5"], "leave training edges"),
    (["--task", "link", "--decoder", "cosine"], "expected decoder one of auto, dot, mlp"),
    (["--task", "link", "--decoder", "nowhere.py:build"], "Python file"),
    (["--task", "link", "--metric", "acc"], "node labels' metric"),
    (["--task", "link", "--prune"], "--prune only with --task node"),
    (["--edge-batch", "100"], "only with --task link"),
    (["--decoder", "mlp"], "only with --task link"),
    (["--task", "edges"], "expected task to be one of node, link"),
])
def test_bad_link_options_exit_2_with_one_line(args, words, capsys, tmp_path, shared_data):
    code = main(["train", "--dataset", "cora", "--root", str(shared_data), "--epochs", "1", "--progress", "none",
                 "--out", str(tmp_path / "r"), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and words in err, err
    assert len(err.splitlines()) == 1


def test_plan_counts_the_pair_exchange_of_the_partition_train_would_use(capsys, shared_data):
    """``fullgraph plan --task link`` adds the pair exchange of epoch 1 over the cached partition (the
    count of ``plan.link`` from that partition and the task's own draw, which test_link_layouts.py checks
    against a run's ledger) and counts the training traffic once per step."""
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_link_graph
    from fullgraph.parallel.setup import node_parts, prepare_partition_dir
    from fullgraph.plan.link import link_epoch_volume
    from fullgraph.tasks import LinkTask

    flags = ["--dataset", "cora", "--root", str(shared_data), "--task", "link", "--edge-batch", "2000", "--hidden", "16"]
    assert main(["plan", *flags, "--nprocs", "2", "--layout", "graph", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["layouts"][0]
    cfg = TrainConfig.of(dataset="cora", root=str(shared_data), task="link", edge_batch=2000, hidden=16,
                         parallel="graph", nprocs=2)
    graph, split = load_link_graph(cfg)
    node_part = node_parts(prepare_partition_dir(cfg, 2, graph=graph), graph.num_nodes)
    want = link_epoch_volume(LinkTask(cfg, split), 1, node_part, 16, 2)
    assert {k: row["by_category"][k] for k in want} == want and want["link/fwd"] > 0
    assert row["steps_per_epoch"] == 3  # 4,488 training edges in steps of 2,000: each recomputes the encoder
    one_step = [f if f != "2000" else "0" for f in flags]  # every training edge in one step, the same parts
    assert main(["plan", *one_step, "--nprocs", "2", "--layout", "graph", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)["layouts"][0]
    assert one["steps_per_epoch"] == 1
    for category in ("halo/fwd", "halo/bwd", "grad/allreduce"):
        assert row["by_category"][category] == 3 * one["by_category"][category]
    assert row["by_category"]["eval/halo/fwd"] == one["by_category"]["eval/halo/fwd"]  # evaluated once an epoch
    assert main(["plan", *flags, "--nprocs", "2", "--layout", "pipeline", "--json"]) == 0  # (test_link_pipeline.py)
    pipeline = json.loads(capsys.readouterr().out)["layouts"][0]
    assert pipeline["steps_per_epoch"] == 3 and pipeline["by_category"]["link/fwd"] == 0  # one stage holds every row



def test_plan_times_the_pair_exchange_on_the_ranks_network(shared_data):
    """The plan's link epoch adds the pair exchange's time: each rank's share of its bytes (the total over
    P) at the network's bandwidth, and a latency per message: 4 all-to-alls a training step (counts, ids,
    rows, gradients), 5 an evaluation chunk (counts, ids, rows, the scores' count and rows), each a
    message to the P - 1 others. One process, or no network given, adds nothing."""
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_link_graph
    from fullgraph.plan.epoch_time import Network
    from fullgraph.plan.link import link_epoch_row

    cfg = TrainConfig.of(dataset="cora", root=str(shared_data), task="link", edge_batch=2000, hidden=16,
                         parallel="graph", nprocs=2)
    node_part = torch.arange(load_link_graph(cfg)[0].num_nodes) % 2
    base = {"by_category": {"halo/fwd": 100, "eval/halo/fwd": 10}, "epoch_s": 1.5, "epoch_s_rounds": [1.5],
            "compute_s": 1.0, "comm_s": 0.0, "bubble_s": 0.0, "eval_s": 0.5}
    free = link_epoch_row(base, cfg, node_part, 16)
    assert free["steps_per_epoch"] == 3 and free["epoch_s"] == 3 * 1.0 + 0.5 and free["comm_s"] == 0.0
    volume = free["by_category"]
    train = sum(volume[k] for k in ("link/index", "link/fwd", "link/bwd"))
    evaluation = sum(volume[k] for k in ("eval/link/index", "eval/link/fwd", "eval/reduce"))
    byte_a_second = link_epoch_row(base, cfg, node_part, 16, Network(bandwidth_gbps=8e-9, latency_us=0.0))
    assert byte_a_second["epoch_s"] == pytest.approx(3.5 + (train + evaluation) / 2)
    assert byte_a_second["comm_s"] == pytest.approx(train / 2)
    second_a_message = link_epoch_row(base, cfg, node_part, 16, Network(bandwidth_gbps=1e15, latency_us=1e6))
    # 5 evaluation chunks: the training sample, validation, its negatives, test, its negatives (each < 2^20)
    assert second_a_message["epoch_s"] == pytest.approx(3.5 + 3 * 4 + 5 * 5, rel=1e-6)
    assert link_epoch_row(base, cfg, None, 16, Network(latency_us=1e6))["epoch_s"] == 3.5

def test_graph_parallel_link_run_resumes_bit_for_bit(tmp_path, shared_data):
    """A graph-parallel link run with several steps an epoch, stopped after 2 epochs and resumed to 4,
    trains the same bits as 4 in one go (the pairs and masks are keyed by seed, epoch and step, so a
    resumed run draws them again), its decoder's weights included."""
    from tests.cli.test_inputs import stopped_and_resumed

    common = ["--dataset", "cora", "--root", str(shared_data), "--task", "link", "--parallel", "graph", "--nprocs", "2",
              "--hidden", "16", "--edge-batch", "2500", "--decoder", "mlp", "--checkpoint-every", "2",
              "--threads", "1", "--progress", "none"]
    whole, part = stopped_and_resumed(common, tmp_path)
    assert any(k.startswith("decoder.") for k in whole)
    assert all(torch.equal(whole[k], part[k]) for k in whole)


def test_graph_parallel_predict_writes_the_embeddings_one_process_does(run, tmp_path, capsys):
    assert main(["predict", "--run", str(run), "--embeddings", "--out", str(tmp_path / "one")]) == 0
    assert main(["predict", "--run", str(run), "--embeddings", "--parallel", "graph", "--nprocs", "2",
                 "--out", str(tmp_path / "two")]) == 0
    one, two = (np.load(tmp_path / d / "embeddings.npy") for d in ("one", "two"))
    assert np.allclose(one, two, atol=1e-5) and not (tmp_path / "two" / "predictions.npy").exists()
    assert main(["predict", "--run", str(run), "--parallel", "graph", "--nprocs", "2", "--out", str(tmp_path / "x")]) == 2
    assert "expected --embeddings with --parallel graph" in capsys.readouterr().err


def test_an_ogb_link_folder_refuses_a_link_split_of_its_own(tmp_path, capsys):
    from fullgraph.data.synthetic.ogb_link import write_synthetic_ogb_link

    folder = write_synthetic_ogb_link(tmp_path / "collab", nodes=300, edges=1500, features=8)
    assert main(["train", "--dataset", str(folder), "--task", "link", "--link-split", "0.8,0.1,0.1", "--epochs", "1",
                 "--progress", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert "expected no --link-split" in err and len(err.splitlines()) == 1


def test_plan_and_train_estimate_a_link_step_alike(capsys, shared_data, monkeypatch):
    """The plan's peak of a link run is the one ``train`` checks before its first epoch: the step's scored
    pairs included (more with a larger ``--edge-batch``), a batch beyond the training edges counted as all
    of them (4,488 on Cora: issue 63's 176 GiB refusal of ``--edge-batch 100000000``)."""
    import fullgraph.memory
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_link_graph
    from fullgraph.train.trainer import Trainer

    monkeypatch.setattr(fullgraph.memory, "_THRESHOLD_FIXED", False)  # glibc's own threshold, as plan assumes
    peaks = {}
    for batch in ("500", "4488", "100000000"):
        flags = ["--dataset", "cora", "--root", str(shared_data), "--task", "link", "--edge-batch", batch, "--hidden", "16"]
        assert main(["plan", *flags, "--nprocs", "1", "--json"]) == 0
        peaks[batch] = json.loads(capsys.readouterr().out)["layouts"][0]["peak_bytes_per_rank"]
    cfg = TrainConfig.of(dataset="cora", root=str(shared_data), task="link", edge_batch=500, hidden=16, threads=1,
                         progress="none")
    graph, split = load_link_graph(cfg)
    assert Trainer(cfg, graph, split=split).build().estimated_peak == peaks["500"]
    assert peaks["500"] < peaks["4488"] == peaks["100000000"] < 2 << 30
