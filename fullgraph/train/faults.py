"""What stops a run from within: a loss or weights that are no longer numbers, and the testing hook
that kills a rank as a lost machine would.

A diverged run (an ``--lr`` far too large, an exploding deep model) computes NaN from then on, and
every later epoch, checkpoint and ``model.pt`` would carry garbage while the run reports success. So
the loss of every epoch is checked (it is summed over ranks: every rank sees the same value and
stops together), and the weights are checked before each checkpoint, so that the last checkpoint
is always one worth resuming from. ``--no-stop-on-nonfinite`` turns both off.
"""

from __future__ import annotations

import math
import os
import signal

import torch

import fullgraph.environ as environ
from fullgraph.errors import NonFiniteError

__all__ = ["check_loss", "check_weights", "fault"]

_ADVICE = "lower --lr or set --clip-grad-norm (--no-stop-on-nonfinite trains on regardless)"


def _last_good(cfg) -> str:
    from fullgraph.train.checkpoint import complete_checkpoints

    last = complete_checkpoints(cfg.run.out) if cfg.run.out else []
    return f"the last good checkpoint is {last[0]}" if last else "the run has no checkpoint to resume from"


def check_loss(cfg, record: dict) -> None:
    """Stop (``NonFiniteError``) on a NaN or infinite epoch loss, before anything of the epoch is written."""
    if not cfg.optimization.stop_on_nonfinite or math.isfinite(record["loss"]):
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
