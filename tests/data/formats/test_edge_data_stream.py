"""Edge data through the on-disk sort (``write_native_edges``) and the OGB converter.

The reference is the in-memory road: ``preprocess(Graph.from_edges(..., edge_weight=...))`` written by
``write_native``. The streamed folder must hold the same files (every sha256 equal, so the same
fingerprint once loaded), whatever the block sizes: tiny ``block_bytes`` cut the spill into many
buckets, so that a row range's seams are crossed everywhere.
"""

import gzip

import numpy as np
import pytest
import torch

from fullgraph.data.datasets import preprocess
from fullgraph.data.detect import load_path
from fullgraph.data.formats import _common
from fullgraph.data.formats.native import write_native
from fullgraph.data.formats.native_edges import write_native_edges
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.formats.ogb import open_ogb
from fullgraph.data.formats.ogb_convert import convert_ogb
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

N = 40


@pytest.fixture(scope="module")
def nodes():
    rng = np.random.default_rng(1)
    masks = {m: torch.zeros(N, dtype=torch.bool) for m in ("train_mask", "val_mask", "test_mask")}
    masks["train_mask"][:20], masks["val_mask"][20:30], masks["test_mask"][30:] = True, True, True
    return dict(x=torch.from_numpy(rng.random((N, 3), dtype=np.float32)), y=torch.from_numpy(rng.integers(0, 3, N)),
                name="streamed", **masks)


def _blocks(src, dst, edge, size):
    return [(src[i:i + size], dst[i:i + size], {k: v[i:i + size] for k, v in edge.items()})
            for i in range(0, max(src.size, 1), size)]


def _same_as_in_memory(tmp_path, nodes, src, dst, edge, **kw):
    want = preprocess(Graph.from_edges(src, dst, N, **{k: torch.from_numpy(v) for k, v in edge.items()}, **nodes), **kw)
    a = write_native(want, tmp_path / "memory", preprocessed=True)
    for size, block_bytes in ((7, 64), (10**6, 1 << 20)):  # many blocks and buckets, and one of each
        b = write_native_edges(tmp_path / "stream", N, _blocks(src, dst, edge, size), block_bytes=block_bytes,
                               **kw, **nodes)
        assert b["version"] == 3 and b["preprocessed"] and b["counts"] == a["counts"]
        assert {k: f["sha256"] for k, f in b["files"].items()} == {k: f["sha256"] for k, f in a["files"].items()}
    assert load_native(tmp_path / "stream").fingerprint() == want.fingerprint()
    return want


def _distinct_pairs(rng, e):
    """``e`` draws of distinct (src, dst) pairs: self loops and both directions of some pairs among them."""
    keys = np.unique(rng.integers(0, N * N, e))
    rng.shuffle(keys)
    return keys % N, keys // N


def test_weights_repeats_summed_loops_dropped(tmp_path, nodes):
    rng = np.random.default_rng(2)
    src, dst = rng.integers(0, N, 400), rng.integers(0, N, 400)  # repeats, loops, one direction or both
    w = rng.random(400).astype(np.float32)
    want = _same_as_in_memory(tmp_path, nodes, src, dst, {"edge_weight": w})
    assert want.edge_kinds == ("weight",)


@pytest.mark.parametrize("reverse_relations", [True, False])
def test_features_and_types_reverse_relations(tmp_path, nodes, reverse_relations):
    rng = np.random.default_rng(3)
    src, dst = _distinct_pairs(rng, 300)
    edge = {"edge_attr": rng.random((src.size, 3)), "edge_type": rng.integers(0, 4, src.size),
            "edge_weight": rng.random(src.size).astype(np.float32)}
    want = _same_as_in_memory(tmp_path, nodes, src, dst, edge, reverse_relations=reverse_relations)
    assert want.num_relations == (8 if reverse_relations else 4)


@pytest.mark.parametrize("reverse_relations", [True, False])
def test_a_pair_in_two_relations_is_two_edges_as_in_memory(tmp_path, nodes, reverse_relations):
    """An edge is ``(src, dst, relation)``: pairs listed in two relations (and one triple listed twice,
    its weights summed) give the folder the in-memory road makes (issue 60)."""
    rng = np.random.default_rng(5)
    src, dst = _distinct_pairs(rng, 200)
    t = rng.integers(0, 3, src.size)
    src, dst = np.concatenate([src, src[:80], src[:10]]), np.concatenate([dst, dst[:80], dst[:10]])
    t = np.concatenate([t, (t[:80] + 1) % 3, t[:10]])
    edge = {"edge_type": t, "edge_weight": rng.random(src.size).astype(np.float32)}
    want = _same_as_in_memory(tmp_path, nodes, src, dst, edge, reverse_relations=reverse_relations)
    pairs = want.edges()[0] * N + want.edges()[1]
    assert int(pairs.unique().numel()) < want.num_edges  # some pairs stand in two relations


def test_symmetric_typed_keeps_relations_and_as_given(tmp_path, nodes):
    rng = np.random.default_rng(4)
    s, d = _distinct_pairs(rng, 100)
    keep = s != d
    s, d = np.concatenate([s[keep], d[keep]]), np.concatenate([d[keep], s[keep]])
    keys = np.unique(d * N + s)
    s, d = keys % N, keys // N
    t = rng.integers(0, 3, N * N)[np.minimum(s, d) * N + np.maximum(s, d)] + 3 * (s > d)  # (u, v, t), (v, u, t + 3)
    want = preprocess(Graph.from_edges(s, d, N, edge_type=torch.from_numpy(t), num_relations=6, **nodes))
    meta = write_native_edges(tmp_path / "sym", N, [(s, d, {"edge_type": t})], num_relations=6, **nodes)
    # symmetric edge by edge in paired relations (r, r + R/2): no reverse edge is added, so R stays
    assert want.num_relations == 6 and want.num_edges == s.size
    assert meta["counts"]["num_relations"] == 6 and load_native(tmp_path / "sym").fingerprint() == want.fingerprint()
    t[0] = (t[0] + 1) % 6  # one edge out of its pair: every edge gains a reverse relation, as in memory
    want = preprocess(Graph.from_edges(s, d, N, edge_type=torch.from_numpy(t), num_relations=6, **nodes))
    meta = write_native_edges(tmp_path / "sym2", N, [(s, d, {"edge_type": t})], num_relations=6, **nodes)
    assert want.num_relations == 12 and load_native(tmp_path / "sym2").fingerprint() == want.fingerprint()
    src, dst = rng.integers(0, N, 200), rng.integers(0, N, 200)
    w = rng.random(200).astype(np.float32)
    meta = write_native_edges(tmp_path / "given", N, _blocks(src, dst, {"edge_weight": w}, 9), symmetrize=False,
                              drop_self_loops=False, block_bytes=64, **nodes)
    want = Graph.from_edges(src, dst, N, edge_weight=torch.from_numpy(w), **nodes)
    assert not meta["preprocessed"] and load_native(tmp_path / "given").fingerprint() == want.fingerprint()


def test_refusals_in_one_line(tmp_path, nodes):
    src, dst = np.array([0, 1, 0]), np.array([1, 2, 1])
    with pytest.raises(InputError, match=r"repeated edge, e\.g\. 0 -> 1 listed 2 times"):
        write_native_edges(tmp_path / "a", N, [(src, dst, {"edge_attr": np.ones((3, 2))})], **nodes)
    with pytest.raises(InputError, match=r"3 -> 3 listed 2 times"):  # a loop too, as Graph.from_edges refuses it
        write_native_edges(tmp_path / "a", N, [([3, 3], [3, 3], {"edge_type": np.array([1, 1]),
                                                                "edge_attr": np.ones((2, 2))})], **nodes)
    with pytest.raises(InputError, match=r"same edge data \(got none in edge block 1, weight in the first\)"):
        write_native_edges(tmp_path / "a", N, [(src, dst, {"edge_weight": np.ones(3)}), (src, dst)], **nodes)
    with pytest.raises(InputError, match=r"finite values in 'edge_weight' \(got 1 NaN"):
        write_native_edges(tmp_path / "a", N, [(src, dst, {"edge_weight": np.array([1, np.nan, 2])})], **nodes)
    with pytest.raises(InputError, match=r"edge types in \[0, 2\)"):
        write_native_edges(tmp_path / "a", N, [(src, dst, {"edge_type": np.array([0, 1, 2])})], num_relations=2,
                           **nodes)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing half-written


# ------------------------------------------------------------------------------------ OGB layouts
def _gz(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write("".join(",".join(repr(v) for v in r) + "\n" for r in rows))


def _ogb(folder, edges, label_rows, node_feat=None, edge_feat=None, edge_weight=None):
    n = len(label_rows)
    _gz(folder / "raw" / "edge.csv.gz", edges)
    _gz(folder / "raw" / "node-label.csv.gz", label_rows)
    _gz(folder / "raw" / "num-node-list.csv.gz", [[n]])
    for name, rows in (("node-feat", node_feat), ("edge-feat", edge_feat), ("edge_weight", edge_weight)):
        if rows is not None:
            _gz(folder / "raw" / f"{name}.csv.gz", rows)
    for s, ids in (("train", range(0, n // 2)), ("valid", range(n // 2, 3 * n // 4)), ("test", range(3 * n // 4, n))):
        _gz(folder / "split" / "s" / f"{s}.csv.gz", [[i] for i in ids])


def test_ogb_edge_features_kept_or_averaged(tmp_path, monkeypatch):
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 64)  # the two files' blocks hold different row counts
    rng = np.random.default_rng(5)
    src, dst = _distinct_pairs(rng, 60)
    keep = src != dst
    edges = np.stack([src[keep], dst[keep]], 1).tolist()
    feats = rng.random((len(edges), 8)).round(3).tolist()
    labels = rng.integers(0, 2, (N, 3)).tolist()
    labels[0], labels[1] = [0, 0, 0], [1, 1, 1]
    _ogb(tmp_path / "prot", edges, labels, edge_feat=feats)
    loaded = load_path(tmp_path / "prot")  # in memory, then symmetrized with its data
    assert loaded.edge_kinds == ("attr",) and loaded.edge_attr.shape[1] == 8
    meta = convert_ogb(open_ogb(tmp_path / "prot"), tmp_path / "native")
    assert meta["counts"]["edge_data"] == ["attr"] and meta["counts"]["edge_features"] == 8
    assert load_native(tmp_path / "native").fingerprint() == loaded.fingerprint()
    mean = convert_ogb(open_ogb(tmp_path / "prot", edge_data=False), tmp_path / "mean")  # the folder of before
    back = load_native(tmp_path / "mean")
    assert "edge_data" not in mean["counts"] and back.edge_kinds == ()
    assert torch.equal(back.x, load_native(tmp_path / "native").x)  # node features: the mean either way


def test_ogb_csv_edge_weights_summed(tmp_path, monkeypatch):
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 40)
    rng = np.random.default_rng(6)
    edges = rng.integers(0, N, (80, 2)).tolist()  # repeated pairs: their weights are summed
    _ogb(tmp_path / "collab", edges, [[i % 3] for i in range(N)], node_feat=rng.random((N, 2)).round(3).tolist(),
         edge_weight=[[float(v)] for v in rng.integers(1, 4, 80)])
    loaded = load_path(tmp_path / "collab")
    assert loaded.edge_kinds == ("weight",)
    convert_ogb(open_ogb(tmp_path / "collab"), tmp_path / "native")
    assert load_native(tmp_path / "native").fingerprint() == loaded.fingerprint()


def test_ogb_binary_edge_feat_member(tmp_path, monkeypatch):
    from fullgraph.data.formats import npy_stream
    from fullgraph.data.synthetic.ogb import write_rmat_ogb_binary

    monkeypatch.setattr(npy_stream, "BLOCK_BYTES", 1000)  # the edge and feature streams cut differently
    folder = write_rmat_ogb_binary(tmp_path / "papers", 6, 400, num_features=3, num_classes=3, labelled=0.5,
                                   edge_features=2)
    raw = np.load(folder / "raw" / "data.npz")
    assert raw["edge_feat"].shape == (raw["edge_index"].shape[1], 2) < (400, 2)  # repeated draws dropped
    loaded = load_path(folder)
    assert loaded.edge_kinds == ("attr",)
    meta = convert_ogb(open_ogb(folder), tmp_path / "native")
    assert meta["edge_data_source"] == {"edge_attr": "raw/data.npz:edge_feat"}
    assert load_native(tmp_path / "native").fingerprint() == loaded.fingerprint()
