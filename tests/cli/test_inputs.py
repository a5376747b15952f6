"""A run trains what was asked, or refuses in one line (issue 36 §1): a ``--partition-dir`` or chunk
file made from another graph than ``--dataset`` names, a layout without ``--nprocs``, a resume on a
graph changed since its checkpoint, an edge list with a weight column; a failed download leaves
nothing behind, and ``predict`` never mixes two predictions in one folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from fullgraph.cli import main


def fullgraph(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "fullgraph", *args], capture_output=True, text=True, timeout=timeout,
                          env=os.environ | {"PYTHONWARNINGS": "ignore"})


def stopped_and_resumed(common: list[str], tmp_path) -> tuple[dict, dict]:
    """``fullgraph train COMMON`` (which checkpoints every 2 epochs) run 4 epochs in one go, and 2 then resumed to 4,
    each command in a fresh process as a user runs it; checks that both trained the same loss bits and returns
    their ``model.pt`` weights (whole, resumed)."""
    import json

    import torch

    def train(*args):
        proc = fullgraph(*args)
        assert proc.returncode == 0, proc.stderr[-2000:]

    train("train", *common, "--epochs", "4", "--out", str(tmp_path / "whole"))
    train("train", *common, "--epochs", "2", "--out", str(tmp_path / "part"))
    train("train", "--resume", str(tmp_path / "part"), "--epochs", "4")
    losses = [[json.loads(line)["loss"] for line in (tmp_path / r / "metrics.jsonl").read_text().splitlines()]
              for r in ("whole", "part")]
    assert losses[1] == losses[0] and len(losses[0]) == 4, losses
    whole, part = (torch.load(tmp_path / r / "model.pt", weights_only=True)["state_dict"] for r in ("whole", "part"))
    return whole, part


def one_line_error(capsys, *words) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fullgraph: error:") and all(w in err[0] for w in words), err


def test_a_partition_of_another_graph_is_refused_and_without_dataset_its_graph_is_taken(tmp_path, shared_data, capsys):
    parts = tmp_path / "cora-2"
    assert main(["partition", "--dataset", "cora", "--root", str(shared_data), "--parts", "2", "--out", str(parts)]) == 0
    capsys.readouterr()
    run = tmp_path / "run"
    # --dataset names another graph than the folder's: one line naming both, nothing written
    assert main(["train", "--dataset", "synthetic", "--partition-dir", str(parts), "--parallel", "graph", "--nprocs",
                 "2", "--out", str(run)]) == 2
    one_line_error(capsys, "--dataset synthetic", str(parts), "'cora'")
    assert not run.exists()
    # without --dataset, the run is the folder's graph, and says so in every file it writes
    proc = fullgraph("train", "--root", str(shared_data), "--partition-dir", str(parts), "--parallel", "graph",
                     "--nprocs", "2", "--epochs", "2", "--progress", "none", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((run / "config.json").read_text())["dataset"] == "cora"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["dataset"] == "cora" and summary["config"]["dataset"] == "cora"
    ev = fullgraph("evaluate", "--run", str(run), "--json")
    assert ev.returncode == 0 and json.loads(ev.stdout)["test_metric"] == summary["test_metric"], ev.stderr


def test_a_layout_without_nprocs_is_refused(capsys, tmp_path):
    assert main(["train", "--parallel", "graph", "--epochs", "1", "--out", str(tmp_path / "run")]) == 2
    one_line_error(capsys, "expected --nprocs with --parallel graph")


def test_predict_refuses_an_earlier_prediction_and_overwrite_replaces_the_whole_set(tmp_path, capsys):
    run, out = tmp_path / "run", tmp_path / "pred"
    assert main(["train", "--epochs", "2", "--progress", "none", "--out", str(run)]) == 0
    assert main(["predict", "--run", str(run), "--out", str(out), "--embeddings"]) == 0
    capsys.readouterr()
    first = (out / "predictions.npy").read_bytes()
    for extra in ([], ["--parallel", "graph", "--nprocs", "2"]):  # refused before any rank starts
        assert main(["predict", "--run", str(run), "--out", str(out), *extra]) == 2
        one_line_error(capsys, "expected --out without an earlier prediction", "embeddings.npy", "--overwrite",
                       "would replace or remove them")  # issue 63 §15: why a folder of other files is refused
    assert (out / "embeddings.npy").exists() and (out / "predictions.npy").read_bytes() == first
    assert main(["predict", "--run", str(run), "--out", str(out), "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["predictions.npy", "probabilities.npy"]  # no stale embeddings


def test_a_failed_download_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    import urllib.error
    import zipfile

    from fullgraph.data import datasets

    def offline(url, dest):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(datasets, "_fetch", offline)
    root = tmp_path / "new" / "data"
    assert main(["train", "--dataset", "cora", "--root", str(root), "--epochs", "1", "--out", str(tmp_path / "run")]) == 2
    one_line_error(capsys, "download failed", "no network")
    assert not (tmp_path / "new").exists()  # not even the folders the download made

    def broken_archive(url, dest):  # the first member extracts, the second is corrupt
        with zipfile.ZipFile(dest, "w") as zf:
            zf.writestr("arxiv/raw/edge.csv.gz", b"x" * 64)
            zf.writestr("arxiv/raw/node-feat.csv.gz", b"y" * 64)
        data = bytearray(dest.read_bytes())
        at = data.rindex(b"y" * 64)
        data[at:at + 64] = b"z" * 64  # the member's CRC no longer matches
        dest.write_bytes(bytes(data))

    monkeypatch.setattr(datasets, "_fetch", broken_archive)
    kept = tmp_path / "kept"
    kept.mkdir()  # a root that existed before is kept, and holds nothing of the download
    assert main(["train", "--dataset", "ogbn-arxiv", "--root", str(kept), "--epochs", "1"]) == 2
    one_line_error(capsys, "download failed")
    assert list(kept.iterdir()) == []


def _edge_list_folder(folder, edges: str):
    import numpy as np

    folder.mkdir()
    (folder / "edges.txt").write_text(edges)
    np.save(folder / "features.npy", np.eye(8, dtype=np.float32))
    (folder / "labels.txt").write_text("0\n1\n0\n1\n0\n1\n0\n1\n")
    for split, ids in (("train", "0\n1\n2\n3\n"), ("val", "4\n5\n"), ("test", "6\n7\n")):
        (folder / f"{split}.txt").write_text(ids)


RING = "".join(f"{i} {(i + 1) % 8}\n" for i in range(8))


def test_a_weight_column_that_is_not_numeric_is_refused(tmp_path, capsys):
    _edge_list_folder(tmp_path / "g", "".join(f"{i} {(i + 1) % 8} {'heavy' if i == 5 else 0.5}\n" for i in range(8)))
    assert main(["train", "--dataset", "edgelist", "--root", str(tmp_path / "g"), "--epochs", "1"]) == 2
    one_line_error(capsys, "edges.txt", "heavy")


def test_tensor_refuses_a_gat_reading_edge_features_before_its_ranks_start(tmp_path, capsys):
    _edge_list_folder(tmp_path / "g", "src dst f1 f2\n" + "".join(f"{i} {(i + 1) % 8} {i} 1\n" for i in range(8)))
    assert main(["train", "--dataset", str(tmp_path / "g"), "--model", "gat", "--hidden", "4", "--heads", "2",
                 "--parallel", "tensor", "--nprocs", "2", "--epochs", "1", "--out", str(tmp_path / "run")]) == 2
    one_line_error(capsys, "reads no edge features with --parallel tensor", "single, graph, pipeline, hybrid")
    assert not (tmp_path / "run").exists()


def test_resume_refuses_a_graph_whose_edge_weights_changed(tmp_path, capsys):
    """The graph's fingerprint covers its edge data (issue 51 §3): new weights are another graph."""
    graph, run = tmp_path / "g", tmp_path / "run"
    _edge_list_folder(graph, "".join(f"{i} {(i + 1) % 8} 0.5\n" for i in range(8)))
    assert main(["train", "--dataset", "edgelist", "--root", str(graph), "--epochs", "2", "--checkpoint-every", "1",
                 "--progress", "none", "--out", str(run)]) == 0
    (graph / "edges.txt").write_text("".join(f"{i} {(i + 1) % 8} 0.75\n" for i in range(8)))
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--epochs", "3"]) == 2
    one_line_error(capsys, "expected the graph checkpoint", "the dataset changed on disk since")


def test_resume_refuses_a_graph_changed_on_disk(tmp_path, capsys):
    for extra in ([], ["--parallel", "graph", "--nprocs", "2"]):
        graph, run = tmp_path / f"g{len(extra)}", tmp_path / f"run{len(extra)}"
        _edge_list_folder(graph, RING)
        assert main(["train", "--dataset", "edgelist", "--root", str(graph), "--epochs", "2", "--checkpoint-every", "1",
                     "--progress", "none", "--out", str(run), *extra]) == 0
        (graph / "edges.txt").write_text(RING + "0 4\n")  # one more edge: another graph under the same name
        capsys.readouterr()
        assert main(["train", "--resume", str(run), "--epochs", "3"]) == 2
        one_line_error(capsys, "expected the graph checkpoint", "the dataset changed on disk since")
        assert json.loads((run / "summary.json").read_text())["epochs_run"] == 2  # the run is left as it was


def test_a_chunk_file_of_another_graph_is_refused(tmp_path):
    import pytest
    import torch

    from fullgraph.data.synthetic import planted_partition
    from fullgraph.errors import InputError
    from fullgraph.partition.chunks import cached_chunks, load_chunks

    one, other = (planted_partition(num_nodes=60, num_classes=3, avg_degree=4, num_features=4, seed=s) for s in (1, 2))
    path = cached_chunks(one, torch.zeros(60, dtype=torch.int64), 1, 4, "random", 0, tmp_path)
    assert load_chunks(path, 60, 4, one.fingerprint()).shape == (60,)
    with pytest.raises(InputError, match=r"expected the chunk file .* to be of this run's graph"):
        load_chunks(path, 60, 4, other.fingerprint())


def test_a_run_on_edge_data_resumes_bit_for_bit_and_its_model_evaluates_and_predicts(tmp_path):
    """Checkpoints, --resume, model.pt, evaluate and predict with edge data (issue 51 §3): a GAT that
    reads the edges' features and a weighted graph, stopped after 2 epochs and resumed to 4, trains the
    same bits as 4 epochs in one go; its model.pt rebuilds the GAT with its edge width."""
    edges = "src dst weight f1 f2\n" + "".join(f"{i} {(i + 1) % 8} {0.5 + i / 8} {i % 3} {1 - i / 4}\n"
                                               for i in range(8))
    _edge_list_folder(tmp_path / "g", edges)
    env = os.environ | {"PYTHONWARNINGS": "ignore"}

    def fullgraph(*args):
        proc = subprocess.run([sys.executable, "-m", "fullgraph", *args], capture_output=True, text=True, timeout=300,
                              env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]

    common = ["--dataset", str(tmp_path / "g"), "--model", "gat", "--hidden", "4", "--heads", "2", "--progress",
              "none", "--checkpoint-every", "2"]
    fullgraph("train", *common, "--epochs", "4", "--out", str(tmp_path / "whole"))
    fullgraph("train", *common, "--epochs", "2", "--out", str(tmp_path / "part"))
    fullgraph("train", "--resume", str(tmp_path / "part"), "--epochs", "4")

    def losses(run):
        return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]

    assert losses(tmp_path / "part") == losses(tmp_path / "whole") and len(losses(tmp_path / "whole")) == 4
    fullgraph("evaluate", "--run", str(tmp_path / "part"))
    fullgraph("predict", "--run", str(tmp_path / "part"), "--out", str(tmp_path / "pred"))
    assert (tmp_path / "pred" / "predictions.npy").is_file()
