"""A typed graph's node types travel wherever the graph goes on disk: the native folder (its
``meta.json`` ``node_types`` record, read back into ``Graph.node_types``), ``partition.json`` from
both part writers (in memory and streamed from the folder's files, byte for byte the same) and
``blockrows.json``. A damaged record, or one that disagrees with the arrays, is one ``InputError``
line, from the loader and from the streamed writer alike. Tiny graphs only."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.data.formats.native import write_native
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.formats.native_stream import CSRStream
from fullgraph.data.typed import typed_graph
from fullgraph.errors import InputError
from fullgraph.partition import PartitionBook, load_part, save_partition
from fullgraph.partition.blockrows import load_block_rows_meta, save_block_rows
from fullgraph.partition.store import load_meta, meta_node_types
from fullgraph.partition.stream_store import save_partition_streaming

TINY = {"max_edges": 17, "block_bytes": 96}  # every streamed pass crosses many block seams
COUNTS = {"paper": 30, "author": 20, "venue": 5}


def _typed(seed: int = 0):
    """Papers (sparse features, labelled), authors (dense features), venues (none); two relations and
    their reverses."""
    rng = np.random.default_rng(seed)
    x_paper = sp.random(30, 6, density=0.3, format="csr", random_state=seed, dtype=np.float32)
    x_author = rng.standard_normal((20, 4)).astype(np.float32)
    writes = (rng.integers(0, 20, 60), rng.integers(0, 30, 60))
    published = (np.arange(30), rng.integers(0, 5, 30))
    order = rng.permutation(30)
    splits = {"train": order[:12], "val": order[12:20], "test": order[20:]}
    return typed_graph(COUNTS, {"paper": x_paper, "author": x_author},
                       {("author", "writes", "paper"): writes, ("paper", "in", "venue"): published},
                       ("paper", rng.integers(0, 3, 30)), splits, name="typed")


@pytest.fixture(scope="module")
def graph():
    return _typed()


def _folder(graph, tmp_path):
    meta = write_native(graph, tmp_path / "ds")
    return tmp_path / "ds", meta


def _edit(folder, **record):
    """The folder's ``node_types`` record with the given entries replaced (the arrays untouched)."""
    meta = json.loads((folder / "meta.json").read_text())
    meta["node_types"] = {**meta["node_types"], **record}
    (folder / "meta.json").write_text(json.dumps(meta))


def _one_line(e) -> str:
    assert "\n" not in str(e.value)
    return str(e.value)


def test_native_folder_keeps_node_types(graph, tmp_path):
    assert graph.node_types.num_relations == 4 and graph.node_types.featureless == (2,)
    folder, meta = _folder(graph, tmp_path)
    assert meta["version"] == 3 and meta["preprocessed"]  # the edges' relations make it 3; no version of its own
    assert {"node_types": meta["node_types"]} == graph.node_types.record() and "node_types" not in meta["counts"]
    back = load_native(folder)
    assert back.node_types == graph.node_types and back.fingerprint() == graph.fingerprint()
    for f in ("indptr", "indices", "y", "train_mask", "val_mask", "test_mask", "edge_type"):
        assert torch.equal(getattr(back, f), getattr(graph, f)), f
    assert torch.equal(back.dense_x(), graph.dense_x()) and back.x.layout == torch.sparse_csr
    assert CSRStream.of_folder(folder).node_types == graph.node_types
    bare = graph.without_edge_data()  # types without relations: the version of a folder without edge data
    meta = write_native(bare, tmp_path / "bare")
    assert meta["version"] == 1 and meta["node_types"]["relations"] == []
    assert load_native(tmp_path / "bare").node_types == bare.node_types


def test_partition_folders_keep_node_types_whichever_writer(graph, tmp_path):
    folder, _ = _folder(graph, tmp_path)
    g = load_native(folder)
    node_part = torch.from_numpy(np.random.default_rng(3).integers(0, 3, g.num_nodes))
    a = save_partition(PartitionBook.build(g, node_part), g, tmp_path / "memory")
    b = save_partition_streaming(folder, node_part.numpy().astype(np.int8), tmp_path / "stream", **TINY)
    doc = load_meta(a)
    assert {"node_types": doc["node_types"]} == graph.node_types.record() and meta_node_types(doc) == graph.node_types
    assert (b / "partition.json").read_text() == (a / "partition.json").read_text()  # the fingerprint included
    for i in range(3):
        assert (b / f"part-{i}/part.pt").read_bytes() == (a / f"part-{i}/part.pt").read_bytes()
    assert load_part(b, 0, graph.fingerprint()).part_id == 0
    rows = save_block_rows(g, "gcn", 2, True, 0, tmp_path / "rows")
    assert meta_node_types(load_block_rows_meta(rows)) == graph.node_types
    doc["node_types"] = {"names": ["paper"]}
    (a / "partition.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"node_types record with names, counts and widths .*partition\.json"):
        load_meta(a)


@pytest.mark.parametrize("record, match", [
    ({"widths": None}, r"node_types record with names, counts and widths .*meta\.json"),
    ({"counts": [30, 20, 6]}, r"node_types counting the 55 nodes \(got 56"),
    ({"widths": [6, 4, 1]}, r"widths summing to the 10 feature columns \(got 11\)"),
    ({"relations": [["paper", "in", "venue"]]}, r"edge types of the 1 relations of node_types \(got 4\)"),
    ({"relations": [["paper", "cites", "nowhere"]]}, r"expected relation 'paper__cites__nowhere' to join known node types .*'nowhere'.* in .*meta\.json"),
])
def test_damaged_node_types_record_is_one_line(graph, tmp_path, record, match):
    folder, _ = _folder(graph, tmp_path)
    _edit(folder, **record)
    with pytest.raises(InputError, match=match) as e:
        load_native(folder)
    _one_line(e)
    with pytest.raises(InputError, match=match):
        save_partition_streaming(folder, np.zeros(graph.num_nodes, dtype=np.int8), tmp_path / "p", **TINY)


@pytest.mark.parametrize("record, match", [
    ({"labelled": ["author"]}, r"splits on the labelled node types \(author\) only"),
    ({"widths": [4, 6, 0]}, r"features within its type's columns"),
    ({"relations": [["paper", "writes", "author"], ["paper", "in", "venue"], ["author", "rev_writes", "paper"],
                    ["venue", "rev_in", "paper"]]}, r"every edge of relation paper__writes__author to have a paper"),
])
def test_record_against_the_arrays_refused_by_loader_and_streamed_writer(graph, tmp_path, record, match):
    folder, _ = _folder(graph, tmp_path)
    _edit(folder, **record)  # a record that agrees with the counts but not with the edges, features or splits
    with pytest.raises(InputError, match=match) as e:
        load_native(folder)
    _one_line(e)
    with pytest.raises(InputError, match=match) as e:
        save_partition_streaming(folder, np.zeros(graph.num_nodes, dtype=np.int8), tmp_path / "p", **TINY)
    _one_line(e)
