"""``TensorEngine``: one process of ``--parallel tensor`` (the operator and switches: ``parallel.tensor``).

Process r owns rows ``r`` of the node order (``node_counts``) for everything node-wise: features,
labels, splits, the loss, and the rows of every activation between layers. The block it hands the
model holds a :class:`~fullgraph.parallel.tensor.TensorOp` over the whole graph, the global ids of
its rows (dropout masks are keyed by them, so they equal one process's), a ``reduce`` over all
processes (batch statistics span every node) and, for attention models, ``attention`` (the layer's
edge weights over the whole graph, its column slice summed with them). Weight gradients: each process
computes those of its rows' loss; their sum over processes (``grad/allreduce``) is the global one.

With ``--tensor-decoupled`` the engine runs a separable model's layers itself: ``pre`` on the rows,
one switch to column slices, every propagation step on the slices with the plain whole-graph Â, one
switch back, ``post`` on the rows.
"""

from __future__ import annotations

import torch

from fullgraph.comm.context import Comm
from fullgraph.comm.stats import sum_over
from fullgraph.errors import InputError
from fullgraph.ops import Block
from fullgraph.ops.csr import take_rows
from fullgraph.ops.edges import EdgeSums
from fullgraph.parallel.engine import ReplicatedEngine, input_features, world_comm
from fullgraph.parallel.tensor import (Switch, TensorOp, _GatherRows, _ToColumns, _ToRows, column_counts,
                                       layer_sites, node_counts)

__all__ = ["TensorEngine", "WholeGraphAttention", "tensor_engine"]


class WholeGraphAttention:
    """``Block.attention`` over the whole graph (see the module docstring): gather every node's scores,
    weigh every edge, sum this process's column slice of ``wh`` (``[n_me, heads·d]``) with the
    weights, and switch the sums back to rows. It holds the operator, not the engine (no cycle)."""

    def __init__(self, op: TensorOp):
        self.op = op
        self._sums = None

    def __call__(self, wh: torch.Tensor, s_src: torch.Tensor, s_dst: torch.Tensor, weigh) -> torch.Tensor:
        sw, n = self.op.switch, self.op.a.shape[0]
        if self._sums is None:  # gathers and sums in a fixed order: the same bits every run (ops.edges)
            self._sums = EdgeSums(self.op.a)
        sums = self._sums
        alpha = weigh(sums.gather_src(_GatherRows.apply(s_src, sw)), sums.gather_dst(_GatherRows.apply(s_dst, sw)),
                      sums.dst, n, sums)  # [E, heads]
        width, heads = wh.shape[1], s_src.shape[1]
        sites, key = layer_sites(self.op.sites), self.op.sites.key
        xc = _ToColumns.apply(wh, sw, sites, key)  # [N, w_me]
        start = sum(column_counts(width, sw.P)[:sw.me])
        head = torch.arange(start, start + xc.shape[1], device=xc.device) // (width // heads)
        msg = sums.gather_src(xc) * alpha.index_select(1, head)  # (alpha[:, head]'s backward accumulates in thread order)
        return _ToRows.apply(sums.sum_at_dst(msg), width, sw, sites, key)


class TensorEngine(ReplicatedEngine):
    """Args:
        row: the whole graph as one block row (``partition.blockrows``, cut with ``blocks = 1``).
        chunks: ``--tensor-chunks``; decoupled: ``--tensor-decoupled``; precision: ``--comm-precision``.
    """

    def __init__(self, row, norm: str, comm: Comm, *, chunks: int = 0, decoupled: bool = False,
                 precision: str = "fp32"):
        if row.blocks != 1 or row.rows.numel() != row.num_nodes:
            raise InputError(f"expected the whole graph as one block row for --parallel tensor (got block row "
                             f"{row.index} of {row.blocks})")
        if comm.world_size > row.num_nodes:
            raise InputError(f"expected at most one process per node with --parallel tensor (got "
                             f"{comm.world_size} processes for {row.num_nodes} nodes)")
        self.comm, self.rank, self.world_size, self.ledger = comm, comm.rank, comm.world_size, comm.ledger
        self.device = dev = comm.device
        self.mode, self.decoupled, self.chunks = "tensor", decoupled, chunks
        counts = node_counts(row.num_nodes, comm.world_size)
        ranges = torch.arange(row.num_nodes).split(counts)
        mine = ranges[comm.rank]
        a = row.adjacency([row.rows])[0]  # [N, N], the whole Â (its transpose is kept when asked)
        self.switch = Switch(comm, counts, precision, [r.to(dev) for r in ranges])
        self.op = TensorOp(a, self.switch, chunks).to(dev)
        self.block = Block(self.op, norm, src_ids=mine.to(dev), dst_ids=mine.to(dev), reduce=sum_over(comm),
                           attention=WholeGraphAttention(self.op))
        self.x = input_features(take_rows(row.x, mine)).to(dev)
        self.y, self.train_mask, self.val_mask, self.test_mask = (
            t[mine].to(dev) for t in (row.y, row.train_mask, row.val_mask, row.test_mask))
        self.num_train, self.num_val, self.num_test = row.num_train, row.num_val, row.num_test
        self.in_dim, self.num_classes, self.name = row.num_features, row.num_classes, row.name
        self.num_nodes, self.nnz = row.num_nodes, a.nnz

    def describe(self) -> str:
        extra = ", decoupled" if self.decoupled else (f", {self.chunks} chunks per owner" if self.chunks else "")
        return (f"tensor {super().describe()}: {self.world_size} column slices, process {self.rank} holds rows of "
                f"{self.block.num_dst} of {self.num_nodes} nodes and the whole graph ({self.nnz} non-zeros){extra}")

    def summary(self) -> dict:
        return {"name": self.name, "processes": self.world_size, "rows": self.switch.counts, "nnz": self.nnz,
                "chunks": self.chunks, "decoupled": self.decoupled}

    # ------------------------------------------------------------------ forward
    def forward(self, model, epoch: int, training: bool) -> torch.Tensor:
        self.op.prefix = "" if training else "eval/"
        self.op.sites.begin()
        if self.decoupled:
            return self._decoupled(model)
        return model(self.block, self.x)

    def _decoupled(self, model) -> torch.Tensor:
        """``post(switch_back(layers(switch(pre(x)))))``: the layers run on column slices of every row,
        with the whole graph's Â as their block (no communication between them)."""
        rows = self.block.dst_ids
        h = model.pre(self.x, rows)
        width = h.shape[1]
        sites = layer_sites(self.op.sites)
        hc = _ToColumns.apply(h, self.switch, sites, self.op.sites.key)
        whole = Block(self.op.a, self.block.norm)
        h0 = hc if model.uses_h0 else None
        for layer in model.layers:
            hc = layer(whole, hc, h0)
        return model.post(_ToRows.apply(hc, width, self.switch, sites, self.op.sites.key), rows)


def tensor_engine(cfg, norm: str, graph=None, comm: Comm | None = None) -> TensorEngine:
    """This rank's engine of a ``tensor`` run: the whole graph from ``cfg.parallel.partition_dir`` (a
    one-block-row folder the launcher wrote), or from ``graph`` when one is passed in."""
    from fullgraph.partition.blockrows import block_row, load_block_row

    owns = comm is None
    p, seed = cfg.parallel, cfg.optimization.seed
    if graph is not None:
        row = block_row(graph, norm, 1, 0, False, seed)
    elif p.partition_dir is not None:
        row = load_block_row(p.partition_dir, 0, blocks=1, norm=norm, permute=False, seed=seed)
    else:
        raise RuntimeError("a tensor rank needs the graph (--partition-dir; the launcher prepares it)")
    p.mesh.check_graph(row.num_nodes)
    comm = world_comm(cfg, "tensor_engine") if owns else comm  # once its inputs are read and checked
    engine = TensorEngine(row, norm, comm, chunks=p.tensor_chunks, decoupled=p.tensor_decoupled,
                          precision=p.comm_precision)
    engine.owns_comm = owns
    return engine
