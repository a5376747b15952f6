"""The native dataset folder: round trips, the PyG writer, and every damaged folder as one error."""

import json

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.data.formats import load_native, write_native
from fullgraph.data.formats.native import is_preprocessed
from fullgraph.data.graph import Graph
from fullgraph.data.synthetic import planted_partition
from fullgraph.errors import InputError

FIELDS = ("indptr", "indices", "y", "train_mask", "val_mask", "test_mask")


def assert_same_graph(a: Graph, b: Graph) -> None:
    for f in FIELDS:
        assert torch.equal(getattr(a, f), getattr(b, f)), f
    assert a.x.layout == b.x.layout and torch.equal(a.dense_x(), b.dense_x())
    assert (a.name, a.num_classes) == (b.name, b.num_classes)


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
        load_native(d)




def test_checksum_is_skipped_when_asked_and_above_the_auto_limit(damaged, monkeypatch):
    from fullgraph.data.formats import native

    d = damaged("checksum")
    load_native(d, verify=False)  # sizes, dtypes and shapes still checked; the flipped bit is not seen
    monkeypatch.setattr(native, "VERIFY_AUTO_MAX_BYTES", 1000)
    load_native(d)
    with pytest.raises(InputError, match="sha256"):
        load_native(d, verify=True)


def test_write_refuses_a_foreign_folder_and_a_file(small, tmp_path):
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
    assert (foreign / "notes.txt").read_text() == "precious" and (tmp_path / "f").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "mine", "nat"]
























