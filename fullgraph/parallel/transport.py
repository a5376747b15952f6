"""What a pipeline or hybrid rank sends and receives: a chunk's rows to the next stage and their
gradients back to the previous one (point to point, one tag per chunk so that chunks in flight never
mix), and a chunk's halo rows within the stage's graph-parallel group (all-to-all). Every transfer
goes through ``Comm``, so the ledger counts it; the engine (``pipeline.py``) decides what to move
and when, and times the waits.

Rows travel at the run's communication precision (``fullgraph.comm.precision``): encoded to bytes
before they leave, decoded after the wait; int8's rounding keyed by the rows' global node ids and a
site (the layer whose input they are, forward or backward).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fullgraph.comm.context import Comm, Pending
from fullgraph.comm.halo import HaloPlan, exchange_halo, send_rows
from fullgraph.comm.precision import check_precision, decode_rows, encode_rows, row_bytes, wire_site

__all__ = ["StageLinks", "StageTransport"]


@dataclass(frozen=True)
class StageLinks:
    """Whom one rank of a chunked run talks to. ``comm``: the world (``None``: the one-process
    simulation); ``group``: the stage's graph-parallel communicator (``None`` when a stage is one
    process); ``prev_rank`` / ``next_rank``: the neighbouring stages' processes that hold the same part
    (``None`` at the ends); ``precision``: of the rows on the wire; ``owns_comm``: the engine closes
    ``comm`` when it is done."""

    comm: Comm | None = None
    group: Comm | None = None
    prev_rank: int | None = None
    next_rank: int | None = None
    precision: str = "fp32"
    owns_comm: bool = True


class StageTransport:
    """The moves of one rank over its ``links``; ``plan``: the stage group's whole-part halo exchange
    (for the exact pass); ``ids``: the global id of every local row (int8's rounding is keyed by it)."""

    def __init__(self, links: StageLinks, device: torch.device, plan: HaloPlan | None = None,
                 ids: torch.Tensor | None = None):
        self.comm, self.group, self.device = links.comm, links.group, device
        self.peers = {"prev": links.prev_rank, "next": links.next_rank}
        self.plan = plan
        self.precision, self.ids = check_precision(links.precision), ids

    def _encode(self, t: torch.Tensor, rows: torch.Tensor | None, site: int | None) -> torch.Tensor:
        if self.precision == "fp32":
            return t.detach().contiguous()
        return encode_rows(t, self.precision, rows=None if rows is None else self.ids[rows], site=site)

    def send(self, tensors: list[torch.Tensor], to: str, category: str, tag: int, *,
             rows: torch.Tensor | None = None, layer: int | None = None, backward: bool = False) -> Pending:
        """Start sending ``tensors`` to the ``prev`` or ``next`` stage (tags ``2·tag + i``): the input
        rows of graph layer ``layer`` (or their gradient, ``backward``), then H0's when GCNII sends it;
        ``rows``, their local ids, and the layer key int8's rounding (H0 as layer 0's input, which no
        other message carries)."""
        sites = [None] * len(tensors) if layer is None else [wire_site(layer, backward), wire_site(0, backward)]
        return self.comm.post([(self._encode(t, rows, site), self.peers[to], 2 * tag + i)
                               for i, (t, site) in enumerate(zip(tensors, sites))], [], category)

    def recv(self, shapes: list[tuple], frm: str, category: str, tag: int) -> tuple[list[torch.Tensor], Pending]:
        """Start receiving tensors of ``shapes`` from the ``prev`` or ``next`` stage; returns the
        buffers and what to wait on before reading them (through ``opened``)."""
        if self.precision == "fp32":
            bufs = [torch.empty(s, device=self.device) for s in shapes]
        else:
            bufs = [torch.empty((s[0], row_bytes(s[1], self.precision)), dtype=torch.uint8, device=self.device)
                    for s in shapes]
        return bufs, self.comm.post([], [(b, self.peers[frm], 2 * tag + i) for i, b in enumerate(bufs)], category)

    def opened(self, bufs: list[torch.Tensor], shapes: list[tuple]) -> list[torch.Tensor]:
        """The tensors that ``recv``'s buffers hold, once waited for."""
        if self.precision == "fp32":
            return bufs
        return [decode_rows(b, self.precision, s[1]) for b, s in zip(bufs, shapes)]

    def _rows(self, rows: torch.Tensor, counts_out: list[int], counts_in: list[int], category: str,
              local: torch.Tensor, site: int) -> torch.Tensor:
        ids = None if self.precision == "fp32" else self.ids[local]
        return send_rows(self.group, rows, counts_out, counts_in, category, self.precision, ids, site)

    def chunk_halo(self, h: torch.Tensor, ch, category: str, layer: int) -> torch.Tensor:
        """The rows of chunk ``ch`` that peers read as halo, out; this rank's halo rows of ``ch``, in
        (``layer``: the graph layer that reads them)."""
        return self._rows(h[ch.send_pos], ch.send_counts, ch.recv_counts, category, ch.dst[ch.send_pos],
                          wire_site(layer, False))

    def chunk_halo_grads(self, g: torch.Tensor, ch, category: str, layer: int) -> torch.Tensor:
        """Gradients of this rank's halo rows of chunk ``ch`` back to their owners; in, the gradients
        of the rows of ``ch`` that peers read (in ``ch.send_pos`` order)."""
        return self._rows(g, ch.recv_counts, ch.send_counts, category, ch.recv_idx, wire_site(layer, True))

    def part_halo(self, h: torch.Tensor, category: str, layer: int) -> torch.Tensor:
        """The whole part's halo rows of ``h`` (the exact evaluation pass reads every halo row)."""
        return exchange_halo(h, self.group, self.plan, category, self.precision, layer)
