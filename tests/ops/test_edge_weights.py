"""Weighted normalization (issue 51 §2) against an independent reference: PyG's ``gcn_norm`` with
``edge_weight`` for ``gcn``, the weighted mean written out for ``mean``, ``A_w + I`` for
``self-loops``; and the Graph's checks of edge data at the boundary."""

from __future__ import annotations

import pytest
import torch

from fullgraph.data.graph import Graph
from fullgraph.errors import InputError
from fullgraph.ops import Block

from tests._equality import FLOAT32_FEW_OPS, assert_same


def graph(edge_weight=None, **edge):
    src = torch.tensor([0, 1, 1, 2, 2, 0, 3, 1])
    dst = torch.tensor([1, 0, 2, 1, 0, 2, 1, 3])
    n = 4
    return Graph.from_edges(src, dst, n, edge_weight=edge_weight, x=torch.ones(n, 2), y=torch.tensor([0, 1, 0, 1]),
                            train_mask=torch.tensor([1, 0, 0, 1]).bool(), val_mask=torch.tensor([0, 1, 0, 0]).bool(),
                            test_mask=torch.tensor([0, 0, 1, 0]).bool(), **edge), src, dst


def dense(block):
    a = block.adj
    return torch.sparse_csr_tensor(a.indptr, a.indices, a.values, a.shape, check_invariants=False).to_dense()


W = torch.tensor([0.5, 2.0, 3.0, 0.25, 1.5, 4.0, 0.75, 1.25])


def test_weighted_gcn_is_pygs_gcn_norm():
    pytest.importorskip("torch_geometric")
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    g, src, dst = graph(W)
    ei, ew = gcn_norm(torch.stack([src, dst]), W, g.num_nodes)
    want = torch.zeros(4, 4).index_put_((ei[1], ei[0]), ew, accumulate=True)  # row = dst
    assert_same(dense(Block.from_graph(g, "gcn")), want, FLOAT32_FEW_OPS, "weighted gcn Â")


def test_weighted_mean_and_self_loops():
    g, src, dst = graph(W)
    a = torch.zeros(4, 4).index_put_((dst, src), W, accumulate=True)
    assert_same(dense(Block.from_graph(g, "mean")), a / a.sum(1, keepdim=True), FLOAT32_FEW_OPS, "weighted mean Â")
    assert torch.equal(dense(Block.from_graph(g, "self-loops")), a + torch.eye(4))  # no arithmetic: exact


def test_repeated_weighted_edges_are_summed_and_featured_ones_refused():
    src, dst = torch.tensor([0, 0, 1]), torch.tensor([1, 1, 0])
    fields = dict(x=torch.ones(3, 1), y=torch.tensor([0, 1, 0]), train_mask=torch.tensor([1, 0, 0]).bool(),
                  val_mask=torch.tensor([0, 1, 0]).bool(), test_mask=torch.tensor([0, 0, 1]).bool())
    g = Graph.from_edges(src, dst, 3, edge_weight=torch.tensor([1.0, 2.5, 4.0]), **fields)
    assert g.num_edges == 2 and g.edge_weight.tolist() == [4.0, 3.5]  # row 0: 1 -> 0; row 1: 0 -> 1 (1 + 2.5)
    with pytest.raises(InputError, match="each edge once when edges carry features .* 0 -> 1"):
        Graph.from_edges(src, dst, 3, edge_attr=torch.ones(3, 2), **fields)


@pytest.mark.parametrize("edge, message", [
    (dict(edge_weight=torch.tensor([1.0, float("nan")] + [1.0] * 6)), "finite values in 'edge_weight'"),
    (dict(edge_weight=torch.ones(7)), "one row per edge, 8 rows"),
    (dict(edge_attr=torch.ones(8)), "'edge_attr' to be a dense torch.float32 tensor \\[E, d\\]"),
    (dict(edge_type=torch.tensor([0, 1, 2, 3, 0, 1, 2, 3]), num_relations=3), "edge types in \\[0, 3\\) .* a type 3"),
    (dict(edge_type=torch.tensor([0, -1, 0, 0, 0, 0, 0, 0])), "edge types >= 0"),
    (dict(num_relations=2), "'edge_type' with num_relations=2"),
])
def test_bad_edge_data_is_one_clear_error(edge, message):
    with pytest.raises(InputError, match=message):
        graph(**edge)


@pytest.mark.parametrize("norm", ["gcn", "mean"])
def test_negative_weights_refused_where_the_normalization_divides(norm):
    g, _, _ = graph(-W)
    with pytest.raises(InputError, match=f"positive for the '{norm}' normalization"):
        Block.from_graph(g, norm)
    Block.from_graph(g, "self-loops")  # a weighted sum divides by nothing


def test_fingerprint_covers_edge_data():
    a, _, _ = graph(W)
    b, _, _ = graph(W * 2)
    c, _, _ = graph()
    assert len({a.fingerprint(), b.fingerprint(), c.fingerprint()}) == 3


def test_a_stored_loops_weight_is_kept_as_pyg_keeps_it():
    """PyG's ``gcn_norm`` adds loops only where none is stored (``add_remaining_self_loops``): a stored
    loop keeps its weight; the others get 1."""
    pytest.importorskip("torch_geometric")
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    src = torch.tensor([0, 1, 1, 2, 2, 0, 3, 1, 2])
    dst = torch.tensor([1, 0, 2, 1, 0, 2, 1, 3, 2])  # the last edge: a loop at 2
    w = torch.cat([W, torch.tensor([2.5])])
    g = Graph.from_edges(src, dst, 4, edge_weight=w, x=torch.ones(4, 2), y=torch.tensor([0, 1, 0, 1]),
                         train_mask=torch.tensor([1, 0, 0, 1]).bool(), val_mask=torch.tensor([0, 1, 0, 0]).bool(),
                         test_mask=torch.tensor([0, 0, 1, 0]).bool())
    ei, ew = gcn_norm(torch.stack([src, dst]), w, 4)
    want = torch.zeros(4, 4).index_put_((ei[1], ei[0]), ew, accumulate=True)
    block = Block.from_graph(g, "gcn")
    assert_same(dense(block), want, FLOAT32_FEW_OPS, "weighted gcn Â with a stored loop")
    assert float(block.edge_weight[block.edge_ids == -3]) == 2.5  # the loop at node 2 carries its weight
