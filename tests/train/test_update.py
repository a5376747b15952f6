"""The weight update every layout shares (``fullgraph.optim.update``): learning-rate schedules,
gradient clipping on the global norm, mixed precision.

References are independent of the code checked: the schedules against PyTorch's own schedulers fed
the same epochs; clipping against a loop written here with ``torch.nn.utils.clip_grad_norm_``;
each layout against one process in the same precision. Resume of these runs, bit for bit, is in
``test_checkpoint.py`` (its LAYOUTS name them).
"""

from __future__ import annotations

import math

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.ops.dropout import keyed_dropout
from fullgraph.parallel.engine import SingleEngine
from fullgraph.optim.schedule import Schedule
from fullgraph.train.trainer import Trainer

from tests._equality import LOSSES_LOW_PRECISION, LOSSES_REORDERED, assert_same_losses
from tests.distributed import run_ranks
from tests.parallel.test_graph_parallel import write_partition

EPOCHS = 12


def _lrs(options: dict, losses=None) -> list[float]:
    opt = TrainConfig.of(lr=0.1, epochs=EPOCHS, **options).optimization
    adam = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=opt.lr)
    schedule, out = Schedule(adam, opt), []
    for epoch in range(1, EPOCHS + 1):
        out.append(schedule.lr)
        schedule.step({"epoch": epoch} | ({"val_loss": losses[epoch - 1]} if losses else {}))
    return out


def _torch_lrs(make, warmup: int, steps: int) -> list[float]:
    """What PyTorch's scheduler ``make(optimizer)`` gives after a warm-up of ``warmup`` epochs."""
    adam = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    sched, out = make(adam), []
    for _ in range(steps):
        out.append(adam.param_groups[0]["lr"])
        adam.step()
        sched.step()
    return [0.1 * (k + 1) / (warmup + 1) for k in range(warmup)] + out


def test_schedules_are_pytorchs_after_a_linear_warm_up():
    from torch.optim.lr_scheduler import CosineAnnealingLR, StepLR

    assert _lrs({}) == [0.1] * EPOCHS
    got = _lrs(dict(lr_schedule="cosine", warmup_epochs=2, lr_min=0.01))
    want = _torch_lrs(lambda o: CosineAnnealingLR(o, T_max=EPOCHS - 3, eta_min=0.01), 2, EPOCHS - 2)
    assert got == pytest.approx(want, rel=1e-12) and got[-1] == pytest.approx(0.01)
    got = _lrs(dict(lr_schedule="step", warmup_epochs=3, lr_step=4, lr_gamma=0.5))
    assert got == pytest.approx(_torch_lrs(lambda o: StepLR(o, step_size=4, gamma=0.5), 3, EPOCHS - 3), rel=1e-12)
    # plateau: halves after 2 evaluations without a lower validation loss, never during the warm-up
    losses = [5, 4, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2]  # (the rate listed is the one each epoch used)
    got = _lrs(dict(lr_schedule="plateau", warmup_epochs=2, lr_step=2, lr_gamma=0.5), losses)
    assert got == pytest.approx([0.1 / 3, 0.2 / 3] + [0.1] * 3 + [0.05] * 4 + [0.025] * 2 + [0.0125])


def _clipped_by_hand(cora, cfg) -> list[float]:
    """The same training written out with PyTorch's clip_grad_norm_ and Adam (no WeightUpdate)."""
    torch.manual_seed(cfg.optimization.seed)
    trainer = Trainer(cfg, engine=SingleEngine(cora, "gcn")).build()
    model, engine, opt = trainer.model, trainer.engine, cfg.optimization
    adam = torch.optim.Adam(model.param_groups(opt.weight_decay, opt.conv_weight_decay), lr=opt.lr)
    out = []
    for epoch in range(1, opt.epochs + 1):
        model.train()
        adam.zero_grad(set_to_none=True)
        with keyed_dropout(opt.seed, epoch):
            out.append(engine.step(model, epoch))
        torch.nn.utils.clip_grad_norm_(model.parameters(), opt.clip_grad_norm)
        adam.step()
    return out


def test_clipping_is_pytorchs_clip_grad_norm(cora):
    cfg = TrainConfig.of(model="gcn", layers=2, hidden=16, epochs=EPOCHS, clip_grad_norm=0.05, dropout=0.5,
                         eval_every=EPOCHS, progress="none")
    result = Trainer(cfg, engine=SingleEngine(cora, "gcn")).build().train()
    want = torch.tensor(_clipped_by_hand(cora, cfg), dtype=torch.float64)
    assert_same_losses(torch.tensor(result.losses, dtype=torch.float64), want, what="clipped losses")
    unclipped = Trainer(cfg.with_options(clip_grad_norm=0.0), engine=SingleEngine(cora, "gcn")).build().train()
    assert abs(unclipped.losses[-1] - result.losses[-1]) > 1e-3  # the bound was active


FEATURES = dict(lr_schedule="cosine", warmup_epochs=2, lr_min=0.001, clip_grad_norm=0.05)
"""Every feature at once, with a bound small enough to clip every epoch."""


@pytest.fixture(scope="module")
def single_features(cora):
    out = {}
    for precision in ("fp32", "bf16", "fp16"):
        cfg = TrainConfig.of(model="gcn", layers=3, hidden=16, epochs=EPOCHS, eval_every=EPOCHS, dropout=0.5,
                             precision=precision, progress="none", **FEATURES)
        out[precision] = torch.tensor(Trainer(cfg, cora).build().train().losses, dtype=torch.float64)
    return out


def test_graph_parallel_equals_single_process_with_schedule_clipping_and_precision(cora, single_features, tmp_path):
    folder = tmp_path / "parts"
    write_partition(cora, 2, "metis", folder)
    runs = [{"name": p, "partition_dir": str(folder),
             "config": dict(model="gcn", layers=3, hidden=16, epochs=EPOCHS, eval_every=EPOCHS, dropout=0.5,
                            precision=p, **FEATURES)} for p in single_features]
    got = run_ranks("train_runs", 2, {"runs": runs}, tmp_path)
    for precision, want in single_features.items():
        tol = {"fp32": LOSSES_REORDERED}.get(precision, LOSSES_LOW_PRECISION)
        assert_same_losses(got[precision]["losses"], want, tol, what=f"{precision} losses")


def test_pipeline_clips_on_the_norm_of_every_stage(cora, tmp_path):
    """Two stages hold different layers: the norm that clips is summed over both, so the pipeline
    trains as its one-process simulation (same chunks) does, which holds every layer."""
    from tests.parallel.test_pipeline import prepare, simulate

    _, pdir, cfile = prepare(cora, 1, 4, tmp_path)
    config = dict(model="gcn", layers=4, hidden=16, epochs=EPOCHS, eval_every=EPOCHS, dropout=0.5, seed=0,
                  **FEATURES)
    want, _, _ = simulate(cora, TrainConfig.of(**config, progress="none"), 4, cfile)
    runs = [{"name": "pipe", "config": config | dict(parallel="pipeline", chunks=4, partition_dir=pdir,
                                                     chunk_file=cfile)}]
    got = run_ranks("chunked_runs", 2, {"runs": runs}, tmp_path)["pipe"]
    assert_same_losses(got["losses"], want, what="pipeline losses")
    assert got["comm"]["grad/norm"] == 2 * 8  # one float64 from each rank, every epoch
    from fullgraph.comm.mesh import Mesh  # as the planner counts it
    from fullgraph.parallel.registry import layout_volume
    from fullgraph.plan.volumes import ModelShape

    shape = ModelShape((cora.num_features, 16, 16, 16), 1000)
    assert layout_volume(Mesh.for_mode("pipeline", 2), shape, nodes=cora.num_nodes, stage_starts=[2],
                         grad_norm=True)["grad/norm"] == 2 * 8


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_fused_gcn_kernel_takes_a_low_precision_gradient(precision):
    """Dense features narrower than the layer make the fused GCN kernel aggregate first (``(ÂH)W``);
    under autocast its backward receives a bf16/fp16 gradient (it crashed on one). Reference: the
    same forward written with dense PyTorch ops under the same autocast, differentiated by autograd.
    The two round the product's gradient differently (the kernel runs its backward in fp32), so they
    agree to the low precision's resolution: 2^-8 = 4e-3 relative for bf16; the bound, 3e-2, is
    far below what a wrong mask, a missing Â or a transposed product moves a gradient (order 1)."""
    from fullgraph.ops.gcn import gcn_layer
    from fullgraph.ops.sparse import SparseOp

    gen = torch.Generator().manual_seed(0)
    n, d_in, d_out = 50, 4, 16
    dense = (torch.rand(n, n, generator=gen) < 0.1).float() * torch.rand(n, n, generator=gen)
    adj = SparseOp.from_tensor(dense.to_sparse_csr())
    h = torch.randn(n, d_in, generator=gen, requires_grad=True)
    w = torch.randn(d_in, d_out, generator=gen, requires_grad=True)
    r = torch.randn(n, d_out, generator=gen)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    grads = []
    for fused in (True, False):
        with torch.autocast("cpu", dtype=dtype):
            if fused:
                z = gcn_layer(adj, h, w, None, relu=True)
            else:
                with torch.autocast("cpu", enabled=False):  # the kernel aggregates in fp32, as csr_mm does
                    aggregated = dense @ h
                z = torch.relu(aggregated @ w)
        (z.float() * r).sum().backward()
        grads.append((h.grad.clone(), w.grad.clone()))
        h.grad, w.grad = None, None
    for got, want in zip(*grads):
        assert torch.isfinite(got).all()
        assert (got - want).norm() <= 3e-2 * want.norm(), (got - want).norm() / want.norm()
