"""PyG convolutions through ``from_pyg``, and the layer contract checked before training.

The reference is PyG itself: the adapted model's logits and every parameter's gradient are compared
with the same PyG objects run by PyG on the whole graph (``conv(x, edge_index)``), not with anything
of fullgraph's. The adapter feeds GCNConv the block's D^-1/2 (A+I) D^-1/2 and runs GCNConv and
SAGEConv on the block's sparse kernel, summing in another order than PyG's scatter: FLOAT32_CHAINED.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch_geometric.nn import GATConv, GCNConv, GINConv, GraphConv, SAGEConv, TAGConv
from torch_geometric.nn.models import GAT, GCN, GIN, GraphSAGE

from fullgraph.errors import InputError
from fullgraph.models import GNN, GraphLayer, Linear, from_pyg
from fullgraph.models.contract import check_model
from fullgraph.ops import Block
from fullgraph.parallel.engine import input_features

from tests import user_models
from tests._equality import FLOAT32_CHAINED, assert_same


def edge_index(graph) -> torch.Tensor:
    dst = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.indptr.diff())
    return torch.stack([graph.indices, dst])


def pyg_forward(model, x, ei):
    if isinstance(model, list):  # a conv list as from_pyg runs it in eval: relu between the convs
        for i, conv in enumerate(model):
            x = conv(x, ei)
            x = x.relu() if i < len(model) - 1 else x
        return x
    return model(x, ei)


CASES = {
    "GCN": lambda F, C: GCN(F, 16, 3, C),
    "GraphSAGE-batchnorm": lambda F, C: GraphSAGE(F, 16, 2, C, norm="batch_norm"),
    "GAT": lambda F, C: GAT(F, 8, 2, C, heads=2),
    "GIN": lambda F, C: GIN(F, 16, 2, C),
    "GraphConv-list": lambda F, C: [GraphConv(F, 16), GraphConv(16, C)],
}


@pytest.mark.parametrize("name", list(CASES))
def test_adapted_model_computes_what_pyg_computes(cora, name):
    torch.manual_seed(0)
    ref = CASES[name](cora.num_features, cora.num_classes)
    ours = from_pyg(ref)
    x, ei = cora.dense_x(), edge_index(cora)
    for m in (ours, *(ref if isinstance(ref, list) else [ref])):
        m.eval()
    want = pyg_forward(ref, x, ei)
    got = ours(Block.from_graph(cora, ours.norm), input_features(cora.x))  # sparse features, as training has them
    assert_same(got, want, FLOAT32_CHAINED, f"{name} logits")
    # and the gradients of every parameter (the same objects: compare after each backward)
    grads = {}
    for label, run in (("pyg", lambda: pyg_forward(ref, x, ei)),
                       ("ours", lambda: ours(Block.from_graph(cora, ours.norm), input_features(cora.x)))):
        ours.zero_grad()
        (run().log_softmax(1)[cora.train_mask].sum()).backward()
        grads[label] = {n: p.grad.clone() for n, p in ours.named_parameters()}
    assert_same_grads(grads["ours"], grads["pyg"], name)


def assert_same_grads(got: dict, want: dict, name: str) -> None:
    assert got.keys() == want.keys()
    for key in want:
        assert_same(got[key], want[key], FLOAT32_CHAINED, f"{name} gradient {key}")


def test_builders_of_the_tests_adapt(cora):
    for builder in (user_models.gcn, user_models.sage, user_models.gat, user_models.gin, user_models.graphconv):
        made = builder(cora.num_features, cora.num_classes)
        model = made if isinstance(made, GNN) else from_pyg(made)
        check_model(model, distributed=True)
        assert model.num_layers == 2


# ---------------------------------------------------------------- what is refused, in one line
@pytest.mark.parametrize("build, words", [
    (lambda: [TAGConv(8, 8, K=3), GCNConv(8, 4)], "write each hop as a layer"),
    (lambda: [GCNConv(8, 8), SAGEConv(8, 4)], "every convolution to be a normalizing GCNConv or none"),
    (lambda: [GCNConv(8, 8, improved=True), GCNConv(8, 4)], "improved=False"),
    (lambda: [SAGEConv(-1, 8), SAGEConv(8, 4)], "input width"),
    (lambda: GCN(8, 8, 2, 4, norm="graph_norm"), r"a BatchNorm, a LayerNorm \(mode 'node' or 'graph'\) or none "
                                                 r"between the convolutions \(got GraphNorm.*\): use one of those"),
])
def test_convs_that_cannot_be_adapted_are_refused(build, words):
    with pytest.raises(InputError, match=words):
        from_pyg(build())


@pytest.mark.parametrize("build, words", [
    (lambda: [GATConv(8, 4, heads=2, dropout=0.3), GATConv(8, 4)], None),  # attention dropout: keyed by edge
    (lambda: GAT(8, 8, 2, 4, dropout=0.3), None),  # PyG's GAT puts its dropout into every GATConv: keyed too
    (lambda: GraphSAGE(8, 8, 2, 4, norm="batch_norm"), None),  # BatchNorm between the convs: fine
    (lambda: GIN(8, 8, 2, 4, norm="batch_norm"), "no BatchNorm inside GINConv"),  # PyG puts it in the MLP too
    (lambda: [GINConv(nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8))), GINConv(nn.Linear(8, 4))],
     "no BatchNorm inside GINConv"),
    (lambda: [GINConv(nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.2))), GINConv(nn.Linear(8, 4))],
     "no dropout inside GINConv"),
])
def test_randomness_and_statistics_inside_a_conv_are_refused_across_processes(build, words):
    model = from_pyg(build())
    check_model(model, distributed=False)  # one process: PyG's own draws and statistics are the reference
    if words is None:
        check_model(model, distributed=True)
        return
    with pytest.raises(InputError, match=words):
        check_model(model, distributed=True)


# ---------------------------------------------------------------- the contract, checked
class WrongRows(GraphLayer):
    def __init__(self):
        super().__init__()
        self.in_width, self.lin = 4, Linear(4, 3)

    def compute(self, block, h, h0=None):
        return self.lin(h)  # every src row: the halo rows too


class ReadsByPosition(WrongRows):
    def compute(self, block, h, h0=None):
        return self.lin(h[: block.num_dst] + h[-1])  # the last src row, whatever node it is


class ReadsTheBlock(WrongRows):
    def compute(self, block, h, h0=None):
        from fullgraph.ops import spmm

        return self.lin(spmm(block.adj, h))


def model_of(layer) -> GNN:
    model = GNN()
    model.norm = "mean"
    model.layers = nn.ModuleList([layer])
    return model


@pytest.mark.parametrize("layer, words", [
    (WrongRows(), "layer 0 \\(WrongRows\\) to return one row per dst node"),
    (ReadsByPosition(), "layer 0 \\(ReadsByPosition\\) to give the same dst rows when the halo rows"),
])
def test_a_layer_that_breaks_the_contract_is_refused_naming_it(layer, words):
    with pytest.raises(InputError, match=words):
        check_model(model_of(layer), distributed=False)


def test_a_layer_that_keeps_the_contract_passes():
    check_model(model_of(ReadsTheBlock()), distributed=True)
