"""Edge data through ``from_pyg``: weights, features and types reach PyG's convs; what a conv cannot
run without is refused before training; attention dropout inside GATConv, GATv2Conv and
TransformerConv is keyed by edge, so every layout draws the same mask.

The reference is PyG's own forward on the whole graph, fed the same edges with the same data in
the same order (the graph's CSR order, which is ``block.edges()``'s): FLOAT32_CHAINED, since the
fast GCN path sums on the block's kernel in another order than PyG's scatter.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch_geometric.nn import (FastRGCNConv, GATConv, GATv2Conv, GCNConv, GINEConv, GraphConv, NNConv, RGCNConv,
                                SAGEConv, SuperGATConv, TransformerConv)
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.models import GAT, GCN

from fullgraph.data.graph import Graph
from fullgraph.errors import InputError
from fullgraph.models import GNN, from_pyg
from fullgraph.ops import Block, SparseOp
from fullgraph.ops.dropout import DropoutKey, keyed_dropout, keyed_edge_keep
from fullgraph.ops.edge_data import EdgeFacts

from tests._equality import FLOAT32_CHAINED, FLOAT32_FEW_OPS, FLOAT32_REORDER, assert_same

N, F, D, R = 24, 6, 3, 4
"""Nodes, input width, edge-feature width, relations of the test graph."""


def edge_graph(seed: int = 0, n: int = N) -> Graph:
    """A random directed graph (each edge once, no self loops) whose edges carry all three kinds."""
    g = torch.Generator().manual_seed(seed)
    pairs = torch.randperm(n * n, generator=g)[: 5 * n]
    src, dst = pairs % n, pairs // n
    keep = src != dst
    src, dst = src[keep], dst[keep]
    e = src.numel()
    return Graph.from_edges(src, dst, n, edge_weight=torch.rand(e, generator=g) + 0.5,
                            edge_attr=torch.randn(e, D, generator=g),
                            edge_type=torch.randint(0, R, (e,), generator=g),
                            x=torch.randn(n, F, generator=g), y=torch.arange(n) % 2,
                            train_mask=torch.arange(n) % 3 == 0, val_mask=torch.arange(n) % 3 == 1,
                            test_mask=torch.arange(n) % 3 == 2)


def csr_edge_index(graph: Graph) -> torch.Tensor:
    """The graph's edges in CSR order (in-edges of node 0, then 1, ...): ``block.edges()``'s order."""
    dst = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.indptr.diff())
    return torch.stack([graph.indices, dst])


CONVS = {  # conv, the edge data PyG's forward gets
    "GCNConv-weighted": (lambda: GCNConv(F, 5), ("edge_weight",)),
    "GCNConv-unnormalized": (lambda: GCNConv(F, 5, normalize=False), ("edge_weight",)),
    "GraphConv": (lambda: GraphConv(F, 5), ("edge_weight",)),
    "GATConv": (lambda: GATConv(F, 4, heads=2, edge_dim=D), ("edge_attr",)),
    "GATv2Conv": (lambda: GATv2Conv(F, 4, heads=2, edge_dim=D), ("edge_attr",)),
    "GINEConv": (lambda: GINEConv(nn.Sequential(nn.Linear(F, 8), nn.ReLU(), nn.Linear(8, 5)), edge_dim=D),
                 ("edge_attr",)),
    "TransformerConv": (lambda: TransformerConv(F, 4, heads=2, edge_dim=D), ("edge_attr",)),
    "NNConv": (lambda: NNConv(F, 5, nn.Linear(D, F * 5)), ("edge_attr",)),
    "RGCNConv": (lambda: RGCNConv(F, 5, num_relations=R), ("edge_type",)),
    "FastRGCNConv": (lambda: FastRGCNConv(F, 5, num_relations=R), ("edge_type",)),
}


@pytest.mark.parametrize("name", list(CONVS))
def test_a_conv_gets_the_edge_data_pyg_gives_it(name):
    torch.manual_seed(0)
    build, args = CONVS[name]
    conv = build().eval()
    graph = edge_graph()
    model = from_pyg(conv)
    layer = model.layers[0].eval()
    block = Block.from_graph(graph, model.norm)
    ei = csr_edge_index(graph)
    if model.norm == "mean":  # the block's entries are the graph's, in its CSR order
        assert torch.equal(torch.stack(block.edges()), ei)
    data = {a: getattr(graph, a) for a in args}
    x = graph.x.clone().requires_grad_(True)

    want = conv(x, ei, **data)
    (want * torch.arange(want.numel()).view_as(want).sin()).sum().backward()
    want_grads = [x.grad.clone()] + [p.grad.clone() for p in conv.parameters()]
    x.grad = None
    conv.zero_grad()
    got = layer.compute(block, x)
    (got * torch.arange(got.numel()).view_as(got).sin()).sum().backward()
    got_grads = [x.grad] + [p.grad for p in conv.parameters()]

    assert_same(got, want, FLOAT32_CHAINED, f"{name} output")
    for i, (g, w) in enumerate(zip(got_grads, want_grads)):
        assert_same(g, w, FLOAT32_CHAINED, f"{name} gradient {i}")
    # and the data matters: the same data in another order gives another output
    shuffled = {a: v[torch.randperm(v.shape[0], generator=torch.Generator().manual_seed(1))] for a, v in data.items()}
    assert not torch.allclose(conv(graph.x, ei, **shuffled), want.detach(), atol=1e-4)


def test_the_weighted_gcn_block_is_pygs_gcn_norm():
    graph = edge_graph(1)
    block = Block.from_graph(graph, "gcn")
    ei, w = gcn_norm(csr_edge_index(graph), graph.edge_weight, graph.num_nodes, add_self_loops=True)
    want = torch.zeros(N, N).index_put_((ei[1], ei[0]), w, accumulate=True)  # [dst, src]
    got = torch.sparse_csr_tensor(block.adj.indptr, block.adj.indices, block.adj.values, (N, N)).to_dense()
    assert_same(got, want, FLOAT32_FEW_OPS, "weighted D^-1/2 (A+I) D^-1/2")


@pytest.mark.parametrize("build, data", [
    (lambda: GAT(F, 8, 2, 3, heads=2, edge_dim=D), "edge_attr"),
    (lambda: GAT(F, 8, 2, 3, heads=2, edge_dim=D, v2=True), "edge_attr"),
    (lambda: GCN(F, 8, 2, 3), "edge_weight"),
])
def test_a_basic_gnn_gets_the_edge_data_too(build, data):
    torch.manual_seed(0)
    ref = build().eval()
    model = from_pyg(ref).eval()
    graph = edge_graph(2)
    want = ref(graph.x, csr_edge_index(graph), **{data: getattr(graph, data)})
    got = model(Block.from_graph(graph, model.norm), graph.x)
    assert_same(got, want, FLOAT32_CHAINED, f"{type(ref).__name__} logits")


# ---------------------------------------------------------------- what a conv needs, refused in one line
@pytest.mark.parametrize("convs, facts, words", [
    ([GINEConv(nn.Linear(F, 4))], EdgeFacts(("weight",)), r"edge features \(edge_attr\) for GINEConv \(layer 0\)"),
    ([GATConv(F, 4), GATConv(4, 4, edge_dim=D)], EdgeFacts(), r"edge features \(edge_attr\) for GATConv \(layer 1\)"),
    ([TransformerConv(F, 4, edge_dim=D)], EdgeFacts(("type",), None, R), "edge features"),
    ([NNConv(F, 4, nn.Linear(D, 4 * F))], EdgeFacts(), "edge features"),
    ([RGCNConv(F, 4, num_relations=R)], EdgeFacts(("attr",), D), r"edge types \(edge_type\) for RGCNConv"),
    ([FastRGCNConv(F, 4, num_relations=R)], EdgeFacts(), "edge types"),
    ([GATConv(F, 4, edge_dim=8)], EdgeFacts(("attr",), 3), r"width 8 for GATConv \(layer 0\) \(got 3 per edge\)"),
    ([GINEConv(nn.Linear(F, 4))], EdgeFacts(("attr",), D), f"width {F} for GINEConv"),  # no edge_dim: x's width
    ([NNConv(F, 4, nn.Linear(5, 4 * F))], EdgeFacts(("attr",), D), "width 5 for NNConv"),
    ([RGCNConv(F, 4, num_relations=4)], EdgeFacts(("type",), None, 6), r"at most 4 relations for RGCNConv"),
    # accepted: optional data absent, data a conv does not read, fewer relations than the conv has
    ([GCNConv(F, 4), GCNConv(4, 4)], EdgeFacts(), None),
    ([GraphConv(F, 4), GATConv(4, 4)], EdgeFacts(("attr",), D), None),
    ([GATConv(F, 4, edge_dim=D), GINEConv(nn.Linear(4, 4), edge_dim=D)], EdgeFacts(("weight", "attr"), D), None),
    ([RGCNConv(F, 4, num_relations=R)], EdgeFacts(("type",), None, R - 1), None),
])
def test_edge_data_a_conv_needs_is_checked(convs, facts, words):
    model = from_pyg(convs)
    if words is None:
        model.check_edge_data(facts)
        return
    with pytest.raises(InputError, match=words) as caught:
        model.check_edge_data(facts)
    assert "\n" not in str(caught.value)
    with pytest.raises(InputError, match=words):  # the same by kinds, width and relations, Graph's names too
        model.check_edge_data(tuple(f"edge_{k}" for k in facts.kinds), facts.width, facts.relations)


def test_a_model_says_what_edge_data_it_needs():
    assert from_pyg([GATConv(F, 4, heads=2), GCNConv(8, 4, normalize=False)]).edge_needs == EdgeFacts()
    model = from_pyg([RGCNConv(F, 4, num_relations=5), GATConv(4, 4, edge_dim=D), FastRGCNConv(4, 4, R)])
    assert model.edge_needs == EdgeFacts(("attr", "type"), D, R)
    model.check_edge_data(model.edge_needs)


def test_built_in_models_accept_any_edge_data():
    GNN().check_edge_data(("weight", "attr", "type"), D, R)
    GNN().check_edge_data(EdgeFacts(("attr",), D))


# ---------------------------------------------------------------- keyed attention dropout
def halves(block: Block, k: int) -> list[tuple[Block, torch.Tensor]]:
    """The block's rows ``[0, k)`` and ``[k, n)``, each over every node as a part holds them (its dst
    nodes first, then the others), with global ``src_ids`` / ``dst_ids``: ``(block, src order)``."""
    n = block.num_src
    ip, ix, vals = block.adj.indptr, block.adj.indices, block.adj.values
    out = []
    for lo, hi in ((0, k), (k, n)):
        order = torch.cat([torch.arange(lo, hi), torch.arange(0, lo), torch.arange(hi, n)])
        pos = torch.empty(n, dtype=torch.int64)
        pos[order] = torch.arange(n)
        a, b = int(ip[lo]), int(ip[hi])
        rows = torch.repeat_interleave(torch.arange(hi - lo), ip[lo:hi + 1].diff())
        cols = pos[ix[a:b]]
        sort = torch.argsort(rows * n + cols)
        adj = SparseOp(ip[lo:hi + 1] - a, cols[sort], vals[a:b][sort], (hi - lo, n))
        edata = block.edata.take(torch.arange(a, b)[sort])
        out.append((Block(adj, block.norm, src_ids=order, dst_ids=order[: hi - lo], edata=edata), order))
    return out


ATTENTION = {
    "GATConv": lambda: GATConv(F, 4, heads=2, dropout=0.5, edge_dim=D),
    "GATv2Conv": lambda: GATv2Conv(F, 4, heads=3, dropout=0.4),
    "TransformerConv": lambda: TransformerConv(F, 4, heads=2, dropout=0.5, edge_dim=D),
}


@pytest.mark.parametrize("name", list(ATTENTION))
def test_attention_dropout_is_keyed_alike_in_every_layout(name):
    torch.manual_seed(0)
    conv = ATTENTION[name]()
    model = from_pyg(conv)
    model.check_layout(True)  # no longer refused across processes
    layer = model.layers[0].train()
    graph = edge_graph(3)
    whole, x = Block.from_graph(graph, model.norm), graph.x
    with keyed_dropout(seed=5, epoch=2):
        out = layer(whole, x)
        parts = torch.cat([layer(b, x[order]) for b, order in halves(whole, 10)])
        again = layer(whole, x)
    with keyed_dropout(seed=5, epoch=3):
        other = layer(whole, x)
    assert conv.dropout > 0  # put back after each call
    assert_same(parts, out, FLOAT32_REORDER, f"{name}: two halves against the whole graph")  # one layer's sums
    assert torch.equal(again, out)
    assert not torch.allclose(other, out, atol=1e-3)  # another epoch, another mask
    layer.eval()
    assert not torch.allclose(layer(whole, x), out, atol=1e-3)  # it dropped something


def test_without_a_key_pygs_own_attention_dropout_runs():
    torch.manual_seed(0)
    conv = GATConv(F, 4, heads=2, dropout=0.5)
    layer = from_pyg(conv).layers[0].train()
    graph = edge_graph(4)
    torch.manual_seed(7)
    got = layer(Block.from_graph(graph, "mean"), graph.x)
    torch.manual_seed(7)
    want = conv((graph.x, graph.x), csr_edge_index(graph))
    assert torch.equal(got, want)


def test_the_keyed_mask_is_dropout_on_alpha(monkeypatch):
    """With the mask PyG's dropout would draw replaced by the keyed one, PyG computes what the layer
    does: scaling the messages alpha * value is dropout on the attention coefficients alpha."""
    torch.manual_seed(0)
    conv = GATConv(F, 4, heads=2, dropout=0.5)
    layer = from_pyg(conv).layers[0].train()
    graph = edge_graph(5)
    ei = csr_edge_index(graph)
    key, loops = DropoutKey(1, 4), torch.arange(N)  # GATConv appends a self loop per node
    keep = keyed_edge_keep(torch.cat([ei[0], loops]), torch.cat([ei[1], loops]), 2, 0.5, key, layer.dropout_site)
    with keyed_dropout(1, 4):
        got = layer(Block.from_graph(graph, "mean"), graph.x)
    monkeypatch.setattr(torch.nn.functional, "dropout",
                        lambda a, p=0.5, training=True, inplace=False: a * keep / (1 - p) if p > 0 and training else a)
    want = conv((graph.x, graph.x), ei)
    assert_same(got, want, FLOAT32_CHAINED, "keyed attention dropout against PyG's on alpha")


def test_keyed_edge_masks_tell_the_two_ends_apart():
    key = DropoutKey(0, 1)
    src, dst = torch.randint(0, 1000, (4000,)), torch.randint(0, 1000, (4000,))
    keep = keyed_edge_keep(src, dst, 4, 0.3, key, 1)
    assert abs(keep.float().mean().item() - 0.7) < 0.02
    assert not torch.equal(keep, keyed_edge_keep(dst, src, 4, 0.3, key, 1))
    assert not torch.equal(keep, keyed_edge_keep(src + (1 << 32), dst, 4, 0.3, key, 1))  # all 64 bits count
    assert not torch.equal(keep, keyed_edge_keep(src, dst, 4, 0.3, key, 2))
    perm = torch.randperm(4000)
    assert torch.equal(keyed_edge_keep(src[perm], dst[perm], 4, 0.3, key, 1), keep[perm])


def test_other_randomness_inside_a_conv_is_still_refused_across_processes():
    model = from_pyg([SuperGATConv(F, 4, dropout=0.3), SAGEConv(4, 4)])
    model.check_layout(False)
    with pytest.raises(InputError, match="dropout=0 inside SuperGATConv"):
        model.check_layout(True)
