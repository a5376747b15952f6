"""The communication ledger: every byte that crosses a process boundary, by category, with the time
spent waiting for it.

Categories (docs/design.md, "The ledger"): ``halo/fwd``, ``halo/bwd``, ``pipe/fwd``, ``pipe/bwd``,
``grad/allreduce``, ``norm/fwd`` and ``norm/bwd`` (batch statistics), ``sample/index``, ``eval/...``.
Counting rules, used by the analytic checks:

* point-to-point and all-to-all: the bytes this rank sends to *other* ranks (rows it keeps for
  itself are not counted: they never leave the process);
* all-reduce: the bytes of the buffer this rank contributes (the algorithm underneath may move a
  small multiple of that; the ledger records the payload, which is what the formulas predict).
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

__all__ = ["Ledger", "CATEGORIES"]

# Every category any layout records, in one fixed order, so ranks can sum their ledgers with one
# all-reduce of a vector. ``meta/metrics`` is that all-reduce itself (the per-epoch loss and ledger
# totals), kept apart so that the analytic checks of the other categories stay exact.
CATEGORIES = ("halo/fwd", "halo/bwd", "pipe/fwd", "pipe/bwd", "spmm/bcast", "spmm/reduce", "spmm/redist",
              "grad/allreduce", "norm/fwd", "norm/bwd", "sample/index", "eval/halo/fwd", "eval/pipe/fwd", "eval/spmm/bcast",
              "eval/spmm/reduce", "eval/spmm/redist", "eval/reduce", "meta/metrics", "meta/checkpoint",
              "grad/norm",  # appended last: checkpoints written before it read back in order
              "tp/fwd", "tp/bwd", "tp/attn", "eval/tp/fwd", "eval/tp/attn",  # tensor parallelism, later still
              "link/index", "link/fwd", "link/bwd", "eval/link/index", "eval/link/fwd")  # link prediction's pairs


class Ledger:
    def __init__(self) -> None:
        self.bytes: dict[str, int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)

    def record(self, category: str, nbytes: int, seconds: float = 0.0) -> None:
        if category not in CATEGORIES:
            raise ValueError(f"unknown ledger category {category!r} (known: {', '.join(CATEGORIES)})")
        self.bytes[category] += int(nbytes)
        self.seconds[category] += seconds

    @contextmanager
    def timed(self, category: str, nbytes: int):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.record(category, nbytes, time.perf_counter() - t0)

    def take(self) -> tuple[dict[str, int], dict[str, float]]:
        """This rank's totals since the last ``take`` (and reset)."""
        b, s = dict(self.bytes), dict(self.seconds)
        self.bytes.clear()
        self.seconds.clear()
        return b, s

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())
