"""Collectives of rows at the run's communication precision, for the SpMM layouts (issue 15): a
broadcast, a reduce-scatter, an all-gather and an all-to-all whose payload is the encoded rows of
``fullgraph.comm.precision`` (``uint8`` on every backend). At ``fp32`` the rows travel as they are.

Each takes the keys of int8's stochastic rounding with the rows: ``rows`` (their global node ids),
``site`` (``wire_site``), ``key`` (the step's ``DropoutKey``, captured in the forward so that the
backward, which may run on another thread, rounds with it) and ``col0`` (the first column when the
rows are a column slice).

A process keeps its own rows exact where it is their only reader (the broadcast's root, the
reduce-scatter's owner); where several processes must end up holding the same values (the
all-gather, which completes a reduction over replicas), every copy, the sender's own included, is
the decoded one.
"""

from __future__ import annotations

from itertools import accumulate

import torch

from fullgraph.comm.context import Comm
from fullgraph.comm.precision import decode_rows, encode_rows, row_bytes

__all__ = ["RowsInFlight", "empty_rows", "broadcast_rows", "reduce_scatter_rows", "all_gather_rows", "exchange_rows"]


class RowsInFlight:
    """A started broadcast of rows; ``wait()`` returns them as float rows."""

    def __init__(self, pending, buf: torch.Tensor, finish):
        self.pending, self.buf, self.finish = pending, buf, finish

    def wait(self) -> torch.Tensor:
        self.pending.wait()
        return self.finish(self.buf)


def empty_rows(n: int, width: int, precision: str, like: torch.Tensor) -> torch.Tensor:
    """A buffer for ``n`` rows of ``width`` values as they travel at ``precision`` (float rows at
    fp32, their encoded bytes below it), on ``like``'s device."""
    if precision == "fp32":
        return like.new_empty((n, width))
    return torch.empty((n, row_bytes(width, precision)), dtype=torch.uint8, device=like.device)


def broadcast_rows(comm: Comm, x: torch.Tensor | None, n: int, like: torch.Tensor, root: int, category: str,
                   precision: str = "fp32", *, rows=None, site=None, key=None, col0: int = 0) -> RowsInFlight:
    """Start the broadcast of ``x`` (``[n, like.shape[1]]``; read at the global rank ``root`` only) to
    ``comm``'s group. The root's ``wait()`` gives back ``x`` itself; the others get the decoded rows."""
    width = like.shape[1]
    if comm.env.rank == root:
        x = x.contiguous()
        buf = x if precision == "fp32" else encode_rows(x, precision, rows=rows, site=site, key=key, col0=col0)
        return RowsInFlight(comm.broadcast(buf, root, category, async_op=True), buf, lambda _: x)
    buf = empty_rows(n, width, precision, like)
    finish = (lambda b: b) if precision == "fp32" else (lambda b: decode_rows(b, precision, width).to(like.dtype))
    return RowsInFlight(comm.broadcast(buf, root, category, async_op=True), buf, finish)


def _offsets(counts: list[int]) -> list[int]:
    """Where each rank's rows start in a block grouped by rank, and (last) where they all end."""
    return [0, *accumulate(int(c) for c in counts)]


def reduce_scatter_rows(comm: Comm, x: torch.Tensor, counts: list[int], category: str, precision: str, *,
                        rows=None, site=None, key=None, col0: int = 0) -> torch.Tensor:
    """The sum over ``comm``'s group of the partial rows ``x`` (``[sum(counts), w]``, grouped by the
    group rank that owns them), of my ``counts[me]`` rows only: my own partial exact, each peer's
    encoded at ``precision`` before it leaves (``exchange_rows``). Peers are added in rank order."""
    me, b, n = comm.rank, _offsets(counts), len(counts)
    keys = None if rows is None else [rows[b[r]:b[r + 1]] for r in range(n)]
    parts = exchange_rows(comm, [x[b[r]:b[r + 1]] for r in range(n)], [(counts[me], x.shape[1])] * n, category,
                          precision, rows=keys, site=site, key=key, col0=[col0] * n)
    out = parts[me].clone()
    for r, got in enumerate(parts):
        if r != me:
            out += got
    return out


def all_gather_rows(comm: Comm, piece: torch.Tensor, counts: list[int], category: str, precision: str, *,
                    rows=None, site=None, key=None, col0: int = 0) -> torch.Tensor:
    """Every group rank's ``piece`` (``counts[r]`` rows from rank r), concatenated in rank order, at
    ``precision``; my own piece is decoded from what I sent, so that every rank holds the same rows."""
    me, b = comm.rank, _offsets(counts)
    width = piece.shape[1]
    mine = None if rows is None else rows[b[me]:b[me + 1]]
    sent = encode_rows(piece, precision, rows=mine, site=site, key=key, col0=col0)
    nothing = empty_rows(0, width, precision, piece)
    send = [nothing if r == me else sent for r in range(len(counts))]
    recv = [nothing if r == me else empty_rows(counts[r], width, precision, piece) for r in range(len(counts))]
    comm.all_to_all(send, recv, category)
    return torch.cat([decode_rows(sent if r == me else got, precision, width).to(piece.dtype)
                      for r, got in enumerate(recv)])


def exchange_rows(comm: Comm, send: list[torch.Tensor], recv_shapes: list[tuple[int, int]], category: str,
                  precision: str, *, rows: list | None = None, site=None, key=None,
                  col0: list[int] | None = None) -> list[torch.Tensor]:
    """``send[r]`` (float rows) to group rank r, and the rows of shape ``recv_shapes[r]`` from it, in
    one ``all_to_all``; ``rows[r]`` and ``col0[r]`` key the rounding of ``send[r]``. Below fp32 the
    rows I keep for myself (``send[me]``) are not sent: I keep them exact."""
    if precision == "fp32":
        recv = [send[0].new_empty(s) for s in recv_shapes]
        comm.all_to_all(send, recv, category)
        return recv
    me = comm.rank
    col0 = col0 or [0] * len(send)
    nothing = empty_rows(0, send[me].shape[1], precision, send[me])
    out = [nothing if r == me else encode_rows(t, precision, rows=None if rows is None else rows[r], site=site,
                                                key=key, col0=col0[r]) for r, t in enumerate(send)]
    got = [nothing if r == me else empty_rows(n, w, precision, send[me]) for r, (n, w) in enumerate(recv_shapes)]
    comm.all_to_all(out, got, category)
    return [send[me] if r == me else decode_rows(b, precision, recv_shapes[r][1]).to(send[me].dtype)
            for r, b in enumerate(got)]
