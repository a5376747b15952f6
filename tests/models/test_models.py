"""Each layer against PyTorch Geometric's implementation of the same layer, with the same weights.

PyG is the field's reference implementation; agreeing with it on outputs *and* weight gradients
checks our normalization, attention softmax, product order and hand-written backward at once.
Tolerance: float32, sums over in-neighbourhoods in a different order: FLOAT32_CHAINED (GAT's
attention gradients in float64: FLOAT64_REORDER); tests/_equality.py says why.
"""

import pytest
import torch

from fullgraph.data.synthetic import planted_partition
from fullgraph.models import MODELS, UNTYPED_MODELS, build_model
from fullgraph.ops import Block

from tests._equality import FLOAT32_CHAINED, FLOAT64_REORDER, assert_same, assert_same_losses

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="torch_geometric is part of the test extra")


@pytest.fixture(scope="module")
def graph():
    return planted_partition(num_nodes=300, num_features=16, seed=3)


def edge_index(graph):
    src, dst = graph.edges()
    return torch.stack([src, dst])


def run_both(ours, theirs, inputs_ours, inputs_theirs, params):
    """Forward + backward of both with the same upstream gradient; compare outputs and grads."""
    out = ours(*inputs_ours)
    ref = theirs(*inputs_theirs)
    assert_same(out, ref, FLOAT32_CHAINED, "layer output")
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (ref * g).sum().backward()
    for i, (mine, their) in enumerate(params):
        assert_same(mine.grad, their.grad, FLOAT32_CHAINED, f"gradient of input {i}")


def test_gcn_layer_matches_pyg(graph):
    torch.manual_seed(0)
    model = build_model("gcn", 16, 8, layers=2, hidden=8, dropout=0.0)
    layer = model.layers[0]
    conv = pyg_nn.GCNConv(16, 8)
    with torch.no_grad():
        conv.lin.weight.copy_(layer.weight.t())
        conv.bias.copy_(torch.randn(8))
        layer.bias.copy_(conv.bias)
    block = Block.from_graph(graph, "gcn")
    x = graph.x.clone().requires_grad_()
    x2 = graph.x.clone().requires_grad_()
    run_both(lambda b, h: torch.relu(layer(b, h)), lambda h, e: torch.relu(conv(h, e)),
             (block, x), (x2, edge_index(graph)), [(x, x2)])
    assert_same(layer.weight.grad.t(), conv.lin.weight.grad, FLOAT32_CHAINED, "weight gradient")


def test_sage_layer_matches_pyg(graph):
    torch.manual_seed(0)
    model = build_model("sage", 16, 8, layers=2, hidden=24, dropout=0.0)
    layer = model.layers[0]
    conv = pyg_nn.SAGEConv(16, 24, aggr="mean")
    with torch.no_grad():
        conv.lin_l.weight.copy_(layer.neigh_lin.weight.t())
        conv.lin_r.weight.copy_(layer.self_lin.weight.t())
        conv.lin_l.bias.copy_(layer.self_lin.bias)
    block = Block.from_graph(graph, "mean")
    out = layer(block, graph.x)  # hidden layer: relu (+ dropout 0)
    ref = torch.relu(conv(graph.x, edge_index(graph)))
    assert_same(out, ref, FLOAT32_CHAINED, "layer output")
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (ref * g).sum().backward()
    assert_same(layer.neigh_lin.weight.grad.t(), conv.lin_l.weight.grad, FLOAT32_CHAINED, "W_neigh gradient")
    assert_same(layer.self_lin.weight.grad.t(), conv.lin_r.weight.grad, FLOAT32_CHAINED, "W_self gradient")


def test_gat_layer_matches_pyg(graph):
    torch.manual_seed(0)
    model = build_model("gat", 16, 8, layers=2, hidden=12, heads=3, dropout=0.0)
    layer = model.layers[0]
    conv = pyg_nn.GATConv(16, 4, heads=3)
    with torch.no_grad():
        conv.lin.weight.copy_(layer.weight.t())
        conv.att_src.copy_(layer.att_src.unsqueeze(0))
        conv.att_dst.copy_(layer.att_dst.unsqueeze(0))
        layer.bias.copy_(torch.randn(12))
        conv.bias.copy_(layer.bias)
    # The attention-vector gradients sum over every edge of the graph (thousands of terms), so run
    # both in float64, where the two summation orders agree to ~1e-12, and compare tightly.
    layer.double(), conv.double()
    x = graph.x.double()
    block = Block.from_graph(graph, "self-loops")
    out = layer(block, x)
    ref = torch.nn.functional.elu(conv(x, edge_index(graph)))
    assert_same(out, ref, FLOAT64_REORDER, "layer output")
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (ref * g).sum().backward()
    assert_same(layer.weight.grad.t(), conv.lin.weight.grad, FLOAT64_REORDER, "weight gradient")
    assert_same(layer.att_src.grad, conv.att_src.grad[0], FLOAT64_REORDER, "att_src gradient")
    assert_same(layer.att_dst.grad, conv.att_dst.grad[0], FLOAT64_REORDER, "att_dst gradient")


def test_gcnii_layer_matches_pyg(graph):
    torch.manual_seed(0)
    model = build_model("gcnii", 16, 8, layers=4, hidden=16, dropout=0.0, gcnii_alpha=0.1, gcnii_lambda=0.5)
    layer = model.layers[2]  # layer index 3: beta = log(0.5 / 3 + 1)
    conv = pyg_nn.GCN2Conv(16, alpha=0.1, theta=0.5, layer=3)
    with torch.no_grad():
        conv.weight1.copy_(layer.weight)
    block = Block.from_graph(graph, "gcn")
    h = torch.randn(graph.num_nodes, 16)
    h0 = torch.randn(graph.num_nodes, 16)
    out = layer(block, h, h0)
    ref = torch.relu(conv(h, h0, edge_index(graph)))
    assert_same(out, ref, FLOAT32_CHAINED, "layer output")
    g = torch.randn_like(out)
    (out * g).sum().backward()
    (ref * g).sum().backward()
    assert_same(layer.weight.grad, conv.weight1.grad, FLOAT32_CHAINED, "weight gradient")


def test_resgcn_layer_is_preactivation_residual(graph):
    """No PyG counterpart for the whole block: check against its definition written with PyG's
    GCNConv for the convolution."""
    torch.manual_seed(0)
    model = build_model("resgcn+", 16, 8, layers=3, hidden=16, dropout=0.0)
    layer = model.layers[1]
    conv = pyg_nn.GCNConv(16, 16)
    with torch.no_grad():
        conv.lin.weight.copy_(layer.weight.t())
        conv.bias.copy_(layer.bias)
    block = Block.from_graph(graph, "gcn")
    h = torch.randn(graph.num_nodes, 16)
    out = layer(block, h)
    ref = h + conv(torch.relu(layer.norm(h)), edge_index(graph))
    assert_same(out, ref, FLOAT32_CHAINED, "layer output")


def test_resgcn_plus_model_matches_pyg_deepgcn_with_gradients(graph):
    """The whole ResGCN+ (encoder, plain first GCN, ``DeepGCNLayer(..., block="res+")`` layers, final
    LayerNorm → ReLU → Linear) as PyG's DeeperGCN example builds it, same weights: the same logits
    and the same gradient of every weight under a cross-entropy loss (training mode, dropout 0)."""
    torch.manual_seed(0)
    F_in, H, C, L = 16, 16, graph.num_classes, 4
    ours = build_model("resgcn+", F_in, C, layers=L, hidden=H, dropout=0.0)
    enc, dec, final = torch.nn.Linear(F_in, H), torch.nn.Linear(H, C), torch.nn.LayerNorm(H)
    convs = [pyg_nn.GCNConv(H, H) for _ in range(L)]
    deep = [pyg_nn.DeepGCNLayer(c, torch.nn.LayerNorm(H), torch.nn.ReLU(), block="res+", dropout=0.0)
            for c in convs[1:]]
    pairs = [(ours.encoder.weight, enc.weight, True), (ours.encoder.bias, enc.bias, False),
             (ours.head.weight, dec.weight, True), (ours.head.bias, dec.bias, False),
             (ours.final_norm.weight, final.weight, False), (ours.final_norm.bias, final.bias, False)]
    for i, conv in enumerate(convs):
        pairs += [(ours.layers[i].weight, conv.lin.weight, True), (ours.layers[i].bias, conv.bias, False)]
    for layer, d in zip(ours.layers[1:], deep):
        pairs += [(layer.norm.weight, d.norm.weight, False), (layer.norm.bias, d.norm.bias, False)]
    with torch.no_grad():
        for mine, theirs, transposed in pairs:
            theirs.copy_(mine.t() if transposed else mine)
    e = edge_index(graph)
    h = convs[0](enc(graph.x), e)
    for d in deep:
        h = d(h, e)
    ref = dec(torch.relu(final(h)))
    out = ours(Block.from_graph(graph, "gcn"), graph.x)
    assert_same(out, ref, FLOAT32_CHAINED, "logits")
    torch.nn.functional.cross_entropy(out, graph.y).backward()
    torch.nn.functional.cross_entropy(ref, graph.y).backward()
    for i, (mine, theirs, transposed) in enumerate(pairs):
        assert_same(mine.grad.t() if transposed else mine.grad, theirs.grad, FLOAT32_CHAINED, f"gradient {i}")


def test_resgcn_plus_keeps_its_output_map_beside_a_link_decoder():
    """ResGCN+'s output map is ``head``: a link task's pair decoder (``decoder``) no longer replaces it (which
    made ``--task link --model resgcn+`` fail on its first forward), and a state saved when the output map
    was named ``decoder`` loads into ``head``; a model with a ``decoder`` of its own is refused in one line."""
    from fullgraph.errors import InputError
    from fullgraph.tasks.decoders import MLPDecoder, attach_decoder

    torch.manual_seed(0)
    model = attach_decoder(build_model("resgcn+", 6, 8, layers=2, hidden=8, dropout=0.0), "mlp", 8)
    assert isinstance(model.decoder, MLPDecoder) and model.head.weight.shape == (8, 8)
    h = model.post(torch.randn(5, 8))
    assert model.decoder(h, h).shape == (5,)
    old = {k.replace("head.", "decoder."): v for k, v in build_model("resgcn+", 6, 3, layers=2, hidden=8, dropout=0.0).state_dict().items()}
    fresh = build_model("resgcn+", 6, 3, layers=2, hidden=8, dropout=0.0)
    fresh.load_state_dict(old)
    assert torch.equal(fresh.head.weight, old["decoder.weight"])
    with pytest.raises(InputError, match="attribute named 'decoder'"):
        attach_decoder(model, "dot", 8)


@pytest.mark.parametrize("name", list(UNTYPED_MODELS))  # R-GCN: test_rgcn.py
@pytest.mark.parametrize("layers", [2, 128])
def test_models_build_and_learn_at_any_depth(name, layers, graph):
    """Every model runs forward and backward at both ends of the depth range, and every weight gets a
    finite gradient."""
    torch.manual_seed(0)
    model = build_model(name, 16, graph.num_classes, layers=layers, hidden=8, dropout=0.5, heads=2)
    assert model.num_layers == layers
    block = Block.from_graph(graph, model.norm)
    out = model(block, graph.x)
    assert out.shape == (graph.num_nodes, graph.num_classes)
    torch.nn.functional.cross_entropy(out[graph.train_mask], graph.y[graph.train_mask]).backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None, pname
        assert torch.isfinite(p.grad).all(), pname


def test_gcnii_has_separate_weight_decay_groups():
    model = build_model("gcnii", 16, 4, layers=8, hidden=16, dropout=0.0)
    groups = model.param_groups(5e-4, 0.01)
    assert [g["weight_decay"] for g in groups] == [0.01, 5e-4]
    conv_ids = {id(p) for p in groups[0]["params"]}
    assert conv_ids == {id(p) for p in model.layers.parameters()}
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_fused_and_plain_gcn_kernels_train_identically():
    """The fused layer (one kept activation per layer) is the same math as plain autograd ops."""
    from fullgraph.config import TrainConfig
    from fullgraph.train.trainer import Trainer

    graph = planted_partition(num_nodes=600, seed=0)
    losses = {}
    for kernel in ("fused", "autograd"):
        cfg = TrainConfig.of(layers=3, hidden=16, dropout=0.0, epochs=10, progress="none", gcn_kernel=kernel)
        losses[kernel] = Trainer(cfg, graph).build().train().losses
    assert_same_losses(losses["fused"], losses["autograd"], what="fused against autograd losses")


@pytest.mark.parametrize("name", sorted(UNTYPED_MODELS))
def test_models_name_each_layers_input_width(graph, name):
    """What a pipeline stage receives and keeps tables of: each layer's input width, which the layer
    itself must accept (checked by running every layer on rows of that width)."""
    model = build_model(name, graph.num_features, 5, layers=3, hidden=16, heads=4, dropout=0.0).eval()
    widths = model.layer_input_widths()
    expected = [graph.num_features if name in ("gcn", "sage", "gat", "gin") else 16] + [16, 16]
    if name == "appnp":  # it propagates the MLP's output: the classes
        expected = [5, 5, 5]
    assert widths == expected
    block = Block.from_graph(graph, MODELS[name].norm)
    h = model.pre(graph.dense_x())
    for i, layer in enumerate(model.layers):
        assert h.shape[1] == widths[i]
        h = layer(block, h, h if model.uses_h0 else None)


def test_appnp_is_pygs_appnp_after_the_same_mlp(graph):
    """APPNP against PyG's ``APPNP`` propagation (GCN normalization, self loops) of the same MLP's
    output: logits and the MLP's gradients."""
    from torch_geometric.nn import APPNP as PygAPPNP

    torch.manual_seed(0)
    model = build_model("appnp", graph.num_features, graph.num_classes, layers=10, hidden=32, dropout=0.0,
                        appnp_alpha=0.1)
    x = graph.dense_x()
    dst = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.indptr.diff())
    edge_index = torch.stack([graph.indices, dst])
    ours = model(Block.from_graph(graph, "gcn"), x)
    mlp = model.lin_out(torch.relu(model.lin_in(x)))
    theirs = PygAPPNP(K=10, alpha=0.1)(mlp, edge_index)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    grads = torch.autograd.grad(ours.square().sum(), [model.lin_in.weight, model.lin_out.bias])
    want = torch.autograd.grad(theirs.square().sum(), [model.lin_in.weight, model.lin_out.bias])
    for a, b in zip(grads, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_gin_is_pygs_gin_conv_with_the_same_weights(graph):
    """GIN-0 against PyG's GINConv over the same two-layer MLP, outputs and gradients."""
    from torch_geometric.nn import GINConv

    torch.manual_seed(0)
    model = build_model("gin", 16, graph.num_classes, layers=2, hidden=24, dropout=0.0)
    x = graph.dense_x()
    dst = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.indptr.diff())
    edge_index = torch.stack([graph.indices, dst])
    convs, pairs = [], []
    for layer in model.layers:
        a, b = layer.lin1.weight.shape
        conv = GINConv(torch.nn.Sequential(torch.nn.Linear(a, b), torch.nn.ReLU(), torch.nn.Linear(b, b)))
        mlp = conv.nn  # (GINConv re-initializes its network when built: copy the weights after)
        with torch.no_grad():
            for theirs, mine in ((mlp[0], layer.lin1), (mlp[2], layer.lin2)):
                theirs.weight.copy_(mine.weight.t())
                theirs.bias.copy_(mine.bias)
                pairs += [(mine.weight, theirs.weight, True), (mine.bias, theirs.bias, False)]
        convs.append(conv)
    ref = convs[1](torch.relu(convs[0](x, edge_index)), edge_index)
    out = model(Block.from_graph(graph, model.norm), x)
    assert_same(out, ref, FLOAT32_CHAINED, "logits")
    torch.nn.functional.cross_entropy(out, graph.y).backward()
    torch.nn.functional.cross_entropy(ref, graph.y).backward()
    for i, (mine, theirs, transposed) in enumerate(pairs):
        assert_same(mine.grad.t() if transposed else mine.grad, theirs.grad, FLOAT32_CHAINED, f"gradient {i}")


def test_gat_layer_with_edge_features_matches_pyg(cora_edges):
    """The built-in GAT with ``edge_dim`` scores each edge's features as ``GATConv(edge_dim=...)`` does,
    self loops reading the mean of their node's in-edges' features (PyG's fill_value='mean')."""
    from fullgraph.data.graph import Graph

    torch.manual_seed(0)
    g = cora_edges
    keep = torch.arange(g.num_nodes) < 300  # a small induced subgraph keeps the float64 run quick
    src, dst = g.edges()
    inside = keep[src] & keep[dst]
    small = Graph.from_edges(src[inside], dst[inside], 300, edge_attr=g.edge_attr[inside], x=g.dense_x()[:300, :16].contiguous(),
                             y=g.y[:300], train_mask=torch.arange(300) < 100,
                             val_mask=(torch.arange(300) >= 100) & (torch.arange(300) < 200),
                             test_mask=torch.arange(300) >= 200, num_classes=g.num_classes)
    model = build_model("gat", 16, 8, layers=2, hidden=12, heads=3, dropout=0.0, edge_dim=3)
    layer = model.layers[0]
    conv = pyg_nn.GATConv(16, 4, heads=3, edge_dim=3)
    with torch.no_grad():
        conv.lin.weight.copy_(layer.weight.t())
        conv.att_src.copy_(layer.att_src.unsqueeze(0))
        conv.att_dst.copy_(layer.att_dst.unsqueeze(0))
        conv.lin_edge.weight.copy_(layer.edge_weight.t())
        conv.att_edge.copy_(layer.att_edge.unsqueeze(0))
        conv.bias.copy_(layer.bias)
    layer.double(), conv.double()
    x = small.x.double()
    block = Block.from_graph(small, "self-loops")
    block.edata.attr = block.edata.attr.double()
    out = layer(block, x)
    s, d = small.edges()
    ref = torch.nn.functional.elu(conv(x, torch.stack([s, d]), small.edge_attr.double()))
    assert_same(out, ref, FLOAT64_REORDER, "layer output")
    # gradients: PyG fed the block's own entries (its loops' mean features were rounded to float32 once,
    # where PyG's own fill would stay in float64 and move the edge map's gradient by ~1e-7)
    conv.add_self_loops = False
    bs, bd = block.edges()
    ref = torch.nn.functional.elu(conv(x, torch.stack([bs, bd]), block.edge_attr))
    assert_same(out, ref, FLOAT64_REORDER, "layer output on the block's entries")
    g_out = torch.randn_like(out)
    (out * g_out).sum().backward()
    (ref * g_out).sum().backward()
    assert_same(layer.edge_weight.grad.t(), conv.lin_edge.weight.grad, FLOAT64_REORDER, "edge weight gradient")
    assert_same(layer.att_edge.grad, conv.att_edge.grad[0], FLOAT64_REORDER, "att_edge gradient")
