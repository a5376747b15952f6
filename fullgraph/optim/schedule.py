"""The learning rate over a run: a linear warm-up, then ``constant``, ``cosine``, ``step`` or ``plateau``.

PyTorch's schedulers do the bookkeeping: ``LambdaLR`` with one closed-form factor for the warm-up and
the epoch-driven schedules (a function of the epoch alone, so a resumed run has exactly the learning
rate the uninterrupted one had, whatever the layout), and ``ReduceLROnPlateau`` for ``plateau``, which
reacts to the validation loss of each evaluation once the warm-up is over. Every rank steps its own
copy with the same inputs (the epoch, the global validation loss), so the layouts agree.
"""

from __future__ import annotations

import math
import warnings

from torch.optim.lr_scheduler import LambdaLR, ReduceLROnPlateau

__all__ = ["SCHEDULES", "Schedule", "lr_factor"]

SCHEDULES = ("constant", "cosine", "step", "plateau")


def lr_factor(opt, done: int) -> float:
    """The learning rate of the epoch after ``done`` epochs, as a fraction of ``opt.lr``: a linear rise
    over ``opt.warmup_epochs`` (epoch k of w runs at k / (w + 1)), then the schedule (``plateau`` is
    constant here: its reductions come from the validation loss)."""
    w = opt.warmup_epochs
    if done < w:
        return (done + 1) / (w + 1)
    t = done - w
    if opt.lr_schedule == "cosine":
        span = max(1, opt.epochs - w - 1)  # the last epoch runs at lr_min
        floor = opt.lr_min / opt.lr
        return floor + (1 - floor) * (1 + math.cos(math.pi * min(t, span) / span)) / 2
    if opt.lr_schedule == "step":
        return opt.lr_gamma ** (t // opt.lr_step)
    return 1.0


class Schedule:
    """Sets the optimizer's learning rate for each epoch; ``step(record)`` after every epoch."""

    def __init__(self, optimizer, opt):
        self.optimizer, self.opt = optimizer, opt
        self.by_epoch = LambdaLR(optimizer, lambda done: lr_factor(opt, done))
        self.plateau = (ReduceLROnPlateau(optimizer, mode="min", factor=opt.lr_gamma, patience=opt.lr_step - 1,
                                          threshold=0.0) if opt.lr_schedule == "plateau" else None)

    @property
    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def step(self, record: dict) -> None:
        """After an epoch: the next epoch's rate (the plateau counts only evaluated epochs after the
        warm-up; during the warm-up the rate rises whatever the loss does)."""
        done = record["epoch"]
        if self.plateau is None or done <= self.opt.warmup_epochs:
            with warnings.catch_warnings():  # fp16 may skip an epoch's optimizer step: the rate moves on all the same
                warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step", category=UserWarning)
                self.by_epoch.step()
        elif "val_loss" in record:
            self.plateau.step(record["val_loss"])

    def state(self) -> dict:
        """What a checkpoint keeps (JSON: floats written by ``repr`` read back exactly)."""
        by_epoch = {k: v for k, v in self.by_epoch.state_dict().items() if k != "lr_lambdas"}
        return {"by_epoch": by_epoch, "plateau": self.plateau.state_dict() if self.plateau else None,
                "lrs": [g["lr"] for g in self.optimizer.param_groups]}

    def load_state(self, state: dict) -> None:
        self.by_epoch.load_state_dict(state["by_epoch"] | {"lr_lambdas": [None] * len(self.optimizer.param_groups)})
        if self.plateau is not None:
            self.plateau.load_state_dict(state["plateau"])
        for group, lr in zip(self.optimizer.param_groups, state["lrs"]):
            group["lr"] = lr
