"""The local kernels against plain dense PyTorch.

Tolerance: float32 sums of a few dozen terms of magnitude ~10 taken in a different order (CSR row
sums vs a dense matmul): FLOAT32_REORDER_WIDE (tests/_equality.py says why).
"""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.ops import SparseOp, gcn_layer, spmm

from tests._equality import FLOAT32_REORDER_WIDE as WIDE, assert_same


def random_op(n_rows, n_cols, density=0.2, seed=0, symmetric=False):
    rng = np.random.default_rng(seed)
    m = sp.random(n_rows, n_cols, density=density, random_state=rng, format="csr", dtype=np.float32)
    if symmetric:
        m = (m + m.T).tocsr()
    m.sort_indices()
    op = SparseOp(torch.from_numpy(m.indptr.astype(np.int64)), torch.from_numpy(m.indices.astype(np.int64)),
                  torch.from_numpy(m.data), m.shape, symmetric=None)
    return op, torch.from_numpy(m.toarray())


@pytest.mark.parametrize("symmetric", [False, True])
def test_spmm_forward_and_backward_match_dense(symmetric):
    n = 30
    op, dense = random_op(n, n if symmetric else 45, seed=1, symmetric=symmetric)
    assert op.symmetric == symmetric
    x = torch.randn(op.shape[1], 7, requires_grad=True)
    g = torch.randn(op.shape[0], 7)
    (spmm(op, x) * g).sum().backward()
    x2 = x.detach().clone().requires_grad_()
    ref = dense @ x2
    (ref * g).sum().backward()
    assert_same(spmm(op, x.detach()), ref, WIDE, "A x")
    assert_same(x.grad, x2.grad, WIDE, "gradient of x")


def test_transpose_and_with_values_share_structure():
    op, dense = random_op(20, 33, seed=2)
    torch.testing.assert_close(op.At.to_dense(), dense.t())
    vals = torch.randn(op.nnz)
    op2 = op.with_values(vals)
    ref = torch.sparse_csr_tensor(op.indptr, op.indices, vals, size=op.shape).to_dense()
    torch.testing.assert_close(op2.At.to_dense(), ref.t())
    assert op2._perm is op._perm


def test_rows_keeps_the_leading_dst_rows():
    op, dense = random_op(20, 20, seed=3)
    torch.testing.assert_close(op.rows(7).to_dense(), dense[:7])


def reference_gcn(dense_adj, h, w, b, relu, mask, p):
    z = dense_adj @ (h @ w) + b
    if relu:
        z = torch.relu(z)
        if mask is not None:
            z = z * mask / (1 - p)
    return z


@pytest.mark.parametrize("d_in,d_out", [(12, 5), (5, 12), (8, 8)])  # transform-first, aggregate-first, tie
@pytest.mark.parametrize("relu,p", [(False, 0.0), (True, 0.0), (True, 0.5)])
@pytest.mark.parametrize("rect", [False, True])
def test_fused_gcn_layer_matches_autograd(d_in, d_out, relu, p, rect):
    n_dst, n_src = (15, 25) if rect else (25, 25)
    op, dense = random_op(n_dst, n_src, density=0.3, seed=4)
    torch.manual_seed(0)
    h = torch.randn(n_src, d_in, requires_grad=True)
    w = torch.randn(d_in, d_out, requires_grad=True)
    b = torch.randn(d_out, requires_grad=True)
    gen = torch.Generator().manual_seed(7)
    out = gcn_layer(op, h, w, b, relu=relu, dropout=p, generator=gen)
    gout = torch.randn_like(out)
    (out * gout).sum().backward()

    mask = None
    if p:
        mask = (torch.rand(n_dst, d_out, generator=torch.Generator().manual_seed(7)) >= p).float()
    h2, w2, b2 = (t.detach().clone().requires_grad_() for t in (h, w, b))
    ref = reference_gcn(dense, h2, w2, b2, relu, mask, p)
    (ref * gout).sum().backward()
    assert_same(out, ref, WIDE, "layer output")
    for name, a, r in (("h", h, h2), ("w", w, w2), ("b", b, b2)):
        assert_same(a.grad, r.grad, WIDE, f"gradient of {name}")


def test_fused_gcn_layer_with_sparse_input_features():
    op, dense = random_op(25, 25, density=0.3, seed=5)
    xop, xdense = random_op(25, 40, density=0.1, seed=6)
    w = torch.randn(40, 6, requires_grad=True)
    b = torch.randn(6, requires_grad=True)
    out = gcn_layer(op, xop, w, b, relu=True)
    out.sum().backward()
    w2, b2 = w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ref = torch.relu(dense @ (xdense @ w2) + b2)
    ref.sum().backward()
    assert_same(out, ref, WIDE, "layer output")
    assert_same(w.grad, w2.grad, WIDE, "gradient of w")
    assert_same(b.grad, b2.grad, WIDE, "gradient of b")


def test_first_layer_skips_the_backward_product():
    """Aggregate-first with an input that needs no gradient never multiplies by Aᵀ."""
    op, _ = random_op(10, 10, seed=8)

    class Counting(SparseOp):
        calls = 0

        @property
        def At(self):
            Counting.calls += 1
            return super().At

    op.__class__ = Counting
    x = torch.randn(10, 3)  # narrower than the output: aggregate first
    w = torch.randn(3, 16, requires_grad=True)
    gcn_layer(op, x, w, None, relu=True).sum().backward()
    assert Counting.calls == 0
    assert w.grad is not None


def test_dropout_rate_scale_and_gradient():
    from fullgraph.ops import dropout

    x = torch.ones(1000, 100, requires_grad=True)
    y = dropout(x, 0.3, True, generator=torch.Generator().manual_seed(0))
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - 0.3) < 0.01  # 10^5 draws: the standard deviation is 0.0015
    torch.testing.assert_close(y[y != 0], torch.full_like(y[y != 0], 1 / 0.7))
    y.sum().backward()
    torch.testing.assert_close(x.grad, (y != 0).float() / 0.7)
    assert dropout(x, 0.3, False) is x
    xop, _ = random_op(50, 60, density=0.5, seed=9)
    dop = dropout(xop, 0.5, True)
    assert dop.nnz == xop.nnz and 0.4 < (dop.values == 0).float().mean().item() < 0.6


@pytest.mark.parametrize("d_in,d_out", [(12, 5), (5, 12)])  # transform-first, aggregate-first
def test_fused_gcn_layer_is_the_same_in_row_blocks(monkeypatch, d_in, d_out):
    """Blocks of rows change neither the dropout mask (the CPU generator fills serially) nor,
    beyond float32 summation order, the gradients."""
    import fullgraph.ops.gcn as gcn

    op, _ = random_op(40, 40, density=0.2, seed=10)
    torch.manual_seed(1)
    h = torch.randn(40, d_in)
    w = torch.randn(d_in, d_out)
    b = torch.randn(d_out)
    gout = torch.randn(40, d_out)

    def run():
        hh, ww, bb = (t.clone().requires_grad_() for t in (h, w, b))
        out = gcn_layer(op, hh, ww, bb, relu=True, dropout=0.5, generator=torch.Generator().manual_seed(3))
        (out * gout).sum().backward()
        return out.detach(), hh.grad, ww.grad, bb.grad

    whole = run()
    monkeypatch.setattr(gcn, "ROW_BLOCK_ELEMENTS", 3 * max(d_in, d_out))  # 3 rows per block, 14 blocks
    blocked = run()
    assert torch.equal(whole[0], blocked[0])
    for name, a, r in zip(("h", "w", "b"), whole[1:], blocked[1:]):
        assert_same(a, r, WIDE, f"gradient of {name}, in row blocks")


@pytest.mark.parametrize("p", [0.3, 0.5, 0.9])
def test_fused_gcn_layer_drops_exactly_where_the_uniform_is_below_p(p):
    """The same mask as ``torch.rand(shape) >= p`` for rates that float32 cannot represent, too."""
    op, dense = random_op(30, 30, density=0.3, seed=11)
    h, w = torch.randn(30, 6), torch.randn(6, 50)
    out = gcn_layer(op, h, w, None, relu=True, dropout=p, generator=torch.Generator().manual_seed(5))
    keep = torch.rand(30, 50, generator=torch.Generator().manual_seed(5)) >= p
    ref = torch.relu(dense @ (h @ w)) * keep / (1 - p)
    assert torch.equal(out == 0, (ref == 0))
    assert_same(out, ref, WIDE, "layer output")


# ---------------------------------------------------------------- keyed dropout masks
def test_keyed_mask_depends_only_on_seed_epoch_site_row_and_column():
    """A row's mask is the same whichever other rows a process holds, and in whatever order: this is
    what lets every layout drop the same entries (ops/dropout.py)."""
    from fullgraph.ops.dropout import keep_mask, keyed_dropout

    ids = torch.randperm(5000, generator=torch.Generator().manual_seed(0))
    with keyed_dropout(seed=3, epoch=7):
        whole = keep_mask((5000, 64), 0.4, site=2)  # rows 0..n-1, the single-process case
        part = keep_mask((1000, 64), 0.4, rows=ids[:1000], site=2)
        other_site = keep_mask((5000, 64), 0.4, site=3)
    with keyed_dropout(seed=3, epoch=8):
        other_epoch = keep_mask((5000, 64), 0.4, site=2)
    with keyed_dropout(seed=4, epoch=7):
        other_seed = keep_mask((5000, 64), 0.4, site=2)
    assert torch.equal(part, whole[ids[:1000]])
    # 320,000 entries: the kept fraction has a standard deviation of ~0.0009
    assert abs(whole.float().mean().item() - 0.6) < 0.005
    for other in (other_site, other_epoch, other_seed):
        agree = (other == whole).float().mean().item()  # independent masks agree on p² + (1-p)² = 0.52
        assert abs(agree - 0.52) < 0.005, agree
    # no structure along rows or columns: neighbouring rows and columns are uncorrelated
    w = whole.float() - 0.6
    assert abs((w[1:] * w[:-1]).mean().item()) < 0.005 and abs((w[:, 1:] * w[:, :-1]).mean().item()) < 0.005
    # without a key the process generator draws (a model used on its own)
    assert not torch.equal(keep_mask((5000, 64), 0.4, site=2), whole)



def test_a_device_without_a_mask_compiler_draws_the_eager_masks_with_one_warning(monkeypatch):
    """Where ``torch.compile`` cannot build the fused mask kernel (no Triton, no C++ compiler), the
    masks are the eager passes' bits, with one warning, and compiling is not tried again."""
    import importlib

    d = importlib.import_module("fullgraph.ops.dropout")
    calls = []

    def no_compiler(fn, **kw):
        def compiled(*a):
            calls.append(1)
            raise RuntimeError("no compiler here")
        return compiled

    key, rows = d.DropoutKey(5, 2), torch.randperm(900)[:300]
    want = d.keyed_keep(rows, 40, 0.3, key, 4)
    monkeypatch.setattr(d, "COMPILED_MASK_DEVICES", ("cpu",))
    monkeypatch.setattr(d, "_compiled_keep", None)
    monkeypatch.setattr(torch, "compile", no_compiler)
    with pytest.warns(UserWarning, match="computing masks eagerly"):
        got = d.keyed_keep(rows, 40, 0.3, key, 4)
    assert torch.equal(got, want) and calls == [1]
    assert torch.equal(d.keyed_keep(rows, 40, 0.3, key, 4), want) and calls == [1]

@pytest.mark.parametrize("needs_grad", [True, False])
def test_keyed_dropout_in_cpu_row_blocks_is_the_whole_masks_product(needs_grad):
    """The CPU path that hashes and applies each block of rows' mask in cache (``ops.dropout._BlockDropout``)
    gives the bits of the whole mask's product (``keep_mask``, then ``x · keep · scale``), forward and
    backward: rows in any order, a width that leaves a last short block, the mask kept only for a gradient."""
    from fullgraph.ops import dropout
    from fullgraph.ops.dropout import _CPU_BLOCK_ENTRIES, keep_mask, keyed_dropout

    width = 333  # _CPU_BLOCK_ENTRIES // width rows a block: the 1,000 rows end in a short block
    assert 1000 % (_CPU_BLOCK_ENTRIES // width)
    rows = torch.randperm(5000, generator=torch.Generator().manual_seed(4))[:1000]
    x = torch.randn(1000, width, generator=torch.Generator().manual_seed(5)).requires_grad_(needs_grad)
    g = torch.randn(1000, width, generator=torch.Generator().manual_seed(6))
    with keyed_dropout(seed=7, epoch=3):
        got = dropout(x, 0.35, True, rows=rows, site=2)
        keep = keep_mask((1000, width), 0.35, rows=rows, site=2)
    want = x.detach() * keep * (1 / 0.65)
    assert torch.equal(got, want) and got.requires_grad == needs_grad
    if needs_grad:
        (got * g).sum().backward()
        assert torch.equal(x.grad, g * keep * (1 / 0.65))


def test_keyed_dropout_agrees_between_dense_sparse_and_the_fused_gcn_layer():
    """The sparse input path drops the stored entries that the dense mask drops, and the fused GCN
    layer drops what ``relu`` then ``dropout`` as separate ops drops."""
    from fullgraph.ops import dropout
    from fullgraph.ops.dropout import keyed_dropout

    xop, xdense = random_op(60, 50, density=0.3, seed=12)
    rows = torch.arange(100, 160)
    op, dense = random_op(40, 40, density=0.2, seed=13)
    h, w, b = torch.randn(40, 6), torch.randn(6, 9), torch.randn(9)
    out_rows = torch.arange(40) * 3
    with keyed_dropout(seed=1, epoch=2):
        d_sparse = dropout(xop, 0.5, True, rows=rows, site=0).to_dense()
        d_dense = dropout(xdense, 0.5, True, rows=rows, site=0)
        fused = gcn_layer(op, h, w, b, relu=True, dropout=0.5, rows=out_rows, site=4)
        plain = dropout(torch.relu(dense @ (h @ w) + b), 0.5, True, rows=out_rows, site=4)
    torch.testing.assert_close(d_sparse, d_dense)
    assert 0.4 < (d_sparse[xdense != 0] == 0).float().mean().item() < 0.6
    assert_same(fused, plain, WIDE, "fused layer with keyed dropout")
    assert torch.equal(fused == 0, plain == 0)


def _random_sums(g: torch.Generator, n_dst: int, n_src: int, E: int):
    """``EdgeSums`` over ``E`` random edges of a rectangular block (repeated and missing rows; the last dst
    row has no edge), with their ``src`` and ``dst``."""
    from fullgraph.ops.edges import EdgeSums
    from fullgraph.ops.sparse import SparseOp

    dst = torch.sort(torch.randint(0, n_dst - 1, (E,), generator=g)).values
    src = torch.randint(0, n_src, (E,), generator=g)
    ip = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.bincount(dst, minlength=n_dst), 0)])
    return EdgeSums(SparseOp(ip, src, torch.ones(E), (n_dst, n_src))), src, dst


def test_edge_dot_and_weighted_sum_equal_their_gathers_forward_and_backward():
    """``ops.edges.edge_dot`` and ``weighted_sum`` (sampled and valued CSR products, HGT's attention) against
    the plain gathers they replace, on a rectangular block with repeated and missing rows, in float64:
    ``torch.autograd.gradcheck`` checks every gradient against finite differences."""
    from fullgraph.ops.edges import edge_dot, weighted_sum

    g = torch.Generator().manual_seed(0)
    n_dst, n_src, E, H, D = 7, 9, 25, 2, 3
    sums, src, dst = _random_sums(g, n_dst, n_src, E)
    q = torch.randn(H, n_dst, D, dtype=torch.float64, generator=g, requires_grad=True)
    k = torch.randn(H, n_src, D, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(E, H, dtype=torch.float64, generator=g, requires_grad=True)
    want = (q[:, dst] * k[:, src]).sum(-1).T
    assert torch.allclose(edge_dot(sums, q, k), want, rtol=1e-12, atol=1e-12)
    agg = torch.zeros(H, n_dst, D, dtype=torch.float64).index_add(1, dst, w.T.unsqueeze(-1) * k[:, src])
    assert torch.allclose(weighted_sum(sums, w, k), agg, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: edge_dot(sums, a, b), (q, k))
    assert torch.autograd.gradcheck(lambda a, b: weighted_sum(sums, a, b), (w, k))


def test_headed_sums_are_every_head_at_once_on_node_major_rows():
    """``EdgeSums.headed``: the graph whose nodes are split into heads, so that node-major rows ``[n, H, D]``
    (a layer's ``x @ W`` as it lies) attend as one head. Its entries are every (edge, head) once, its
    products equal the heads-first ones entry for entry (by ``edge`` and ``head``), and the softmax over
    its rows is each head's softmax over a node's in-edges (float64, gradients by ``gradcheck``)."""
    from fullgraph.models.gat import edge_softmax
    from fullgraph.ops.edges import edge_dot, weighted_sum

    g = torch.Generator().manual_seed(1)
    n_dst, n_src, E, H, D = 6, 8, 21, 3, 2
    sums, src, dst = _random_sums(g, n_dst, n_src, E)
    headed = sums.headed(H)
    assert headed is sums.headed(H) and sums.headed(1) is sums
    assert sorted(zip(headed.edge.tolist(), headed.head.tolist())) == [(e, h) for e in range(E) for h in range(H)]
    assert torch.equal(headed.dst, dst[headed.edge] * H + headed.head)
    assert torch.equal(headed.src, src[headed.edge] * H + headed.head)
    q = torch.randn(n_dst, H, D, dtype=torch.float64, generator=g, requires_grad=True)
    k = torch.randn(n_src, H, D, dtype=torch.float64, generator=g, requires_grad=True)
    flat = lambda x: x.reshape(1, -1, D)  # noqa: E731  node-major rows as the headed graph's
    score = edge_dot(headed, flat(q), flat(k))[:, 0]
    plain = edge_dot(sums, q.transpose(0, 1), k.transpose(0, 1))  # [E, H], heads first
    assert torch.allclose(score, plain[headed.edge, headed.head], rtol=1e-12, atol=1e-12)
    alpha = edge_softmax(score[:, None], headed.dst, n_dst * H, headed)[:, 0]
    want = edge_softmax(plain, dst, n_dst, sums)
    assert torch.allclose(alpha, want[headed.edge, headed.head], rtol=1e-12, atol=1e-12)
    w = torch.randn(E * H, 1, dtype=torch.float64, generator=g, requires_grad=True)
    by_head = torch.zeros(E, H, dtype=torch.float64).index_put((headed.edge, headed.head), w[:, 0].detach())
    agg = weighted_sum(headed, w, flat(k)).view(n_dst, H, D)
    assert torch.allclose(agg, weighted_sum(sums, by_head, k.transpose(0, 1)).transpose(0, 1), rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: edge_dot(headed, flat(a), flat(b)), (q, k))
    assert torch.autograd.gradcheck(lambda a, b: weighted_sum(headed, a, flat(b)), (w, k))
