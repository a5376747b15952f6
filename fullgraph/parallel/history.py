"""The history tables of the chunked-stale rule (:mod:`fullgraph.parallel.pipeline`).

Per graph layer, a table of every local node's input row: a row holds this epoch's value once its
chunk (or, in the hybrid, its halo rows) has been processed, and the history otherwise. With refresh
period ``a = 1`` a table simply keeps last epoch's values; with ``a > 1`` a copy taken at the end of
epochs a, 2a, … is restored at the start of every epoch, so epoch t reads epoch a·⌊(t-1)/a⌋.
"""

from __future__ import annotations

import torch

__all__ = ["History"]


class History:
    """``tables``: layer input index → ``[n_local, d]`` (``None`` until the first exact pass fills
    them); ``saved``: the copy restored at each epoch's start when ``refresh > 1``."""

    def __init__(self, refresh: int):
        self.refresh = refresh
        self.tables: dict[int, torch.Tensor] | None = None
        self.saved: dict[int, torch.Tensor] = {}

    def keep(self) -> None:
        """Take the copy that later epochs restore (after the tables were first filled)."""
        if self.refresh > 1:
            self.saved = {i: t.clone() for i, t in self.tables.items()}

    def restore(self) -> None:
        """At an epoch's start: the tables as the last refresh left them."""
        if self.refresh > 1:
            for i, t in self.tables.items():
                t.copy_(self.saved[i])

    def end_epoch(self, epoch: int) -> None:
        if self.refresh > 1 and epoch % self.refresh == 0:
            for i, t in self.tables.items():
                self.saved[i].copy_(t)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The tables the next epoch reads (current, and the refresh copy), as a checkpoint names them."""
        out = {f"table/{i}": t for i, t in (self.tables or {}).items()}
        return out | {f"history/{i}": t for i, t in self.saved.items()}

    def load_state_tensors(self, state: dict[str, torch.Tensor]) -> None:
        self.tables = {int(k.split("/")[1]): v for k, v in state.items() if k.startswith("table/")}
        self.saved = {int(k.split("/")[1]): v for k, v in state.items() if k.startswith("history/")}
