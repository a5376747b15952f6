"""The native dataset folder and ``--dataset PATH`` format detection (``generate`` / ``convert``:
``tests/cli/test_data.py``)."""

import gzip
import json
import shutil

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.cli import main
from fullgraph.config import TrainConfig
from fullgraph.data.datasets import preprocess
from fullgraph.data.detect import detect, looks_like_path
from fullgraph.data.formats import load_native, write_native
from fullgraph.data.formats.native import is_preprocessed
from fullgraph.data.graph import Graph
from fullgraph.data.load import feature_norm_of, load_graph, load_raw_graph
from fullgraph.data.synthetic import planted_partition
from fullgraph.errors import InputError
from tests._equality import assert_same_graph

@pytest.fixture(scope="module")
def small():
    return planted_partition(num_nodes=300, num_classes=3, num_features=8, seed=1, name="small")


def sparse_multilabel_graph() -> Graph:
    n = 40
    rng = np.random.default_rng(0)
    x = sp.random(n, 30, density=0.1, format="csr", random_state=1, dtype=np.float32)
    x.sort_indices()
    y = torch.from_numpy((rng.random((n, 4)) < 0.5).astype(np.float32))
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    masks[0][:20], masks[1][20:30], masks[2][30:] = True, True, True
    src = rng.integers(0, n, 120)
    dst = rng.integers(0, n, 120)  # directed, with repeats and perhaps loops: stored as given
    xt = torch.sparse_csr_tensor(torch.from_numpy(x.indptr.astype(np.int64)), torch.from_numpy(x.indices.astype(np.int64)),
                                 torch.from_numpy(x.data), size=x.shape)
    return Graph.from_edges(src, dst, n, x=xt, y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2],
                            name="ml")


# ---------------------------------------------------------------------------------- round trips
def test_round_trip_dense(small, tmp_path):
    meta = write_native(small, tmp_path / "g")
    assert meta["preprocessed"] and meta["features"] == "dense" and meta["counts"]["num_nodes"] == 300
    assert meta["total_bytes"] == sum(p.stat().st_size for p in (tmp_path / "g").iterdir())
    assert np.load(tmp_path / "g" / "indices.npy").dtype == np.int32  # half the bytes on disk
    back = load_native(tmp_path / "g")
    assert_same_graph(small, back)
    assert back.fingerprint() == small.fingerprint()
    assert back.indices.dtype == torch.int64
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]  # no temporary folder left behind


def test_round_trip_sparse_multilabel_directed(tmp_path):
    g = sparse_multilabel_graph()
    assert not is_preprocessed(g)
    meta = write_native(g, tmp_path / "ml", block_bytes=64)  # many tiny blocks
    assert meta["features"] == "sparse_csr" and meta["counts"]["multilabel"] and not meta["preprocessed"]
    back = load_native(tmp_path / "ml")
    assert back.multilabel and back.x.layout == torch.sparse_csr
    assert_same_graph(g, back)
    # as stored by the loader; through --dataset it is preprocessed like every published format
    assert_same_graph(preprocess(g), load_raw_graph(TrainConfig.of(dataset=str(tmp_path / "ml"))))


def test_loaded_arrays_are_memory_mapped_copy_on_write(small, tmp_path):
    write_native(small, tmp_path / "g")
    back = load_native(tmp_path / "g")
    before = (tmp_path / "g" / "x.npy").read_bytes()
    back.x[0, 0] = 123.0  # a private page: the file is untouched
    assert (tmp_path / "g" / "x.npy").read_bytes() == before
    assert float(load_native(tmp_path / "g").x[0, 0]) == float(small.x[0, 0])


def test_rewrite_replaces_an_earlier_native_folder_and_fills_an_empty_one(small, tmp_path):
    (tmp_path / "empty").mkdir()
    write_native(small, tmp_path / "empty")
    write_native(sparse_multilabel_graph(), tmp_path / "empty")
    assert load_native(tmp_path / "empty").name == "ml"
    assert not (tmp_path / "empty" / "x.npy").exists()  # the dense graph's features are gone


def test_pyg_data_to_native(small, tmp_path):
    pytest.importorskip("torch_geometric")
    from fullgraph.data.pyg import to_pyg, write_pyg

    data = to_pyg(small)
    data.edge_index = data.edge_index[:, data.edge_index[0] < data.edge_index[1]]  # one direction only
    meta = write_pyg(data, tmp_path / "pyg", name="from-pyg")
    assert meta["preprocessed"] and meta["name"] == "from-pyg"
    back = load_native(tmp_path / "pyg")
    assert torch.equal(back.indptr, small.indptr) and torch.equal(back.indices, small.indices)
    assert torch.equal(back.x, small.x) and torch.equal(back.train_mask, small.train_mask)


def test_streamed_edge_blocks_write_the_same_folder(small, tmp_path):
    from fullgraph.data.formats.native_edges import write_native_edges

    rng = np.random.default_rng(5)
    n, e = small.num_nodes, 3000
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)  # repeats, loops, one direction
    nodes = dict(x=small.x, y=small.y, train_mask=small.train_mask, val_mask=small.val_mask,
                 test_mask=small.test_mask, name="streamed")
    want = preprocess(Graph.from_edges(src, dst, n, **nodes))
    a = write_native(want, tmp_path / "a")
    for block_bytes in (64, 1 << 20):  # hundreds of buckets, and one
        blocks = ((src[i:i + 257], dst[i:i + 257]) for i in range(0, e, 257))
        b = write_native_edges(tmp_path / "b", n, blocks, block_bytes=block_bytes, **nodes)
        assert b["preprocessed"] and b["counts"] == a["counts"]
        assert {k: f["sha256"] for k, f in b["files"].items()} == {k: f["sha256"] for k, f in a["files"].items()}
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == sorted(p.name for p in (tmp_path / "a").iterdir())
    as_given = write_native_edges(tmp_path / "c", n, [(torch.from_numpy(src), torch.from_numpy(dst))],
                                  symmetrize=False, dedupe=False, drop_self_loops=False, **nodes)
    assert not as_given["preprocessed"]
    assert_same_graph(Graph.from_edges(src, dst, n, **nodes), load_native(tmp_path / "c"))
    with pytest.raises(InputError, match=r"destination ids in \[0, 300\) in edge block 1"):
        write_native_edges(tmp_path / "d", n, [(src, dst), ([0], [300])], **nodes)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c"]  # nothing half-written


# ---------------------------------------------------------------------------------- bad folders
def _truncate(d):
    p = d / "x.npy"
    p.write_bytes(p.read_bytes()[:-100])


def _wrong_dtype(d):
    np.save(d / "y.npy", np.load(d / "y.npy").astype(np.int32))


def _counts_disagree(d):
    meta = json.loads((d / "meta.json").read_text())
    meta["counts"]["num_nodes"] += 1
    (d / "meta.json").write_text(json.dumps(meta))


def _split_size_disagrees(d):
    meta = json.loads((d / "meta.json").read_text())
    meta["counts"]["split_sizes"]["val"] += 1
    (d / "meta.json").write_text(json.dumps(meta))


def _flip_a_byte(d):
    p = d / "x.npy"
    b = bytearray(p.read_bytes())
    b[-8] ^= 0x01  # the lowest mantissa bit of one feature: still a finite number
    p.write_bytes(bytes(b))


def _missing(d):
    (d / "test_mask.npy").unlink()


def _not_json(d):
    (d / "meta.json").write_text('{"format": "fullgraph-native",')


DAMAGE = {
    "truncated": (_truncate, r"x\.npy to hold \d+ bytes \(got \d+: the file is truncated\)"),
    "wrong dtype": (_wrong_dtype, r"y\.npy to hold int64 as meta\.json says \(got int32\)"),
    "counts": (_counts_disagree, r"indptr\.npy of shape \[302\] from the counts .*\(got shape \[301\] listed"),
    "split size": (_split_size_disagrees, r"expected \d+ nodes in .*val_mask\.npy as meta\.json says"),
    "checksum": (_flip_a_byte, r"x\.npy to have sha256 .*changed or damaged"),
    "missing": (_missing, r"test_mask\.npy in the fullgraph dataset .*not found"),
    "not json": (_not_json, r"meta\.json to be JSON"),
}


@pytest.fixture
def damaged(small, tmp_path):
    def make(kind):
        d = tmp_path / f"copy-{kind.replace(' ', '-')}"
        write_native(small, d)
        DAMAGE[kind][0](d)
        return d

    return make


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_folder_is_one_input_error(kind, damaged):
    d = damaged(kind)
    with pytest.raises(InputError, match=DAMAGE[kind][1]):
        load_raw_graph(TrainConfig.of(dataset=str(d))) if kind == "not json" else load_native(d)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_folder_on_the_command_line(kind, damaged, capsys):
    d = damaged(kind)
    assert main(["train", "--dataset", str(d), "--epochs", "1", "--progress", "none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fullgraph: error:"), err
    assert str(d) in err[0]


def test_checksum_is_skipped_when_asked_and_above_the_auto_limit(damaged, monkeypatch):
    from fullgraph.data.formats import native_read

    d = damaged("checksum")
    load_native(d, verify=False)  # sizes, dtypes and shapes still checked; the flipped bit is not seen
    monkeypatch.setattr(native_read, "VERIFY_AUTO_MAX_BYTES", 1000)
    load_native(d)
    with pytest.raises(InputError, match="sha256"):
        load_native(d, verify=True)


def test_write_refuses_a_foreign_folder_and_a_file(small, tmp_path, capsys):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("precious")
    with pytest.raises(InputError, match="refusing to overwrite"):
        write_native(small, foreign)
    # a native folder with a stranger in it is not ours to replace either
    write_native(small, tmp_path / "nat")
    (tmp_path / "nat" / "notes.txt").write_text("precious")
    with pytest.raises(InputError, match="refusing to overwrite"):
        write_native(small, tmp_path / "nat")
    (tmp_path / "f").write_text("precious")
    with pytest.raises(InputError, match="got an existing file"):
        write_native(small, tmp_path / "f")
    for out in (foreign, tmp_path / "f"):
        assert main(["generate", "planted", "--nodes", "50", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(out) in err[0], err
    assert (foreign / "notes.txt").read_text() == "precious" and (tmp_path / "f").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "mine", "nat"]


# ---------------------------------------------------------------------------------- detection
def _gz(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def _ogb(d):
    _gz(d / "raw" / "edge.csv.gz", "0,1\n1,2\n2,3\n3,0\n4,0\n")
    _gz(d / "raw" / "node-feat.csv.gz", "".join(f"{i}.5,{-i}\n" for i in range(5)))
    _gz(d / "raw" / "node-label.csv.gz", "0\n1\n2\n1\n0\n")
    for s, ids in (("train", "0\n1\n"), ("valid", "2\n"), ("test", "3\n4\n")):
        _gz(d / "split" / "scheme" / f"{s}.csv.gz", ids)


def _graphsaint(d):
    d.mkdir(parents=True)
    sp.save_npz(d / "adj_full.npz", sp.csr_matrix((np.ones(4), ([0, 1, 2, 3], [1, 2, 3, 0])), shape=(4, 4)))
    np.save(d / "feats.npy", np.eye(4))
    (d / "class_map.json").write_text(json.dumps({str(i): i % 2 for i in range(4)}))
    (d / "role.json").write_text(json.dumps({"tr": [0], "va": [1], "te": [2, 3]}))


def _edgelist(d):
    d.mkdir(parents=True)
    (d / "edges.txt").write_text("0 1\n1 2\n2 3\n")
    np.save(d / "features.npy", np.eye(4, dtype=np.float32))
    (d / "labels.txt").write_text("0\n1\n0\n1\n")
    for s, i in (("train", 0), ("val", 1), ("test", 2)):
        (d / f"{s}.txt").write_text(f"{i}\n")


def _hetero(d):
    d.mkdir(parents=True)
    masks = np.zeros((2, 6), dtype=bool)
    masks[:, :2] = True
    np.savez(d / "whatever.npz", node_features=np.eye(6, dtype=np.float32), node_labels=np.arange(6) % 2,
             edges=np.array([[0, 1], [1, 2], [3, 4]]), train_masks=masks, val_masks=np.roll(masks, 2, 1),
             test_masks=np.roll(masks, 4, 1))


def _shchur(d):
    d.mkdir(parents=True)
    adj = sp.csr_matrix(np.roll(np.eye(6, dtype=np.float32), 1, axis=1))
    np.savez(d / "graph.npz", adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
             adj_shape=adj.shape, attr_matrix=np.eye(6, dtype=np.float32), labels=np.arange(6) % 2)


def _planetoid(d, shared):
    shutil.copytree(shared / "cora", d)


def _native(d, small):
    write_native(small, d)


@pytest.mark.parametrize("kind", ["native", "ogb", "graphsaint", "planetoid", "edgelist", "npz_hetero", "npz_shchur"])
def test_detects_each_format_under_any_folder_name(kind, tmp_path, shared_data, small):
    d = tmp_path / "some data (copy)"
    {"native": lambda: _native(d, small), "ogb": lambda: _ogb(d), "graphsaint": lambda: _graphsaint(d),
     "planetoid": lambda: _planetoid(d, shared_data), "edgelist": lambda: _edgelist(d),
     "npz_hetero": lambda: _hetero(d), "npz_shchur": lambda: _shchur(d)}[kind]()
    det = detect(d)
    assert det.kind == kind
    cfg = TrainConfig.of(dataset=str(d), split=1 if kind == "npz_hetero" else 0)
    assert looks_like_path(cfg.data.dataset)
    g = load_graph(cfg)
    assert is_preprocessed(g)
    if kind == "planetoid":
        assert g.name == "cora" and feature_norm_of(cfg) == "row"
        assert g.fingerprint() == load_graph(TrainConfig.of(dataset="cora", root=str(shared_data))).fingerprint()
    else:
        assert feature_norm_of(cfg) == "none"
    if kind.startswith("npz"):  # the file itself works too
        assert detect(det.path).kind == kind and det.path.suffix == ".npz"
    if kind == "npz_hetero":
        assert g.train_mask.tolist() == [True, True, False, False, False, False]


def test_unrecognised_and_refused_folders(tmp_path, small):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "readme.md").write_text("hi")
    with pytest.raises(InputError, match=r"found none of: meta\.json .*OGB.*GraphSAINT.*Planetoid.*edge list.*\.npz"):
        detect(tmp_path / "junk")
    (tmp_path / "junk" / "meta.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(InputError, match="expected format 'fullgraph-native'.*got 'something-else'"):
        detect(tmp_path / "junk")
    with pytest.raises(InputError, match="does not exist"):
        load_graph(TrainConfig.of(dataset=str(tmp_path / "nowhere")))
    proteins = tmp_path / "prot"
    _ogb(proteins)
    (proteins / "raw" / "node-feat.csv.gz").unlink()
    _gz(proteins / "raw" / "edge-feat.csv.gz", "0.1\n")
    assert (detect(proteins).kind, detect(proteins).options["layout"], detect(proteins).metric) == \
        ("ogb", "edge-feat", "rocauc")
    papers = tmp_path / "papers"
    (papers / "raw").mkdir(parents=True)
    np.savez(papers / "raw" / "data.npz", edge_index=np.zeros((2, 1), dtype=np.int64))
    assert (detect(papers).kind, detect(papers).options["layout"], detect(papers).metric) == ("ogb", "binary", None)
    _gz(papers / "split" / "time" / "train.csv.gz", "0\n")
    _gz(papers / "split" / "time" / "valid.csv.gz", "0\n")
    _gz(papers / "split" / "time" / "test.csv.gz", "0\n")
    with pytest.raises(InputError, match="node-label.npz"):
        load_graph(TrainConfig.of(dataset=str(papers)))
    two = tmp_path / "two"
    _hetero(two)
    shutil.copy(two / "whatever.npz", two / "other.npz")
    with pytest.raises(InputError, match="one .npz file"):
        detect(two)
    write_native(small, tmp_path / "nat")
    with pytest.raises(InputError, match="--split 0"):
        load_graph(TrainConfig.of(dataset=str(tmp_path / "nat"), split=2))


def test_known_names_win_over_folders(tmp_path, monkeypatch, shared_data):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cora").mkdir()
    (tmp_path / "cora" / "junk.txt").write_text("not a dataset")
    assert not looks_like_path("cora") and not looks_like_path("synthetic") and not looks_like_path("edgelist")
    assert looks_like_path("./cora") and looks_like_path("mygraph/")
    assert load_raw_graph(TrainConfig.of(dataset="cora", root=str(shared_data))).num_nodes == 2708
    with pytest.raises(InputError, match="known dataset name"):  # not a path: the old message
        load_raw_graph(TrainConfig.of(dataset="imagenet"))
