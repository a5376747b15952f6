"""``ops.edge_hidden``: the edge decoder's fused hidden layer against the same layer written with autograd's
gathers, in float64 (exact up to the order of a few additions: 1e-12), and against finite differences
(``gradcheck``); an edge with a zero pre-activation gets no gradient, as ``torch.relu``'s backward gives none."""

from __future__ import annotations

import torch

from fullgraph.ops.edge_hidden import edge_hidden


def inputs(extra: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ps, pd = torch.randn(7, 4, generator=g, dtype=torch.float64), torch.randn(5, 4, generator=g, dtype=torch.float64)
    b = torch.randn(4, generator=g, dtype=torch.float64)
    src, dst = torch.randint(0, 7, (30,), generator=g), torch.randint(0, 5, (30,), generator=g)
    x = torch.randn(30, 4, generator=g, dtype=torch.float64) if extra else None
    return [t.requires_grad_() if t is not None and t.is_floating_point() else t for t in (ps, pd, b, src, dst, x)]


def test_forward_and_backward_equal_autograds_gathers():
    for extra in (False, True):
        ps, pd, b, src, dst, x = inputs(extra)
        w = torch.randn(30, 4, dtype=torch.float64)
        got = edge_hidden(ps, pd, b, src, dst, x)
        grads = torch.autograd.grad((got * w).sum(), [t for t in (ps, pd, b, x) if t is not None])
        want = torch.relu(ps[src] + pd[dst] + b + (x if extra else 0))
        wants = torch.autograd.grad((want * w).sum(), [t for t in (ps, pd, b, x) if t is not None])
        assert torch.allclose(got, want, rtol=0, atol=1e-12)
        for a, e in zip(grads, wants):
            assert torch.allclose(a, e, rtol=0, atol=1e-12)
        assert torch.autograd.gradcheck(lambda *t: edge_hidden(t[0], t[1], t[2], src, dst, t[3] if extra else None),
                                        (ps, pd, b, x if extra else torch.zeros(1, dtype=torch.float64)))


def test_a_zero_pre_activation_passes_no_gradient():
    ps = torch.tensor([[1.0, -2.0]], requires_grad=True)
    pd = torch.tensor([[-1.0, 1.0]], requires_grad=True)
    b = torch.zeros(2, requires_grad=True)
    z = edge_hidden(ps, pd, b, torch.tensor([0]), torch.tensor([0]))  # pre-activations 0 and -1
    z.sum().backward()
    assert torch.equal(z, torch.zeros(1, 2)) and torch.equal(ps.grad, torch.zeros(1, 2))
