"""OGB's link-prediction layout (``fullgraph.data.formats.ogb_link``): a tiny synthetic ogbl-collab
(``fullgraph.data.synthetic.ogb_link``), hand-written citation2- and ddi-style folders, detection, and every
damaged folder refused in one line naming the file. The references are independent of the reader: ``gzip``
+ ``np.loadtxt`` of the text files, a Python dict for the merged pairs, and a plain ``torch.load`` of the
split files (trusted here: the tests wrote them)."""

from __future__ import annotations

import gzip
import pickle
import shutil

import numpy as np
import pytest
import torch

from fullgraph.data import detect as detect_mod
from fullgraph.data.formats import _common
from fullgraph.data.formats.ogb_link import is_ogb_link_folder, load_ogb_link
from fullgraph.data.synthetic.ogb_link import write_synthetic_ogb_link
from fullgraph.errors import InputError

N = 120


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 500)  # every text file cut into many blocks


@pytest.fixture(scope="module")
def collab(tmp_path_factory):
    return write_synthetic_ogb_link(tmp_path_factory.mktemp("link") / "ogbl-collab", nodes=N, edges=1500,
                                    features=8, seed=3)


def _table(path, dtype=np.int64) -> np.ndarray:
    with gzip.open(path, "rt") as f:
        return np.loadtxt(f, dtype=dtype, delimiter=",", ndmin=2)


def _gz(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write("".join(",".join(str(v) for v in r) + "\n" for r in rows))


def _pt(path) -> dict:
    return torch.load(path, weights_only=False)


def _entries(graph) -> np.ndarray:
    src, dst = graph.edges()
    return np.stack([src.numpy(), dst.numpy()], 1)


def test_a_synthetic_collab_loads_as_the_symmetric_training_graph_and_its_split(collab):
    graph, split = load_ogb_link(collab)
    raw = collab / "raw"
    edge, weight, year = _table(raw / "edge.csv.gz"), _table(raw / "edge_weight.csv.gz")[:, 0], \
        _table(raw / "edge_year.csv.gz")[:, 0]
    merged: dict = {}
    for (a, b), w, y in zip(edge.tolist(), weight.tolist(), year.tolist()):
        if a != b:
            sw, sy = merged.get((min(a, b), max(a, b)), (0, 0))
            merged[(min(a, b), max(a, b))] = (sw + w, max(sy, y))
    assert len(merged) < len(edge)  # pairs repeated over years: merged below
    pairs = _entries(graph)
    assert graph.num_edges == 2 * len(merged) and graph.edge_kinds == ("weight", "attr")
    assert set(map(tuple, pairs.tolist())) == set(map(tuple, pairs[:, ::-1].tolist()))  # symmetric, once each
    for (s, d), w, y in zip(pairs.tolist(), graph.edge_weight.tolist(), graph.edge_attr[:, 0].tolist()):
        assert (w, y) == merged[(min(s, d), max(s, d))]  # weights summed, the latest year
    assert graph.edge_attr.shape == (graph.num_edges, 1) and graph.edge_attr.dtype == torch.float32
    assert torch.allclose(graph.x, torch.from_numpy(_table(raw / "node-feat.csv.gz", np.float32)))
    assert graph.name == "ogbl-collab" and graph.num_classes == 2 and not graph.y.any()
    assert graph.train_mask.sum() == N - 2 and graph.val_mask[N - 2] and graph.test_mask[N - 1]
    pt = {s: _pt(collab / "split" / "time" / f"{s}.pt") for s in ("train", "valid", "test")}
    assert isinstance(pt["train"]["edge"], np.ndarray) and set(pt["valid"]) == {"edge", "edge_neg", "weight", "year"}
    assert np.array_equal(pt["train"]["edge"], edge)  # the raw edges are the training rows
    assert split.per_positive == 0 and split.num_nodes == N
    for field, s, key in (("train", "train", "edge"), ("val", "valid", "edge"), ("val_neg", "valid", "edge_neg"),
                          ("test", "test", "edge"), ("test_neg", "test", "edge_neg")):
        assert np.array_equal(getattr(split, field).numpy(), pt[s][key]), field
    assert set(pt["train"]["year"].tolist()) <= set(range(1963, 2018))
    assert set(pt["valid"]["year"].tolist()) == {2018} and set(pt["test"]["year"].tolist()) == {2019}
    everything = {tuple(sorted(p)) for s in pt.values() for p in s["edge"].tolist()}
    for s in ("valid", "test"):
        negatives = pt[s]["edge_neg"]
        assert (negatives[:, 0] != negatives[:, 1]).all()
        assert not {tuple(sorted(p)) for p in negatives.tolist()} & everything  # no pair of any row


def test_the_synthetic_writer_is_deterministic_per_seed(collab, tmp_path):
    again = write_synthetic_ogb_link(tmp_path / "again", nodes=N, edges=1500, features=8, seed=3)
    other = write_synthetic_ogb_link(tmp_path / "other", nodes=N, edges=1500, features=8, seed=4)
    for f in ("raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/edge_weight.csv.gz"):
        assert gzip.open(collab / f).read() == gzip.open(again / f).read()
    assert gzip.open(collab / "raw/edge.csv.gz").read() != gzip.open(other / "raw/edge.csv.gz").read()
    assert load_ogb_link(collab)[1].fingerprint() == load_ogb_link(again)[1].fingerprint()


def _citation2(folder, k=3, legacy=True):
    """citation2's shape: directed citations (one pair cited both ways, one self-citation), per-positive
    negatives, tensors in the split files (train saved in torch's legacy format)."""
    _gz(folder / "raw" / "edge.csv.gz", [[0, 1], [1, 0], [2, 1], [3, 3], [4, 2], [5, 4]])
    _gz(folder / "raw" / "node-feat.csv.gz", [[i, -i] for i in range(7)])
    _gz(folder / "raw" / "node_year.csv.gz", [[2000 + i] for i in range(7)])
    _gz(folder / "raw" / "num-node-list.csv.gz", [[7]])
    _gz(folder / "raw" / "num-edge-list.csv.gz", [[6]])
    split = folder / "split" / "time"
    split.mkdir(parents=True)
    torch.save({"source_node": torch.tensor([0, 1, 2, 4, 5]), "target_node": torch.tensor([1, 0, 1, 2, 4])},
               split / "train.pt", _use_new_zipfile_serialization=not legacy)
    rng = np.random.default_rng(0)
    for s, (src, dst) in {"valid": ([6, 5], [0, 1]), "test": ([6], [2])}.items():
        torch.save({"source_node": torch.tensor(src), "target_node": torch.tensor(dst),
                    "target_node_neg": torch.from_numpy(rng.integers(0, 7, (len(src), k)))}, split / f"{s}.pt")
    return folder


def test_a_citation2_folder_has_negatives_per_positive(tmp_path):
    folder = _citation2(tmp_path / "citation2")
    graph, split = load_ogb_link(folder)
    assert sorted(map(tuple, _entries(graph).tolist())) == [(0, 1), (1, 0), (1, 2), (2, 1), (2, 4), (4, 2), (4, 5),
                                                            (5, 4)]  # both ways, once, no self-citation
    assert graph.edge_kinds == () and graph.x[:, 1].tolist() == [-float(i) for i in range(7)]
    assert split.per_positive == 3 and split.sizes()["val_neg"] == 6 and split.sizes()["test_neg"] == 3
    valid = _pt(folder / "split" / "time" / "valid.pt")
    assert split.val.tolist() == [[6, 0], [5, 1]] and split.train.tolist()[:2] == [[0, 1], [1, 0]]
    for i in range(2):
        for j in range(3):
            want = [int(valid["source_node"][i]), int(valid["target_node_neg"][i, j])]
            assert split.val_neg[i * 3 + j].tolist() == want


def _ddi(folder, *, numpy_one=False):
    """ddi's shape: no node features, the ``target`` scheme, shared negatives as numpy arrays; ``numpy_one``:
    train.pt as numpy 1 pickled it (``numpy.core.multiarray``), in torch's legacy format."""
    _gz(folder / "raw" / "edge.csv.gz", [[0, 1], [1, 2], [2, 3], [3, 4], [1, 0]])
    _gz(folder / "raw" / "num-node-list.csv.gz", [[6]])
    split = folder / "split" / "target"
    split.mkdir(parents=True)
    train = {"edge": np.array([[0, 1], [1, 2], [2, 3], [3, 4]])}
    torch.save(train, split / "train.pt", _use_new_zipfile_serialization=not numpy_one)
    if numpy_one:
        data = (split / "train.pt").read_bytes()
        assert b"numpy._core.multiarray\n" in data
        (split / "train.pt").write_bytes(data.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n"))
    for s, pos in (("valid", [[0, 5]]), ("test", [[4, 5]])):
        torch.save({"edge": np.array(pos), "edge_neg": np.array([[0, 3], [1, 4], [2, 5]])}, split / f"{s}.pt")
    return folder


@pytest.mark.parametrize("numpy_one", [False, True])
def test_a_ddi_folder_without_features_gets_a_constant_column(tmp_path, numpy_one):
    graph, split = load_ogb_link(_ddi(tmp_path / "ogbl-ddi", numpy_one=numpy_one), name="ddi")
    assert graph.x.shape == (6, 1) and bool((graph.x == 1).all()) and graph.name == "ddi"
    assert graph.num_edges == 8  # 0-1 listed both ways: one pair
    assert split.train.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4]] and split.test_neg.shape == (3, 2)
    assert split.name == "ddi target split (OGB)"


def test_detect_tells_the_link_layout_from_the_node_layout(collab, tmp_path):
    det = detect_mod.detect(collab)
    assert det.kind == "ogb_link" and det.name == "ogbl-collab" and is_ogb_link_folder(collab)
    with pytest.raises(InputError) as e:
        detect_mod.load_path(collab)
    assert str(e.value) == f"{collab} is a link-prediction dataset (OGB's link layout): train it with --task link"
    node = tmp_path / "arxiv"  # the node layout shares raw/edge.csv.gz and node-feat.csv.gz
    _gz(node / "raw" / "edge.csv.gz", [[0, 1], [1, 2], [2, 3]])
    _gz(node / "raw" / "node-feat.csv.gz", [[0.5, 1.0]] * 4)
    _gz(node / "raw" / "node-label.csv.gz", [[0], [1], [0], [1]])
    for s, ids in (("train", [0, 1]), ("valid", [2]), ("test", [3])):
        _gz(node / "split" / "time" / f"{s}.csv.gz", [[i] for i in ids])
    assert detect_mod.detect(node).kind == "ogb" and not is_ogb_link_folder(node)
    assert detect_mod.load_path(node).num_nodes == 4


class _RunsCode:
    """A pickle that, loaded by plain ``pickle``, writes the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').write('ran')",)


def _save(path, obj) -> None:
    torch.save(obj, path)


def _edit(folder, split, key, value):
    path = folder / "split" / "time" / f"{split}.pt"
    d = _pt(path)
    d[key] = value
    _save(path, d)


DAMAGE = {
    "missing valid.pt": (lambda f: (f / "split/time/valid.pt").unlink(), ["valid.pt", "not found"]),
    "not a dict": (lambda f: _save(f / "split/time/train.pt", [1, 2]), ["train.pt", "dict", "got list"]),
    "no edge key": (lambda f: _save(f / "split/time/train.pt", {"edges": np.zeros((2, 2), np.int64)}),
                    ["train.pt", "'edge'", "'source_node'", "['edges']"]),
    "no edge_neg": (lambda f: _save(f / "split/time/test.pt", {"edge": np.zeros((2, 2), np.int64)}),
                    ["test.pt", "'edge_neg'", "['edge']"]),
    "three columns": (lambda f: _edit(f, "valid", "edge", np.zeros((4, 3), np.int64)),
                      ["valid.pt['edge']", "[n, 2]", "shape (4, 3)"]),
    "float ids": (lambda f: _edit(f, "test", "edge_neg", np.zeros((4, 2), np.float32)),
                  ["test.pt['edge_neg']", "integer", "float32"]),
    "not an array": (lambda f: _edit(f, "train", "edge", [[0, 1]]), ["train.pt['edge']", "got list"]),
    "id out of range": (lambda f: _edit(f, "valid", "edge_neg", np.array([[0, 1], [2, N]])),
                        ["valid.pt['edge_neg']", f"[0, {N})", f"got {N} at row 2"]),
    "negative id": (lambda f: _edit(f, "train", "edge", torch.tensor([[0, -1]])), ["train.pt['edge']", "got -1"]),
    "not a pickle": (lambda f: (f / "split/time/test.pt").write_bytes(b"this is no torch file\n"),
                     ["test.pt", "torch.save'd dict", "neither a zip archive nor a pickle"]),
    "truncated": (lambda f: (f / "split/time/train.pt").write_bytes((f / "split/time/train.pt").read_bytes()[:3000]),
                  ["train.pt", "torch.save'd dict", "a damaged zip archive"]),
    "raw id out of range": (lambda f: _gz(f / "raw/edge.csv.gz", [[0, 1], [N, 2]]),
                            ["edge.csv.gz", f"[0, {N})", "line 2"]),
    "weights short": (lambda f: _gz(f / "raw/edge_weight.csv.gz", [[1]]), ["edge_weight.csv.gz", "one line per edge"]),
    "weight past float32": (lambda f: _gz(f / "raw/edge_weight.csv.gz", [["1e39"] if i == 1 else [w] for i, w in
                                                                         enumerate(_table(f / "raw/edge_weight.csv.gz")[:, 0].tolist())]),
                            ["edge_weight.csv.gz", "within float32's range", "[1e+39]", "line 2"]),  # issue 63 §9
    "edge count": (lambda f: _gz(f / "raw/num-edge-list.csv.gz", [[3]]), ["edge.csv.gz", "expected 3 edges"]),
    "feature rows": (lambda f: _gz(f / "raw/node-feat.csv.gz", [[0.5] * 8] * 3), ["node-feat.csv.gz", "got 3"]),
    "nan feature": (lambda f: _gz(f / "raw/node-feat.csv.gz", [[0.5] * 8] * 4 + [[0.5] * 7 + ["nan"]]
                                  + [[0.5] * 8] * (N - 5)),
                    ["node-feat.csv.gz", "finite", "line 5"]),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_folders_fail_in_one_line(collab, tmp_path, case):
    folder = tmp_path / "collab"
    shutil.copytree(collab, folder)
    damage, words = DAMAGE[case]
    damage(folder)
    with pytest.raises(InputError) as e:
        load_ogb_link(folder)
    text = str(e.value)
    assert "\n" not in text and text.startswith("expected") and all(w in text for w in words), text


def test_damaged_citation2_splits(tmp_path):
    folder = _citation2(tmp_path / "c2", legacy=False)
    torch.save({"source_node": torch.tensor([6]), "target_node": torch.tensor([2]),
                "target_node_neg": torch.zeros(1, 5, dtype=torch.int64)}, folder / "split/time/test.pt")
    with pytest.raises(InputError, match=r"negatives per positive in .*valid\.pt as in .*test\.pt \(got 3 and 5"):
        load_ogb_link(folder)
    torch.save({"source_node": torch.tensor([6, 5]), "target_node": torch.tensor([2]),
                "target_node_neg": torch.zeros(2, 3, dtype=torch.int64)}, folder / "split/time/test.pt")
    with pytest.raises(InputError, match=r"as many 'source_node' as 'target_node' entries in .*test\.pt \(got 2 and 1"):
        load_ogb_link(folder)
    torch.save({"source_node": torch.tensor([6]), "target_node": torch.tensor([2]),
                "target_node_neg": torch.zeros(2, 3, dtype=torch.int64)}, folder / "split/time/test.pt")
    with pytest.raises(InputError, match=r"one row of negatives per positive, 1, in .*test\.pt"):
        load_ogb_link(folder)


def test_a_pickle_that_runs_code_is_refused_without_running(collab, tmp_path):
    live, marker = tmp_path / "live", tmp_path / "marker"
    pickle.loads(pickle.dumps(_RunsCode(live)))  # the payload is real: plain pickle runs it
    assert live.read_text() == "ran"
    folder = tmp_path / "collab"
    shutil.copytree(collab, folder)
    _edit(folder, "valid", "edge", _RunsCode(marker))
    with pytest.raises(InputError) as e:
        load_ogb_link(folder)
    assert not marker.exists()
    text = str(e.value)
    assert "\n" not in text and "valid.pt" in text and "GLOBAL exec" in text and "Please use" not in text, text
