"""Edge data in partitions written by streaming from a folder's files (``save_partition_streaming``).

The folder is written by the streamed convert (``write_native_edges``: repeated edges' weights summed,
reverse edges given their edge's data), then partitioned twice: from the loaded graph
(``PartitionBook`` + ``save_partition``) and from the files. The two must be equal bit for bit: the
same ``partition.json``, the same part files, so the same ``edata`` (global edge ids, weights,
features, types) and the same float32 weighted degrees. One part holds only isolated nodes (no
edges, no halo), and the blocks are shrunk so that every pass crosses many seams.
"""

import json

import numpy as np
import pytest
import torch

from fullgraph.data.formats.native_edges import write_native_edges
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.formats.native_stream import CSRStream
from fullgraph.errors import InputError
from fullgraph.partition import PartitionBook, load_part, save_partition
from fullgraph.partition.fennel import fennel_folder, fennel_stream
from fullgraph.partition.stream_store import save_partition_streaming

TINY = {"max_edges": 29, "block_bytes": 150}
ISOLATED = 20  # the last nodes have no edges


def _folder(small, tmp_path, kinds):
    rng = np.random.default_rng(7)
    n, e = small.num_nodes, 900
    src, dst = rng.integers(0, n - ISOLATED, e), rng.integers(0, n - ISOLATED, e)
    if kinds != ("weight",):  # features or types: each edge listed once
        keys = np.unique(dst * n + src)
        src, dst = keys % n, keys // n
    k = src.size
    edge = {"edge_weight": (rng.random(k) * 3).astype(np.float32), "edge_attr": rng.random((k, 3)),
            "edge_type": rng.integers(0, 3, k)}
    edge = {name: v for name, v in edge.items() if name[5:] in kinds}
    blocks = [(src[i:i + 100], dst[i:i + 100], {name: v[i:i + 100] for name, v in edge.items()})
              for i in range(0, k, 100)]
    nodes = {f: getattr(small, f) for f in ("x", "y", "train_mask", "val_mask", "test_mask")}
    write_native_edges(tmp_path / "ds", n, blocks, block_bytes=256, name="edges", **nodes)
    return tmp_path / "ds"


@pytest.mark.parametrize("kinds", [("weight",), ("attr", "type"), ("weight", "attr", "type")])
def test_streamed_parts_equal_in_memory_parts_with_edge_data(small, tmp_path, kinds):
    folder = _folder(small, tmp_path, kinds)
    g = load_native(folder)
    assert g.edge_kinds == kinds
    node_part = torch.from_numpy(np.random.default_rng(1).integers(0, 2, g.num_nodes))
    node_part[-ISOLATED:] = 2  # a part without edges
    a = save_partition(PartitionBook.build(g, node_part), g, tmp_path / "memory")
    b = save_partition_streaming(folder, node_part.numpy().astype(np.int8), tmp_path / "stream", **TINY)
    doc = json.loads((a / "partition.json").read_text())
    assert json.loads((b / "partition.json").read_text()) == doc and doc["edge_data"] == list(kinds)
    for i in range(3):
        assert (b / f"part-{i}/part.pt").read_bytes() == (a / f"part-{i}/part.pt").read_bytes()
        pa, pb = load_part(a, i, g.fingerprint()), load_part(b, i, g.fingerprint())
        for f in ("eid", *kinds):
            assert torch.equal(getattr(pa.edata, f), getattr(pb.edata, f)), f
        assert torch.equal(pa.degree, pb.degree)
        assert pb.degree.dtype == (torch.float32 if "weight" in kinds else torch.int64)
        if "weight" in kinds:  # the weighted in-degree of every local node, as the loaded graph has it
            assert torch.equal(pb.degree, g.aggregation_degree()[pb.local_nodes])
    assert load_part(b, 2).num_edges == 0


def test_damaged_edge_data_refused_and_fennel_streams_the_folder(small, tmp_path):
    folder = _folder(small, tmp_path, ("weight",))
    g = load_native(folder)
    stream = CSRStream.of_folder(folder)
    assert stream.edge_kinds == ("weight",)  # the structure alone, the data left to the caller
    assert np.array_equal(fennel_folder(folder, 3, seed=2),
                          fennel_stream(CSRStream.of_arrays(g.indptr, g.indices), 3, seed=2))
    with pytest.raises(InputError, match="without edge data for this pass"):
        CSRStream.of_folder(folder, structure_only=False)
    w = np.load(folder / "edge_weight.npy", mmap_mode="r+")
    w[5] = np.nan
    w.flush()
    del w
    with pytest.raises(InputError, match=r"valid edge data in .*edge_weight\.npy \(got NaN or infinite"):
        save_partition_streaming(folder, np.zeros(g.num_nodes, dtype=np.int8), tmp_path / "p", verify=False, **TINY)
