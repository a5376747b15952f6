"""fullgraph's GCN against a stack of PyG ``GCNConv`` layers through whole training steps (issue 66).

``test_models.py`` checks one layer without dropout. Here the two-layer model, as
``benchmarks/accuracy_vs_pyg.py`` trains it on both sides, goes through forward, loss, backward and
Adam with weight decay, twice, with dropout on: PyG's side gets fullgraph's keyed masks, applied
where PyG's examples apply dropout (on the input and after the hidden ReLU). In float64, with Â's
values taken from PyG's ``gcn_norm``, every difference left would be another computation: where
dropout sits, the bias, the normalization's self-loops, the loss's scale or weight decay's reach.
"""

import pytest
import torch
from torch.nn import functional as F

from fullgraph.data.synthetic import planted_partition
from fullgraph.models import build_model
from fullgraph.ops import Block
from fullgraph.ops.dropout import DropoutKey, keyed_dropout, keyed_keep
from fullgraph.ops.loss import masked_loss

from tests._equality import FLOAT32_FEW_OPS, FLOAT64_REORDER, assert_same

pyg_nn = pytest.importorskip("torch_geometric.nn", reason="torch_geometric is part of the test extra")
P, HIDDEN, LR, DECAY = 0.5, 8, 0.01, 5e-4


def gcn_norm_block(graph) -> tuple[Block, torch.Tensor]:
    """fullgraph's GCN block with PyG's float64 ``gcn_norm`` values in its places, and PyG's ``edge_index``
    (after checking that both hold the same entries and fullgraph's float32 values are PyG's)."""
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    block = Block.from_graph(graph, "gcn")
    src, dst = graph.edges()
    ei = torch.stack([src, dst])
    loops, w = gcn_norm(ei, None, graph.num_nodes, add_self_loops=True, dtype=torch.float64)
    n = graph.num_nodes
    order = torch.argsort(loops[1] * n + loops[0])  # row = target, as fullgraph's Â is stored
    rows, cols, w = loops[1][order], loops[0][order], w[order]
    adj = block.adj
    assert torch.equal(adj.indptr, torch.searchsorted(rows, torch.arange(n + 1)))
    assert torch.equal(adj.indices.long(), cols)
    assert_same(adj.values, w.float(), FLOAT32_FEW_OPS, "Â's values against gcn_norm's")
    return Block(adj.with_values(w), "gcn"), ei


def test_gcn_training_steps_match_pyg_gcnconv_with_the_same_masks():
    graph = planted_partition(num_nodes=300, num_features=16, seed=3)
    block, ei = gcn_norm_block(graph)
    n, f, c = graph.num_nodes, graph.num_features, graph.num_classes
    torch.manual_seed(0)
    model = build_model("gcn", f, c, layers=2, hidden=HIDDEN, dropout=P).double()
    convs = torch.nn.ModuleList([pyg_nn.GCNConv(f, HIDDEN), pyg_nn.GCNConv(HIDDEN, c)]).double()
    with torch.no_grad():
        for layer, conv in zip(model.layers, convs):
            conv.lin.weight.copy_(layer.weight.t())
            layer.bias.normal_()  # not zero, so that weight decay reaches it from the first step
            conv.bias.copy_(layer.bias)
    ours = torch.optim.Adam(model.param_groups(DECAY), lr=LR)  # the trainer's groups
    theirs = torch.optim.Adam(convs.parameters(), lr=LR, weight_decay=DECAY)  # the benchmark's
    x, y, train = graph.x.double(), graph.y, graph.train_mask
    rows = torch.arange(n)
    for epoch in (1, 2):
        key = DropoutKey(7, epoch)
        keep_in = keyed_keep(rows, f, P, key, model.PRE_SITE).double() / (1 - P)
        keep_hidden = keyed_keep(rows, HIDDEN, P, key, model.layers[0].dropout_site).double() / (1 - P)
        model.train()
        ours.zero_grad()
        theirs.zero_grad()
        with keyed_dropout(key.seed, key.epoch):
            out = model(block, x)
        ref = convs[1](F.relu(convs[0](x * keep_in, ei)) * keep_hidden, ei)
        loss, ref_loss = masked_loss(out, y, train), F.cross_entropy(ref[train], y[train])
        assert_same(out, ref, FLOAT64_REORDER, f"logits, step {epoch}")
        assert_same(loss, ref_loss, FLOAT64_REORDER, f"loss, step {epoch}")
        loss.backward()
        ref_loss.backward()
        ours.step()
        theirs.step()
        for i, (layer, conv) in enumerate(zip(model.layers, convs)):
            assert_same(layer.weight.grad.t(), conv.lin.weight.grad, FLOAT64_REORDER, f"W{i} gradient, step {epoch}")
            assert_same(layer.bias.grad, conv.bias.grad, FLOAT64_REORDER, f"b{i} gradient, step {epoch}")
            assert_same(layer.weight.t(), conv.lin.weight, FLOAT64_REORDER, f"W{i} after Adam, step {epoch}")
            assert_same(layer.bias, conv.bias, FLOAT64_REORDER, f"b{i} after Adam, step {epoch}")
    model.eval()
    with torch.no_grad():
        assert_same(model(block, x), convs[1](F.relu(convs[0](x, ei)), ei), FLOAT64_REORDER, "evaluation logits")
