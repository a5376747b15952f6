"""Graph validation (one clear error per malformed case, through the API and the command line) and
the structure preprocessing."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from fullgraph import Graph, InputError
from fullgraph.data.preprocess import (
    add_self_loops, dedupe, gcn_norm, mean_norm, remove_self_loops, self_loop_positions, symmetrize,
)


def good_fields(n=6):
    return dict(
        x=torch.ones(n, 3),
        y=torch.tensor([0, 1, 0, 1, 0, 1]),
        train_mask=torch.tensor([1, 1, 0, 0, 0, 0], dtype=torch.bool),
        val_mask=torch.tensor([0, 0, 1, 1, 0, 0], dtype=torch.bool),
        test_mask=torch.tensor([0, 0, 0, 0, 1, 1], dtype=torch.bool),
    )


SRC, DST = [0, 1, 2, 3, 4], [1, 2, 3, 4, 5]


def make(src=SRC, dst=DST, n=6, **over):
    fields = good_fields(n) | over
    return Graph.from_edges(torch.tensor(src), torch.tensor(dst), n, **fields)


def test_a_good_graph_builds():
    g = make()
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (6, 5, 3, 2)
    src, dst = g.edges()
    assert sorted(zip(src.tolist(), dst.tolist())) == list(zip(SRC, DST))


# (case name, how to break the graph, the words the message must contain)
BAD = [
    ("edge id out of range", dict(src=[0, 1, 9, 3, 4]), "edge source ids in [0, 6)"),
    ("negative edge id", dict(dst=[1, -2, 3, 4, 5]), "destination ids in [0, 6)"),
    ("features of wrong dtype", dict(x=torch.ones(6, 3, dtype=torch.float64)), "dtype torch.float32"),
    ("features of wrong shape", dict(x=torch.ones(6)), "two-dimensional"),
    ("feature rows disagree with N", dict(x=torch.ones(5, 3)), "6 rows (got 5)"),
    ("label rows disagree with N", dict(y=torch.tensor([0, 1, 0])), "one row per node, 6 rows"),
    ("NaN feature", dict(x=torch.tensor([[float("nan")] * 3] + [[1.0] * 3] * 5)), "NaN or infinite"),
    ("inf feature", dict(x=torch.tensor([[float("inf")] * 3] + [[1.0] * 3] * 5)), "NaN or infinite"),
    ("label out of range", dict(y=torch.tensor([0, 1, 0, 1, 0, 7]), num_classes=2), "labels in [0, 2)"),
    ("label below -1", dict(y=torch.tensor([0, 1, 0, 1, 0, -3])), "labels >= 0"),
    ("labels of wrong dtype", dict(y=torch.tensor([0, 1, 0, 1, 0, 1], dtype=torch.int32)), "int64"),
    ("numbers of wrong dtype", dict(y=torch.tensor([0.5, 1, 0, 1, 0, 1], dtype=torch.float64)), "float32"),
    ("a number missing in a split", dict(y=torch.tensor([0.5, 1, float("nan"), 1, 0, 1])), "NaN"),
    ("empty train mask", dict(train_mask=torch.zeros(6, dtype=torch.bool)), "'train_mask' to select at least one"),
    ("overlapping masks", dict(val_mask=torch.tensor([1, 0, 1, 1, 0, 0], dtype=torch.bool)),
     "in both 'train_mask' and 'val_mask'"),
    ("mask of wrong dtype", dict(test_mask=torch.tensor([0, 0, 0, 0, 1, 1])), "bool tensor of shape (6,)"),
    ("unlabelled node in a split", dict(y=torch.tensor([-1, 1, 0, 1, 0, 1])), "label (got 1 with -1)"),
]


@pytest.mark.parametrize("case,change,words", BAD, ids=[b[0] for b in BAD])
def test_bad_graph_is_one_clear_error(case, change, words):
    change = dict(change)
    edges = {k: change.pop(k) for k in ("src", "dst") if k in change}
    with pytest.raises(InputError) as e:
        make(**edges, **change)
    assert words in str(e.value)


def test_empty_graph_is_an_error():
    with pytest.raises(InputError, match="at least one node"):
        Graph(indptr=torch.zeros(1, dtype=torch.int64), indices=torch.zeros(0, dtype=torch.int64),
              x=torch.ones(0, 3), y=torch.zeros(0, dtype=torch.int64), train_mask=torch.zeros(0, dtype=torch.bool),
              val_mask=torch.zeros(0, dtype=torch.bool), test_mask=torch.zeros(0, dtype=torch.bool))


def test_bad_csr_is_an_error():
    f = good_fields()
    with pytest.raises(InputError, match="end at len"):
        Graph(indptr=torch.tensor([0, 1, 2, 3, 4, 5, 9]), indices=torch.tensor([1, 2, 3, 4, 5]), **f)
    with pytest.raises(InputError, match="non-decreasing"):
        Graph(indptr=torch.tensor([0, 3, 2, 3, 4, 5, 5]), indices=torch.tensor([1, 2, 3, 4, 5]), **f)
    with pytest.raises(InputError, match="1-D int64"):
        Graph(indptr=torch.tensor([0, 1, 2, 3, 4, 5, 5], dtype=torch.int32), indices=torch.tensor([1, 2, 3, 4, 5]),
              **f)


def test_multilabel_graph():
    y = torch.tensor([[1, 0, 1]] * 6, dtype=torch.float32)
    g = make(y=y)
    assert g.multilabel and g.num_classes == 3
    with pytest.raises(InputError, match="only 0 and 1"):
        make(y=y * 2)


def test_sparse_features_are_validated_too():
    x = torch.eye(6, 3).to_sparse_csr()
    assert make(x=x).x.layout == torch.sparse_csr
    bad = torch.sparse_csr_tensor(x.crow_indices(), x.col_indices(), torch.full_like(x.values(), float("nan")),
                                  size=x.shape)
    with pytest.raises(InputError, match="NaN"):
        make(x=bad)


# ---------------------------------------------------------------- through the command line
def _write_edgelist(tmp_path, edges: str, labels="0\n1\n0\n1\n0\n1\n", feats=None):
    (tmp_path / "edges.txt").write_text(edges)
    (tmp_path / "labels.txt").write_text(labels)
    np.save(tmp_path / "features.npy", np.ones((6, 3), np.float32) if feats is None else feats)
    return tmp_path


@pytest.mark.parametrize(
    "edges,labels,feats,words",
    [
        ("0 1\n1 2\n2 9\n", "0\n1\n0\n1\n0\n1\n", None, "[0, 6)"),
        ("0 1\n1 -2\n", "0\n1\n0\n1\n0\n1\n", None, "[0, 6)"),
        ("0 1\n1 2\n", "0\n1\n0\n1\n0\n1\n", np.full((6, 3), np.nan, np.float32), "NaN"),
        ("0 1\n1 2\n", "0\n1\n0\n1\n", None, "row"),
        ("0 1\nzero 2\n", "0\n1\n0\n1\n0\n1\n", None, "line 2"),
    ],
    ids=["edge id out of range", "negative id", "NaN features", "label rows", "malformed line"],
)
def test_bad_input_from_the_command_line_exits_2_with_one_line(tmp_path, edges, labels, feats, words):
    _write_edgelist(tmp_path, edges, labels, feats)
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        "[train]\n"
        f'dataset = "edgelist"\nroot = "{tmp_path}"\nepochs = 1\n'
    )
    proc = subprocess.run([sys.executable, "-m", "fullgraph", "train", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("fullgraph: error:") and words in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- preprocessing
def dense(g):
    return torch.sparse_csr_tensor(g.indptr, g.indices, torch.ones(g.num_edges), size=(g.num_nodes,) * 2).to_dense()


def test_symmetrize_dedupe_and_self_loops():
    g = make(src=[0, 0, 1, 2, 3], dst=[1, 1, 1, 3, 3])  # a duplicate and two self loops
    s = symmetrize(g)
    a = dense(s)
    assert torch.equal(a, a.t()) and a.max() == 1
    r = remove_self_loops(s)
    assert dense(r).diagonal().sum() == 0
    assert r.num_edges == 4  # 0-1, 1-0, 2-3, 3-2
    with_loops = add_self_loops(r)
    assert torch.equal(dense(with_loops).diagonal(), torch.ones(6))
    assert add_self_loops(with_loops).num_edges == with_loops.num_edges  # never doubled


def test_gcn_and_mean_normalization_match_their_definitions():
    g = symmetrize(make(src=[0, 0, 1, 2, 3, 4], dst=[1, 2, 2, 3, 4, 4]))
    a = dense(g)
    a.fill_diagonal_(0)
    a_hat = a + torch.eye(6)
    d = a_hat.sum(1).pow(-0.5)
    ip, ix, v = gcn_norm(g.indptr, g.indices)
    got = torch.sparse_csr_tensor(ip, ix, v, size=(6, 6)).to_dense()
    torch.testing.assert_close(got, d[:, None] * a_hat * d[None, :])
    ip, ix, v = mean_norm(g.indptr, g.indices)
    got = torch.sparse_csr_tensor(ip, ix, v, size=(6, 6)).to_dense()
    stored = dense(g)  # the mean runs over the stored in-edges, the self loop 4 -> 4 included
    deg = stored.sum(1, keepdim=True)
    torch.testing.assert_close(got, torch.where(deg > 0, stored / deg.clamp(min=1), torch.zeros_like(a)))


def test_preprocessing_leaves_the_input_untouched():
    g = make(src=[3, 0, 1, 2, 3], dst=[0, 1, 1, 3, 3])
    before = (g.indptr.clone(), g.indices.clone())
    symmetrize(g), gcn_norm(g.indptr, g.indices), mean_norm(g.indptr, g.indices)
    assert torch.equal(before[0], g.indptr) and torch.equal(before[1], g.indices)


# ---------------------------------------------------------------- the lean structure passes
def _scipy_csr(g):
    import scipy.sparse as sp

    return sp.csr_matrix((np.ones(g.num_edges), g.indices.numpy(), g.indptr.numpy()), shape=(g.num_nodes,) * 2)


def _canonical_scipy(m):
    """SciPy's canonical structure of ``m``: repeats merged, rows sorted, as int64 tensors."""
    import scipy.sparse as sp

    m = sp.csr_matrix(m)
    m.sum_duplicates()
    m.sort_indices()
    return torch.from_numpy(m.indptr.astype(np.int64)), torch.from_numpy(m.indices.astype(np.int64))


def random_graph(n, m, seed, dtype=np.int64):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m).astype(dtype), rng.integers(0, n, m).astype(dtype)
    src[: m // 10] = dst[: m // 10]  # self loops, and (with so few nodes) many repeated edges
    return src, dst


@pytest.mark.parametrize("n,m", [(7, 60), (300, 5000), (5000, 3000)])
def test_structure_passes_match_scipy(monkeypatch, n, m):
    import fullgraph.data.edge_list as graph_mod

    monkeypatch.setattr(graph_mod, "EDGE_BLOCK", 64)  # many blocks, so that block edges are exercised
    src, dst = random_graph(n, m, seed=n)
    fields = dict(x=torch.ones(n, 2), y=torch.arange(n) % 2, train_mask=torch.arange(n) == 0,
                  val_mask=torch.arange(n) == 1, test_mask=torch.arange(n) == 2)
    g = Graph.from_edges(torch.from_numpy(src), torch.from_numpy(dst), n, **fields)
    import scipy.sparse as sp

    a = sp.csr_matrix((np.ones(m), (dst, src)), shape=(n, n))  # in-edge CSR: row = destination
    ref_ip = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
    assert torch.equal(g.indptr, torch.from_numpy(ref_ip))
    for v in range(0, n, max(1, n // 50)):  # repeats kept, sources sorted within each row
        assert g.indices[ref_ip[v] : ref_ip[v + 1]].tolist() == sorted(src[dst == v].tolist())
    for got, want in [(symmetrize(g), _canonical_scipy(a + a.T)), (dedupe(g), _canonical_scipy(a))]:
        assert torch.equal(got.indptr, want[0]) and torch.equal(got.indices, want[1])
    s = symmetrize(g)
    r = remove_self_loops(s)
    d = sp.csr_matrix((np.ones(s.num_edges), s.indices.numpy(), s.indptr.numpy()), shape=(n, n))
    d.setdiag(0)
    d.eliminate_zeros()
    want = _canonical_scipy(d)
    assert torch.equal(r.indptr, want[0]) and torch.equal(r.indices, want[1])
    assert self_loop_positions(r.indptr, r.indices).size == 0
    same = remove_self_loops(r)  # nothing to drop: the arrays are kept, not copied
    assert same.indices.data_ptr() == r.indices.data_ptr()
    # int32 ids, numpy input: the same CSR without an int64 copy of the edge list
    g32 = Graph.from_edges(src.astype(np.int32), dst.astype(np.int32), n, **fields)
    assert torch.equal(g32.indptr, g.indptr) and torch.equal(g32.indices, g.indices)


def test_fingerprint_hashes_the_bytes_of_every_field():
    import hashlib

    g = make(src=[0, 0, 1, 2, 3], dst=[1, 1, 1, 3, 3])
    h = hashlib.sha256()
    for t in (g.indptr, g.indices, g.y, g.train_mask, g.val_mask, g.test_mask, g.x):
        h.update(str(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes())
    assert g.fingerprint() == h.hexdigest()


def test_nonfinite_features_are_counted_across_blocks(monkeypatch):
    import fullgraph.data.graph as graph_mod

    monkeypatch.setattr(graph_mod, "_FEATURE_BLOCK", 4)  # one row of 3 features per block
    x = torch.ones(6, 3)
    x[1, 0], x[4, 2], x[5, 1] = float("nan"), float("inf"), float("-inf")
    with pytest.raises(InputError, match="got 3 NaN or infinite"):
        make(x=x)
