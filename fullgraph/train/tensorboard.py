"""``--log-tensorboard DIR``: the run's numbers as TensorBoard scalars, beside ``metrics.jsonl``.

Rank 0 writes, through PyTorch's own ``torch.utils.tensorboard.SummaryWriter`` (the logger PyTorch
users already read), one step per epoch: the loss, the learning rate, the gradient norm where it was
measured, the epoch's time, the evaluation's metrics (every one of the task: ``metrics/<split>/<name>``) and validation loss when one
ran, and the bytes
each ledger category moved (``comm/<category>``, summed over ranks); at the end, each rank's peak
memory (``memory/peak_rss_rank<r>``, and ``memory/peak_cuda_rank<r>`` on GPUs), at the last epoch.
"""

from __future__ import annotations

from fullgraph.errors import InputError

__all__ = ["TensorBoardLog", "SCALARS"]

SCALARS = ("loss", "lr", "grad_norm", "epoch_time_s", "train_metric", "val_metric", "test_metric", "val_loss")
"""The epoch record's fields written as scalars of the same name."""


class TensorBoardLog:
    """Rank 0's TensorBoard writer for ``folder`` (appends on resume: TensorBoard orders by step)."""

    def __init__(self, folder: str):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise InputError("expected the tensorboard package with --log-tensorboard (got none installed): "
                             "pip install tensorboard, or pip install 'fullgraph[tensorboard]'") from None
        self.writer = SummaryWriter(log_dir=folder)
        self.last = 0

    def epoch(self, record: dict) -> None:
        step = self.last = record["epoch"]
        for name in SCALARS:
            if isinstance(record.get(name), (int, float)):
                self.writer.add_scalar(name, record[name], step)
        for split, got in record.get("metrics", {}).items():
            for name, value in got.items():
                self.writer.add_scalar(f"metrics/{split}/{name}", value, step)
        for category, nbytes in record.get("comm_bytes", {}).items():
            self.writer.add_scalar(f"comm/{category}", nbytes, step)

    def summary(self, summary: dict) -> None:
        for key, tag in (("peak_rss_bytes_per_rank", "peak_rss"), ("peak_cuda_bytes_per_rank", "peak_cuda")):
            for rank, nbytes in enumerate(summary.get(key) or []):
                self.writer.add_scalar(f"memory/{tag}_rank{rank}", nbytes, self.last)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
