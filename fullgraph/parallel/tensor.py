"""Tensor parallelism (NeutronTP): the feature dimension split instead of the graph.

Every process holds the whole graph's structure and, of every dense matrix, the rows of its range
``r`` (``[N/P, H]``, contiguous runs of the node order: the dense work is balanced by construction).
A layer's sparse product is where the split changes: the rows switch to column slices with one
all-to-all (process r gets column slice r of every row, ``[N, H/P]``), each process multiplies the
whole Â by its slice (no halo: every in-neighbour of every node is local), and a second all-to-all
brings the result back to rows. The weight product, bias, norm, activation, dropout and loss run on
the rows. So a layer costs two all-to-alls forward and two backward (``tp/fwd``, ``tp/bwd``), each
moving ``N·w − Σ_r n_r·w_r`` values of the product's width w, i.e. ``(P−1)/P·N·w`` when P divides
both: 2·(P−1)/P·N·w·4 bytes per product at fp32.

Like the SpMM layouts this leaves the model and its fused layer untouched: the block's matrix is a
:class:`TensorOp` whose ``mm`` / ``mm_t`` do the switch, the product and the switch back. A switch
could be saved only where two products follow each other with nothing between them that mixes
columns: the propagation of APPNP-style models, which ``--tensor-decoupled`` runs on the column
slices from the first step to the last (:class:`DecoupledForward`: two all-to-alls per pass).

Attention (GAT) is completed by ``Block.attention``: the per-node scores are whole on the rows (they
need every column of a row), so each process computes them for its rows, the scores of all nodes are
gathered (``tp/attn``, ``[N, heads]`` twice per layer; the backward sums the gathered gradients back
to their owners), every process computes every edge's weight (``E × heads`` work and memory,
repeated on each process), and sums its column slice with them.

``--tensor-chunks K`` aggregates each owner's rows in K chunks and sends each finished chunk to its
owner while the next one is multiplied, so the ``[N, w/P]`` result is never held whole; it moves
the same bytes. ``--comm-precision``: the switched rows travel encoded (``comm.wire``), keyed like
the SpMM layouts' (global node id, column, layer, phase).
"""

from __future__ import annotations

from itertools import accumulate

import torch

from fullgraph.comm.context import EXCHANGE_TAG, Comm
from fullgraph.comm.precision import decode_rows, encode_rows
from fullgraph.comm.wire import empty_rows, exchange_rows
from fullgraph.ops import SparseOp
from fullgraph.parallel.spmm import WireSites
from fullgraph.partition.blockrows import column_counts, node_counts

__all__ = ["Switch", "TensorOp", "column_counts", "node_counts", "layer_sites"]

CHUNK_TAG = EXCHANGE_TAG + 1
"""The first tag of a chunked product's transfers (one per chunk), above the all-to-all's."""


def _starts(counts: list[int]) -> list[int]:
    return [0, *accumulate(counts)]


class Switch:
    """The two all-to-alls between rows and column slices, for one process (``ids[k]``: the global
    node ids of process k's rows, which key int8's rounding)."""

    def __init__(self, comm: Comm, counts: list[int], precision: str, ids: list[torch.Tensor]):
        self.comm, self.counts, self.precision, self.ids = comm, counts, precision, ids
        self.me, self.P = comm.rank, comm.world_size
        self.prefix = ""  # "eval/" while the layout evaluates

    def to_columns(self, x: torch.Tensor, category: str, site=None, key=None) -> torch.Tensor:
        """My rows ``[n_me, w]`` -> my column slice of every row ``[N, w_me]``."""
        cuts = column_counts(x.shape[1], self.P)
        st = _starts(cuts)
        send = [x[:, st[j]:st[j + 1]] for j in range(self.P)]
        got = exchange_rows(self.comm, send, [(n, cuts[self.me]) for n in self.counts], self.prefix + category,
                            self.precision, rows=[self.ids[self.me]] * self.P, site=site, key=key, col0=st[:-1])
        return torch.cat(got)

    def to_rows(self, y: torch.Tensor, width: int, category: str, site=None, key=None) -> torch.Tensor:
        """My column slice ``[N, w_me]`` of a ``width``-wide matrix -> my rows ``[n_me, width]``."""
        cuts = column_counts(width, self.P)
        col0 = _starts(cuts)[self.me]
        back = exchange_rows(self.comm, list(y.split(self.counts)), [(self.counts[self.me], c) for c in cuts],
                             self.prefix + category, self.precision, rows=self.ids, site=site, key=key,
                             col0=[col0] * self.P)
        return torch.cat(back, 1)


class TensorOp:
    """``Â`` (and ``Âᵀ``) for one process of the tensor layout: ``mm`` / ``mm_t`` map this process's rows
    of a dense matrix to its rows of the product, through column slices (see the module docstring).
    ``chunks``: row chunks per owner for the overlapped switch back (0: one all-to-all)."""

    def __init__(self, a: SparseOp, switch: Switch, chunks: int = 0):
        # no more chunks than the fewest rows an owner has: every transfer then carries rows both ways
        self.a, self.switch, self.chunks = a, switch, min(chunks, min(switch.counts))
        n = switch.counts[switch.me]
        self.shape = (n, n)
        self.nnz = a.nnz
        self.sites = WireSites()
        self._pieces: dict[bool, list[list[SparseOp]]] = {}

    @property
    def prefix(self) -> str:
        return self.switch.prefix

    @prefix.setter
    def prefix(self, value: str) -> None:
        self.switch.prefix = value

    def _product(self, x: torch.Tensor, transpose: bool) -> torch.Tensor:
        site, key = self.sites.next(transpose), self.sites.key
        cat = "tp/bwd" if transpose else "tp/fwd"
        width = x.shape[1]
        xc = self.switch.to_columns(x.contiguous(), cat, site(WireSites.REDIST_IN), key)
        if self.chunks:
            return self._chunked(xc, width, transpose, cat, site(WireSites.REDIST_OUT), key)
        if xc.shape[1] == 0:  # fewer columns than processes: this one has none
            yc = xc.new_zeros((self.a.shape[0], 0))
        else:
            yc = self.a.mm_t(xc) if transpose else self.a.mm(xc)
        return self.switch.to_rows(yc, width, cat, site(WireSites.REDIST_OUT), key)

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return self._product(x, False)

    def mm_t(self, x: torch.Tensor) -> torch.Tensor:
        return self._product(x, True)

    def pieces(self, transpose: bool) -> list[list[SparseOp]]:
        """Â's (or Âᵀ's) rows cut by owner, each owner's into ``chunks`` runs (built once, kept)."""
        if transpose not in self._pieces:
            full = self.a if not transpose or self.a.symmetric else _transposed(self.a)
            out, start = [], 0
            for n in self.switch.counts:
                bounds = _starts([len(t) for t in torch.tensor_split(torch.arange(n), self.chunks)])
                out.append([_row_range(full, start + lo, start + hi) for lo, hi in zip(bounds, bounds[1:])])
                start += n
            self._pieces[transpose] = out
        return self._pieces[transpose]

    def _chunked(self, xc: torch.Tensor, width: int, transpose: bool, cat: str, site, key) -> torch.Tensor:
        """The switch back, chunk by chunk: at step s this process multiplies the chunks of owner
        ``me + s`` and sends each as soon as it is done, while it receives the same chunk of its own
        rows from ``me − s`` (one send and one receive per transfer, in the same order on every
        process, so NCCL's grouped pairs match); at most two chunks are in flight."""
        sw, pieces = self.switch, self.pieces(transpose)
        me, P, p = sw.me, sw.P, sw.precision
        cuts = column_counts(width, P)
        col_start = _starts(cuts)
        out = xc.new_empty((sw.counts[me], width))
        mine = _starts([pc.shape[0] for pc in pieces[me]])
        flight, tag = [], CHUNK_TAG

        def product(pc: SparseOp) -> torch.Tensor:
            return pc.mm(xc) if xc.shape[1] else xc.new_zeros((pc.shape[0], 0))

        for c, pc in enumerate(pieces[me]):  # my own rows of my slice: no transfer
            out[mine[c]:mine[c + 1], col_start[me]:col_start[me + 1]] = product(pc)
        for s in range(1, P):
            dst, src = (me + s) % P, (me - s) % P
            lo_dst = _starts([pc.shape[0] for pc in pieces[dst]])
            for c, pc in enumerate(pieces[dst]):
                ids = sw.ids[dst][lo_dst[c]:lo_dst[c + 1]]
                y = product(pc)
                payload = y if p == "fp32" else encode_rows(y, p, rows=ids, site=site, key=key, col0=col_start[me])
                rows = mine[c + 1] - mine[c]
                buf = (xc.new_empty((rows, cuts[src])) if p == "fp32" else empty_rows(rows, cuts[src], p, xc))
                pending = sw.comm.post([(payload, sw.comm.ranks[dst], tag)], [(buf, sw.comm.ranks[src], tag)],
                                       sw.prefix + cat)
                flight.append((pending, buf, src, c))
                tag += 1
                if len(flight) > 2:
                    self._land(flight.pop(0), out, mine, col_start, cuts, p)
        for item in flight:
            self._land(item, out, mine, col_start, cuts, p)
        return out

    @staticmethod
    def _land(item, out, mine, col_start, cuts, precision) -> None:
        pending, buf, src, c = item
        pending.wait()
        got = buf if precision == "fp32" else decode_rows(buf, precision, cuts[src]).to(out.dtype)
        out[mine[c]:mine[c + 1], col_start[src]:col_start[src + 1]] = got

    def to(self, device) -> "TensorOp":
        self.a = self.a.to(device)
        self.switch.ids = [t.to(device) for t in self.switch.ids]
        self._pieces = {}
        return self


def _row_range(a: SparseOp, lo: int, hi: int) -> SparseOp:
    """Rows ``lo..hi-1`` of ``a`` (its index arrays sliced, its row pointer rebased)."""
    s, e = int(a.indptr[lo]), int(a.indptr[hi])
    return SparseOp(a.indptr[lo:hi + 1] - s, a.indices[s:e], a.values[s:e], (hi - lo, a.shape[1]), symmetric=False)


def _transposed(a: SparseOp) -> SparseOp:
    """``Aᵀ`` as an operator of its own (its rows are then cut like Â's)."""
    return SparseOp.from_tensor(a.At)


# ---------------------------------------------------------------- switches autograd can differentiate
class _ToColumns(torch.autograd.Function):
    """Rows -> column slices; the backward sends the slices' gradient back to rows (``tp/bwd``)."""

    @staticmethod
    def forward(ctx, x, switch: Switch, sites, key):
        ctx.switch, ctx.sites, ctx.key, ctx.width = switch, sites, key, x.shape[1]
        return switch.to_columns(x.contiguous(), "tp/fwd", sites(False, WireSites.REDIST_IN), key)

    @staticmethod
    def backward(ctx, g):
        return ctx.switch.to_rows(g.contiguous(), ctx.width, "tp/bwd", ctx.sites(True, WireSites.REDIST_OUT),
                                  ctx.key), None, None, None


class _ToRows(torch.autograd.Function):
    """Column slices of a ``width``-wide matrix -> rows; the backward switches the gradient to columns."""

    @staticmethod
    def forward(ctx, y, width: int, switch: Switch, sites, key):
        ctx.switch, ctx.sites, ctx.key = switch, sites, key
        return switch.to_rows(y.contiguous(), width, "tp/fwd", sites(False, WireSites.REDIST_OUT), key)

    @staticmethod
    def backward(ctx, g):
        return ctx.switch.to_columns(g.contiguous(), "tp/bwd", ctx.sites(True, WireSites.REDIST_IN),
                                     ctx.key), None, None, None, None


class _GatherRows(torch.autograd.Function):
    """Every process's rows of ``t`` (``[n_r, k]``), in node order, on every process (``tp/attn``, fp32);
    the backward sums each row's gradients from every process back at its owner, in rank order."""

    @staticmethod
    def forward(ctx, t, switch: Switch):
        ctx.switch = switch
        t = t.contiguous()
        got = exchange_rows(switch.comm, [t] * switch.P, [(n, t.shape[1]) for n in switch.counts],
                            switch.prefix + "tp/attn", "fp32")
        return torch.cat(got)

    @staticmethod
    def backward(ctx, g):
        sw = ctx.switch
        k = g.shape[1]
        parts = exchange_rows(sw.comm, list(g.contiguous().split(sw.counts)), [(sw.counts[sw.me], k)] * sw.P,
                              "tp/attn", "fp32")
        out = parts[0].clone()
        for got in parts[1:]:
            out += got
        return out, None


def layer_sites(sites: WireSites):
    """The key sites of the next graph layer's messages, forward and backward, as
    ``site(backward, phase)`` (int8's rounding; the switches of attention and of the decoupled pass)."""
    from fullgraph.comm.precision import wire_site

    layer = sites.calls
    sites.calls += 1
    return lambda backward, phase: wire_site(layer, backward, phase)
