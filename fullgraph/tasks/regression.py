"""Node regression: a number per node (``--task node-regression``).

The model's output row of a node is one number. Targets are standardized inside: by the mean and the
standard deviation of the training nodes' targets, summed over the ranks once at set-up (:meth:`bind`),
so the loss, the mean squared error of standardized targets, has the scale classification's losses
have, and the learning rates, initializations and weight decay that suit them suit it too. The loss is
summed over a rank's training rows and divided by the global count, as node labels' is, so that the
ranks' losses and gradients sum to one process's. Predictions are mapped back (``out · std + mean``), and
every metric is in the targets' own units: RMSE, MAE and R² (one minus the squared error over the
squared deviation from the split's own mean), from five sums per split (squared and absolute errors,
the targets, their squares, the count) in one reduction over the ranks, accumulated in float64.

Labels: a float32 number per node (``Graph.numeric``); integer labels are taken as numbers too (a
count, a rating, a year), as ``docs/tasks.md`` says; multi-label rows are refused.
"""

from __future__ import annotations

import math

import torch

from fullgraph.errors import InputError
from fullgraph.options import REGRESSION_METRICS
from fullgraph.tasks.metrics import NamedSums
from fullgraph.tasks.node import SPLITS, NodeTask

__all__ = ["RegressionTask", "regression_metrics"]


def regression_metrics(sse: float, sae: float, total: float, squares: float, n: float) -> dict[str, float]:
    """RMSE, MAE and R² of a split from its sums: squared errors, absolute errors, targets, squared
    targets, count. R² is 0 where the targets do not vary (no deviation to explain)."""
    if n <= 0:
        return {"rmse": 0.0, "mae": 0.0, "r2": 0.0}
    deviation = squares - total * total / n
    return {"rmse": math.sqrt(max(sse, 0.0) / n), "mae": sae / n,
            "r2": 1.0 - sse / deviation if deviation > 1e-12 * max(squares, 1.0) else 0.0}


class RegressionTask(NodeTask):
    """A number per node: what ``--task node-regression`` trains (module docstring)."""

    name = "node-regression"
    metrics = REGRESSION_METRICS

    def __init__(self, cfg=None):
        super().__init__(cfg)
        self.scale: tuple[float, float] | None = None  # (mean, std) of the training targets, from bind

    @staticmethod
    def out_width(num_classes: int, hidden: int) -> int:
        """One number per node, whatever the labels' class count."""
        return 1

    def bind(self, engine, model) -> None:
        """Take the labels as numbers, and the training targets' mean and deviation (collective)."""
        if engine.y.dim() != 1:
            raise InputError(f"expected one number per node with --task node-regression (got multi-label rows of "
                             f"{engine.y.shape[1]} columns): use --task node")
        engine.y = engine.y.to(torch.float32)
        y = engine.y[engine.train_mask].double()
        total, squares, n = engine.reduce_sum([float(y.sum()), float((y * y).sum()), float(y.numel())],
                                              "meta/metrics")
        if engine.ledger is not None:
            engine.ledger.take()  # set-up traffic, not an epoch's
        mean = total / n
        std = math.sqrt(max(squares / n - mean * mean, 0.0))
        self.scale = (mean, std if std > 1e-12 * max(abs(mean), 1.0) else 1.0)  # constant targets: unscaled

    def _scale(self, engine) -> tuple[float, float]:
        if self.scale is None:  # evaluate and predict in one process, without the trainer's set-up
            self.bind(engine, None)
        return self.scale

    def rows_loss(self, out: torch.Tensor, y: torch.Tensor, count: int) -> torch.Tensor:
        """The squared errors of some training rows' standardized targets, as a share of ``count``."""
        mean, std = self.scale
        return (out[:, 0] - (y - mean) / std).square().sum() / count

    def metric(self, engine) -> str:
        chosen = self.cfg.optimization.metric if self.cfg is not None else "auto"
        return "rmse" if chosen == "auto" else chosen

    def evaluate(self, engine, model, logits: torch.Tensor) -> dict:
        """Every metric of each split in the targets' units (``metrics``, by name), the validation loss
        (standardized, as trained); no ``*_acc``."""
        e, metric = engine, self.metric(engine)
        mean, std = self._scale(e)
        pred = logits[:, 0].double() * std + mean
        masks, sums = e.eval_masks(), NamedSums()
        for split, mask in zip(SPLITS, masks):
            y, err = e.y[mask].double(), pred[mask] - e.y[mask].double()
            sums.add(split, [float(err.square().sum()), float(err.abs().sum()), float(y.sum()),
                             float(y.square().sum()), float(y.numel())])
        sums.add("val/loss", [float(self.rows_loss(logits[masks[1]], e.y[masks[1]], 1))])
        sums.reduce(e, "eval/reduce")
        record = {"train_acc": None, "val_acc": None, "test_acc": None,
                  "val_loss": sums["val/loss"][0] / max(sums["val"][4], 1.0), "metric": metric, "metrics": {}}
        for split in SPLITS:
            record["metrics"][split] = got = regression_metrics(*sums[split])
            record[f"{split}_metric"] = got[metric]
        return record

    def predictions(self, engine, logits: torch.Tensor) -> dict[str, torch.Tensor]:
        """``predict``'s arrays: each node's number in the targets' units (no probabilities)."""
        mean, std = self._scale(engine)
        return {"predictions": (logits[:, 0].double() * std + mean).float()}
