"""One pair of nodes joined by several relations (issue 60 §1): an edge is ``(src, dst, relation)``.

The graph: papers and authors where about two thousand (paper, author) pairs are in both ``writes``
and ``reviews``, and papers cite papers. The reference is PyG's ``RGCNConv`` on the same typed edge
list (its own per-relation mean, independent of our CSR and ``relation-mean`` values), in float64,
so the bound is FLOAT64_REORDER (the same float64 sums in another order; the block's float32
relation-mean values are checked against float64 counts, then used in float64). Training under
the layouts is checked against one process in tests/parallel/test_multi_relation_layouts.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fullgraph.data.preprocess import symmetrize
from fullgraph.data.typed import typed_graph
from fullgraph.models import build_model
from fullgraph.ops import Block, SparseOp
from fullgraph.ops.csr import row_ids

from tests._equality import FLOAT32_FEW_OPS, FLOAT64_REORDER, assert_same


def two_relation_graph(seed: int = 0, papers: int = 300, authors: int = 200, pairs: int = 3000, both: int = 2000):
    """Papers (features) and authors (none): ``writes`` on ``pairs`` random pairs, ``reviews`` on
    ``both`` of them plus as many others, ``cites`` among papers; reverse relations added."""
    rng = np.random.default_rng(seed)
    key = rng.choice(papers * authors, pairs, replace=False)
    p, a = key // authors, key % authors
    other = rng.choice(np.setdiff1d(np.arange(papers * authors), key), both, replace=False)
    rp = np.concatenate([p[:both], other // authors])
    ra = np.concatenate([a[:both], other % authors])
    cites = rng.integers(0, papers, (2, 4 * papers))
    cites = cites[:, cites[0] != cites[1]]
    edges = {("paper", "writes", "author"): (p, a), ("paper", "reviews", "author"): (rp, ra),
             ("paper", "cites", "paper"): (cites[0], cites[1])}
    perm = rng.permutation(papers)
    return typed_graph({"paper": papers, "author": authors}, {"paper": rng.standard_normal((papers, 6)).astype(np.float32)},
                       edges, ("paper", rng.integers(0, 3, papers)),
                       {"train": perm[: papers // 2], "val": perm[papers // 2 : 3 * papers // 4],
                        "test": perm[3 * papers // 4 :]}, name="two-relations")


@pytest.fixture(scope="module")
def graph():
    return two_relation_graph()


def test_a_pair_in_two_relations_is_two_edges(graph):
    t = graph.node_types
    src, dst = graph.edges()
    pairs = src * graph.num_nodes + dst
    writes, reviews = t.relations.index(("paper", "writes", "author")), t.relations.index(("paper", "reviews", "author"))
    both = np.intersect1d(pairs[graph.edge_type == writes].numpy(), pairs[graph.edge_type == reviews].numpy())
    assert both.size == 2000  # every shared pair kept in each relation, and its reverse in each reverse relation
    assert int((graph.edge_type == t.relations.index(("author", "rev_writes", "paper"))).sum()) == 3000
    assert symmetrize(graph).num_edges == graph.num_edges  # already symmetric, triple by triple


def test_a_repeated_triple_is_kept_once_and_two_relations_twice():
    from fullgraph.data.graph import Graph

    fields = dict(x=torch.ones(3, 1), y=torch.tensor([0, 1, 0]), train_mask=torch.tensor([1, 0, 0]).bool(),
                  val_mask=torch.tensor([0, 1, 0]).bool(), test_mask=torch.tensor([0, 0, 1]).bool())
    g = Graph.from_edges(torch.tensor([0, 0, 0, 2]), torch.tensor([1, 1, 1, 1]), 3,
                         edge_type=torch.tensor([1, 0, 1, 0]), **fields)
    assert g.edges()[0].tolist() == [0, 0, 2] and g.edge_type.tolist() == [0, 1, 0]  # row 1 by (src, relation)
    s = symmetrize(g)
    assert s.num_relations == 4 and s.num_edges == 6
    assert sorted(zip(*[t.tolist() for t in s.edges()], s.edge_type.tolist())) == [
        (0, 1, 0), (0, 1, 1), (1, 0, 2), (1, 0, 3), (1, 2, 2), (2, 1, 0)]
    assert symmetrize(s).num_edges == 6 and symmetrize(s).num_relations == 4  # twice is once


@pytest.mark.parametrize("decomposition,bases", [("none", 0), ("bases", 2)])
def test_rgcn_on_two_relation_pairs_equals_pygs_rgcnconv_in_float64(graph, decomposition, bases):
    pyg = pytest.importorskip("torch_geometric.nn")
    torch.manual_seed(0)
    model = build_model("rgcn", graph.num_features, graph.num_classes, node_types=graph.node_types, layers=2,
                        hidden=8, dropout=0.0, rgcn_decomposition=decomposition, rgcn_bases=bases).double()
    layer = model.layers[0]
    layer.last = True  # the sum itself, before the ReLU a hidden layer applies (RGCNConv applies none)
    conv = pyg.RGCNConv(8, 8, graph.node_types.num_relations, num_bases=bases or None, aggr="mean").double()
    with torch.no_grad():
        if decomposition == "bases":
            conv.weight.copy_(layer.basis)
            conv.comp.copy_(layer.comp)
        else:
            conv.weight.copy_(layer.rel_weight)
        conv.root.copy_(layer.root)
        conv.bias.copy_(layer.bias)
    b = Block.from_graph(graph, model.norm)
    rows = row_ids(b.adj.indptr)  # relation-mean's float32 reciprocals, recounted in float64 for this check
    key = rows * graph.num_relations + b.edge_type
    values = 1.0 / torch.bincount(key, minlength=graph.num_nodes * graph.num_relations).double()[key]
    assert_same(values, b.adj.values.double(), FLOAT32_FEW_OPS, "relation-mean values")
    block = Block(SparseOp(b.adj.indptr, b.adj.indices, values, b.adj.shape), b.norm, edata=b.edata)
    h = torch.randn(graph.num_nodes, 8, dtype=torch.float64, requires_grad=True)
    h2 = h.detach().clone().requires_grad_(True)
    ours = layer(block, h)
    src, dst = graph.edges()
    theirs = conv(h2, torch.stack([src, dst]), graph.edge_type)
    assert_same(ours, theirs, FLOAT64_REORDER, f"R-GCN layer on two-relation pairs ({decomposition})")
    g = torch.randn_like(ours)
    (ours * g).sum().backward()
    (theirs * g).sum().backward()
    assert_same(h.grad, h2.grad, FLOAT64_REORDER, "input gradient")
    weight = layer.basis if decomposition == "bases" else layer.rel_weight
    assert_same(weight.grad, conv.weight.grad, FLOAT64_REORDER, "relation weights' gradient")


def test_a_relation_keeps_row_pointers_of_the_rows_it_writes_only(graph):
    """A knowledge graph's 1,070 relations must not each hold a row pointer of every dst row (that was
    21 GB at ogbl-wikikg2's size): a relation's operator spans the rows it writes (and reads) only."""
    block = Block.from_graph(graph, "relation-mean")
    ops = block.relation_ops(graph.num_relations)
    src, dst = graph.edges()
    written = [int(dst[graph.edge_type == r].unique().numel()) for r in range(graph.num_relations)]
    for r, (op, cols, rows) in enumerate(ops):
        assert rows is not None and torch.equal(rows, dst[graph.edge_type == r].unique())
        assert op.indptr.numel() == written[r] + 1 and op.shape[1] == int(src[graph.edge_type == r].unique().numel())
    assert sum(op.indptr.numel() for op, _, _ in ops) == sum(written) + graph.num_relations < 3 * graph.num_nodes


def _backward_nodes(out: torch.Tensor) -> list[str]:
    seen, todo, names = set(), [out.grad_fn], []
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        names.append(type(fn).__name__)
        todo.extend(f for f, _ in fn.next_functions)
    return names


def test_a_layer_gathers_every_relations_rows_once(graph):
    """Backward of a gather per relation makes a zero-filled gradient of the whole input per relation, and
    of a weight picked by index a zero ``[R, d_in, d_out]`` per relation: with a knowledge graph's 1,070
    relations that was 27 s and an 11.7 GB peak (glibc kept the freed blocks) where one gather and one
    unbind take 2.6 s and 1.7 GB (benchmarks/README.md, 'Typed links at scale')."""
    model = build_model("rgcn", graph.num_features, graph.num_classes, node_types=graph.node_types, layers=2,
                        hidden=8, dropout=0.0, rgcn_decomposition="bases", rgcn_bases=2)
    block = Block.from_graph(graph, model.norm)
    out = model.layers[0](block, torch.randn(graph.num_nodes, 8, requires_grad=True))
    names = _backward_nodes(out)
    compact = sum(rel[1] is not None for rel in block.relation_ops(graph.num_relations))
    assert compact >= 2  # the relations that read one type's rows gather them
    assert names.count("IndexSelectBackward0") == 1 and "SelectBackward0" not in names
