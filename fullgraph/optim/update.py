"""One epoch's weight update: what happens between the backward and the next forward.

The gradient arrives summed over the ranks (``Engine.sync_grads``). It is unscaled (fp16's loss
scale, ``fullgraph.optim.precision``), measured (the whole model's norm, one sum over the ranks, only
when clipping or fp16 needs it), clipped to ``--clip-grad-norm`` with PyTorch's
``clip_grads_with_norm_`` on that global norm, and Adam steps; then the schedule sets the next
epoch's learning rate (``fullgraph.optim.schedule``). Every rank does the same with the same global
numbers, so the layouts train alike, and ``state()`` is all a checkpoint needs to resume bit for bit.
"""

from __future__ import annotations

import math

import torch

from fullgraph.optim.precision import Precision
from fullgraph.optim.schedule import Schedule

__all__ = ["WeightUpdate"]


class WeightUpdate:
    """Adam, the learning-rate schedule, gradient clipping and the compute precision of a run."""

    def __init__(self, model, engine, opt):
        self.model, self.engine = model, engine
        self.optimizer = torch.optim.Adam(model.param_groups(opt.weight_decay, opt.conv_weight_decay), lr=opt.lr)
        self.schedule = Schedule(self.optimizer, opt)
        self.precision = Precision(opt.precision, engine.device)
        self.clip = opt.clip_grad_norm

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def step(self) -> dict:
        """Unscale, measure, clip, step: what the epoch's record says of it (the learning rate used,
        the gradient norm before clipping where it was measured, whether fp16 skipped the step)."""
        params = [p for p in self.model.parameters() if p.grad is not None]
        said = {"lr": self.schedule.lr}
        self.precision.unscale(params)
        if self.clip or self.precision.dynamic:
            norm = self.engine.grad_norm(self.model)
            said["grad_norm"] = norm
            if not self.precision.update(math.isfinite(norm)):
                return said | {"skipped_step": True, "loss_scale": self.precision.scale}
            if self.clip and params:
                torch.nn.utils.clip_grads_with_norm_(params, self.clip, torch.tensor(norm, device=params[0].device))
        self.optimizer.step()
        return said

    def after_epoch(self, record: dict) -> None:
        self.schedule.step(record)

    def state(self) -> dict:
        return {"schedule": self.schedule.state(), "precision": self.precision.state()}

    def load_state(self, state: dict) -> None:
        if state:  # a checkpoint written before schedules were kept has none: the defaults were in use
            self.schedule.load_state(state["schedule"])
            self.precision.load_state(state["precision"])
