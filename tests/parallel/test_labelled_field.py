"""One process on a typed graph's node task computes only the labelled types' rows in the last layer
(``parallel.prune.labelled_field``), and that changes neither the loss nor a gradient.

The reference is written out here, independent of the pruning code: the model on the whole graph's
block (``model(engine.block, engine.x)``, every row of every layer), the labelled training rows picked
from its output by ``train_mask``, cross-entropy averaged over them, under the same keyed dropout masks.
Tolerances: the loss LOSSES_REORDERED, the gradients DENSE_REFERENCE_GRADS (tests/_equality.py): the last
layer's products run over fewer rows, so a kernel may sum them in another order; where the labelled type
does not come first, its rows are also renumbered and each row's entries sorted again.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from fullgraph.data.typed import typed_graph
from fullgraph.models import build_model
from fullgraph.models.spec import SPECS
from fullgraph.ops.dropout import keyed_dropout
from fullgraph.parallel.engine import SingleEngine
from fullgraph.tasks import NodeTask

from tests._equality import DENSE_REFERENCE_GRADS, LOSSES_REORDERED, assert_same, assert_same_state

PAPERS, AUTHORS, VENUES = 40, 30, 6


def small_typed(order: tuple[str, ...]):
    """Papers (labelled, sparse features), authors (dense), venues (none), their ids given in ``order``."""
    rng = np.random.default_rng(0)
    counts = {"paper": PAPERS, "author": AUTHORS, "venue": VENUES}
    edges = {("paper", "by", "author"): (rng.integers(0, PAPERS, 90), rng.integers(0, AUTHORS, 90)),
             ("paper", "at", "venue"): (np.arange(PAPERS), rng.integers(0, VENUES, PAPERS))}
    features = {"paper": rng.standard_normal((PAPERS, 7)).astype(np.float32),
                "author": rng.standard_normal((AUTHORS, 5)).astype(np.float32)}
    perm = rng.permutation(PAPERS)
    return typed_graph({t: counts[t] for t in order}, features, edges, ("paper", rng.integers(0, 3, PAPERS)),
                       {"train": perm[:15], "val": perm[15:25], "test": perm[25:]}, name="small-typed")


def engine_and_model(graph, model: str, task=None):
    engine = SingleEngine(graph, SPECS[model].norm)
    engine.task = task or NodeTask()
    torch.manual_seed(0)
    m = build_model(model, graph.num_features, graph.num_classes, node_types=graph.node_types, layers=2, hidden=8,
                    heads=2, dropout=0.5)
    return engine, m


@pytest.mark.parametrize("order", [("paper", "author", "venue"), ("author", "venue", "paper")],
                         ids=["labelled-first", "labelled-last"])
@pytest.mark.parametrize("model", ["rgcn", "hgt"])
def test_the_last_layer_computes_the_labelled_rows_alone_with_the_same_loss_and_gradients(model, order):
    graph = small_typed(order)
    engine, m = engine_and_model(graph, model)
    nodes = PAPERS + AUTHORS + VENUES
    t = graph.node_types
    lo = t.offsets[t.index("paper")]
    src, dst = graph.edges()
    papers = (dst >= lo) & (dst < lo + PAPERS)
    read = torch.unique(torch.cat([src[papers], torch.arange(lo, lo + PAPERS)])).numel()
    assert read < nodes  # an author of no paper: no layer needs its row
    assert engine.rows_computed(m) == [read, PAPERS]  # the papers and what they read below, the papers alone on top
    ref = copy.deepcopy(m)
    m.train(), ref.train()
    with keyed_dropout(0, 3):
        out = engine.forward(m, 3, training=True)
        assert out.shape[0] == PAPERS
        loss = engine.task.loss(engine, m, out, 3, 0)
        full = ref(engine.block, engine.x)  # the reference: every row of every layer
        want = F.cross_entropy(full[engine.train_mask], engine.y[engine.train_mask])
    loss.backward(), want.backward()
    assert_same(loss.detach(), want.detach(), LOSSES_REORDERED, "loss")
    assert_same_state({k: p.grad for k, p in m.named_parameters()}, {k: p.grad for k, p in ref.named_parameters()},
                      DENSE_REFERENCE_GRADS, "gradients")
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in m.layers.parameters())
    with torch.no_grad():  # evaluation still computes every row (predict writes them all)
        assert engine.forward(m, 0, training=False).shape[0] == nodes


def test_links_and_graphs_of_one_labelled_type_compute_every_row():
    graph = small_typed(("paper", "author", "venue"))
    engine, m = engine_and_model(graph, "rgcn", SimpleNamespace(name="link", joins_rows=True))  # (what it reads)
    assert engine.rows_computed(m) is None  # a link's score reads any type's output rows
    with keyed_dropout(0, 1):
        assert engine.forward(m, 1, training=True).shape[0] == graph.num_nodes
