"""Where an edge task's labelled edges come from, and their own features (issue 62 §2): split files of the
labelled edges beside an edge list, PyG's ``edge_label`` kept by ``write_pyg``, and the edges' feature
columns read by the decoder.

What is proved: the split files' rows are the split (through the rows without a label), and bad ones are one
line and exit 2; ``write_pyg`` keeps ``edge_label`` (with ``edge_label_index`` or per ``edge_index`` column, whose
``edge_attr`` rows are then the features) and trains; one process's loss with edge features is the MLP on
``[h_u, h_v, x_uv]`` written out from the weights (leaving the features out fails it); graph parallelism with
edge features equals one process; ``predict --pairs`` takes each pair's features and gives the classes the
run's own evaluation gave; a user's decoder of three parameters gets the features.

Tolerances: FLOAT32_FEW_OPS for a loss written out in another order, LOSSES_REORDERED for a layout against
one process (tests/_equality.py says why).
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

NODES = 120


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Two planted halves, features that tell them apart, and an edge list ``src,dst,length,angle,label``: the
    class is 1 across the halves or where ``length`` > 1, else 0; every eighth edge has no label (NaN)."""
    rng = np.random.default_rng(1)
    side = np.arange(NODES) // (NODES // 2)
    src, dst = rng.integers(0, NODES, (2, 900))
    keep = src != dst
    src, dst = src[keep], dst[keep]
    pairs = np.unique(np.stack([src, dst], 1), axis=0)  # each listed pair once: edges with features
    src, dst = pairs[:, 0], pairs[:, 1]
    x = (rng.standard_normal((NODES, 5)) + side[:, None]).astype(np.float32)
    feats = rng.uniform(0, 2, (len(src), 2))
    label = ((side[src] != side[dst]) | (feats[:, 0] > 1)).astype(float)
    label[::8] = np.nan
    path = tmp_path_factory.mktemp("edge-sources") / "g"
    path.mkdir()
    np.save(path / "features.npy", x)
    rows = "\n".join(f"{s},{d},{f[0]:.4f},{f[1]:.4f},{lab:g}" for s, d, f, lab in zip(src, dst, feats, label))
    (path / "edges.csv").write_text("src,dst,length,angle,label\n" + rows + "\n")
    return path


def cfg_of(path, **extra) -> TrainConfig:
    return TrainConfig.of(dataset=str(path), task="edge", hidden=16, epochs=3, edge_batch=400, seed=0,
                          progress="none", threads=1, **extra)


def listed(path):
    """The edge list's rows as numbers (``src, dst, length, angle, label``)."""
    return np.array([[float(v) for v in line.split(",")] for line in (path / "edges.csv").read_text().splitlines()[1:]])


@pytest.fixture()
def with_split_files(folder, tmp_path):
    """The folder with split files: the labelled rows cut 60/20/20 in listed order (row numbers of the list; the
    test part as a ``.npy`` boolean mask over the rows)."""
    import shutil

    path = tmp_path / "split"
    shutil.copytree(folder, path)
    labelled = np.flatnonzero(~np.isnan(listed(folder)[:, 4]))
    cut = np.split(labelled, [int(0.6 * len(labelled)), int(0.8 * len(labelled))])
    for name, rows in zip(("edge_train.txt", "edge_val.csv"), cut):
        np.savetxt(path / name, rows, fmt="%d")
    mask = np.zeros(len(listed(folder)), bool)
    mask[cut[2]] = True
    np.save(path / "edge_test.npy", mask)
    return path, cut


def test_split_files_are_the_split_of_the_labelled_edges(with_split_files):
    from fullgraph.data.load import load_edge_split

    path, cut = with_split_files
    split = load_edge_split(cfg_of(path))
    table = listed(path)
    for part, rows in zip(("train", "val", "test"), cut):
        pairs, y = split.part(part)
        assert torch.equal(pairs, torch.from_numpy(table[rows, :2].astype(np.int64)))
        assert torch.equal(y, torch.from_numpy(table[rows, 4].astype(np.int64)))
        assert torch.equal(split.features(getattr(split, part)), torch.from_numpy(table[rows, 2:4].astype(np.float32)))
    assert load_edge_split(cfg_of(path).with_options(seed=3)).train.equal(split.train)  # the data's split, not the seed's


@pytest.mark.parametrize("change, says", [
    ("edge-split", "expected no --edge-split with"),
    ("two-files", "expected all three edge split files (edge_train, edge_val, edge_test) or none"),
    ("unlabelled", "to name labelled edges only (got row 0, whose label is NaN)"),
    ("twice", "expected each edge in at most one part of the split"),
    ("outside", "expected rows of the edge list in [0, "),
])
def test_bad_split_files_are_one_line_and_exit_2(with_split_files, tmp_path, capsys, change, says):
    path, cut = with_split_files
    flags = ["--edge-split", "0.5,0.25,0.25"] if change == "edge-split" else []
    if change == "two-files":
        (path / "edge_test.npy").unlink()
    elif change in ("unlabelled", "twice", "outside"):
        extra = {"unlabelled": 0, "twice": int(cut[0][0]), "outside": 10 ** 6}[change]
        np.savetxt(path / "edge_val.csv", np.append(cut[1], extra), fmt="%d")
    capsys.readouterr()
    assert main(["train", "--dataset", str(path), "--task", "edge", *flags, "--epochs", "1", "--progress", "none",
                 "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


def test_pyg_edge_label_is_kept_by_write_pyg_and_trains(folder, tmp_path):
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Data

    from fullgraph.data.edge_sources import labelled_edges
    from fullgraph.data.load import load_edge_split
    from fullgraph.data.pyg import write_pyg

    table = listed(folder)
    x = torch.from_numpy(np.load(folder / "features.npy"))
    index = torch.from_numpy(table[:, :2].astype(np.int64)).T
    data = Data(x=x, edge_index=index, y=torch.arange(NODES) % 2, num_nodes=NODES,
                edge_attr=torch.from_numpy(table[:, 2:4]).float(), edge_label=torch.from_numpy(table[:, 4]))
    write_pyg(data, tmp_path / "per-edge", seed=0)
    got = labelled_edges(tmp_path / "per-edge", "edge")
    assert np.array_equal(got.pairs, table[:, :2]) and np.array_equal(got.y, table[:, 4], equal_nan=True)
    assert np.array_equal(got.x, table[:, 2:4].astype(np.float32)) and data.edge_label is not None  # not changed
    from fullgraph.data.pyg import from_pyg
    from fullgraph.errors import InputError

    with pytest.raises(InputError, match="write it with fullgraph.data.pyg.write_pyg"):  # train_model(data=)'s reader
        from_pyg(data)
    want = load_edge_split(cfg_of(folder))  # the same labelled edges as the edge list's, so the same split
    split = load_edge_split(cfg_of(tmp_path / "per-edge"))
    assert all(torch.equal(getattr(split, k), getattr(want, k)) for k in ("pairs", "y", "train", "x"))

    labelled = ~np.isnan(table[:, 4])  # given as pairs of their own, without features
    alone = Data(x=x, edge_index=index, y=torch.arange(NODES) % 2, num_nodes=NODES,
                 edge_label_index=index[:, labelled], edge_label=torch.from_numpy(table[labelled, 4]).long())
    write_pyg(alone, tmp_path / "pairs", seed=0)
    assert main(["train", "--dataset", str(tmp_path / "pairs"), "--task", "edge", "--hidden", "8", "--epochs", "2",
                 "--progress", "none", "--out", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert sum(summary["graph"]["labelled_edges"].values()) == labelled.sum()


def test_an_ogb_layouts_edge_label_file_labels_its_edges(folder, tmp_path):
    """An OGB node-property folder (csv layout) with ``raw/edge_label.csv.gz`` and ``raw/edge-feat.csv.gz``: the
    same labelled edges, labels and features as the edge list they were written from."""
    import gzip

    def gz(path, rows):
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt") as f:
            f.write("".join(",".join(str(v) for v in r) + "\n" for r in rows))

    table, x = listed(folder), np.load(folder / "features.npy")
    ogb = tmp_path / "ogb"
    gz(ogb / "raw" / "edge.csv.gz", table[:, :2].astype(np.int64).tolist())
    gz(ogb / "raw" / "edge_label.csv.gz", [[v] for v in table[:, 4]])
    gz(ogb / "raw" / "edge-feat.csv.gz", table[:, 2:4].tolist())
    gz(ogb / "raw" / "node-feat.csv.gz", x.tolist())
    gz(ogb / "raw" / "node-label.csv.gz", [[i % 2] for i in range(NODES)])
    for part, ids in (("train", range(0, 60)), ("valid", range(60, 90)), ("test", range(90, NODES))):
        gz(ogb / "split" / "s" / f"{part}.csv.gz", [[i] for i in ids])
    from fullgraph.data.load import load_edge_split, load_graph

    want, got = load_edge_split(cfg_of(folder)), load_edge_split(cfg_of(ogb))
    assert all(torch.equal(getattr(got, k), getattr(want, k)) for k in ("pairs", "y", "train", "test", "x"))
    assert load_graph(cfg_of(ogb)).edge_attr.shape[1] == 2  # the graph keeps its edge features; no label among them
    assert main(["train", "--dataset", str(ogb), "--task", "edge", "--hidden", "8", "--epochs", "1", "--progress",
                 "none", "--out", str(tmp_path / "run")]) == 0


def test_one_process_loss_reads_the_edges_features(folder):
    """The first step's loss from the encoder's rows, the step's edges, their features and the MLP's weights:
    ``W2 relu(W1 [h_u, h_v, x_uv] + b1) + b2``; without ``x_uv`` (its columns of ``W1`` dropped) it differs."""
    from fullgraph.train.trainer import Trainer

    trainer = Trainer(cfg_of(folder, dropout=0.0)).build()
    model, e, t = trainer.model, trainer.engine, trainer.task
    d = model.decoder
    assert t.split.edge_dim == 2 and d.hidden.weight.shape == (16, 2 * 16 + 2)
    with torch.no_grad():
        h = model(e.block, e.x)
        rows = t.step_rows(1, 0)
        pairs, y, xe = t.split.pairs[rows], t.split.y[rows], t.split.x[rows]
        z = torch.cat([h[pairs[:, 0]], h[pairs[:, 1]], xe], 1) @ d.hidden.weight.T + d.hidden.bias
        want = F.cross_entropy(torch.relu(z) @ d.out.weight.T + d.out.bias, y)
        blind = torch.cat([h[pairs[:, 0]], h[pairs[:, 1]]], 1) @ d.hidden.weight[:, :32].T + d.hidden.bias
        without = F.cross_entropy(torch.relu(blind) @ d.out.weight.T + d.out.bias, y)
        got = t.loss(e, model, h, 1, 0)
    assert_same(got.double(), want.double(), FLOAT32_FEW_OPS, "edge loss with edge features")
    assert abs(float(got) - float(without)) > 1e-3


def train(path, out, *flags) -> tuple[dict, list[float]]:
    assert main(["train", "--dataset", str(path), "--task", "edge", "--hidden", "16", "--epochs", "4",
                 "--edge-batch", "400", "--progress", "none", "--threads", "1", "--out", str(out), *flags]) == 0
    losses = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    return json.loads((out / "summary.json").read_text()), losses


def test_graph_parallel_with_edge_features_equals_one_process_and_predict_takes_them(folder, tmp_path, capsys):
    from fullgraph.data.load import load_edge_split

    _, want = train(folder, tmp_path / "one")
    _, got = train(folder, tmp_path / "two", "--parallel", "graph", "--nprocs", "2")
    assert_same_losses(got, want, what="edge task with edge features, graph P = 2 against one process")

    split = load_edge_split(cfg_of(folder))
    pairs, y = split.part("test")
    np.savetxt(tmp_path / "bare.txt", pairs.numpy(), fmt="%d")
    capsys.readouterr()
    assert main(["predict", "--run", str(tmp_path / "one"), "--pairs", str(tmp_path / "bare.txt"),
                 "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.strip()
    assert "[n, 4] (src, dst, then the edge's 2 features" in err and len(err.splitlines()) == 1, err
    np.savetxt(tmp_path / "pairs.txt", np.concatenate([pairs.numpy(), split.features(split.test).numpy()], 1))
    assert main(["predict", "--run", str(tmp_path / "one"), "--pairs", str(tmp_path / "pairs.txt"),
                 "--out", str(tmp_path / "p")]) == 0
    pred = np.load(tmp_path / "p" / "predictions.npy")
    capsys.readouterr()
    assert main(["evaluate", "--run", str(tmp_path / "one"), "--json"]) == 0
    test = json.loads(capsys.readouterr().out)["metrics"]["test"]
    assert test["acc"] == pytest.approx(float((pred == y.numpy()).mean()), abs=1e-12)


def test_a_users_decoder_of_three_parameters_gets_the_features(folder, tmp_path):
    (tmp_path / "dec.py").write_text(
        "import torch\n"
        "class Dec(torch.nn.Module):\n"
        "    def __init__(self, width, outputs, edge_dim):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(2 * width + edge_dim, outputs)\n"
        "        self.seen = []\n"
        "    def forward(self, h_src, h_dst, x):\n"
        "        self.seen.append(x.shape[1])\n"
        "        return self.lin(torch.cat([h_src, h_dst, x], 1))\n"
        "def build(width, outputs, edge_dim):\n"
        "    return Dec(width, outputs, edge_dim)\n")
    from fullgraph.data.load import load_edge_split
    from fullgraph.train.trainer import Trainer

    trainer = Trainer(cfg_of(folder, decoder=f"{tmp_path / 'dec.py'}:build").with_options(epochs=1)).build()
    trainer.train()
    assert trainer.model.decoder.edge_dim == 2 and set(trainer.model.decoder.seen) == {2}
    train(folder, tmp_path / "run", "--decoder", f"{tmp_path / 'dec.py'}:build")  # model.pt rebuilds it (no out.bias)
    split = load_edge_split(cfg_of(folder))
    np.savetxt(tmp_path / "pairs.txt", np.concatenate([split.pairs[:5].numpy(), split.x[:5].numpy()], 1))
    assert main(["predict", "--run", str(tmp_path / "run"), "--pairs", str(tmp_path / "pairs.txt"),
                 "--out", str(tmp_path / "p")]) == 0
    assert np.load(tmp_path / "p" / "probabilities.npy").shape == (5, 2)


def test_the_plan_counts_the_edge_exchange_the_ledger_moves(folder, tmp_path, capsys):
    """``fullgraph plan``'s bytes of an edge task's pair exchange (training and an evaluation, its gather of a
    row of index and C logits per edge) against a graph P = 2 run's ledger, every training edge in one step
    (each epoch then asks for the same far ends); an edge decoder's far rows travel as half projections,
    ``--hidden`` wide (sending whole projections doubles ``link/fwd``)."""
    flags = ["--dataset", str(folder), "--task", "edge", "--hidden", "16", "--edge-batch", "0"]
    summary, _ = train(folder, tmp_path / "run", "--parallel", "graph", "--nprocs", "2", "--edge-batch", "0",
                       "--eval-every", "1")
    got = summary["comm_bytes_per_epoch"]
    capsys.readouterr()
    assert main(["plan", *flags, "--nprocs", "2", "--layout", "graph", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["layouts"][0]["by_category"]
    pair = [k for k in row if k.startswith(("link/", "eval/link/")) or k == "eval/reduce"]
    assert {k: got[k] for k in pair} == {k: row[k] for k in pair}
    assert row["link/fwd"] > 0 and row["eval/link/fwd"] > 0 and row["link/fwd"] == row["link/bwd"]
