"""Residual connections (``from_pyg(residual=True)``), jumping knowledge (PyG's ``BasicGNN(jk=...)``) and
PyG's ``LayerNorm(mode='graph')`` in one process, against plain PyG on the whole graph.

The reference is PyG itself: the same PyG objects run by PyG (``model(x, edge_index)``), or, for the
residual, the same convs written out as a plain PyG module (``conv(x, ei) + res(x)``), which shares
no code with the adapter. Forward and gradients: FLOAT32_CHAINED (the adapter sums on the block's
sparse kernel, PyG by scatter). Training: fullgraph's trainer against a plain PyG loop (Adam, mean
cross-entropy over the training nodes, no dropout: PyG's draws are not keyed) from the same initial
weights, over EPOCHS epochs: LOSSES_REORDERED and WEIGHTS_REORDERED (tests/_equality.py says why).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import GATConv, SAGEConv
from torch_geometric.nn.models import GCN, GraphSAGE

from fullgraph.config import TrainConfig
from fullgraph.data.synthetic import planted_partition
from fullgraph.errors import InputError
from fullgraph.models import as_gnn, from_pyg
from fullgraph.models.contract import check_model
from fullgraph.ops import Block
from fullgraph.parallel.engine import input_features
from fullgraph.train.trainer import Trainer

from tests._equality import FLOAT32_CHAINED, assert_same, assert_same_losses, assert_same_state

EPOCHS = 10


@pytest.fixture(autouse=True)
def _one_thread():
    """Small graphs: one thread is fastest, and a loaded machine's spinning OpenMP workers are avoided
    (``tests/conftest.py`` puts the count back after each test)."""
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    """400 nodes, 32 dense features, 4 classes: a few milliseconds an epoch, PyG's and ours."""
    return planted_partition(num_nodes=400, num_classes=4, num_features=32, seed=0)


def edge_index(graph) -> torch.Tensor:
    dst = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.indptr.diff())
    return torch.stack([graph.indices, dst])


class PlainResidual(nn.Module):
    """The residual model as one writes it in plain PyG: ``x = conv(x) + res(x)``, ReLU between."""

    def __init__(self, convs, res):
        super().__init__()
        self.convs, self.res = nn.ModuleList(convs), nn.ModuleList(res)

    def forward(self, x, ei):
        for i, (conv, res) in enumerate(zip(self.convs, self.res)):
            x = conv(x, ei) + res(x)
            x = x.relu() if i < len(self.convs) - 1 else x
        return x


def residual_pair(F_in: int, C: int):
    """``from_pyg(convs, residual=True)`` and the same model in plain PyG, from the same initial weights
    (widths F → 16 → 16 → C: a projection, an identity, a projection)."""
    torch.manual_seed(0)
    convs = [SAGEConv(F_in, 16), SAGEConv(16, 16), SAGEConv(16, C)]
    ours = from_pyg(convs, residual=True)
    ref = PlainResidual(copy.deepcopy(convs), [copy.deepcopy(layer.res) for layer in ours.layers])
    return ours, ref


def basic_pair(build):
    torch.manual_seed(0)
    pyg = build()
    return from_pyg(copy.deepcopy(pyg)), pyg


BASIC = {
    "GraphSAGE-jk-cat": lambda F, C: GraphSAGE(F, 16, 3, C, jk="cat"),
    "GraphSAGE-jk-max": lambda F, C: GraphSAGE(F, 16, 3, C, jk="max"),
    "GraphSAGE-jk-lstm": lambda F, C: GraphSAGE(F, 16, 2, C, jk="lstm"),
    "GCN-jk-last": lambda F, C: GCN(F, 16, 2, C, jk="last"),
    "GraphSAGE-graph-layernorm": lambda F, C: GraphSAGE(F, 16, 3, C, norm="layer_norm"),  # PyG's mode='graph'
}


def pair(name: str, graph):
    if name == "residual":
        return residual_pair(graph.num_features, graph.num_classes)
    return basic_pair(lambda: BASIC[name](graph.num_features, graph.num_classes))


PLACES = {"convs": "conv", "norms": "norm", "res": "res"}


def our_name(name: str) -> str:
    """A parameter of the adapted model by its plain PyG name (``convs.1.lin_l.weight`` ->
    ``layers.1.conv.lin_l.weight``; ``norms``, ``res`` likewise; ``jk`` and ``lin`` as they are)."""
    head, _, rest = name.partition(".")
    if head not in PLACES:
        return name
    i, _, tail = rest.partition(".")
    return f"layers.{i}.{PLACES[head]}.{tail}"


def renamed(state: dict) -> dict:
    return {our_name(k): v for k, v in state.items()}


NAMES = ["residual", *BASIC]


@pytest.mark.parametrize("name", NAMES)
def test_forward_and_gradients_equal_pyg(cora, tiny, name):
    """On Cora's sparse features for the residual (the first projection multiplies them as they are),
    on the tiny graph for the others."""
    graph = cora if name == "residual" else tiny
    ours, ref = pair(name, graph)
    ours.eval(), ref.eval()
    x, ei = graph.dense_x(), edge_index(graph)
    block = Block.from_graph(graph, ours.norm)
    assert_same(ours(block, input_features(graph.x)), ref(x, ei), FLOAT32_CHAINED, f"{name} logits")
    grads = {}
    for label, model, run in (("pyg", ref, lambda: ref(x, ei)), ("ours", ours,
                              lambda: ours(block, input_features(graph.x)))):
        (run().log_softmax(1)[graph.train_mask].sum()).backward()
        grads[label] = {n: p.grad for n, p in model.named_parameters()}
    assert_same_state(grads["ours"], renamed(grads["pyg"]), FLOAT32_CHAINED, f"{name} gradients")


def train_plain_pyg(model, graph, epochs: int) -> list[float]:
    """Full-graph training as a PyG user writes it (fullgraph's defaults: Adam lr 0.01, weight decay 5e-4)."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    x, ei, y, train = graph.dense_x(), edge_index(graph), graph.y, graph.train_mask
    losses = []
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, ei)[train], y[train])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name", ["residual", "GraphSAGE-jk-cat", "GraphSAGE-jk-max", "GraphSAGE-jk-lstm",
                                  "GraphSAGE-graph-layernorm"])
def test_one_process_trains_as_plain_pyg(tiny, name):
    ours, ref = pair(name, tiny)
    cfg = TrainConfig.of(epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01, progress="none", threads=1)
    trainer = Trainer(cfg, tiny, model=ours)
    result = trainer.build().train()
    want = train_plain_pyg(ref, tiny, EPOCHS)
    assert_same_losses(result.losses, want, what=f"{name} losses against plain PyG")
    assert_same_state(dict(ours.named_parameters()), renamed(dict(ref.named_parameters())),
                      what=f"{name} weights against plain PyG")


def test_residual_is_an_identity_where_the_widths_agree_and_a_projection_where_not():
    model = from_pyg([SAGEConv(8, 16), SAGEConv(16, 16), GATConv(16, 4, heads=2)], residual=True)
    kinds = [type(layer.res).__name__ for layer in model.layers]
    assert kinds == ["Linear", "Identity", "Linear"]
    assert model.layers[0].res.bias is None and model.layers[2].res.weight.shape == (8, 16)
    assert all(layer.res is None for layer in from_pyg([SAGEConv(8, 16), SAGEConv(16, 4)]).layers)


def test_a_residual_on_a_conv_that_has_its_own_is_refused():
    with pytest.raises(InputError, match=r"one residual per layer .*GATConv\(residual=True\).*set one of them"):
        from_pyg([GATConv(8, 4, residual=True), GATConv(4, 4)], residual=True)


def test_jumping_knowledge_reads_every_layer_and_passes_the_contract():
    for jk in ("cat", "max", "lstm"):
        model = from_pyg(GraphSAGE(8, 16, 3, 4, jk=jk))
        assert model.reads_every_layer and model.post_modules[-1] == "lin"
        check_model(model, distributed=True)
    last = from_pyg(GraphSAGE(8, 16, 3, 4, jk="last"))
    assert not last.reads_every_layer and last.post_modules == ("lin",)


def test_jumping_knowledge_with_prune_equals_it_without(tiny):
    """--prune cuts each layer to the rows the loss reads; every layer's output is then cut to the last
    layer's rows, its first rows in each (parallel.prune): the same losses."""
    runs = {}
    for prune in (False, True):
        torch.manual_seed(0)
        model = from_pyg(GraphSAGE(tiny.num_features, 16, 3, tiny.num_classes, jk="cat", dropout=0.5))
        cfg = TrainConfig.of(epochs=5, eval_every=5, seed=0, prune=prune, progress="none", threads=1)
        runs[prune] = Trainer(cfg, tiny, model=model).build().train().losses
    assert_same_losses(runs[True], runs[False], what="jk=cat with --prune")


def test_a_whole_graph_layernorm_is_refused_with_prune_in_one_line(tiny):
    torch.manual_seed(0)
    model = from_pyg(GraphSAGE(tiny.num_features, 16, 2, tiny.num_classes, norm="layer_norm"))
    cfg = TrainConfig.of(epochs=1, seed=0, prune=True, progress="none", threads=1)
    with pytest.raises(InputError, match=r"without statistics over all nodes .*LayerNorm\(mode='graph'\)\) with "
                                         r"--prune .*leave out --prune"):
        Trainer(cfg, tiny, model=model).build().train()  # refused as the pruning is set up, before an epoch


def docs_example(heading: str) -> dict:
    """The first Python block under ``heading`` in docs/your-model.md, run: its names."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "your-model.md").read_text()
    after = text[text.index(heading):]
    code = after[after.index("```python\n") + len("```python\n"):]
    names: dict = {}
    exec(compile(code[:code.index("```")], "docs/your-model.md", "exec"), names)  # noqa: S102 - our own docs
    return names


def test_the_pre_and_post_example_of_the_docs_trains(tiny):
    build = docs_example("## Your own `pre` and `post`")["build"]
    torch.manual_seed(0)
    model = build(tiny.num_features, tiny.num_classes, hidden=16)
    check_model(model, distributed=True)
    assert model.stage_parameters(0, 0, with_pre=True, with_post=True) == [
        *model.encoder.parameters(), *model.head.parameters()]
    cfg = TrainConfig.of(epochs=5, eval_every=5, seed=0, progress="none", threads=1)
    losses = Trainer(cfg, tiny, model=model).build().train().losses
    assert losses[-1] < losses[0]


def test_the_builders_of_the_docs_build():
    names = docs_example("## PyG convolutions, unchanged")
    for fn in ("build", "build_jk", "build_gat", "build_res"):
        check_model(as_gnn(names[fn](12, 3)), distributed=True)
