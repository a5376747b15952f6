"""The suite's one notion of "equal within float32": named tolerances, each with why it holds, and
the assertions that use them.

A check reads ``assert_same_losses(got, want)`` or ``assert_same(out, ref, FLOAT32_CHAINED, "layer
output")``; on failure it says which tensor (or epoch), how many entries, and the worst entry: got,
want, |got - want| and how many times the bound that is. An entry passes when

    |got - want| <= atol + rtol * |want|          (``want`` is the reference; NaN never passes)

which is ``torch.isclose``'s rule, taken in float64 so that the check itself adds no rounding.
Shapes, dtypes and devices must match as well, and integer tensors (BatchNorm's step counter) must
be exactly equal. A tolerance is never loosened to make a test pass: a new kind of comparison gets
a new name here, with its reason.

Setting ``FULLGRAPH_TEST_MARGINS=<file>`` appends, for every check, how close to its bound it ran
(worst |got - want| / bound; 1.0 is the edge): the measure to look at before tightening one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch


class Tol(NamedTuple):
    """A bound ``atol + rtol * |want|``; ``name`` is what a failure message quotes."""

    name: str
    rtol: float
    atol: float
    growth: float = 1.0
    """Per-epoch losses only: after epoch ``flat`` the bound grows by this factor per epoch."""
    flat: int = 1

    def __str__(self) -> str:
        grows = f", x{self.growth:g} per epoch after epoch {self.flat}" if self.growth != 1.0 else ""
        return f"{self.name} (rtol={self.rtol:g}, atol={self.atol:g}{grows})"

    def epoch_scale(self, epochs: int) -> torch.Tensor:
        """``growth ** max(0, epoch - flat)`` for epochs 1..``epochs`` (float64): what multiplies the
        bound of each epoch's loss."""
        e = torch.arange(1, epochs + 1, dtype=torch.float64)
        return torch.tensor(self.growth, dtype=torch.float64) ** (e - self.flat).clamp(min=0)


# ---------------------------------------------------------------- one training, run another way
LOSSES_REORDERED = Tol("LOSSES_REORDERED", rtol=1e-6, atol=0.0, growth=1.7, flat=3)
"""Per-epoch losses of the same training (same weights, same keyed dropout masks) whose float32 sums
run in another order: a part sums a row of Â·H over its local columns (inner, then halo) where one
process sums in global column order; a block row is summed block column by block column; weight
gradients arrive as a sum of P partial sums; the fused GCN kernel multiplies in another order.

Each of these changes the last bits (~1e-7 relative) of a sum. Then ReLU's kink decides: a
pre-activation within ~1e-9 of zero lands on either side, a weight gradient changes from ~1e-7 to
0, and Adam, dividing by that weight's running RMS (~1e-7), turns it into a step of up to lr. Such
events add up: on Cora the loss differences grow from ~1e-7 to 1e-5..2e-3 by epoch 20, depending on
the seed (SAGE 3x32, METIS P = 4: 7e-5 with seed 7, 2e-3 with seed 6), and one process with its
nodes renumbered drifts the same way. In float64 both layouts agree to 1e-13 over 30 epochs: it is
rounding, not another computation. Hence the bound: 1e-6 relative through epoch 3 (4x the largest
difference seen there over 84 reordered runs), then x1.7 per epoch (the fastest growth measured;
the worst of 132 drift curves reaches 0.29 of the bound): 4e-5 at epoch 10, 8e-3 at epoch 20.
Past ~25 epochs it says nothing: compare losses over 20 epochs or fewer.

What a real difference does: a halo row left out moves the loss by 1e-7..1e-4 at epoch 2 depending
on the row (most halo nodes reach no training node in two hops); this bound catches 12-31 of the 133
rows of one Cora part at epoch 2 and 28-98 by epoch 4, where a flat 1e-5 caught 5-10. Every row is
caught by the per-node comparison of a prediction with one process's (FLOAT32_REORDER): a loss
is the wrong place to look for one row. A mask not matched or a gradient summed twice moves the
loss by 1e-3 from epoch 1. Relative only: a cross-entropy loss is O(1), never near zero."""

LOSSES_LOW_PRECISION = Tol("LOSSES_LOW_PRECISION", rtol=4e-6, atol=0.0, growth=4.0, flat=2)
"""Per-epoch losses of the same training under ``--precision bf16`` or ``fp16`` whose float32 sums run
in another order (as for LOSSES_REORDERED). The dense products round their float32 results to 8
(bf16) or 11 (fp16) bits: a last-bit change of the float32 sum flips a rounding now and then, and one
flip moves an activation by 2^-8 relative, where float32 moved it by 2^-24. Measured on Cora (GCN
3x16, METIS P = 2, cosine schedule, clipping every epoch): 3e-8 and 2e-7 in epochs 1-2, 4e-6 at
epoch 3, 8e-6 at epoch 4, then up to 1.2e-4 (no further growth: bf16's jitter, not drift). Hence
4e-6 relative through epoch 2 (20x the measured), x4 per epoch after (4x the measured at epoch 3,
8x at 4): past epoch 6 it says nothing. What it catches: a layout that computed in another
precision than the reference differs by 1e-5 at epoch 1 already (bf16 against fp32, 2.5x the bound),
and a mask or gradient error by 1e-3."""

WEIGHTS_REORDERED = Tol("WEIGHTS_REORDERED", rtol=1e-4, atol=1e-4)
"""Final weights of those same trainings. Adam divides each step by the running RMS of that
weight's gradient, so the gradients' last-bit differences reach the weights amplified: 1e-4
relative. The absolute part is for weights whose gradient is nearly zero (an input feature that
hardly any training node sees): there float32 noise decides Adam's step m/√v itself; a step is at
most lr = 1e-2, and the largest such difference seen is ~2e-5. A wrong gradient moves a weight by
whole steps (1e-2)."""

WEIGHTS_BATCH_NORM = Tol("WEIGHTS_BATCH_NORM", rtol=1e-4, atol=3e-4)
"""Final weights of a BatchNorm model trained over parts against one process (as WEIGHTS_REORDERED).
The statistics are sums over ranks in another order, and every activation is divided by their
square root, so a last-bit difference reaches every row, not only the rows a part sums; a weight
whose gradient is nearly zero takes Adam steps that this noise decides. Seen: 1.2e-4 on one of
22,928 weights (SAGE with BatchNorm, METIS P = 2, Cora, a 2-core Xeon; 2e-5 elsewhere), hence 3e-4
absolute, 3% of one step. Statistics that were a part's own instead of the whole graph's move the
losses by 1e-3 from epoch 1 (LOSSES_REORDERED catches it) and the weights by whole steps."""

RECOMPUTED = Tol("RECOMPUTED", rtol=1e-6, atol=0.0)
"""With ``--recompute`` against without: the same kernels on the same inputs, and the recomputed
forward redraws the same keyed masks; only the order in which autograd accumulates gradient
contributions may change (the checkpointed region's backward runs as one node), a few ulps, so
1e-6 relative over a few epochs of losses and on gradients. A mask drawn differently gives the
gradient of another network: losses part by 1e-3 or more from the second epoch."""

DENSE_REFERENCE_LOSS = Tol("DENSE_REFERENCE_LOSS", rtol=1e-4, atol=0.0)
"""The chunked-stale engine's loss against a dense written-out reference of its rule: the reference
multiplies a dense Â (a BLAS product over all n columns, zeros included, in its own blocking), the
engine sums CSR rows chunk by chunk; through several layers that differs by up to 1e-4 relative.
Relative only: the loss is O(1). A wrong rule (a current row read as history or the reverse) moves
it by 1e-2."""

DENSE_REFERENCE_GRADS = Tol("DENSE_REFERENCE_GRADS", rtol=1e-4, atol=1e-6)
"""That reference's weight gradients: the same 1e-4 relative; a gradient entry is a sum of many
signed terms, and one that cancels to near zero keeps an absolute error of a few ulps of its
largest terms (these gradients are O(1e-2)), well below atol = 1e-6."""

CUDA_LOSSES = Tol("CUDA_LOSSES", rtol=1e-3, atol=1e-5)
"""CPU against CUDA over a few Adam steps in float32. Summation orders differ per kernel (cuSPARSE
and cuBLAS against MKL; GAT's softmax sums with atomics, in an order that varies run to run), about
1e-7 relative per op, and Adam's normalized steps grow it: GAT's fifth loss differed by 1.2e-4
relative on an H100. A real difference moves losses by 1e-2 or more (a dropout mask not applied, a
wrong normalization), so 1e-3 still fails on it."""

CUDA_WEIGHTS = Tol("CUDA_WEIGHTS", rtol=1e-3, atol=1e-3)
"""Weights after those Adam steps of lr 0.01: where a gradient is near zero, Adam's step m/√v is
decided by that noise, so a weight near zero may differ by a fraction of a step (GAT: 1.5e-4 on an
H100); a tenth of the learning rate bounds that and still fails on a wrong gradient (a whole step,
1e-2)."""

# ---------------------------------------------------------------- one computation, two implementations
FLOAT32_REORDER = Tol("FLOAT32_REORDER", rtol=1e-5, atol=1e-6)
"""One float32 forward computation, the same math with its sums in another order, on O(1) values
(BatchNorm's outputs and statistics against torch's; a graph-parallel prediction against one
process's probabilities and embeddings): a few ulps, ~1e-7 relative; an entry that cancels to near
zero keeps a few ulps of the terms, below 1e-6."""

FLOAT32_REORDER_WIDE = Tol("FLOAT32_REORDER_WIDE", rtol=1e-5, atol=1e-5)
"""The same for the local kernels against dense PyTorch (CSR row sums against a dense matmul, the
fused GCN layer against autograd): sums of a few dozen terms of magnitude up to ~10 differ by a few
ulps of the largest term (~1e-6 each), and an entry that cancels to near zero keeps that absolute
error, hence atol = 1e-5."""

FLOAT32_CHAINED = Tol("FLOAT32_CHAINED", rtol=1e-4, atol=1e-5)
"""Several reordered float32 sums in a chain: a layer against PyTorch Geometric's (linear map,
aggregation over in-neighbourhoods, normalization, in another order), or a backward pass through
one (BatchNorm's input gradient). Each step carries the last-bit differences of the one before:
1e-4 relative; values are O(1) and an entry that cancels keeps a few ulps of the largest term
of a sum of ~10, below 1e-5."""

FLOAT32_FEW_OPS = Tol("FLOAT32_FEW_OPS", rtol=1e-6, atol=1e-7)
"""One value made by a handful of float32 operations in another order (a normalized adjacency entry
``w / sqrt(d_u d_v)`` against PyG's ``gcn_norm``; a self loop's mean of a few edge features, rounded
to float32 from float64): a few ulps, below 1e-6 relative; an entry near zero keeps an ulp of its
terms, below 1e-7."""

FLOAT64_REORDER = Tol("FLOAT64_REORDER", rtol=1e-9, atol=1e-10)
"""The same math in float64 with sums in another order (GAT's attention-vector gradients summed
over every edge of the graph): ~1e-16 relative per op, so even thousands of terms agree to ~1e-12;
1e-9 / 1e-10 leave room and still catch any float32 step or wrong term."""


# ---------------------------------------------------------------- the assertions
def assert_same(got, want, tol: Tol, what: str = "value") -> None:
    """``got`` equals the reference ``want`` within ``tol``: tensors, numpy arrays or numbers."""
    problem = _difference(_tensor(got), _tensor(want), tol, what)
    if problem:
        raise AssertionError(f"{what} differs beyond {tol}: {problem}")


def assert_same_losses(got, want, tol: Tol = LOSSES_REORDERED, what: str = "losses") -> None:
    """Per-epoch losses (a sequence of numbers or a 1-D tensor) equal the reference's, epoch by
    epoch: the same number of epochs, each within ``tol``; a failure names the epoch (from 1)."""
    got, want = _losses(got), _losses(want)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: {got.numel()} epochs, the reference has {want.numel()}")
    problem = _difference(got, want, tol, what, index_name="epoch", first=1, scale=tol.epoch_scale(want.numel()))
    if problem:
        raise AssertionError(f"{what} differ beyond {tol}: {problem}")


def assert_same_state(got, want, tol: Tol = WEIGHTS_REORDERED, what: str = "state") -> None:
    """Two sets of named tensors (state dicts, ``dict(model.named_parameters())``, gradients by
    name, or modules, whose state dicts are taken) hold the same names, each tensor equal within
    ``tol``. A failure lists every tensor that differs, with its worst entry."""
    got, want = _named(got), _named(want)
    if got.keys() != want.keys():
        raise AssertionError(f"{what}: names differ; only in got: {sorted(got.keys() - want.keys())}, "
                             f"only in the reference: {sorted(want.keys() - got.keys())}")
    problems = [f"  {name}: {p}" for name in want if (p := _difference(_tensor(got[name]), _tensor(want[name]),
                                                                       tol, f"{what} {name}"))]
    if problems:
        raise AssertionError(f"{what}: {len(problems)} of {len(want)} tensors differ beyond {tol}:\n"
                             + "\n".join(problems))


# ---------------------------------------------------------------- internals
def _tensor(x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, float):  # a Python float is a float64: keep all of it
        return torch.tensor(x, dtype=torch.float64)
    return torch.as_tensor(x)  # numpy arrays keep their dtype


def _losses(x) -> torch.Tensor:
    # as float64 from the start: Python floats are float64, and torch.tensor would round them to float32
    return (x.detach() if isinstance(x, torch.Tensor) else torch.tensor(list(x), dtype=torch.float64)).to(
        torch.float64).flatten()


def _named(x) -> Mapping[str, torch.Tensor]:
    if isinstance(x, torch.nn.Module):
        return x.state_dict()
    if isinstance(x, Mapping):
        return x
    raise TypeError(f"expected a module or a mapping of names to tensors, got {type(x).__name__}")


def _difference(got: torch.Tensor, want: torch.Tensor, tol: Tol, what: str, index_name: str = "index",
                first: int = 0, scale: torch.Tensor | None = None) -> str | None:
    """None when ``got`` equals ``want`` within ``tol``; else what differs, in words."""
    for attr in ("shape", "dtype", "device", "layout"):
        if getattr(got, attr) != getattr(want, attr):
            return f"{attr} {getattr(got, attr)}, the reference's is {getattr(want, attr)}"
    if got.layout != torch.strided:
        got, want = got.to_dense(), want.to_dense()
    g, w = got.cpu(), want.cpu()
    if not g.is_floating_point():
        bad = g != w
        if bad.any():
            i = int(bad.flatten().nonzero()[0])
            where = _at(i, g.shape, index_name, first)
            return (f"{int(bad.sum())} of {g.numel()} entries differ (exact); first{where}: "
                    f"got {g.flatten()[i].item()}, want {w.flatten()[i].item()}")
        _record(tol, what, 0.0)
        return None
    g, w = g.to(torch.float64).flatten(), w.to(torch.float64).flatten()
    diff = (g - w).abs()
    bound = tol.atol + tol.rtol * w.abs()
    if scale is not None:  # per-entry growth of the bound (per-epoch losses)
        bound = bound * scale
    ratio = diff / bound  # 1.0 is the edge; 0/0 (exact, zero bound) -> nan
    ratio = torch.where(diff == 0, torch.zeros_like(ratio), ratio)
    ratio = torch.where(torch.isnan(g) | torch.isnan(w), torch.full_like(ratio, float("inf")), ratio)
    bad = ~(ratio <= 1.0)
    worst = int(ratio.argmax()) if g.numel() else 0
    _record(tol, what, float(ratio[worst]) if g.numel() else 0.0)
    if not bad.any():
        return None
    rel = diff[worst] / w[worst].abs() if w[worst] != 0 else float("inf")
    return (f"{int(bad.sum())} of {g.numel()} entries; worst{_at(worst, got.shape, index_name, first)}: "
            f"got {g[worst].item():.9g}, want {w[worst].item():.9g} (|diff| {diff[worst].item():.3g}, "
            f"relative {float(rel):.3g}, {ratio[worst].item():.3g}x the bound)")


def _at(flat: int, shape: Sequence[int], index_name: str, first: int) -> str:
    """Where a flat position is, in words: nothing for a 0-d tensor, a number for a 1-d one
    (counted from ``first``: epochs from 1), else a tuple."""
    if len(shape) == 0:
        return ""
    if len(shape) == 1:
        return f" at {index_name} {flat + first}"
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return f" at {index_name} {tuple(reversed(index))}"


def _record(tol: Tol, what: str, ratio: float) -> None:
    path = os.environ.get("FULLGRAPH_TEST_MARGINS")
    if path:
        with open(path, "a") as f:
            f.write(f"{tol.name}\t{ratio:.4g}\t{what}\n")


GRAPH_FIELDS = ("indptr", "indices", "y", "train_mask", "val_mask", "test_mask")


def assert_same_graph(a, b) -> None:
    """Two ``Graph`` objects hold the same structure, labels, splits, features, name and classes,
    exactly (a stored or converted graph is a copy: no tolerance)."""
    for f in GRAPH_FIELDS:
        assert torch.equal(getattr(a, f), getattr(b, f)), f
    assert a.x.layout == b.x.layout and torch.equal(a.dense_x(), b.dense_x())
    assert (a.name, a.num_classes) == (b.name, b.num_classes)
