"""What a pipeline or hybrid rank sends and receives: a chunk's rows to the next stage and their
gradients back to the previous one (point to point, one tag per chunk so that chunks in flight never
mix), and a chunk's halo rows within the stage's graph-parallel group (all-to-all). Every transfer
goes through ``Comm``, so the ledger counts it; the engine (``pipeline.py``) decides what to move
and when, and times the waits.
"""

from __future__ import annotations

import torch

from fullgraph.comm.context import Comm, Pending
from fullgraph.comm.halo import HaloPlan, exchange_halo

__all__ = ["StageTransport"]


class StageTransport:
    """The links of one rank: ``prev`` and ``next`` are the global ranks of the neighbouring stages'
    processes that hold the same part (``None`` at the ends); ``group`` the stage's graph-parallel
    communicator (``None`` when a stage is one process) and ``plan`` its whole-part halo exchange."""

    def __init__(self, comm: Comm | None, group: Comm | None, device: torch.device, prev_rank: int | None,
                 next_rank: int | None, plan: HaloPlan | None = None):
        self.comm, self.group, self.device = comm, group, device
        self.peers = {"prev": prev_rank, "next": next_rank}
        self.plan = plan  # the whole part's halo exchange, for the exact pass

    def send(self, tensors: list[torch.Tensor], to: str, category: str, tag: int) -> Pending:
        """Start sending ``tensors`` to the ``prev`` or ``next`` stage (tags ``2·tag + i``)."""
        return self.comm.post([(t.detach().contiguous(), self.peers[to], 2 * tag + i) for i, t in enumerate(tensors)],
                              [], category)

    def recv(self, shapes: list[tuple], frm: str, category: str, tag: int) -> tuple[list[torch.Tensor], Pending]:
        """Start receiving tensors of ``shapes`` from the ``prev`` or ``next`` stage; returns the
        buffers and what to wait on before reading them."""
        bufs = [torch.empty(s, device=self.device) for s in shapes]
        return bufs, self.comm.post([], [(b, self.peers[frm], 2 * tag + i) for i, b in enumerate(bufs)], category)

    def chunk_halo(self, h: torch.Tensor, ch, category: str) -> torch.Tensor:
        """The rows of chunk ``ch`` that peers read as halo, out; this rank's halo rows of ``ch``, in."""
        return self.group.all_to_all_rows(h[ch.send_pos], ch.send_counts, ch.recv_counts, category)

    def chunk_halo_grads(self, g: torch.Tensor, ch, category: str) -> torch.Tensor:
        """Gradients of this rank's halo rows of chunk ``ch`` back to their owners; in, the gradients
        of the rows of ``ch`` that peers read (in ``ch.send_pos`` order)."""
        return self.group.all_to_all_rows(g, ch.recv_counts, ch.send_counts, category)

    def part_halo(self, h: torch.Tensor, category: str) -> torch.Tensor:
        """The whole part's halo rows of ``h`` (the exact evaluation pass reads every halo row)."""
        return exchange_halo(h, self.group, self.plan, category)
