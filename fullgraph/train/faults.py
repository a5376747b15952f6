"""What stops a run from within: a loss or weights that are no longer numbers, and the testing hook
that kills a rank as a lost machine would.

A diverged run (an ``--lr`` far too large, an exploding deep model) computes NaN from then on, and
every later epoch, checkpoint and ``model.pt`` would carry garbage while the run reports success. So
the loss of every epoch is checked (it is summed over ranks: every rank sees the same value and
stops together), and the weights are checked before each checkpoint, so that the last checkpoint
is always one worth resuming from. ``--no-stop-on-nonfinite`` turns both off. A loss that stays a
number but grows far past its first epoch's (``--lr 1e10``: 2.6 to 6e22) is said once, in one line.
"""

from __future__ import annotations

import logging
import math
import os
import signal

import torch

import fullgraph.environ as environ
from fullgraph.errors import NonFiniteError

__all__ = ["check_loss", "check_weights", "fault"]

log = logging.getLogger("fullgraph")

LOSS_GROWTH = 1000.0
"""An epoch loss this many times the first epoch's is said to diverge (once, when it first gets there)."""
_ADVICE = "lower --lr or set --clip-grad-norm (--no-stop-on-nonfinite trains on regardless)"


def _last_good(cfg) -> str:
    from fullgraph.train.checkpoint import complete_checkpoints

    last = complete_checkpoints(cfg.run.out) if cfg.run.out else []
    return f"the last good checkpoint is {last[0]}" if last else "the run has no checkpoint to resume from"


def check_loss(cfg, record: dict, losses=(), main: bool = True) -> None:
    """Stop (``NonFiniteError``) on a NaN or infinite epoch loss, before anything of the epoch is written;
    warn (on the ``main`` rank) the first time a finite one exceeds :data:`LOSS_GROWTH` times the first
    of the run's earlier ``losses``."""
    loss = record["loss"]
    if math.isfinite(loss):
        limit = LOSS_GROWTH * losses[0] if losses and losses[0] > 0 else math.inf
        if main and loss > limit and all(v <= limit for v in losses):
            log.warning("the loss at epoch %d is %.3g, more than %g times the first epoch's %.3g: training is "
                        "diverging; lower --lr (now %g) or set --clip-grad-norm", record["epoch"], loss, LOSS_GROWTH,
                        losses[0], cfg.optimization.lr)
        return
    if not cfg.optimization.stop_on_nonfinite:
        return
    raise NonFiniteError(f"the loss is {record['loss']} at epoch {record['epoch']} (--lr {cfg.optimization.lr}): "
                         f"training diverged and was stopped; {_last_good(cfg)}; {_ADVICE}")


def check_weights(cfg, epoch: int, model, engine) -> None:
    """Stop (``NonFiniteError``) instead of checkpointing NaN or infinite weights. Collective: a
    pipeline stage holds only its own layers, so the ranks sum what each found."""
    if not cfg.optimization.stop_on_nonfinite:
        return
    bad = float(sum(int(not torch.isfinite(p).all()) for p in model.parameters()))
    if engine.reduce_sum([bad], "meta/checkpoint")[0]:
        raise NonFiniteError(f"the weights after epoch {epoch} are not finite (NaN or inf), so no checkpoint was "
                             f"written: training diverged and was stopped; {_last_good(cfg)}; {_ADVICE}")


def fault(epoch: int, rank: int) -> None:
    """A testing hook: ``FULLGRAPH_FAULT=kill:RANK:EPOCH[:ONCE_FILE]`` makes that rank SIGKILL itself as
    the epoch starts, as a lost machine would; with ``ONCE_FILE``, only if that file does not exist
    yet (it is created first), so that a restarted run gets past the epoch (the kill-and-resume tests)."""
    spec = (environ.get("FULLGRAPH_FAULT") or "").split(":")
    if spec[0] != "kill" or spec[1:3] != [str(rank), str(epoch)]:
        return
    if len(spec) > 3:
        try:
            open(spec[3], "x").close()
        except FileExistsError:
            return
    os.kill(os.getpid(), signal.SIGKILL)
