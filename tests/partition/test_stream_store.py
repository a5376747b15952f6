"""The streaming partition writer: the same folder as the in-memory one, from a dataset folder's files.

Each case writes a partition twice, with ``save_partition(PartitionBook.build(load_native(folder)))``
and with ``save_partition_streaming(folder)``, and asks for the same ``partition.json`` (which lists
every part file's sha256, so the files are equal byte for byte) and equal parts read back by
``load_part``. Most cases shrink the blocks to a few dozen edges and a few hundred bytes, so that
every pass is many reads and the block seams are crossed everywhere.
"""

import json

import numpy as np
import pytest
import torch

from fullgraph.data.formats.native import write_native
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.graph import Graph
from fullgraph.data.synthetic import rmat
from fullgraph.errors import InputError
from fullgraph.partition import PartitionBook, load_meta, load_part, partition_nodes, save_partition
from fullgraph.partition.stream_store import save_partition_streaming

TINY = {"max_edges": 37, "block_bytes": 200}  # many blocks per pass on the test graphs


@pytest.fixture(scope="module")
def dense_folder(small, tmp_path_factory):
    folder = tmp_path_factory.mktemp("dense") / "ds"
    write_native(small, folder)
    return folder


@pytest.fixture(scope="module")
def sparse_multilabel_folder(tmp_path_factory):
    """An R-MAT graph (skewed degrees: rows longer than a block) with sparse features, some rows
    empty, and 0/1 multi-label targets."""
    g = rmat(8, 1500, num_features=12, seed=3)
    rng = np.random.default_rng(4)
    x = g.x * torch.from_numpy(rng.random(tuple(g.x.shape)) < 0.3)
    x[::7] = 0
    y = torch.from_numpy((rng.random((g.num_nodes, 5)) < 0.4).astype(np.float32))
    g = Graph(indptr=g.indptr, indices=g.indices, x=x.to_sparse_csr(), y=y, train_mask=g.train_mask,
              val_mask=g.val_mask, test_mask=g.test_mask, name="rmat-sparse")
    folder = tmp_path_factory.mktemp("sparse") / "ds"
    write_native(g, folder)
    return folder


def _both(folder, node_part, tmp_path, meta=None, **kw):
    """The in-memory writer's folder and the streaming writer's, for the same assignment."""
    g = load_native(folder)
    node_part = torch.as_tensor(node_part)
    a = save_partition(PartitionBook.build(g, node_part), g, tmp_path / "memory", meta)
    small_ids = node_part.numpy().astype(np.int16)
    b = save_partition_streaming(folder, small_ids, tmp_path / "stream", meta, **kw)
    return g, a, b


def _assert_same_folder(a, b, fingerprint):
    doc_a, doc_b = json.loads((a / "partition.json").read_text()), json.loads((b / "partition.json").read_text())
    assert doc_b == doc_a
    assert doc_b["fingerprint"] == fingerprint
    for i in range(doc_a["parts"]):
        assert (b / f"part-{i}/part.pt").read_bytes() == (a / f"part-{i}/part.pt").read_bytes()
        pa, pb = load_part(a, i, fingerprint), load_part(b, i, fingerprint)
        sa, sb = pa.state_dict(), pb.state_dict()
        assert sa.keys() == sb.keys()
        for k in sa:
            assert torch.equal(sa[k], sb[k]) if isinstance(sa[k], torch.Tensor) else sa[k] == sb[k], k


@pytest.mark.parametrize("method", ["random", "contiguous", "metis"])
@pytest.mark.parametrize("parts", [1, 2, 4])
def test_dense_features_same_folder_as_in_memory(dense_folder, tmp_path, method, parts):
    g = load_native(dense_folder)
    node_part = partition_nodes(g, parts, method, seed=parts)
    meta = {"method": method, "seed": parts, "weight": "nodes", "note": [1, "two"]}
    g, a, b = _both(dense_folder, node_part, tmp_path, meta, **TINY)
    _assert_same_folder(a, b, g.fingerprint())
    assert load_meta(b)["meta"] == meta


@pytest.mark.parametrize("parts", [1, 3])
def test_sparse_features_multilabel_and_long_rows(sparse_multilabel_folder, tmp_path, parts):
    g = load_native(sparse_multilabel_folder)
    assert g.multilabel and g.x.layout == torch.sparse_csr and int(g.in_degrees().max()) > TINY["max_edges"]
    g, a, b = _both(sparse_multilabel_folder, partition_nodes(g, parts, "random", seed=0), tmp_path, **TINY)
    _assert_same_folder(a, b, g.fingerprint())


def test_default_blocks_and_cora(cora, tmp_path):
    folder = tmp_path / "cora"
    write_native(cora, folder)
    _, a, b = _both(folder, partition_nodes(cora, 4, "metis", seed=0), tmp_path, {"method": "metis"})
    _assert_same_folder(a, b, cora.fingerprint())


@pytest.mark.parametrize("edges", [[], [(0, 1), (1, 2), (5, 6)]])
@pytest.mark.parametrize("parts", [1, 5, 12])
def test_edgeless_graph_and_parts_without_edges(tmp_path, edges, parts):
    """Parts with no edge, no halo, nothing to send: their empty arrays are saved as the book's."""
    n = 12
    src = torch.tensor([u for u, v in edges] + [v for u, v in edges], dtype=torch.int64)
    dst = torch.tensor([v for u, v in edges] + [u for u, v in edges], dtype=torch.int64)
    masks = [torch.arange(n) % 3 == i for i in range(3)]
    g = Graph.from_edges(src, dst, n, x=torch.randn(n, 3), y=torch.arange(n) % 2, train_mask=masks[0],
                         val_mask=masks[1], test_mask=masks[2], name="few-edges")
    write_native(g, tmp_path / "ds")
    g, a, b = _both(tmp_path / "ds", torch.arange(n) % parts, tmp_path, max_edges=2, block_bytes=16)
    _assert_same_folder(a, b, g.fingerprint())


def test_int8_int64_and_tensor_assignments_and_num_parts(dense_folder, tmp_path):
    g = load_native(dense_folder)
    node_part = partition_nodes(g, 3, "random", seed=1)
    a = save_partition(PartitionBook.build(g, node_part), g, tmp_path / "memory")
    for i, given in enumerate([node_part, node_part.numpy().astype(np.int8), node_part.numpy().astype(np.uint16)]):
        b = save_partition_streaming(dense_folder, given, tmp_path / f"s{i}", num_parts=3, **TINY)
        _assert_same_folder(a, b, g.fingerprint())


def test_reads_no_memory_map(dense_folder, tmp_path, monkeypatch):
    """Pages of a map would count in the process's memory: the writer reads files instead."""
    def refuse(*args, **kwargs):
        raise AssertionError("a memory map or np.load was used")

    monkeypatch.setattr(np, "memmap", refuse)
    monkeypatch.setattr(np, "load", refuse)
    node_part = np.arange(300, dtype=np.int16) % 2  # the graph has 300 nodes
    save_partition_streaming(dense_folder, node_part, tmp_path / "p", **TINY)
    monkeypatch.undo()
    assert load_part(tmp_path / "p", 1).num_inner == 150


def _one_line_error(match, *args, **kwargs):
    """``save_partition_streaming(*args, **kwargs)`` fails with one InputError line matching ``match``."""
    with pytest.raises(InputError, match=match) as info:
        save_partition_streaming(*args, **kwargs)
    assert "\n" not in str(info.value)


def test_not_preprocessed_is_refused(directed, tmp_path):
    said_so = tmp_path / "directed"
    write_native(directed, said_so)
    assert json.loads((said_so / "meta.json").read_text())["preprocessed"] is False
    node_part = np.arange(directed.num_nodes, dtype=np.int16) % 2
    _one_line_error("preprocessed", said_so, node_part, tmp_path / "p")
    assert not (tmp_path / "p").exists()
    lying = tmp_path / "lying"  # meta says preprocessed; the structure is not symmetric
    write_native(directed, lying, preprocessed=True)
    _one_line_error("symmetric", lying, node_part, tmp_path / "p", **TINY)
    assert not (tmp_path / "p").exists() and not list(tmp_path.glob(".p.tmp-*"))


def test_self_loops_and_repeats_are_refused(small, tmp_path):
    ip, ix = small.indptr.clone(), small.indices.clone()
    row = int(torch.nonzero(small.in_degrees() >= 2)[0])
    ix[int(ip[row])] = row  # a self loop in place of an edge
    looped = small.with_structure(ip, ix)
    write_native(looped, tmp_path / "loop", preprocessed=True)
    node_part = np.zeros(small.num_nodes, dtype=np.int8)
    _one_line_error("self loops", tmp_path / "loop", node_part, tmp_path / "p")


def _damage(folder, at: int, data: bytes) -> None:
    with open(folder / "indices.npy", "r+b") as f:
        f.seek(at)
        f.write(data)


@pytest.mark.parametrize("verify", [True, False])
def test_damaged_or_truncated_indices_is_one_input_error(small, tmp_path, verify):
    node_part = np.arange(small.num_nodes, dtype=np.int16) % 2
    row = int(torch.nonzero(small.in_degrees() >= 2)[0])
    for case, match in (("huge", "sha256|damaged"), ("swap", "sha256|damaged"), ("short", "truncated")):
        folder = tmp_path / case
        write_native(small, folder)
        size = (folder / "indices.npy").stat().st_size
        if case == "huge":
            _damage(folder, size - 40, np.full(4, 10**6, dtype=np.int32).tobytes())
        elif case == "swap":  # the first two edge ids of a row exchanged: in range, but out of order
            at = size - 4 * small.num_edges + 4 * int(small.indptr[row])
            _damage(folder, at, np.fromfile(folder / "indices.npy", dtype=np.int32, count=2, offset=at)[::-1].tobytes())
        else:
            with open(folder / "indices.npy", "r+b") as f:
                f.truncate(size - 12)
        _one_line_error(match, folder, node_part, tmp_path / f"p-{case}", verify=verify, **TINY)
        assert not (tmp_path / f"p-{case}").exists()


def test_bad_assignments_are_refused(dense_folder, tmp_path):
    out = tmp_path / "p"
    cases = [(np.zeros(299, dtype=np.int16), "shape"), (np.zeros(300, dtype=np.float32), "integer"),
             (np.zeros(300, dtype=bool), "integer"), (np.full(300, -1, dtype=np.int16), r"\[0, "),
             ([0] * 300, "numpy array or tensor")]
    for given, match in cases:
        _one_line_error(match, dense_folder, given, out)
    _one_line_error("at least one node", dense_folder, np.zeros(300, dtype=np.int8), out, num_parts=2)
    _one_line_error("JSON", dense_folder, np.zeros(300, dtype=np.int8), out, {"bad": object()})
    assert not out.exists()


def test_target_folder_rules(dense_folder, tmp_path):
    node_part = np.arange(300, dtype=np.int16) % 2
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    _one_line_error("refusing to overwrite", dense_folder, node_part, foreign)
    assert (foreign / "keep.txt").read_text() == "mine"
    out = save_partition_streaming(dense_folder, node_part, tmp_path / "p", **TINY)
    again = save_partition_streaming(dense_folder, node_part % 1, out, **TINY)  # an earlier partition: replaced
    assert load_meta(again)["parts"] == 1 and not (out / "part-1").exists()
