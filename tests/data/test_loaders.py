"""Format loaders: the real files as published, and tiny hand-written files for the other formats."""

import gzip
import json

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.data.datasets import preprocess
from fullgraph.data.formats import (
    load_edgelist, load_graphsaint, load_npz_hetero, load_npz_shchur, load_ogb, load_planetoid,
)
from fullgraph.data.graph import Graph
from fullgraph.data.pyg import from_pyg, to_pyg
from fullgraph.data.safe_pickle import load_npz_with_objects, load_pickle
from fullgraph.data.splits import per_class_split
from fullgraph.errors import InputError


def _self_loops(g: Graph) -> int:
    src, dst = g.edges()
    return int((src == dst).sum())


def _nnz(x: torch.Tensor) -> int:
    return int(x.values().count_nonzero()) if x.layout == torch.sparse_csr else int(x.count_nonzero())


# ------------------------------------------------------------------------------ real files, raw
@pytest.fixture(scope="module")
def cora_raw(shared_data):
    return load_planetoid(shared_data / "cora", "cora")


@pytest.fixture(scope="module")
def citeseer_raw(shared_data):
    return load_planetoid(shared_data / "citeseer", "citeseer")


def test_planetoid_cora_as_published(cora_raw, shared_data):
    g = cora_raw
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (2708, 10858, 1433, 7)
    assert _self_loops(g) == 0
    assert g.x.layout == torch.sparse_csr and g.x.crow_indices().dtype == torch.int64
    assert _nnz(g.x) == 31261 + 17955
    assert bool((g.y >= 0).all())
    assert g.train_mask[:140].all() and int(g.train_mask.sum()) == 140
    assert g.val_mask[140:640].all() and int(g.val_mask.sum()) == 500
    # test.index[i] names the node that gets row i of tx / ty (Kipf's reordering)
    test_ids = np.loadtxt(shared_data / "cora" / "ind.cora.test.index", dtype=np.int64)
    tx = load_pickle(shared_data / "cora" / "ind.cora.tx").toarray()
    ty = load_pickle(shared_data / "cora" / "ind.cora.ty").argmax(1)
    dense = g.dense_x().numpy()
    for i in (0, 1, 500, 999):
        assert np.array_equal(dense[test_ids[i]], tx[i]) and int(g.y[test_ids[i]]) == ty[i]
    assert bool(g.test_mask[torch.from_numpy(test_ids)].all()) and int(g.test_mask.sum()) == 1000


def test_planetoid_citeseer_pads_the_missing_test_ids(citeseer_raw, shared_data):
    g = citeseer_raw
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (3327, 9464, 3703, 6)
    assert _self_loops(g) == 248
    assert _nnz(g.x) == 73173 + 31992
    test_ids = set(np.loadtxt(shared_data / "citeseer" / "ind.citeseer.test.index", dtype=np.int64).tolist())
    absent = sorted(set(range(min(test_ids), max(test_ids) + 1)) - test_ids)
    assert len(absent) == 15
    unlabelled = torch.nonzero(g.y == -1).flatten().tolist()
    assert unlabelled == absent
    dense = g.dense_x()
    assert float(dense[absent].abs().sum()) == 0.0
    in_split = g.train_mask | g.val_mask | g.test_mask
    assert not bool(in_split[absent].any())
    assert [int(m.sum()) for m in (g.train_mask, g.val_mask, g.test_mask)] == [120, 500, 1000]


def test_planetoid_pubmed_reports_the_missing_allx(shared_data):
    with pytest.raises(InputError) as e:
        load_planetoid(shared_data / "pubmed", "pubmed")
    assert str(shared_data / "pubmed" / "ind.pubmed.allx") in str(e.value)
    assert "ind.pubmed.tx" not in str(e.value).split("missing:")[1]


def test_planetoid_bad_graph_ids(tmp_path, shared_data):
    import shutil

    for f in (shared_data / "cora").iterdir():
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "ind.cora.test.index").write_text("1708\n1709\nabc\n")
    with pytest.raises(InputError, match=r"integer .*line 3"):
        load_planetoid(tmp_path, "cora")


def test_shchur_graphdata_files_as_published(shared_data):
    comp = load_npz_shchur(shared_data / "amazon_computers" / "amazon_cs.npz")
    assert (comp.num_nodes, comp.num_edges, comp.num_features) == (13752, 287209, 767)
    assert comp.x.layout == torch.sparse_csr and _nnz(comp.x) == 3675081
    cs = load_npz_shchur(shared_data / "coauthor_cs" / "coauthor_cs.npz")
    assert (cs.num_nodes, cs.num_edges, cs.num_features, cs.num_classes) == (18333, 163788, 6805, 15)
    assert _nnz(cs.x) == 1092079 and float(cs.x.values().max()) == 105.0


def test_shchur_original_key_layout_matches_graphdata(tmp_path, shared_data):
    src = shared_data / "coauthor_cs" / "coauthor_cs.npz"
    d = load_npz_with_objects(src)
    adj, attr = d["adj_matrix"].item(), d["node_attr"].item()
    orig = tmp_path / "ms_academic_cs.npz"
    np.savez(orig, adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr, adj_shape=adj.shape,
             attr_data=attr.data, attr_indices=attr.indices, attr_indptr=attr.indptr, attr_shape=attr.shape,
             labels=d["node_label"], class_names=d["metadata"].item()["class_names"])
    a, b = load_npz_shchur(src, seed=3), load_npz_shchur(orig, seed=3)
    assert torch.equal(a.indptr, b.indptr) and torch.equal(a.indices, b.indices)
    assert torch.equal(a.x.values(), b.x.values()) and torch.equal(a.y, b.y)
    assert torch.equal(a.train_mask, b.train_mask)


def test_shchur_dense_attrs_sparse_labels_and_bad_keys(tmp_path):
    adj = sp.csr_matrix(np.roll(np.eye(6, dtype=np.float32), 1, axis=1))  # a directed 6-cycle
    onehot = sp.csr_matrix(np.eye(2, dtype=np.float32)[[0, 1, 0, 1, 0, 1]])
    path = tmp_path / "tiny.npz"
    np.savez(path, adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr, adj_shape=adj.shape,
             attr_matrix=np.eye(6, dtype=np.float32), labels_data=onehot.data, labels_indices=onehot.indices,
             labels_indptr=onehot.indptr, labels_shape=onehot.shape)
    g = load_npz_shchur(path, train_per_class=1, val_per_class=1)
    assert g.y.tolist() == [0, 1, 0, 1, 0, 1] and g.x.layout == torch.strided and g.num_edges == 6
    assert [int(m.sum()) for m in (g.train_mask, g.val_mask, g.test_mask)] == [2, 2, 2]
    np.savez(tmp_path / "other.npz", foo=np.arange(3))
    with pytest.raises(InputError, match=r"adj_matrix.*found \['foo'\]"):
        load_npz_shchur(tmp_path / "other.npz")


def test_hetero_squirrel_and_tolokers_as_published(shared_data):
    path = shared_data / "squirrel" / "squirrel.npz"
    g = load_npz_hetero(path, split=9)
    raw = np.load(path)
    assert (g.num_nodes, g.num_edges, g.num_features) == (5201, 2 * 198353, 2089)
    assert torch.equal(g.test_mask, torch.from_numpy(raw["test_masks"][9]))
    assert g.x.layout == torch.strided and _nnz(g.x) == 93477
    with pytest.raises(InputError, match=r"split index in 0\.\.9 .*got 10"):
        load_npz_hetero(path, split=10)
    t = load_npz_hetero(shared_data / "tolokers" / "tolokers.npz")
    assert (t.num_nodes, t.num_edges, t.num_features, t.num_classes) == (11758, 1038000, 10, 2)


def test_hetero_rejects_a_file_without_its_keys(tmp_path):
    np.savez(tmp_path / "x.npz", node_features=np.zeros((2, 2), np.float32))
    with pytest.raises(InputError, match="node_labels"):
        load_npz_hetero(tmp_path / "x.npz")


def test_geomgcn_edge_list_equals_the_yandex_graph(tmp_path, shared_data):
    """The geom-gcn text edge list (header, self loops, both directions) gives the yandex graph."""
    raw = np.load(shared_data / "squirrel" / "squirrel.npz")
    np.save(tmp_path / "x.npy", raw["node_features"])
    np.save(tmp_path / "y.npy", raw["node_labels"])
    for k in ("train", "val", "test"):
        np.save(tmp_path / f"{k}.npy", raw[f"{k}_masks"][0])
    edges = shared_data / "squirrel" / "geom-gcn" / "out1_graph_edges.txt"
    g = load_edgelist(edges, tmp_path / "x.npy", tmp_path / "y.npy", train=tmp_path / "train.npy",
                      val=tmp_path / "val.npy", test=tmp_path / "test.npy")
    assert g.num_edges == 217073 and _self_loops(g) == 140
    a, b = preprocess(g), preprocess(load_npz_hetero(shared_data / "squirrel" / "squirrel.npz"))
    assert torch.equal(a.indptr, b.indptr) and torch.equal(a.indices, b.indices)
    assert torch.equal(a.train_mask, b.train_mask)


# ---------------------------------------------------------------------------- GraphSAINT format
def _write_graphsaint(folder, *, multilabel=False):
    folder.mkdir(parents=True, exist_ok=True)
    n = 6
    rows = [0, 1, 1, 2, 3, 4, 5, 0]
    cols = [1, 0, 2, 1, 4, 3, 0, 5]
    sp.save_npz(folder / "adj_full.npz", sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)))
    np.save(folder / "feats.npy", np.arange(n * 3, dtype=np.float64).reshape(n, 3))
    if multilabel:
        cm = {str(i): [i % 2, 1, 0, int(i > 3)] for i in range(n)}
    else:
        cm = {str(i): i % 3 for i in range(n)}
    (folder / "class_map.json").write_text(json.dumps(cm))
    (folder / "role.json").write_text(json.dumps({"tr": [0, 1, 2], "va": [3], "te": [4, 5]}))


def test_graphsaint_single_label(tmp_path):
    _write_graphsaint(tmp_path / "flickr")
    g = load_graphsaint(tmp_path / "flickr")
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (6, 8, 3, 3)
    assert g.y.tolist() == [0, 1, 2, 0, 1, 2] and g.x.dtype == torch.float32
    assert g.train_mask.tolist() == [True, True, True, False, False, False]
    assert g.name == "flickr"
    src, dst = g.edges()
    assert (0, 5) in set(zip(src.tolist(), dst.tolist()))  # row -> column is source -> destination


def test_graphsaint_multilabel(tmp_path):
    _write_graphsaint(tmp_path / "yelp", multilabel=True)
    g = load_graphsaint(tmp_path / "yelp")
    assert g.multilabel and g.y.dtype == torch.float32 and g.y.shape == (6, 4) and g.num_classes == 4
    assert g.y[5].tolist() == [1.0, 1.0, 0.0, 1.0]


def test_graphsaint_bad_inputs(tmp_path):
    folder = tmp_path / "g"
    _write_graphsaint(folder)
    (folder / "role.json").write_text(json.dumps({"tr": [0], "va": [1]}))
    with pytest.raises(InputError, match=r"tr, va, te"):
        load_graphsaint(folder)
    _write_graphsaint(folder)
    (folder / "class_map.json").write_text("{\"0\": 1,")
    with pytest.raises(InputError, match=r"class_map\.json to be JSON"):
        load_graphsaint(folder)
    (folder / "class_map.json").write_text(json.dumps({"0": 1, "1": [0, 1]}))
    with pytest.raises(InputError, match="int .*or every one a 0/1 list"):
        load_graphsaint(folder)
    (folder / "feats.npy").unlink()
    (folder / "role.json").unlink()
    with pytest.raises(InputError) as e:
        load_graphsaint(folder)
    assert "feats.npy" in str(e.value) and "role.json" in str(e.value)


# ------------------------------------------------------------------------------------ OGB format
def _gz(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def _write_ogb(folder, *, labels="0\n1\n2\n1\nnan\n", split="time"):
    _gz(folder / "raw" / "edge.csv.gz", "0,1\n1,2\n2,3\n3,0\n4,0\n")
    _gz(folder / "raw" / "node-feat.csv.gz", "".join(f"{i}.5,{-i},1e-3\n" for i in range(5)))
    _gz(folder / "raw" / "node-label.csv.gz", labels)
    _gz(folder / "raw" / "num-node-list.csv.gz", "5\n")
    _gz(folder / "raw" / "num-edge-list.csv.gz", "5\n")
    _gz(folder / "split" / split / "train.csv.gz", "0\n1\n")
    _gz(folder / "split" / split / "valid.csv.gz", "2\n")
    _gz(folder / "split" / split / "test.csv.gz", "3\n")


def test_ogb_raw_layout(tmp_path):
    _write_ogb(tmp_path / "ogbn_arxiv")
    g = load_ogb(tmp_path / "ogbn_arxiv")
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (5, 5, 3, 3)
    assert g.y.tolist() == [0, 1, 2, 1, -1]  # nan: unlabelled
    assert g.dense_x()[2].tolist() == pytest.approx([2.5, -2.0, 1e-3])
    src, dst = g.edges()
    assert sorted(zip(src.tolist(), dst.tolist())) == [(0, 1), (1, 2), (2, 3), (3, 0), (4, 0)]
    assert g.train_mask.tolist() == [True, True, False, False, False]


def test_ogb_multilabel_and_split_choice(tmp_path):
    _write_ogb(tmp_path / "p", labels="1,0\n0,1\n1,1\n0,0\n1,0\n", split="species")
    (tmp_path / "p" / "split" / "other").mkdir()
    with pytest.raises(InputError, match="exactly one split scheme"):
        load_ogb(tmp_path / "p")
    g = load_ogb(tmp_path / "p", split_name="species")
    assert g.multilabel and g.y.shape == (5, 2)


def test_ogb_malformed_files(tmp_path):
    folder = tmp_path / "o"
    _write_ogb(folder)
    _gz(folder / "raw" / "edge.csv.gz", "0,1\n1,2\n2;3\n")
    with pytest.raises(InputError, match=r"edge\.csv\.gz.*line 3"):
        load_ogb(folder)
    _write_ogb(folder)
    _gz(folder / "raw" / "num-node-list.csv.gz", "7\n")
    with pytest.raises(InputError, match="7 label rows"):
        load_ogb(folder)
    _write_ogb(folder)
    _gz(folder / "split" / "time" / "test.csv.gz", "9\n")
    with pytest.raises(InputError, match=r"\[0, 5\).*test\.csv\.gz"):
        load_ogb(folder)
    (folder / "raw" / "node-feat.csv.gz").unlink()
    with pytest.raises(InputError, match="node-feat.csv.gz"):
        load_ogb(folder)


# ------------------------------------------------------------------------------ edge list format
def _write_edgelist(d):
    (d / "edges.txt").write_text("# a comment\nsrc dst\n0 1\n1\t2  # trailing\n\n2,3\n3 0 0.5\n")
    (d / "feats.txt").write_text("1 0\n0 1\n1 1\n0 0\n")
    (d / "labels.txt").write_text("0\n1\n0\n1\n")
    (d / "train.txt").write_text("0\n1\n")
    (d / "val.txt").write_text("2\n")
    (d / "test.txt").write_text("3\n")


def test_edgelist_text_files(tmp_path):
    _write_edgelist(tmp_path)
    with pytest.raises(InputError, match=r"2 value\(s\) per line .*line 7"):  # '3 0 0.5' vs 2 columns
        load_edgelist(tmp_path / "edges.txt", tmp_path / "feats.txt", tmp_path / "labels.txt")
    (tmp_path / "edges.txt").write_text("# a comment\nsrc dst\n0 1\n1\t2  # trailing\n\n2,3\n3 0\n")
    g = load_edgelist(tmp_path / "edges.txt", tmp_path / "feats.txt", tmp_path / "labels.txt",
                      train=tmp_path / "train.txt", val=tmp_path / "val.txt", test=tmp_path / "test.txt")
    src, dst = g.edges()
    assert sorted(zip(src.tolist(), dst.tolist())) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert g.x.tolist() == [[1, 0], [0, 1], [1, 1], [0, 0]] and g.y.tolist() == [0, 1, 0, 1]
    assert g.val_mask.tolist() == [False, False, True, False] and g.name == "edges"


def test_edgelist_weights_are_read_npy_npz_and_seeded_split(tmp_path):
    np.save(tmp_path / "y.npy", np.array([0, 0, 0, 1, 1, 1]))
    sp.save_npz(tmp_path / "x.npz", sp.csr_matrix(np.eye(6, dtype=np.float32)))
    for weights, want in (("0 1 0.5\n1 2 1.0\n2 0 2\n", [2, 0.5, 1]), ("0 1 3\n1 2 1\n2 0 2\n", [2, 3, 1])):
        (tmp_path / "e.txt").write_text(weights)  # float or integer weights: a third column is the weight
        g = load_edgelist(tmp_path / "e.txt", tmp_path / "x.npz", tmp_path / "y.npy", train_per_class=1,
                          val_per_class=1)
        assert g.edge_weight.tolist() == want  # in CSR order: 2->0, 0->1, 1->2
    (tmp_path / "e.txt").write_text("0 1\n1 2\n2 0\n")
    g = load_edgelist(tmp_path / "e.txt", tmp_path / "x.npz", tmp_path / "y.npy", train_per_class=1, val_per_class=1)
    assert g.num_edges == 3 and g.x.layout == torch.sparse_csr
    assert [int(m.sum()) for m in (g.train_mask, g.val_mask, g.test_mask)] == [2, 2, 2]


def test_edgelist_malformed_inputs(tmp_path):
    _write_edgelist(tmp_path)
    args = (tmp_path / "feats.txt", tmp_path / "labels.txt")
    (tmp_path / "bad.txt").write_text("0 1\n1 two\n")
    with pytest.raises(InputError, match=r"bad\.txt \(got 'two' on line 2\)"):
        load_edgelist(tmp_path / "bad.txt", *args)
    (tmp_path / "bad.txt").write_text("0 1\n1 9\n")
    with pytest.raises(InputError, match=r"\[0, 4\).*bad\.txt"):
        load_edgelist(tmp_path / "bad.txt", *args)
    (tmp_path / "ok.txt").write_text("0 1\n")
    with pytest.raises(InputError, match="all three split files"):
        load_edgelist(tmp_path / "ok.txt", *args, train=tmp_path / "train.txt")
    (tmp_path / "short.txt").write_text("1 0\n0 1\n")
    with pytest.raises(InputError, match=r"4 rows.*short\.txt"):
        load_edgelist(tmp_path / "ok.txt", tmp_path / "short.txt", tmp_path / "labels.txt")
    with pytest.raises(InputError, match="edge list file .*missing.txt"):
        load_edgelist(tmp_path / "missing.txt", *args)
    (tmp_path / "ml.txt").write_text("1 0\n0 1\n1 1\n0 0\n")
    with pytest.raises(InputError, match="multi-label"):
        load_edgelist(tmp_path / "ok.txt", tmp_path / "feats.txt", tmp_path / "ml.txt")
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(InputError, match="at least one edge"):
        load_edgelist(tmp_path / "empty.txt", *args)


# ------------------------------------------------------------------------------------- splits
def test_per_class_split_is_seeded_and_follows_the_quota():
    y = torch.tensor([0] * 100 + [1] * 60 + [2] * 10 + [3] * 1 + [-1] * 5)
    tr, va, te = per_class_split(y, 20, 30, seed=7)
    tr2, va2, te2 = per_class_split(y, 20, 30, seed=7)
    assert torch.equal(tr, tr2) and torch.equal(va, va2) and torch.equal(te, te2)
    assert not torch.equal(tr, per_class_split(y, 20, 30, seed=8)[0])
    assert not bool((tr & va).any() or (tr & te).any() or (va & te).any())
    per = lambda m, c: int((m & (y == c)).sum())  # noqa: E731
    assert [per(tr, 0), per(va, 0), per(te, 0)] == [20, 30, 50]
    assert [per(tr, 1), per(va, 1), per(te, 1)] == [20, 30, 10]
    assert [per(tr, 2), per(va, 2), per(te, 2)] == [5, 2, 3]  # small class: half, then val <= test
    assert [per(tr, 3), per(va, 3), per(te, 3)] == [1, 0, 0]
    assert not bool(((tr | va | te) & (y == -1)).any())


# ------------------------------------------------------------------------------------------ PyG
def test_pyg_round_trip(cora_raw):
    pytest.importorskip("torch_geometric")
    g = preprocess(cora_raw)
    data = to_pyg(g)
    assert data.edge_index.shape == (2, g.num_edges) and data.x.layout == torch.strided
    src, dst = g.edges()
    assert torch.equal(data.edge_index[0], src) and torch.equal(data.edge_index[1], dst)
    back = from_pyg(to_pyg(g, dense_x=False))
    assert back.name == "cora" and back.x.layout == torch.sparse_csr
    for f in ("indptr", "indices", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(back, f), getattr(g, f)), f
    assert torch.equal(back.x.to_dense(), g.x.to_dense())
    assert torch.equal(from_pyg(data, name="c").x, g.dense_x())


def test_from_pyg_split_columns_ogb_labels_and_missing_masks():
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Data

    n = 60
    y = torch.arange(n).remainder(3)
    masks = torch.zeros(n, 2, dtype=torch.bool)
    masks[:10, 1] = True
    masks[10:20, 0] = True
    data = Data(x=torch.randn(n, 4, dtype=torch.float64), edge_index=torch.tensor([[0, 1], [1, 2]]),
                y=y[:, None], train_mask=masks, val_mask=masks.roll(20, 0), test_mask=masks.roll(40, 0), num_nodes=n)
    g = from_pyg(data, split=1)
    assert g.train_mask[:10].all() and int(g.train_mask.sum()) == 10 and g.x.dtype == torch.float32
    assert torch.equal(g.y, y)
    with pytest.raises(InputError, match=r"split in 0\.\.1"):
        from_pyg(data, split=2)
    bare = Data(x=torch.randn(n, 4), edge_index=torch.tensor([[0], [1]]), y=y, num_nodes=n)
    with pytest.raises(InputError, match="seed"):
        from_pyg(bare)
    assert int(from_pyg(bare, seed=0, name="b").train_mask.sum()) == 30
