"""FENNEL, the streaming partitioner (``--partitioner fennel``).

References independent of the code under test: a hand-made graph whose best split is known (two
cliques joined by one edge), halo and edge counts made here with NumPy from the definition (a node
is in part p's halo when it belongs elsewhere and has a neighbour in p), and the replication
factors of the other partitioners on the same graph. The streamed folder road is compared with the
in-memory one byte for byte, and shown not to load the graph.
"""

import functools
import json

import numpy as np
import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.data.formats.native import write_native
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.formats.native_stream import CSRStream
from fullgraph.data.graph import Graph
from fullgraph.data.synthetic import planted_partition, rmat
from fullgraph.errors import InputError
from fullgraph.parallel import setup
from fullgraph.partition import PartitionBook, load_meta, partition_nodes, save_partition
from fullgraph.partition.balance import fennel_by_memory, folder_counts, graph_counts, row_cost
from fullgraph.partition.fennel import SLACK, STARTS, fennel_folder, fennel_stream, stream_part_stats
from fullgraph.partition.label_prop import cluster, initial_parts, pack_clusters
from fullgraph.plan import model_memory_options, variable_bytes


def _stream(g: Graph) -> CSRStream:
    return CSRStream.of_arrays(g.indptr, g.indices, g.name)


def _counts_by_definition(g: Graph, node_part: np.ndarray, parts: int) -> dict[str, np.ndarray]:
    """Inner nodes, local edges (entries of a part's rows) and halo nodes per part, from the edge list."""
    node_part = np.asarray(node_part, dtype=np.int64)
    dst = np.repeat(np.arange(g.num_nodes), np.diff(g.indptr.numpy()))
    src = g.indices.numpy()
    inner = np.bincount(node_part, minlength=parts)
    edges = np.bincount(node_part[dst], minlength=parts)
    halo = np.zeros(parts, dtype=np.int64)
    for p in range(parts):  # src read by a row of p, owned elsewhere
        halo[p] = np.unique(src[(node_part[dst] == p) & (node_part[src] != p)]).size
    return {"inner": inner, "edges": edges, "halo": halo}


@pytest.fixture(scope="module")
def planted():
    return planted_partition(num_nodes=2000, num_classes=4, avg_degree=8, homophily=0.9, num_features=4, seed=2)


@pytest.fixture(scope="module")
def skewed():
    """R-MAT: hubs whose rows are longer than the test's blocks."""
    return rmat(10, 6000, num_features=4, seed=1)


@pytest.mark.parametrize("start", STARTS)
def test_two_cliques_are_split_at_their_bridge(start):
    k = 40
    g = _two_cliques(k)
    node_part = fennel_stream(_stream(g), 2, seed=0, batch=1, start=start)
    assert node_part.dtype == np.int8
    assert len(set(node_part[:k])) == 1 and len(set(node_part[k:])) == 1 and node_part[0] != node_part[-1]
    assert _counts_by_definition(g, node_part, 2)["halo"].tolist() == [1, 1]


@pytest.mark.parametrize("parts", [2, 4, 7])
def test_cut_beats_random_and_contiguous_and_nears_metis(planted, parts):
    """Replication factor (Σ halo / N, counted here) against the other partitioners: at most 0.6x
    random's (issue 38's target) and at most 1.5x METIS's, on a graph whose node order hides its
    communities (planted_partition draws classes at random)."""
    def alpha(node_part):
        return _counts_by_definition(planted, np.asarray(node_part), parts)["halo"].sum() / planted.num_nodes

    ours = alpha(fennel_stream(_stream(planted), parts, seed=0))
    assert ours <= 0.6 * alpha(partition_nodes(planted, parts, "random", seed=0))
    assert ours <= 0.6 * alpha(partition_nodes(planted, parts, "contiguous"))
    assert ours <= 1.5 * alpha(partition_nodes(planted, parts, "metis", seed=0))


@pytest.mark.parametrize("row_cost", [None, 1.0, 6.0])
@pytest.mark.parametrize("order, start", [("natural", "clusters"), ("blocks", "clusters"), ("natural", "empty")])
def test_parts_fit_their_capacity(skewed, row_cost, order, start):
    """No part weighs over ``SLACK`` times the mean, by node count or by in-degree + row cost; every
    part gets a node."""
    parts = 5
    node_part = fennel_stream(_stream(skewed), parts, row_cost=row_cost, seed=3, order=order, block_edges=97,
                              start=start)
    deg = np.diff(skewed.indptr.numpy())
    w = np.ones(skewed.num_nodes) if row_cost is None else deg + row_cost
    loads = np.bincount(node_part.astype(np.int64), weights=w, minlength=parts)
    assert loads.min() > 0
    assert loads.max() <= SLACK * w.sum() / parts + w.max()


def test_one_part_many_parts_and_determinism(skewed):
    s = _stream(skewed)
    assert (fennel_stream(s, 1) == 0).all()
    n = skewed.num_nodes
    every = fennel_stream(s, n, seed=0)
    assert sorted(every.tolist()) == list(range(n)) and every.dtype == np.int16  # one node each
    a, b = fennel_stream(s, 4, seed=5), fennel_stream(s, 4, seed=5)
    assert np.array_equal(a, b)
    assert set(fennel_stream(s, 4, seed=-1).tolist()) == {0, 1, 2, 3}  # any seed, as the other partitioners
    assert not np.array_equal(a, fennel_stream(s, 4, seed=6, order="blocks"))


@pytest.mark.parametrize("block_edges", [13, 1000, 1 << 22])
@pytest.mark.parametrize("order", ["natural", "blocks"])
def test_folder_equals_memory(skewed, tmp_path, block_edges, order):
    """Read from a folder's files block by block, or from arrays: the same assignment (the blocks
    bound the batches, so the same ``block_edges`` on both sides)."""
    write_native(skewed, tmp_path / "ds")
    kw = {"row_cost": 2.0, "seed": 1, "block_edges": block_edges, "order": order}
    assert np.array_equal(fennel_folder(tmp_path / "ds", 3, **kw), fennel_stream(_stream(skewed), 3, **kw))


@pytest.mark.parametrize("parts", [2, 5])
def test_stream_part_stats_count_as_the_definition_and_the_book(skewed, parts):
    node_part = fennel_stream(_stream(skewed), parts, seed=0)
    got = stream_part_stats(_stream(skewed), node_part, parts, block_edges=53)
    ref = _counts_by_definition(skewed, node_part, parts)
    for k in ("inner", "edges", "halo"):
        assert got[k].tolist() == ref[k].tolist(), k
    book = PartitionBook.build(skewed, torch.from_numpy(node_part.astype(np.int64)), parts)
    assert [st["halo"] for st in book.stats()] == ref["halo"].tolist()


@pytest.mark.parametrize("bad, match", [
    ({"parts": 0}, "between 1 and"), ({"parts": 10**9}, "between 1 and"), ({"passes": 0}, "fennel pass"),
    ({"batch": 0}, "row per fennel batch"), ({"batch": -1}, "row per fennel batch"),
    ({"slack": 0.9}, "slack"), ({"order": "bfs"}, "unknown fennel order"), ({"row_cost": -1}, "row cost"),
])
def test_bad_options_are_one_clear_error(skewed, bad, match):
    kw = {"parts": 2} | bad
    with pytest.raises(InputError, match=match):
        fennel_stream(_stream(skewed), kw.pop("parts"), **kw)


def _memory_cost():
    cfg = TrainConfig.of(model="sage", layers=3, hidden=32)
    return functools.partial(variable_bytes, model_opts=model_memory_options(cfg))


def test_memory_balance_from_a_folder_equals_from_memory(skewed, tmp_path):
    """fennel_by_memory reads the same counts from meta.json as from the graph, and its largest rank
    (estimated, from counts made here) is lighter than with parts balanced by node count or by
    degree + 1: on R-MAT the first leaves the hubs' part with most edges, the second the leaves'
    part with most rows."""
    write_native(skewed, tmp_path / "ds")
    cost = _memory_cost()
    assert folder_counts(tmp_path / "ds") == graph_counts(skewed)
    a = fennel_by_memory(skewed, 4, 0, cost)
    assert np.array_equal(a, fennel_by_memory(tmp_path / "ds", 4, 0, cost))

    def largest(node_part):
        st = _counts_by_definition(skewed, node_part, 4)
        return max(cost(graph_counts(skewed) | {"nodes": int(i), "halo": int(h), "edges": int(e)})
                   for i, h, e in zip(st["inner"], st["halo"], st["edges"]))

    assert largest(a) < largest(fennel_stream(_stream(skewed), 4, seed=0))
    assert largest(a) < largest(fennel_stream(_stream(skewed), 4, row_cost=1, seed=0))


def _fail_loading(*args, **kwargs):
    raise AssertionError("the streamed road loaded the graph")


def test_partition_command_streams_a_native_folder(skewed, tmp_path, monkeypatch, capsys):
    """`fullgraph partition --partitioner fennel` on a native folder: the graph is never loaded, and
    the folder written is the one the in-memory writer makes for the same assignment."""
    from fullgraph.cli import main

    folder = tmp_path / "ds"
    write_native(skewed, folder)
    monkeypatch.setattr(setup, "load_graph", _fail_loading)
    monkeypatch.setattr("fullgraph.data.formats.native_read.load_native", _fail_loading)
    args = ["partition", "--dataset", str(folder), "--partitioner", "fennel", "--parts", "3", "--model", "sage",
            "--layers", "2", "--hidden", "16", "--out", str(tmp_path / "streamed")]
    assert main(args) == 0
    assert "3 parts by fennel" in capsys.readouterr().out
    monkeypatch.undo()
    doc = load_meta(tmp_path / "streamed")
    assert doc["meta"]["method"] == "fennel" and doc["meta"]["weight"] == "memory"
    g = load_native(folder)
    node_part = setup.node_parts(tmp_path / "streamed", g.num_nodes)
    ref = save_partition(PartitionBook.build(g, node_part, 3), g, tmp_path / "memory", doc["meta"])
    assert json.loads((ref / "partition.json").read_text()) == json.loads(
        (tmp_path / "streamed" / "partition.json").read_text())
    for i in range(3):
        assert (ref / f"part-{i}/part.pt").read_bytes() == (tmp_path / "streamed" / f"part-{i}/part.pt").read_bytes()


def test_fennel_on_a_named_dataset_goes_through_memory(cora, tmp_path, shared_data):
    """Cora by name (row-normalized features): the in-memory road, memory-balanced like metis-memory."""
    cfg = TrainConfig.of(dataset="cora", root=str(shared_data), partitioner="fennel", model="gcn", layers=2,
                         hidden=16)
    out = setup.prepare_partition_dir(cfg, 3, out=tmp_path / "cora3")
    doc = load_meta(out)
    assert doc["parts"] == 3 and doc["meta"]["weight"] == "memory"
    rand = PartitionBook.build(cora, partition_nodes(cora, 3, "random", seed=0), 3).replication_factor
    assert doc["replication_factor"] <= 0.6 * rand


# ------------------------------------------------------------------ the clusters fennel starts from
def _two_cliques(k: int = 30) -> Graph:
    pairs = [(a, b) for c in (0, k) for a in range(c, c + k) for b in range(c, c + k) if a < b] + [(k - 1, k)]
    src = torch.tensor([u for u, v in pairs] + [v for u, v in pairs])
    dst = torch.tensor([v for u, v in pairs] + [u for u, v in pairs])
    masks = [torch.arange(2 * k) % 3 == i for i in range(3)]
    return Graph.from_edges(src, dst, 2 * k, x=torch.zeros(2 * k, 1), y=torch.arange(2 * k) % 2,
                            train_mask=masks[0], val_mask=masks[1], test_mask=masks[2], name="cliques")


def test_label_propagation_finds_the_cliques_and_respects_the_cap(skewed):
    g = _two_cliques()
    labels = cluster(_stream(g), cap=30)
    assert labels.dtype == np.int32 and sorted(set(labels.tolist())) == [0, 1]
    assert len(set(labels[:30])) == 1 and len(set(labels[30:])) == 1
    for cap in (7, 50):  # one row at a time: the cap is never passed
        sizes = np.bincount(cluster(_stream(skewed), cap=cap, batch=1))
        assert sizes.min() > 0 and sizes.max() <= cap


def test_packing_keeps_clusters_whole_and_parts_near_the_mean(skewed):
    labels = cluster(_stream(skewed), cap=skewed.num_nodes // 8)
    part_of = pack_clusters(labels, 4, np.int8)
    node_part = part_of[labels]
    sizes = np.bincount(node_part, minlength=4)
    assert sizes.max() <= skewed.num_nodes / 4 + np.bincount(labels).max()
    part_sized = cluster(_stream(skewed), skewed.num_nodes // 4)  # initial_parts' clusters: a part's size
    assert np.array_equal(initial_parts(_stream(skewed), 4, np.int8), pack_clusters(part_sized, 4, np.int8)[part_sized])
    for c in range(int(labels.max()) + 1):  # a cluster in one part
        assert len(set(node_part[labels == c].tolist())) == 1


def test_starting_from_clusters_nears_metis_where_the_first_pass_cannot():
    """A planted partition with shuffled ids and weak communities (homophily 0.7): restreaming from
    FENNEL's own first pass stalls ~1.5x above METIS's cut (as it does from any arbitrary complete
    assignment); from the clusters of label propagation it comes within 20% (measured: 1.11x)."""
    g = planted_partition(num_nodes=100_000, num_classes=5, avg_degree=10.5, homophily=0.7, num_features=2, seed=0)

    def alpha(node_part):
        return stream_part_stats(_stream(g), np.asarray(node_part), 4)["halo"].sum() / g.num_nodes

    ours, first_pass = alpha(fennel_stream(_stream(g), 4)), alpha(fennel_stream(_stream(g), 4, start="empty"))
    assert ours <= 1.2 * alpha(partition_nodes(g, 4, "metis", seed=0).numpy())
    assert ours < 0.85 * first_pass
    with pytest.raises(InputError, match="unknown fennel start"):
        fennel_stream(_stream(g), 4, start="bfs")
