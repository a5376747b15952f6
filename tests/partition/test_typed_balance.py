"""Typed graphs' parts balance every node type (as DGL's ``balance_ntypes``), and untyped graphs' parts stay
exactly as they were.

The tolerance checked is METIS's default k-way one, ``ufactor`` 30: each type's count in each part within
3% of ``count / P``, or one node where 3% is under a node (an integer split of 30 nodes into 4 parts holds 7
or 8 of them). ``pymetis`` passes METIS one constraint only, so the per-type balance comes from
``type_balance.balance_types`` after the cut (``partitioners``' docstring says why).
"""

import numpy as np
import pymetis
import pytest
import torch

from fullgraph.data.typed import typed_graph
from fullgraph.ops.node_types import NodeTypes
from fullgraph.partition import partition_nodes
from fullgraph.partition.balance import metis_by_memory
from fullgraph.partition.type_balance import TYPE_TOLERANCE, balance_types, type_bounds, type_counts
from fullgraph.partition.fennel import fennel_stream
from fullgraph.data.formats.native_stream import CSRStream

TOL = 0.03
"""METIS's default k-way imbalance tolerance (``ufactor`` 30, i.e. 1.03), the one the parts keep per type."""


def _no_loops(a, b):
    return a[a != b], b[a != b]


@pytest.fixture(scope="module")
def typed():
    """Three types of unequal sizes (300 papers, labelled; 120 authors; 30 venues), random relations."""
    rng = np.random.default_rng(0)
    edges = {("paper", "writes", "author"): (rng.integers(0, 300, 900), rng.integers(0, 120, 900)),
             ("paper", "in", "venue"): (np.arange(300), rng.integers(0, 30, 300)),
             ("paper", "cites", "paper"): _no_loops(rng.integers(0, 300, 600), rng.integers(0, 300, 600))}
    features = {"paper": rng.random((300, 8)).astype(np.float32), "author": rng.random((120, 4)).astype(np.float32)}
    perm = rng.permutation(300)
    return typed_graph({"paper": 300, "author": 120, "venue": 30}, features, edges, ("paper", rng.integers(0, 3, 300)),
                       {"train": perm[:60], "val": perm[60:120], "test": perm[120:]}, name="typed")


def _check_balanced(graph, node_part, parts):
    types = graph.node_types
    for name, a, b in zip(types.names, types.offsets[:-1], types.offsets[1:]):
        counts = torch.bincount(node_part[a:b], minlength=parts)
        mean = (b - a) / parts
        assert float((counts - mean).abs().max()) <= max(TOL * mean, 1.0), (name, counts.tolist())
    train = torch.bincount(node_part[graph.train_mask], minlength=parts)
    assert bool((train >= 1).all()), train.tolist()  # the labelled type's train nodes are split among the parts


def test_the_tolerance_is_metis_default_and_integer_splits_meet_it():
    assert TYPE_TOLERANCE == 1.0 + TOL
    assert type_bounds(300, 2) == (146, 154) and type_bounds(30, 4) == (7, 8) and type_bounds(3, 4) == (0, 1)


@pytest.mark.parametrize("method", ["metis", "fennel", "contiguous"])
@pytest.mark.parametrize("parts", [2, 4])
def test_typed_parts_balance_every_type(typed, method, parts):
    node_part = partition_nodes(typed, parts, method, seed=3)
    assert torch.equal(node_part, partition_nodes(typed, parts, method, seed=3))
    assert bool((torch.bincount(node_part, minlength=parts) > 0).all())
    _check_balanced(typed, node_part, parts)


@pytest.mark.parametrize("parts", [2, 4])
def test_metis_memory_balances_every_type_too(typed, parts):
    def cost(s):  # a rank's bytes, linear in what it holds
        return 4096.0 * s["nodes"] + 64.0 * s["edges"] + 2048.0 * s["halo"]

    _check_balanced(typed, metis_by_memory(typed, parts, 0, 1.0, cost, rounds=2), parts)


def test_typed_contiguous_gives_part_p_the_pth_range_of_every_type(typed):
    node_part = partition_nodes(typed, 4, "contiguous")
    for a, b in zip(typed.node_types.offsets[:-1], typed.node_types.offsets[1:]):
        run = node_part[a:b]
        assert bool((run.diff() >= 0).all()) and run.unique().tolist() == [0, 1, 2, 3]


def test_balance_types_moves_the_fewest_nodes_and_reports_the_counts(typed):
    """Every venue in part 0 (the rest split evenly): only venues move, exactly the excess of part 0."""
    types = typed.node_types
    start = np.arange(typed.num_nodes) % 3
    v0, v1 = types.offsets[2], types.offsets[3]
    start[v0:v1] = 0
    out = balance_types(start, typed.indptr, typed.indices, types, 3)
    assert out.dtype == start.dtype and (start[v0:v1] == 0).all()  # a copy
    assert (out[:v0] == start[:v0]).all() and int((out != start).sum()) == 30 - 10
    report = type_counts(out, types, 3)
    assert report["venue"] == {"counts": [10, 10, 10], "imbalance": 1.0} and list(report) == list(types.names)
    assert (balance_types(out, typed.indptr, typed.indices, types, 3) == out).all()  # balanced: nothing moves
    tiny, spread = NodeTypes(("a", "b"), (3, 3), (0, 0)), np.array([0, 1, 2, 3, 0, 1])  # no type reaches 4 parts:
    assert (balance_types(spread, np.zeros(7, np.int64), np.zeros(0, np.int64), tiny, 4) == spread).all()  # kept


def test_untyped_graphs_partition_exactly_as_before(small):
    """METIS is asked exactly what it was (one weight per node, the volume objective, k-way, the seed),
    and fennel and contiguous give what they gave: no per-type step touches a graph of one type."""
    assert small.node_types is None
    for parts in (2, 4):
        options = pymetis.Options(seed=7, objtype=int(pymetis.ObjType.VOL))
        dt = pymetis.zero_copy_dtype()
        adjacency = pymetis.CSRAdjacency(small.indptr.numpy().astype(dt), small.indices.numpy().astype(dt))
        direct = pymetis.part_graph(parts, adjacency=adjacency, options=options, recursive=False).vertex_part
        assert torch.equal(partition_nodes(small, parts, "metis", seed=7), torch.as_tensor(np.asarray(direct)))
        stream = CSRStream.of_arrays(small.indptr, small.indices, small.name)
        assert torch.equal(partition_nodes(small, parts, "fennel", seed=7),
                           torch.from_numpy(fennel_stream(stream, parts, seed=7).astype(np.int64)))
        n = small.num_nodes
        assert torch.equal(partition_nodes(small, parts, "contiguous"), torch.arange(n) * parts // n)
