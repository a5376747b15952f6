"""The built-in R-GCN against PyG's ``RGCNConv`` (an independent implementation of the same layer), its
per-type input against a linear map per type, and what every model owes the layouts (same bits on the
same seed, the same losses with ``--recompute``, stage parameters that cover the model once).

Tolerances: FLOAT32_CHAINED for a layer against PyG's (a few float32 products and sums in another
order); exact equality where the same code runs twice."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.config import TrainConfig
from fullgraph.data.typed import typed_graph
from fullgraph.errors import InputError
from fullgraph.models import build_model
from fullgraph.ops import Block
from fullgraph.train.trainer import Trainer

from tests._equality import FLOAT32_CHAINED, assert_same, assert_same_losses


def small_typed(seed: int = 0, reverse: bool = True):
    """Three types (paper 40 with sparse features, author 30 with dense ones, venue 6 without), two
    relations between types and one within papers, labels and splits on papers."""
    rng = np.random.default_rng(seed)
    pf = sp.random(40, 12, density=0.3, random_state=seed, format="csr", dtype=np.float32)
    af = rng.standard_normal((30, 5)).astype(np.float32)
    edges = {("paper", "by", "author"): (rng.integers(0, 40, 90), rng.integers(0, 30, 90)),
             ("paper", "at", "venue"): (np.arange(40), rng.integers(0, 6, 40)),
             ("paper", "cites", "paper"): (rng.integers(0, 40, 60), rng.integers(0, 40, 60))}
    cites = edges["paper", "cites", "paper"]
    edges["paper", "cites", "paper"] = (cites[0][cites[0] != cites[1]], cites[1][cites[0] != cites[1]])  # no loops
    perm = rng.permutation(40)
    return typed_graph({"paper": 40, "author": 30, "venue": 6}, {"paper": pf, "author": af}, edges,
                       ("paper", rng.integers(0, 3, 40)), {"train": perm[:15], "val": perm[15:25], "test": perm[25:]},
                       name="small-typed", reverse=reverse)


@pytest.fixture(scope="module")
def typed():
    return small_typed()


def build(graph, **kw):
    opts = dict(layers=2, hidden=8, dropout=0.0) | kw
    return build_model("rgcn", graph.num_features, graph.num_classes, node_types=graph.node_types, **opts)


def test_typed_graph_numbers_nodes_by_type_and_adds_reverse_relations(typed):
    t = typed.node_types
    assert t.offsets == (0, 40, 70, 76) and t.widths == (12, 5, 0) and t.column_offsets == (0, 12, 17, 17)
    names = [r[1] for r in t.relations]
    assert names == ["by", "at", "cites", "rev_by", "rev_at"]  # cites stays one relation, made symmetric
    src, dst = typed.edges()
    for r, (s, _, d) in enumerate(t.relations):
        sel = typed.edge_type == r
        assert bool((t.type_of(src[sel]) == t.index(s)).all()) and bool((t.type_of(dst[sel]) == t.index(d)).all())
    assert int((typed.y[40:] >= 0).sum()) == 0 and not bool(typed.train_mask[40:].any())


@pytest.mark.parametrize("decomposition,bases", [("none", 0), ("bases", 2), ("blocks", 2)])
def test_a_layer_equals_pygs_rgcnconv(typed, decomposition, bases):
    """Our layer on the typed block against ``RGCNConv(aggr="mean")`` with the same weights (their
    shapes are PyG's: ``[R, in, out]``, bases ``[B, in, out]`` with ``comp [R, B]``, blocks
    ``[R, B, in/B, out/B]``), gradients too."""
    pyg = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    model = build(typed, rgcn_decomposition=decomposition, rgcn_bases=bases)
    layer = model.layers[0]
    layer.last = True  # the sum itself, before the ReLU a hidden layer applies (RGCNConv applies none)
    R = typed.node_types.num_relations
    conv = pyg.RGCNConv(8, 8, R, num_bases=bases if decomposition == "bases" else None,
                        num_blocks=bases if decomposition == "blocks" else None, aggr="mean")
    with torch.no_grad():
        if decomposition == "bases":
            conv.weight.copy_(layer.basis)
            conv.comp.copy_(layer.comp)
        else:
            conv.weight.copy_(layer.blocks if decomposition == "blocks" else layer.rel_weight)
        conv.root.copy_(layer.root)
        conv.bias.copy_(layer.bias)
    block = Block.from_graph(typed, model.norm)
    h = torch.randn(typed.num_nodes, 8, requires_grad=True)
    h2 = h.detach().clone().requires_grad_(True)
    ours = layer(block, h)
    src, dst = typed.edges()
    theirs = conv(h2, torch.stack([src, dst]), typed.edge_type)
    assert_same(ours, theirs, FLOAT32_CHAINED, f"R-GCN layer ({decomposition})")
    ours.square().sum().backward()
    theirs.square().sum().backward()
    assert_same(h.grad, h2.grad, FLOAT32_CHAINED, f"R-GCN input gradient ({decomposition})")


def test_the_input_maps_each_type_by_its_own_weights(typed):
    """``pre`` equals, row by row, the type's own linear map of its own features (its column block and
    bias), or the type's embedding row alone (no type bias beside a table: issue 61 §2, ``models.typed``);
    ``zeros`` leaves a featureless type its bias only."""
    torch.manual_seed(0)
    model = build(typed)
    inp, t = model.input, typed.node_types
    with torch.no_grad():
        inp.bias.normal_()
    x = typed.dense_x()
    h = model.pre(_sparse(typed.x))
    cols = t.column_offsets
    paper = x[:40, cols[0]:cols[1]] @ inp.weight[cols[0]:cols[1]] + inp.bias[0]
    author = x[40:70, cols[1]:cols[2]] @ inp.weight[cols[1]:cols[2]] + inp.bias[1]
    venue = inp.embedding
    assert_same(h, torch.cat([paper, author, venue]), FLOAT32_CHAINED, "per-type input")
    zeros = build(typed, featureless="zeros")
    assert zeros.input.embedding is None
    assert torch.equal(zeros.pre(_sparse(typed.x))[70:], zeros.input.bias[2].expand(6, -1))


@pytest.mark.parametrize("featureless, bound", [("embedding", lambda n, h: math.sqrt(6 / (n + h))),
                                                 ("one-hot", lambda n, h: 1 / math.sqrt(n))])
def test_a_featureless_types_table_is_drawn_over_its_own_shape(featureless, bound):
    """Issue 61 §3: the default drew every table within ±√(6 / 2·hidden) whatever the type's count, rows far
    larger than a Glorot draw of the table (0.43 against 0.035 for 5,000 nodes at 16), which let the model
    learn the training nodes by their own rows; now Glorot over ``[count, hidden]`` (``one-hot``: the bound
    ``torch.nn.Linear(count, hidden)`` draws within), each type over its own count."""
    from fullgraph.models.rgcn import TypedInput
    from fullgraph.ops.node_types import NodeTypes

    types = NodeTypes(("paper", "venue", "term"), (50, 5000, 300), (4, 0, 0),
                      (("paper", "at", "venue"), ("paper", "has", "term")), ("paper",))
    torch.manual_seed(0)
    table = TypedInput(types, 16, featureless).embedding.detach()
    for rows, n in ((table[:5000], 5000), (table[5000:], 300)):
        b = bound(n, 16)
        assert 0.95 * b < float(rows.abs().max()) <= b, (featureless, n, float(rows.abs().max()), b)


def _sparse(x):
    from fullgraph.parallel.engine import input_features

    return input_features(x)


def train(graph, **kw):
    cfg = TrainConfig.of(model="rgcn", layers=2, hidden=8, dropout=0.5, epochs=4, eval_every=4, seed=1,
                         progress="none", threads=1, **kw)
    trainer = Trainer(cfg, graph)
    result = trainer.build().train()
    return torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict()


def test_same_seed_same_bits_and_recompute_same_losses(typed):
    losses, state = train(typed)
    again, state_again = train(typed)
    assert torch.equal(losses, again) and all(torch.equal(v, state_again[k]) for k, v in state.items())
    recomputed, _ = train(typed, recompute=True)
    assert_same_losses(recomputed, losses, what="R-GCN losses with --recompute")
    assert float(losses[-1]) < float(losses[0])  # it learns


def test_stage_parameters_cover_the_model_once(typed):
    model = build(typed, layers=4)
    seen = [id(p) for s, (a, b) in enumerate([(0, 2), (2, 4)])
            for p in model.stage_parameters(a, b, with_pre=s == 0, with_post=s == 1)]
    assert sorted(seen) == sorted(id(p) for p in model.parameters())


def test_refusals_name_what_is_wrong(typed, cora):
    with pytest.raises(InputError, match="expected node types for --model rgcn"):
        build_model("rgcn", cora.num_features, cora.num_classes, layers=2, hidden=8, dropout=0.0)
    with pytest.raises(InputError, match="expected widths divisible by the 3 blocks"):
        build(typed, rgcn_decomposition="blocks", rgcn_bases=3)
    with pytest.raises(InputError, match="expected --rgcn-bases >= 1 with --rgcn-decomposition, bases|expected rgcn_bases"):
        TrainConfig.of(model="rgcn", rgcn_decomposition="bases")
    model = build(typed)
    with pytest.raises(InputError, match="expected edge types of the 5 relations R-GCN was built for .got no edge types"):
        model.check_edge_data(())
