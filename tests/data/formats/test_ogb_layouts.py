"""Every OGB node-property layout, read from small folders written in its exact layout.

The references are independent of the streaming readers: NumPy's own ``np.load`` of the whole
archive, ``gzip`` + ``np.loadtxt`` of the text files, and a Python loop over the edges for
ogbn-proteins' node features. The block sizes are shrunk so that every stream is cut many times
(rows split across reads, the two rows of a (2, E) member read side by side)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

from fullgraph.data.datasets import preprocess
from fullgraph.data.detect import detect
from fullgraph.data.formats import _common, npy_stream
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.formats.ogb import load_ogb, open_ogb
from fullgraph.data.formats.ogb_convert import convert_ogb
from fullgraph.data.synthetic.ogb import npz_writer, write_rmat_ogb_binary
from fullgraph.errors import InputError


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(npy_stream, "BLOCK_BYTES", 4000)
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 300)


def _gz(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def _lines(rows):
    return "".join(",".join("nan" if isinstance(v, float) and np.isnan(v) else repr(v) for v in r) + "\n"
                   for r in rows)


def _reference(folder):
    """papers100M's layout read the plain way: whole arrays, no streams."""
    data = np.load(folder / "raw" / "data.npz")
    label = np.load(folder / "raw" / "node-label.npz")["node_label"][:, 0]
    ids = {s: np.loadtxt(gzip.open(folder / "split" / "time" / f"{s}.csv.gz"), dtype=np.int64, ndmin=1)
           for s in ("train", "valid", "test")}
    return data["edge_index"], data["node_feat"], label, ids


@pytest.mark.parametrize("compress", [True, False])
def test_binary_layout_matches_numpy_and_converts(tmp_path, compress):
    folder = write_rmat_ogb_binary(tmp_path / "papers", 7, 3000, num_features=6, num_classes=4, labelled=0.4,
                                   compress=compress)
    edge_index, x, label, ids = _reference(folder)
    assert np.isnan(label).any()  # unlabelled nodes exist, and no split names one
    g = load_ogb(folder)
    src, dst = g.edges()
    want = sorted(zip(edge_index[0].tolist(), edge_index[1].tolist()))
    assert sorted(zip(src.tolist(), dst.tolist())) == want
    assert torch.equal(g.x, torch.from_numpy(x))
    assert g.y.tolist() == [-1 if np.isnan(v) else int(v) for v in label]
    for mask, s in ((g.train_mask, "train"), (g.val_mask, "valid"), (g.test_mask, "test")):
        assert sorted(torch.nonzero(mask).flatten().tolist()) == sorted(ids[s].tolist())
        assert bool((g.y[mask] >= 0).all())
    meta = convert_ogb(open_ogb(folder), tmp_path / "native")
    assert meta["symmetrized"] and meta["ogb_layout"] == "binary" and "metric" not in meta
    native, expected = load_native(tmp_path / "native"), preprocess(g)
    for field in ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(native, field), getattr(expected, field)), field


def test_binary_layout_fortran_edge_index_and_float16_features(tmp_path):
    folder = tmp_path / "f"
    (folder / "raw").mkdir(parents=True)
    ei = np.asfortranarray(np.array([[0, 1, 2, 3, 4], [1, 2, 3, 4, 0]], dtype=np.int64))
    x = np.arange(10, dtype=np.float16).reshape(5, 2)
    np.savez_compressed(folder / "raw" / "data.npz", edge_index=ei, node_feat=x, num_nodes_list=np.array([5]),
                        num_edges_list=np.array([5]))
    np.savez(folder / "raw" / "node-label.npz", node_label=np.array([[0.0], [1.0], [np.nan], [1.0], [0.0]]))
    for s, i in (("train", "0\n1\n"), ("valid", "3\n"), ("test", "4\n")):
        _gz(folder / "split" / "time" / f"{s}.csv.gz", i)
    g = load_ogb(folder)
    assert sorted(zip(*[t.tolist() for t in g.edges()])) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]
    assert g.x.dtype == torch.float32 and torch.equal(g.x, torch.from_numpy(x.astype(np.float32)))
    assert g.y.tolist() == [0, 1, -1, 1, 0]


def _proteins(folder, n=6, tasks=3):
    rng = np.random.default_rng(0)
    edges = np.array([[0, 1], [1, 2], [2, 0], [3, 4], [0, 4], [4, 5]])
    feats = rng.random((len(edges), 8)).round(3)
    labels = rng.integers(0, 2, (n, tasks))
    labels[:, 0] = [0, 1, 0, 1, 0, 1]  # every task has both classes somewhere
    _gz(folder / "raw" / "edge.csv.gz", _lines(edges.tolist()))
    _gz(folder / "raw" / "edge-feat.csv.gz", _lines(feats.tolist()))
    _gz(folder / "raw" / "node-label.csv.gz", _lines(labels.tolist()))
    _gz(folder / "raw" / "node_species.csv.gz", _lines([[3702]] * n))
    _gz(folder / "raw" / "num-node-list.csv.gz", f"{n}\n")
    _gz(folder / "raw" / "num-edge-list.csv.gz", f"{len(edges)}\n")
    for s, i in (("train", "0\n1\n2\n"), ("valid", "3\n"), ("test", "4\n5\n")):
        _gz(folder / "split" / "species" / f"{s}.csv.gz", i)
    return edges, feats, labels


def test_edge_feat_layout_mean_of_incident_edges_and_rocauc(tmp_path):
    edges, feats, labels = _proteins(tmp_path / "prot")
    want = np.zeros((6, 8))
    for (u, v), f in zip(edges.tolist(), feats):
        for end in (u, v):
            want[end] += f / sum(1 for e in edges.tolist() for w in e if w == end)
    g = load_ogb(tmp_path / "prot")
    assert g.multilabel and g.num_classes == 3 and torch.equal(g.y, torch.from_numpy(labels.astype(np.float32)))
    assert torch.allclose(g.x, torch.from_numpy(want).float(), atol=1e-6)
    assert detect(tmp_path / "prot").metric == "rocauc"
    meta = convert_ogb(open_ogb(tmp_path / "prot"), tmp_path / "native")
    assert meta["metric"] == "rocauc" and detect(tmp_path / "native").metric == "rocauc"
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "fullgraph", "train", "--dataset", str(tmp_path / "native"),
                          "--epochs", "2", "--hidden", "8", "--progress", "none", "--out", str(run)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["metric"] == "rocauc" and 0.0 <= summary["test_metric"] <= 1.0


def test_csv_layout_read_in_blocks_converts_like_it_loads(tmp_path):
    folder = tmp_path / "arxiv"
    rng = np.random.default_rng(1)
    n = 40
    edges = rng.integers(0, n, (200, 2))
    _gz(folder / "raw" / "edge.csv.gz", _lines(edges.tolist()))
    x = rng.random((n, 5)).round(4)
    _gz(folder / "raw" / "node-feat.csv.gz", _lines(x.tolist()))
    y = [[float("nan")] if i % 7 == 6 else [i % 3] for i in range(n)]
    _gz(folder / "raw" / "node-label.csv.gz", _lines(y))
    labelled = [i for i in range(n) if i % 7 != 6]
    for s, part in (("train", labelled[:20]), ("valid", labelled[20:27]), ("test", labelled[27:])):
        _gz(folder / "split" / "time" / f"{s}.csv.gz", "".join(f"{i}\n" for i in part))
    g = load_ogb(folder)
    assert torch.allclose(g.x, torch.from_numpy(x).float()) and g.y[6] == -1 and g.num_nodes == n
    assert sorted(zip(*[t.tolist() for t in g.edges()])) == sorted(map(tuple, edges.tolist()))
    convert_ogb(open_ogb(folder), tmp_path / "native")
    native, expected = load_native(tmp_path / "native"), preprocess(g)
    for field in ("indptr", "indices", "x", "y", "train_mask"):
        assert torch.equal(getattr(native, field), getattr(expected, field)), field


def _rewrite_member(path, name, array):
    """``path`` (an .npz) with member ``name`` replaced by ``array``."""
    keep = {k: v for k, v in np.load(path).items() if k != name}
    np.savez(path, **keep, **{name: array})


def _convert(tmp_path, folder):
    out = subprocess.run([sys.executable, "-m", "fullgraph", "convert", "--dataset", str(folder), "--out",
                          str(tmp_path / "out")], capture_output=True, text=True)
    return out.returncode, out.stderr.strip()


def test_damaged_binary_folders_fail_in_one_line(tmp_path):
    folder = write_rmat_ogb_binary(tmp_path / "p", 6, 500, num_features=4, num_classes=3, labelled=0.5)
    data, labels = folder / "raw" / "data.npz", folder / "raw" / "node-label.npz"
    good = data.read_bytes()
    cases = [
        (lambda: data.write_bytes(good[: len(good) * 2 // 3]), "data.npz"),  # truncated archive
        (lambda: _rewrite_member(data, "edge_index", np.zeros((2, 500), dtype=np.float32)), "integers"),
        (lambda: _rewrite_member(data, "num_nodes_list", np.array([65])), "65 rows"),
        (lambda: _rewrite_member(data, "num_edges_list", np.array([7])), r"shape \(2, 7\)"),
        (lambda: _rewrite_member(labels, "node_label", np.zeros((63, 1), dtype=np.float32)), "63"),
        (lambda: _rewrite_member(data, "edge_index", np.full((2, 500), 64, dtype=np.int64)), r"\[0, 64\)"),
    ]
    for damage, pattern in cases:
        data.write_bytes(good)
        write_rmat_ogb_binary(tmp_path / "p", 6, 500, num_features=4, num_classes=3, labelled=0.5)
        damage()
        code, err = _convert(tmp_path, folder)
        assert code == 2 and len(err.splitlines()) == 1, (pattern, err)
        import re
        assert re.search(pattern, err), (pattern, err)
        assert not (tmp_path / "out").exists()


def test_damaged_member_stream_and_unlabelled_split_node(tmp_path):
    folder = write_rmat_ogb_binary(tmp_path / "p", 6, 500, num_features=4, num_classes=3, labelled=0.5)
    data = folder / "raw" / "data.npz"
    with zipfile.ZipFile(data) as zf:  # a member whose compressed bytes are damaged mid-stream
        info = zf.getinfo("node_feat.npy")
    raw = bytearray(data.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 200
    raw[start:start + 64] = bytes(64)
    data.write_bytes(bytes(raw))
    with pytest.raises(InputError, match="node_feat"):
        load_ogb(folder)
    write_rmat_ogb_binary(tmp_path / "p", 6, 500, num_features=4, num_classes=3, labelled=0.5)
    label = np.load(folder / "raw" / "node-label.npz")["node_label"]
    nan_node = int(np.flatnonzero(np.isnan(label[:, 0]))[0])
    _gz(folder / "split" / "time" / "train.csv.gz", f"{nan_node}\n")
    with pytest.raises(InputError, match=f"node {nan_node} unlabelled"):
        convert_ogb(open_ogb(folder), tmp_path / "out")
    with npz_writer(folder / "raw" / "extra.npz", False):
        pass  # an unrelated archive beside the layout changes nothing
    assert detect(folder).options["layout"] == "binary"


def test_edge_data_past_float32_is_one_line_naming_file_and_line(tmp_path):
    """Issue 63 §9: a value past float32's range warned from numpy, then failed naming no file or line."""
    import warnings

    _proteins(tmp_path / "prot")
    rows = [[0.5] * 8] * 6
    rows[2] = [0.5] * 7 + [1e39]
    _gz(tmp_path / "prot" / "raw" / "edge-feat.csv.gz", _lines(rows))
    with pytest.raises(InputError) as e, warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        load_ogb(tmp_path / "prot")
    text = str(e.value)
    assert "\n" not in text and "edge-feat.csv.gz" in text and "float32's range" in text and "line 3" in text, text
