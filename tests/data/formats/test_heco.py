"""HeCo's ACM and DBLP folders as typed graphs (``fullgraph.data.formats.heco``): the published files read
as shared/data/README.md measures them, recognised by the generic loader and by name, and every damaged
folder refused in one line that names the file. Each graph is loaded once per module: the file stays fast."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.cli import main
from fullgraph.config import TrainConfig
from fullgraph.data import datasets
from fullgraph.data.detect import detect, fixed_splits
from fullgraph.data.formats import load_heco
from fullgraph.data.formats.heco import SCHEMAS, heco_files
from fullgraph.data.load import load_graph
from fullgraph.errors import InputError


@pytest.fixture(scope="module")
def acm(shared_data):
    return load_heco(shared_data / "heco_acm")


@pytest.fixture(scope="module")
def dblp(shared_data):
    return load_heco(shared_data / "heco_dblp")


def _rows(path) -> np.ndarray:
    return np.loadtxt(path, dtype=np.int64, ndmin=2)


def _x_row(x: torch.Tensor, node: int) -> np.ndarray:
    """One dense row of a sparse CSR feature matrix."""
    lo, hi = int(x.crow_indices()[node]), int(x.crow_indices()[node + 1])
    row = np.zeros(x.shape[1], dtype=np.float32)
    row[x.col_indices()[lo:hi].numpy()] = x.values()[lo:hi].numpy()
    return row


def _edge_type(g, src: int, dst: int) -> int:
    s, d = g.edges()
    at = torch.nonzero((s == src) & (d == dst)).flatten()
    assert at.numel() == 1, (src, dst)
    return int(g.edge_type[at[0]])


def _labels_and_splits_on(g, lo: int, hi: int, per_class: int) -> None:
    """Labels and every split on ids ``lo..hi-1`` (the labelled type) only."""
    outside = torch.ones(g.num_nodes, dtype=torch.bool)
    outside[lo:hi] = False
    assert bool((g.y[lo:hi] >= 0).all()) and bool((g.y[outside] == -1).all())
    for m in (g.train_mask, g.val_mask, g.test_mask):
        assert not bool(m[outside].any())
    assert int(g.train_mask.sum()) == per_class * g.num_classes
    assert int(g.val_mask.sum()) == int(g.test_mask.sum()) == 1000


def test_acm_types_relations_features_and_one_edge(acm, shared_data):
    t, folder = acm.node_types, shared_data / "heco_acm"
    assert (t.names, t.counts, t.widths, t.labelled) == (("paper", "author", "subject"), (4019, 7167, 60),
                                                        (1902, 1902, 0), ("paper",))
    assert t.relations == (("paper", "written_by", "author"), ("paper", "has_subject", "subject"),
                           ("author", "rev_written_by", "paper"), ("subject", "rev_has_subject", "paper"))
    pa, ps = _rows(folder / "pa.txt"), _rows(folder / "ps.txt")
    assert acm.num_edges == 2 * (len(pa) + len(ps)) == 2 * (13407 + 4019) and acm.num_relations == 4
    assert acm.num_classes == 3 and acm.x.layout == torch.sparse_csr
    _labels_and_splits_on(acm, 0, 4019, 20)
    paper, author = int(pa[0, 0]), int(pa[0, 1])  # global ids: papers first, then authors, then subjects
    assert _edge_type(acm, paper, 4019 + author) == 0 and _edge_type(acm, 4019 + author, paper) == 2
    assert _edge_type(acm, int(ps[0, 0]), 4019 + 7167 + int(ps[0, 1])) == 1
    a_feat = sp.load_npz(folder / "a_feat.npz").tocsr()
    row = _x_row(acm.x, 4019 + author)
    assert not row[:1902].any() and np.array_equal(row[1902:], a_feat[author].toarray()[0].astype(np.float32))
    assert not _x_row(acm.x, 4019 + 7167).any()  # a subject: no features
    labels = np.load(folder / "labels.npy")
    assert torch.equal(acm.y[:4019], torch.from_numpy(labels.astype(np.int64)))


def test_dblp_types_relations_features_and_one_edge(dblp, shared_data):
    t, folder = dblp.node_types, shared_data / "heco_dblp"
    assert (t.names, t.counts, t.widths, t.labelled) == (("author", "paper", "term", "conference"),
                                                        (4057, 14328, 7723, 20), (334, 4231, 50, 0), ("author",))
    assert t.relations[:3] == (("paper", "written_by", "author"), ("paper", "published_in", "conference"),
                               ("paper", "has_term", "term"))
    assert t.relations[3:] == tuple((d, "rev_" + r, s) for s, r, d in t.relations[:3])
    rows = {f: _rows(folder / f) for f in ("pa.txt", "pc.txt", "pt.txt")}
    assert dblp.num_edges == 2 * sum(len(r) for r in rows.values()) == 2 * (19645 + 14328 + 85810)
    _labels_and_splits_on(dblp, 0, 4057, 20)
    paper, term = (int(v) for v in rows["pt.txt"][0])
    g_paper, g_term = 4057 + paper, 4057 + 14328 + term
    assert _edge_type(dblp, g_paper, g_term) == 2 and _edge_type(dblp, g_term, g_paper) == 5
    paper, author = (int(v) for v in rows["pa.txt"][0])
    assert _edge_type(dblp, 4057 + paper, author) == 0
    t_feat = np.load(folder / "t_feat.npz", allow_pickle=False)  # a plain .npy despite its name
    row = _x_row(dblp.x, g_term)
    assert not row[:334 + 4231].any() and np.allclose(row[334 + 4231:], t_feat[term])


def _save_npz(path, matrix) -> None:
    sp.save_npz(path, matrix, compressed=False)  # uncompressed: fast to write


def _tiny_acm(folder, k: int = 20) -> None:
    """An ACM-shaped folder of 3 papers, 2 authors and 2 subjects: fast to load."""
    folder.mkdir()
    _save_npz(folder / "p_feat.npz", sp.csr_matrix(np.eye(3, 2)))
    _save_npz(folder / "a_feat.npz", sp.coo_matrix(np.ones((2, 2))))
    (folder / "pa.txt").write_text("0\t0\n1\t1\n2\t1\n")
    (folder / "ps.txt").write_text("0 0\n1 1\n2 0\n")
    np.save(folder / "labels.npy", np.array([0.0, 1.0, 0.0]))  # float class ids, as ACM's
    for i, split in enumerate(("train", "val", "test")):
        np.save(folder / f"{split}_{k}.npy", np.array([i]))


def test_the_split_choice_and_the_files_as_they_are(tmp_path):
    _tiny_acm(tmp_path / "tiny", k=60)
    g = load_heco(tmp_path / "tiny", labels_per_class=60, reverse=False, name="tiny")
    assert g.name == "tiny" and g.node_types.counts == (3, 2, 2) and g.y.tolist() == [0, 1, 0, -1, -1, -1, -1]
    assert g.num_relations == 2 and g.num_edges == 6  # one direction, as the files list them
    assert [int(m.nonzero()) for m in (g.train_mask, g.val_mask, g.test_mask)] == [0, 1, 2]
    with pytest.raises(InputError, match=r"expected the split files train_20.npy.*\(got splits for 60\)"):
        load_heco(tmp_path / "tiny")  # labels_per_class=20 by default


def test_detected_by_its_files_and_known_by_name(acm, shared_data, monkeypatch):
    folder = shared_data / "heco_acm"
    assert detect(folder).kind == "heco" and detect(shared_data / "heco_dblp").kind == "heco"
    g = load_graph(TrainConfig.of(dataset=str(folder), split=1))  # --split 1: 40 training nodes per class
    assert g.node_types == acm.node_types and int(g.train_mask.sum()) == 120 and g.num_edges == acm.num_edges
    with pytest.raises(InputError, match=r"expected --split 0\.\.2 .*\(got 3\)"):
        load_graph(TrainConfig.of(dataset=str(folder), split=3))
    monkeypatch.setattr(datasets, "_fetch", lambda url, dest: pytest.fail(f"tried to download {url}"))
    named = datasets.load_dataset("acm", shared_data)  # checked against the published sha256
    assert named.name == "acm" and named.fingerprint() == acm.fingerprint()
    assert datasets.get_spec("dblp").num_splits == 3
    assert {s.name: s.present for s in datasets.dataset_status(shared_data)}["dblp"]
    train, val, test = fixed_splits("acm", str(shared_data))  # what convert keeps: all three
    assert train.shape == (3, acm.num_nodes) and train.sum(1).tolist() == [60, 120, 180]
    assert np.array_equal(train[0], acm.train_mask.numpy()) and np.array_equal(test[0], acm.test_mask.numpy())
    assert np.array_equal(train[2].nonzero()[0], np.sort(np.load(folder / "train_60.npy")))  # ids of papers: 0..


# ------------------------------------------------------------------------------------ damaged folders
def _copy(src, dst, files) -> None:
    dst.mkdir()
    for f in files:
        shutil.copyfile(src / f, dst / f)  # copyfile: the copies are writable, the shared files are not


@pytest.fixture
def acm_copy(shared_data, tmp_path):
    """A writable copy of the ACM files that split 20 needs."""
    folder = tmp_path / "acm"
    _copy(shared_data / "heco_acm", folder, heco_files(SCHEMAS["acm"], (20,)))
    return folder


def _drop_author_rows(folder):
    _save_npz(folder / "a_feat.npz", sp.load_npz(folder / "a_feat.npz").tocsr()[:7000])


DAMAGE = {
    "missing file": (lambda f: (f / "a_feat.npz").unlink(), {}, ["a_feat.npz", "not found"]),
    "edge id past its type": (lambda f: (f / "ps.txt").write_text((f / "ps.txt").read_text() + "4019 3\n"), {},
                              ["ps.txt", "column 1", "paper ids in [0, 4019)", "p_feat.npz", "(got 4019 at row 4020)"]),
    "feature rows short of the ids": (_drop_author_rows, {},
                                      ["a_feat.npz", "pa.txt", "author ids in [0, 7000)", "(got 7"]),
    "labels of another length": (lambda f: np.save(f / "labels.npy", np.zeros(4000)), {},
                                 ["labels.npy", "p_feat.npz", "4019", "(got 4000)"]),
    "a split K not there": (lambda f: None, {"labels_per_class": 40},
                            ["train_40.npy", "val_40.npy", "test_40.npy", "(got splits for 20)"]),
    "a split file gone": (lambda f: (f / "val_20.npy").unlink(), {}, ["val_20.npy", "(got splits for 20)"]),
    "a split id past the type": (lambda f: np.save(f / "test_20.npy", np.arange(4010, 4030)), {},
                                 ["test_20.npy", "paper ids in [0, 4019)", "(got 4019 at row 10)"]),
    "features not an array": (lambda f: (f / "p_feat.npz").write_text("not an array\n"), {},
                              ["p_feat.npz", "expected", "(got ValueError"]),
    "which graph it is": (lambda f: (f / "ps.txt").unlink(), {}, ["ps.txt", "pc.txt", "(got neither)"]),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_folder_is_one_line_naming_the_file(acm_copy, case):
    damage, kwargs, words = DAMAGE[case]
    damage(acm_copy)
    with pytest.raises(InputError) as e:
        load_heco(acm_copy, **kwargs)
    text = str(e.value)
    assert "\n" not in text and text.startswith("expected") and all(w in text for w in words), text


def test_the_command_line_refuses_a_damaged_folder_and_writes_nothing(acm_copy, tmp_path, capsys):
    np.save(acm_copy / "labels.npy", np.zeros(10))
    run = tmp_path / "run"
    assert main(["train", "--dataset", str(acm_copy), "--epochs", "1", "--progress", "none", "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fullgraph: error: expected") and "labels.npy" in err[0], err
    assert not run.exists()
