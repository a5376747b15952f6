"""Class labels whose count is inferred must look like class numbers (issue 49 §4).

A label of 1000 in a 4-class file used to train silently with 1,001 classes. Where the count is
inferred (the largest label + 1), labels that leave more than half of the classes, and at least
``MIN_EMPTY_CLASSES``, without a node are refused in one line; a count the data states is trusted.
The real datasets, the built-in synthetic graph and small graphs missing a class all pass, and
every layout's run header states the class count.
"""

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph import Graph, InputError
from fullgraph.cli import main
from fullgraph.data.formats import load_native, load_npz_shchur, write_native
from fullgraph.data.formats.edgelist_folder import load_edgelist_folder
from fullgraph.data.labels import MIN_EMPTY_CLASSES, check_inferred_classes, used_classes
from fullgraph.data.safe_pickle import load_npz_with_objects
from fullgraph.data.synthetic import planted_partition
from fullgraph.parallel.engine import Engine
from fullgraph.parallel.pipeline import ChunkedEngine
from fullgraph.parallel.spmm import SpmmEngine
from fullgraph.parallel.tensor_engine import TensorEngine

TYPO = [0, 1, 2, 3] * 5 + [1000]  # 4 classes and one node labelled 1000


def graph(labels, **over) -> Graph:
    """A path graph over ``labels`` with every labelled node in some split."""
    y = torch.tensor(labels)
    n = y.numel()
    split = torch.arange(n) % 3
    masks = {m: (split == i) & (y >= 0) for i, m in enumerate(("train_mask", "val_mask", "test_mask"))}
    masks["train_mask"][0] = True  # a label at node 0 keeps every mask non-empty in the tiny graphs
    return Graph.from_edges(torch.arange(n - 1), torch.arange(1, n), n, x=torch.ones(n, 2), y=y, **masks | over)


def write_folder(folder, labels):
    """An edge-list folder (docs/data.md): a path over the nodes, one feature, ``labels.txt``."""
    folder.mkdir()
    n = len(labels)
    (folder / "edges.txt").write_text("".join(f"{i} {i + 1}\n" for i in range(n - 1)))
    np.save(folder / "features.npy", np.ones((n, 1), dtype=np.float32))
    (folder / "labels.txt").write_text("".join(f"{c}\n" for c in labels))
    return folder


# ---------------------------------------------------------------------------- refused
def test_a_label_far_beyond_the_others_is_refused_in_one_line():
    with pytest.raises(InputError) as e:
        graph(TYPO)
    msg = str(e.value)
    assert "\n" not in msg
    for words in ("labels {0, 1, 2, 3, 1000}", "996 of 1001 classes have no node", "a label of 1000",
                  "next largest, 3", "renumber the classes 0..4", "num_classes"):
        assert words in msg, msg


def test_a_typo_below_the_refusal_is_said_once_in_one_line(tmp_path, caplog):
    """Issue 63 §5: a 7 in a 3-class folder made 8 classes, 4 of them empty, and trained silently."""
    folder = write_folder(tmp_path / "typo", [0, 1, 2] * 4 + [7])
    with caplog.at_level("WARNING", logger="fullgraph"):
        g = load_edgelist_folder(folder)
    said = [r.getMessage() for r in caplog.records if "without a node" in r.getMessage()]
    assert g.num_classes == 8 and len(said) == 1 and "\n" not in said[0], said
    for words in ("labels.txt {0, 1, 2, 7}", "4 of 8 classes without a node", "a label of 7", "next largest, 2",
                  "8 outputs", "renumber the classes 0..3"):
        assert words in said[0], said[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="fullgraph"):
        graph([0, 1, 2] * 4)  # every class used: nothing to say
    assert not [r for r in caplog.records if "without a node" in r.getMessage()]


def test_ids_rather_than_class_numbers_are_refused():
    with pytest.raises(InputError, match=r"2015 of 2021 classes have no node; no label below 2015"):
        graph([2015, 2016, 2017, 2018, 2019, 2020] * 2)
    with pytest.raises(InputError, match=r"labels \{0, 10, 20, 30, \.\.\., 80, 90\}: 81 of 91 classes"):
        graph(list(range(0, 100, 10)) * 2)


def test_the_threshold_more_than_half_and_at_least_eight_empty():
    assert MIN_EMPTY_CLASSES == 8
    assert check_inferred_classes(np.array([0, 8])) == 9  # 7 empty: too few to call a typo
    with pytest.raises(InputError, match="8 of 10 classes have no node"):
        check_inferred_classes(np.array([0, 9]))
    assert check_inferred_classes(np.arange(0, 20, 2)) == 19  # 9 empty of 19, 10 used: not more than half
    with pytest.raises(InputError, match="10 of 19 classes"):
        check_inferred_classes(np.r_[np.arange(0, 16, 2), 18])  # 9 used, 10 empty


def test_used_classes_counts_or_sorts():
    assert used_classes(np.array([3, -1, 0, 3, 1])).tolist() == [0, 1, 3]
    assert used_classes(np.array([5, 10**12, 5, -1])).tolist() == [5, 10**12]  # no bincount of 10^12


# ---------------------------------------------------------------------------- accepted
def test_small_graphs_missing_a_few_classes_pass():
    assert graph([0, 1, 3, 4, 1, 0]).num_classes == 5  # class 2 has no node
    assert graph([0, 1, 2, 3] * 3 + [10]).num_classes == 11  # 7 empty classes
    assert graph([0, -1, -1, 7, -1, 2, -1, 5]).num_classes == 8  # few labelled nodes, 4 empty


def test_split_files_where_a_class_is_absent_pass(tmp_path):
    folder = write_folder(tmp_path / "g", [0, 1, 2, 4, 0, 1, 2, 4, -1, -1])  # class 3: no node at all
    for s, ids in (("train", [0, 1, 2, 3]), ("val", [4, 5]), ("test", [6, 7])):
        (folder / f"{s}.txt").write_text("".join(f"{i}\n" for i in ids))
    assert load_edgelist_folder(folder).num_classes == 5


def test_a_stated_class_count_is_trusted(tmp_path):
    g = graph(TYPO, num_classes=1001)
    assert g.num_classes == 1001
    with pytest.raises(InputError, match=r"labels in \[0, 1000\) \(got a label 1000\)"):
        graph(TYPO, num_classes=1000)
    write_native(g, tmp_path / "native")  # meta.json states the count: read back as stated
    assert load_native(tmp_path / "native").num_classes == 1001
    folder = write_folder(tmp_path / "edges", TYPO)
    assert load_edgelist_folder(folder, num_classes=1001).num_classes == 1001


def test_one_hot_columns_state_the_class_count(tmp_path):
    """gnn-benchmark ``.npz`` labels come one-hot: 20 columns are 20 classes, used or not (not 2)."""
    adj = sp.csr_matrix(np.roll(np.eye(6, dtype=np.float32), 1, axis=1))
    onehot = sp.csr_matrix(np.eye(20, dtype=np.float32)[[0, 1, 0, 1, 0, 1]])
    path = tmp_path / "tiny.npz"
    np.savez(path, adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr, adj_shape=adj.shape,
             attr_matrix=np.eye(6, dtype=np.float32), labels_data=onehot.data, labels_indices=onehot.indices,
             labels_indptr=onehot.indptr, labels_shape=onehot.shape)
    assert load_npz_shchur(path, train_per_class=1, val_per_class=1).num_classes == 20


def _labels_of(path):
    if path.suffix == ".npy":
        y = np.load(path)
        return y.argmax(1) if y.ndim == 2 else y
    with np.load(path, allow_pickle=False) as z:  # only the names: the pickled members are read safely below
        key = "node_labels" if "node_labels" in z.files else "node_label"
    return np.asarray(load_npz_with_objects(path, [key])[key])


@pytest.mark.parametrize("rel, classes", [
    ("amazon_computers/amazon_cs.npz", 10), ("coauthor_cs/coauthor_cs.npz", 15),
    ("coauthor_physics/coauthor_phy.npz", 5), ("squirrel/squirrel.npz", 5), ("squirrel/squirrel_filtered.npz", 5),
    ("tolokers/tolokers.npz", 2), ("heco_acm/labels.npy", 3), ("heco_dblp/labels.npy", 4),
])
def test_the_real_datasets_whose_count_is_inferred_pass(shared_data, rel, classes):
    """Every class of each is used (read from the labels alone: the whole graphs load in test_loaders)."""
    y = _labels_of(shared_data / rel).astype(np.int64)
    used = used_classes(y)
    assert used.size == classes and check_inferred_classes(used) == classes


def test_the_synthetic_graph_passes():
    g = planted_partition(seed=0)
    assert check_inferred_classes(used_classes(g.y.numpy())) == g.num_classes == 5


# ---------------------------------------------------------------------------- the command line
def test_the_command_line_refuses_the_typo_in_one_line(tmp_path, capsys):
    folder = write_folder(tmp_path / "mygraph", TYPO)
    run = tmp_path / "run"
    assert main(["train", "--dataset", str(folder), "--epochs", "1", "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fullgraph: error:"), err
    assert "labels.txt" in err[0] and "996 of 1001 classes have no node" in err[0], err


# ---------------------------------------------------------------------------- the run's header
def _bare(cls, **attrs):
    """An engine of ``cls`` with only the attributes its ``describe`` reads (no process group)."""
    e = object.__new__(cls)
    e.__dict__.update(name="cora", in_dim=1433, num_classes=7, **attrs)
    return e


def test_every_layout_header_states_the_class_count():
    assert "classes=7" in repr(planted_partition(num_nodes=60, num_classes=7, num_features=4, seed=0))
    headers = [
        Engine.describe(SimpleNamespace(name="cora", in_dim=1433, num_classes=7)),
        _bare(ChunkedEngine, chunks=[SimpleNamespace(size=600), SimpleNamespace(size=700)], stage=0, num_stages=2,
              first=0, last=1, group=None, K=2, induced=False).describe(),
        _bare(SpmmEngine, mode="spmm-1d", R=2, c=1, row=0, col=0, block_nnz=[1, 1], block_nnz_unpermuted=[1, 1]
              ).describe(),
        _bare(TensorEngine, decoupled=False, chunks=0, world_size=2, rank=0, block=SimpleNamespace(num_dst=1354),
              num_nodes=2708, nnz=13264).describe(),
    ]
    for h in headers:
        assert "cora (1433 features, 7 classes)" in h, h
