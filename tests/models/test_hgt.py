"""The built-in HGT against PyG's ``HGTConv`` (an independent implementation of the same layer) in float64,
on the whole typed graph and on a block whose rows are shuffled as a layout's are; the whole model
against PyG's ``hgt_dblp`` example model built from PyG's own modules; and what every model owes the
layouts (same bits on the same seed, the same losses with ``--recompute``).

Tolerances: FLOAT64_REORDER (float64 on both sides: the same sums in another order) where compared with PyG;
exact equality where the same code runs twice."""

from __future__ import annotations

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.models import build_model, hgt
from fullgraph.ops import Block
from fullgraph.train.trainer import Trainer

from tests._equality import FLOAT64_REORDER, assert_same
from tests.models.test_rgcn import small_typed




@pytest.fixture(scope="module")
def typed():
    return small_typed()


def build(graph, **kw):
    opts = dict(layers=2, hidden=8, heads=2, dropout=0.0) | kw
    return build_model("hgt", graph.num_features, graph.num_classes, node_types=graph.node_types, **opts)


def pyg_conv(layer, types):
    """PyG's ``HGTConv`` with ``layer``'s weights (its relations in the same order, so ``k_rel``'s type
    ``h * R + r`` is our relation ``r``, head ``h``)."""
    pyg = pytest.importorskip("torch_geometric.nn")
    metadata = (list(types.names), [tuple(r) for r in types.relations])
    conv = pyg.HGTConv(layer.in_width, layer.in_width, metadata, heads=layer.heads).double()
    R, H = types.num_relations, layer.heads
    with torch.no_grad():
        for t, name in enumerate(types.names):
            conv.kqv_lin.lins[name].weight.copy_(layer.kqv_weight[t].T)
            conv.kqv_lin.lins[name].bias.copy_(layer.kqv_bias[t])
            conv.out_lin.lins[name].weight.copy_(layer.out_weight[t].T)
            conv.out_lin.lins[name].bias.copy_(layer.out_bias[t])
            conv.skip[name].copy_(layer.skip[t : t + 1])
        for r, rel in enumerate(types.relations):
            conv.p_rel["__".join(rel)].copy_(layer.p_rel[r : r + 1])
            for h in range(H):
                conv.k_rel.weight[h * R + r].copy_(layer.k_rel[r, h])
                conv.v_rel.weight[h * R + r].copy_(layer.v_rel[r, h])
    return conv


def as_dicts(graph, h):
    """``h``'s rows and the graph's edges as PyG's per-type and per-relation dicts (local ids)."""
    types, (src, dst) = graph.node_types, graph.edges()
    off = types.offsets
    x = {name: h[off[t] : off[t + 1]] for t, name in enumerate(types.names)}
    edges = {}
    for r, (s, name, d) in enumerate(types.relations):
        sel = graph.edge_type == r
        edges[(s, name, d)] = torch.stack([src[sel] - off[types.index(s)], dst[sel] - off[types.index(d)]])
    return x, edges


@pytest.fixture(params=["headed", "per-head"])
def attention(request, monkeypatch):
    """Both of ``HGTLayer._attend``'s roads: over the block split into heads, and a product per head (a
    block past ``HEADED_ENTRIES``)."""
    if request.param == "per-head":
        monkeypatch.setattr(hgt, "HEADED_ENTRIES", 0)
    return request.param


def test_a_layer_equals_pygs_hgtconv_forward_and_gradients(typed, attention):
    torch.manual_seed(0)
    layer = build(typed).double().layers[0]
    conv = pyg_conv(layer, typed.node_types)
    h = torch.randn(typed.num_nodes, 8, dtype=torch.float64, requires_grad=True)
    h2 = h.detach().clone().requires_grad_(True)
    ours = layer(Block.from_graph(typed, "relation-mean"), h)
    theirs = torch.cat(list(conv(*as_dicts(typed, h2)).values()))  # the types in id order
    assert_same(ours, theirs, FLOAT64_REORDER, "HGT layer")
    weights = torch.randn_like(ours)
    (ours * weights).sum().backward()
    (theirs * weights).sum().backward()
    assert_same(h.grad, h2.grad, FLOAT64_REORDER, "HGT input gradient")
    assert_same(layer.k_rel.grad[2, 1], conv.k_rel.weight.grad[1 * 5 + 2], FLOAT64_REORDER, "HGT key matrix gradient")
    assert_same(layer.p_rel.grad[3], conv.p_rel["__".join(typed.node_types.relations[3])].grad[0], FLOAT64_REORDER,
                "HGT prior gradient")
    assert_same(layer.skip.grad[1], conv.skip["author"].grad[0], FLOAT64_REORDER, "HGT skip gradient")


def test_a_block_of_shuffled_rows_computes_the_same_rows(typed, attention):
    """A layout's block holds its rows in its own order (``src_ids``): the rows' types come from their
    ids, so the layer computes the same values for the same nodes."""
    torch.manual_seed(1)
    layer = build(typed).double().layers[0]
    whole = Block.from_graph(typed, "relation-mean")
    h = torch.randn(typed.num_nodes, 8, dtype=torch.float64)
    want = layer(whole, h)
    perm = torch.randperm(typed.num_nodes)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel())
    src, dst = whole.adj.indices, torch.repeat_interleave(torch.arange(typed.num_nodes), whole.adj.indptr.diff())
    from fullgraph.ops import SparseOp
    from fullgraph.ops.edge_data import EdgeData

    order = torch.argsort(inv[dst] * typed.num_nodes + inv[src])  # the same entries, CSR order of new ids
    rows, cols = inv[dst][order], inv[src][order]
    ip = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.bincount(rows, minlength=typed.num_nodes), 0)])
    edata = EdgeData(whole.edge_ids[order], None, None, whole.edge_type[order], typed.node_types.num_relations)
    shuffled = Block(SparseOp(ip, cols, whole.adj.values[order], whole.adj.shape), "relation-mean",
                     src_ids=perm, dst_ids=perm, edata=edata)
    assert_same(layer(shuffled, h[perm]), want[perm], FLOAT64_REORDER, "HGT layer on shuffled rows")


def test_the_model_equals_pygs_example_model(typed, attention):
    """The whole model (typed input with ReLU, two HGT layers, a linear head) against the same stack of
    PyG's modules: ``Linear`` per type, ``HGTConv`` twice, ``Linear`` (PyG's ``hgt_dblp`` example)."""
    torch.manual_seed(2)
    model = build(typed, featureless="zeros").double()
    types = typed.node_types
    convs = [pyg_conv(layer, types) for layer in model.layers]
    x = (typed.x.to_dense() if typed.x.layout != torch.strided else typed.x).double()
    cols, off = types.column_offsets, types.offsets
    x_dict = {}
    for t, name in enumerate(types.names):
        own = x[off[t] : off[t + 1], cols[t] : cols[t + 1]]
        x_dict[name] = torch.relu(own @ model.input.weight[cols[t] : cols[t + 1]] + model.input.bias[t])
    edges = as_dicts(typed, torch.zeros(typed.num_nodes, 1))[1]
    for conv in convs:
        x_dict = conv(x_dict, edges)
    theirs = model.head(torch.cat(list(x_dict.values())))
    ours = model(Block.from_graph(typed, model.norm), x)
    assert_same(ours, theirs, FLOAT64_REORDER, "HGT model")


def train(graph, **kw):
    cfg = TrainConfig.of(model="hgt", layers=2, hidden=8, heads=2, dropout=0.5, epochs=4, eval_every=4, seed=1,
                         progress="none", threads=1, **kw)
    return Trainer(cfg, graph).build().train()


def test_same_seed_same_bits_and_recompute_and_prune_same_losses(typed):
    a, b, c, d = train(typed), train(typed), train(typed, recompute=True), train(typed, prune=True)
    assert a.losses == b.losses and a.losses == c.losses and a.losses == d.losses


def test_refusals_name_what_is_wrong(typed, cora):
    with pytest.raises(InputError, match="expected node types for --model hgt"):
        build_model("hgt", cora.num_features, cora.num_classes, layers=2, hidden=8, heads=2, dropout=0.0)
    with pytest.raises(InputError, match="multiple of heads for hgt"):
        TrainConfig.of(model="hgt", hidden=10, heads=4)
    with pytest.raises(InputError, match="relations HGT was built for"):
        build(typed).check_edge_data(())
