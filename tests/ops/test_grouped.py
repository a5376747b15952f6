"""``ops.grouped.grouped_linear`` against autograd's own split, products and ``cat``, and the groups a
block hands it (``Block.relation_groups``) against the rows ``Block.relation_reads`` lists.

Tolerance: float64 throughout, the same products in the same order: exact up to the summation order of
a gradient that several groups add into one input row (``addmm_`` against autograd's accumulation), so
1e-12.
"""

import pytest
import torch

from fullgraph.ops import Block, SparseOp
from fullgraph.ops.edge_data import EdgeData
from fullgraph.ops.grouped import grouped_linear

TOL = 1e-12


def reference(inputs, groups, weight, bias):
    rows = [inputs[i][a:b] @ weight[g] + (0 if bias is None else bias[g]) for g, (i, a, b) in enumerate(groups)]
    return torch.cat(rows)


GROUPS = {
    "tiled": [(0, 0, 3), (0, 3, 3), (0, 3, 9)],           # a type per group, one of them empty
    "reread": [(0, 0, 9), (1, 0, 4), (0, 2, 6), (1, 4, 7)],  # rows of the first input read twice; a gather's runs
}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kind", sorted(GROUPS))
def test_grouped_linear_equals_split_products_and_cat(kind, bias):
    torch.manual_seed(0)
    groups = GROUPS[kind]
    inputs = (torch.randn(9, 5, dtype=torch.float64, requires_grad=True),
              torch.randn(7, 5, dtype=torch.float64, requires_grad=True))
    wide = torch.randn(len(groups), 5, 12, dtype=torch.float64, requires_grad=True)
    weight = wide[:, :, 4:8]  # a column slice, as HGT's query map is of its [F, 3F] weight
    b = torch.randn(len(groups), 4, dtype=torch.float64, requires_grad=True) if bias else None
    out = grouped_linear(inputs, groups, weight, b)
    ref = reference(inputs, groups, weight, b)
    assert torch.allclose(out, ref, atol=TOL, rtol=0)
    g = torch.randn_like(out)
    leaves = [*inputs, wide] + ([b] if bias else [])
    got = torch.autograd.grad(out, leaves, g, allow_unused=True)
    want = torch.autograd.grad(ref, leaves, g, allow_unused=True)
    for name, x, y in zip(("input 0", "input 1", "weight", "bias"), got, want):
        if y is None:  # an input no group reads: no gradient either way
            assert x is None or not x.any(), name
            continue
        assert torch.allclose(x, y, atol=TOL, rtol=0), name


def test_grouped_linear_gradcheck():
    torch.manual_seed(1)
    inputs = (torch.randn(6, 3, dtype=torch.float64, requires_grad=True),
              torch.randn(4, 3, dtype=torch.float64, requires_grad=True))
    groups = [(0, 0, 6), (1, 0, 2), (0, 1, 4), (1, 2, 4)]
    weight = torch.randn(4, 3, 2, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b, w, c: grouped_linear((a, b), groups, w, c),
                                    (*inputs, weight, bias))


def test_grouped_linear_under_autocast_runs_in_its_dtype():
    x, w, b = torch.randn(6, 4), torch.randn(2, 4, 3, requires_grad=True), torch.randn(2, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = grouped_linear((x,), [(0, 0, 2), (0, 2, 6)], w, b)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert w.grad.dtype == torch.float32


def typed_block(src, dst, rel, n):
    """A block over ``n`` nodes whose entries ``src -> dst`` carry relations ``rel`` (CSR by dst)."""
    order = torch.argsort(dst * n + src)
    src, dst, rel = src[order], dst[order], rel[order]
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.bincount(dst, minlength=n).cumsum(0)
    ones = torch.ones(src.numel())
    edata = EdgeData(eid=torch.arange(src.numel()), type=rel, num_relations=int(rel.max()) + 1)
    block = Block(SparseOp(indptr, src, ones, (n, n), symmetric=False), "relation-mean", edata=edata)
    return block


def test_relation_groups_read_the_rows_relation_reads_lists():
    """Relation 0 reads nodes 0..3 (a run), relation 1 nodes 1, 5, 9 (a gather), relation 2 none, relation 3
    every src row's worth (past nine tenths of them: no compact list)."""
    n = 12
    src = torch.tensor([0, 1, 2, 3, 1, 5, 9] + list(range(12)))
    dst = torch.tensor([4, 5, 6, 7, 0, 1, 2] + [(v + 1) % 12 for v in range(12)])
    rel = torch.tensor([0, 0, 0, 0, 1, 1, 1] + [3] * 12)
    block = typed_block(src, dst, rel, n)
    index, groups = block.relation_groups(4)
    assert groups == [(0, 0, 4), (1, 0, 3), (0, 0, 12)]
    assert index.tolist() == [1, 5, 9]
    h = torch.randn(n, 2)
    inputs = (h, h[index])
    stacked = torch.cat([inputs[i][a:b] for i, a, b in groups])
    reads, sizes = block.relation_reads(4)
    parts = iter(h[reads].split(sizes))
    expected = torch.cat([h if rel[1] is None else next(parts) for rel in block.relation_ops(4) if rel is not None])
    assert torch.equal(stacked, expected)
