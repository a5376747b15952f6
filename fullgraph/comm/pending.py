"""Started transfers and the host copies a GPU rank's transfers may travel in.

``Pending`` holds a started transfer's handles, the tensors that must live until it ends, and (where
the transfer moved host copies of a GPU's tensors) the copies to put back on the GPU once it ends.
Ranks that share a GPU talk over gloo (``fullgraph.device.shares_gpu``), whose point-to-point and
all-to-all operations move host memory only: ``Comm`` then sends a host copy of each tensor and
receives into a host buffer (:func:`host_copy`, :func:`host_buffer`), the price of running every
multi-rank layout's CUDA path on one GPU.
"""

from __future__ import annotations

import time
from datetime import timedelta

import torch

__all__ = ["Pending", "host_copy", "host_buffer"]


def host_copy(t: torch.Tensor) -> torch.Tensor:
    """A host tensor of ``t``'s contents (a new one, whatever ``t``'s device)."""
    return torch.empty(t.shape, dtype=t.dtype).copy_(t)


def host_buffer(t: torch.Tensor) -> torch.Tensor:
    """An empty host tensor of ``t``'s shape and dtype, to receive what ``t`` will hold."""
    return torch.empty(t.shape, dtype=t.dtype)


class Pending:
    """Handles of started point-to-point operations (gloo returns one per operation: all are waited
    on); ``wait`` gives up after the communicator's timeout, so a dead neighbour cannot hang a rank.
    ``back``: ``(host buffer, tensor)`` pairs whose buffer is copied into the tensor once all are done."""

    def __init__(self, works, tensors, comm, category: str, back=()):
        self.works, self.tensors, self.comm, self.category, self.back = works, tensors, comm, category, list(back)

    def wait(self) -> float:
        """Block until every operation is done; returns (and records) the seconds spent waiting."""
        t0 = time.perf_counter()
        for w in self.works:
            if not w.wait(timeout=timedelta(seconds=self.comm.timeout_s)):
                raise RuntimeError(f"rank {self.comm.env.rank}: a {self.category} transfer did not finish in "
                                   f"{self.comm.timeout_s:g} s")
        self.works = []
        for host, t in self.back:
            t.copy_(host)
        self.back = []
        self.comm.ledger.record(self.category, 0, waited := time.perf_counter() - t0)
        return waited
