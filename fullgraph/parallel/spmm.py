"""Algebraic layouts (CAGNET, MG-GCN): the sparse product itself distributed over a process grid.

A GCN layer is ``Z = Â (H W)`` (or ``(Â H) W``); these layouts leave the model and its fused layer
untouched and hand it, as the block's matrix, a :class:`GridOp`: an operator whose ``mm(x)`` and
``mm_t(g)`` compute ``Â x`` and ``Âᵀ g`` for this rank's block row of the dense matrix, across
processes. Everything node-wise (the weight product, bias, ReLU, dropout, GCNII's initial residual,
LayerNorm, the loss) stays local to the block row; only the sparse products communicate. The fused
layer's savings (MG-GCN §4.2 and §4.4: one kept activation per layer, the product order chosen by
width, the first layer's backward product skipped when its input needs no gradient) therefore hold
in these layouts as they do in one process.

Grid (CAGNET Algorithm 2): ``P = R × c`` processes, ``R = P / c`` block rows of Â and of the dense
matrices, each block row replicated on the ``c`` processes of a grid row (ranks ``i·c .. i·c+c-1``,
consecutive, so that the row's reduction stays on one machine). Process ``(i, j)`` owns the block
columns ``K_j`` (the R columns dealt out to the c grid columns) and computes
``Σ_{k ∈ K_j} Â_ik X_k``: block row ``X_k`` is broadcast within grid column j by its owner
``(k, j)``. The partial sums are then summed over the grid row (``spmm/reduce``). ``c = 1`` is the
1D layout: every block broadcast to all, no reduction. With ``overlap`` the broadcast of the next
block is in flight while the current one is multiplied (MG-GCN's double buffer).

``permute`` (MG-GCN): block rows are cut from a seeded random permutation of the nodes instead of
the node order, which spreads dense regions of Â over all blocks (``summary()`` reports the
non-zeros per block row with and without it). Losses and weights do not depend on it.

Weight gradients: every replica of block row i computes the gradient of its rows' loss; the sum
over the R distinct block rows of a grid column (``grad/allreduce`` within the column) is the
global gradient. The loss and the evaluation counts are reported by grid column 0 only.

``--comm-precision`` below fp32 (``fullgraph.comm.wire``): the dense rows of every broadcast and
redistribution travel encoded; a reduction becomes a reduce-scatter of encoded partial sums (and,
where the c replicas of a block row must hold the same sum, an all-gather of the encoded result,
which every replica decodes, its owner included). The sparse blocks of 2D/3D and the weight
gradients stay exact. int8's rounding is keyed by the global node id, the column, the graph layer
(``WireSites``) and the phase of the product.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.comm.context import Comm
from fullgraph.comm.mesh import Mesh
from fullgraph.comm.precision import wire_site
from fullgraph.comm.wire import all_gather_rows, broadcast_rows, exchange_rows, reduce_scatter_rows
from fullgraph.models import SPMM_MODELS  # noqa: F401 - re-exported: the models these layouts take
from fullgraph.errors import InputError
from fullgraph.ops import Block, SparseOp
from fullgraph.ops.dropout import current_key
from fullgraph.ops.csr import indptr_from_counts, take_rows
from fullgraph.parallel.engine import ReplicatedEngine, input_features, torchrun_env, world_comm
from fullgraph.parallel.pairs import PairOwners, take_ends
from fullgraph.partition.blockrows import BlockRow, block_nnz, block_row, load_block_row, row_blocks

__all__ = ["GridOp", "SummaOp", "SpmmEngine", "SPMM_MODELS", "row_blocks", "spmm_engine"]


class WireSites:
    """The key sites of an op's messages in one step (int8's stochastic rounding): the forward's n-th
    product is graph layer n, and the backward multiplies by ``Âᵀ`` in the reverse order, the first
    layer's product last or not at all. ``begin`` starts a step and takes its key (the backward may run
    on another thread, which does not see it)."""

    BCAST, REDUCE, GATHER, REDIST_IN, REDIST_OUT = range(5)  # the phases of one product

    def __init__(self):
        self.begin()

    def begin(self) -> None:
        self.calls, self.back, self.key = 0, 0, current_key()

    def next(self, backward: bool):
        """The site of each phase of the next product, as ``site(phase)``."""
        if backward:
            self.back += 1
            layer = self.calls - self.back
        else:
            layer, self.calls = self.calls, self.calls + 1
        return lambda phase: wire_site(layer, backward, phase)


class GridOp:
    """``Â`` (and ``Âᵀ``) as seen by process ``(i, j)`` of an ``R × c`` grid: ``mm`` / ``mm_t`` map this
    block row of a dense matrix to this block row of the product. Below fp32 (``precision``) the
    broadcast blocks travel encoded and the grid-row sum is a reduce-scatter and an all-gather of
    encoded rows (``fullgraph.comm.wire``); ``ids`` (each block row's global node ids) key int8."""

    def __init__(self, a_blocks: list[SparseOp], at_blocks: list[SparseOp], sizes: list[int], row: int, col: int,
                 c: int, col_comm: Comm, row_comm: Comm | None, overlap: bool, precision: str = "fp32",
                 ids: list[torch.Tensor] | None = None):
        self.a, self.at, self.sizes = a_blocks, at_blocks, sizes
        self.row, self.col, self.c = row, col, c
        self.R = len(sizes)
        self.col_comm, self.row_comm, self.overlap = col_comm, row_comm, overlap
        self.mine = [int(k) for k in np.array_split(np.arange(self.R), c)[col]]  # K_j
        self.shape = (sizes[row], sizes[row])
        self.prefix = ""  # "eval/" while the layout evaluates: its traffic is not training traffic
        self.nnz = sum(b.nnz for b in a_blocks)
        self.precision, self.ids, self.sites = precision, ids if precision == "int8" else None, WireSites()

    def _product(self, blocks: list[SparseOp], x: torch.Tensor, backward: bool) -> torch.Tensor:
        """``Σ_{k ∈ K_j} blocks[k] X_k`` (X_k broadcast in my grid column), summed over my grid row."""
        x = x.contiguous()
        out = x.new_zeros((self.sizes[self.row], x.shape[1]))
        site, key, p = self.sites.next(backward), self.sites.key, self.precision
        ids = (lambda k: self.ids[k]) if self.ids else (lambda k: None)  # noqa: E731

        def start(k: int):  # block row k within my grid column, from its owner (k, col)
            return broadcast_rows(self.col_comm, x if k == self.row else None, self.sizes[k], x, k * self.c + self.col,
                                  self.prefix + "spmm/bcast", p, rows=ids(k), site=site(WireSites.BCAST), key=key)

        ks = self.mine
        pending = start(ks[0]) if self.overlap else None
        for n, k in enumerate(ks):
            if self.overlap:  # block k arrives while block k+1 is already on its way
                arriving = pending
                if n + 1 < len(ks):
                    pending = start(ks[n + 1])
            else:
                arriving = start(k)
            buf = arriving.wait()
            if blocks[k].nnz:
                out += blocks[k].mm(buf)
        if self.c > 1 and p == "fp32":
            self.row_comm.all_reduce_(out, self.prefix + "spmm/reduce")
        elif self.c > 1:  # every replica must hold the same sum: each owns a piece, then all gather
            counts = [len(t) for t in np.array_split(np.arange(out.shape[0]), self.c)]
            cat = self.prefix + "spmm/reduce"
            mine = reduce_scatter_rows(self.row_comm, out, counts, cat, p, rows=ids(self.row),
                                       site=site(WireSites.REDUCE), key=key)
            out = all_gather_rows(self.row_comm, mine, counts, cat, p, rows=ids(self.row),
                                  site=site(WireSites.GATHER), key=key)
        return out

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return self._product(self.a, x, False)

    def mm_t(self, x: torch.Tensor) -> torch.Tensor:
        return self._product(self.at, x, True)

    def to(self, device) -> "GridOp":
        shared = self.at is self.a  # symmetric Â: one set of blocks serves both products
        self.a = [b.to(device) for b in self.a]
        self.at = self.a if shared else [b.to(device) for b in self.at]
        self.ids = [t.to(device) for t in self.ids] if self.ids else None
        return self


class SummaOp:
    """``Â`` on a ``q × q × d`` grid, SUMMA over sparse and dense blocks: 2D for ``d = 1`` (q = √P,
    CAGNET §4.3), split-3D for ``d = q`` (q = ∛P, CAGNET §4.4).

    Rows are cut into q blocks, each block into d sub-blocks, each sub-block into q pieces; process
    ``(i, j, l)`` holds piece j of sub-block ``(i, l)`` of every dense matrix (the layers' rows, n/P of
    them) and stores the sparse block ``Â_{i,(j,l)}``: the rows of block i, the columns of sub-block
    ``(j, l)``. Layer l of the grid works on the inner sub-blocks ``(·, l)``. A product ``Â X``:

    1. within ``(i, ·, l)`` the pieces trade column slices, so that ``(i, j, l)`` holds ``X_{(i,l),j}``:
       sub-block ``(i, l)``, column slice j (``spmm/redist``);
    2. for k = 0..q-1: ``Â_{i,(k,l)}`` is broadcast along ``(i, ·, l)`` from ``(i, k, l)``, and
       ``X_{(k,l),j}`` along ``(·, j, l)`` from ``(k, j, l)``; ``C_ij += Â_{i,(k,l)} X_{(k,l),j}``
       (``spmm/bcast``, sparse and dense);
    3. 3D only: the d layers' partial ``C_ij`` are summed along the fiber ``(i, j, ·)`` (``spmm/reduce``)
       and each keeps the rows of its sub-block ``(i, l)``;
    4. within ``(i, ·, l)`` the column slices go back to the row pieces (``spmm/redist``).
    """

    def __init__(self, a_mine: SparseOp, at_mine: SparseOp, nnz_a: list[int], nnz_at: list[int],
                 geometry: dict, coords: tuple[int, int, int], comms: dict[str, Comm], precision: str = "fp32",
                 ids: list[list[torch.Tensor]] | None = None):
        self.a, self.at, self.nnz_a, self.nnz_at = a_mine, at_mine, nnz_a, nnz_at
        self.g = geometry  # block sizes, sub-block sizes, piece sizes (see SpmmEngine)
        self.row, self.col, self.layer = coords
        self.q, self.depth = geometry["q"], geometry["depth"]
        self.row_comm, self.col_comm, self.fiber_comm = comms["row"], comms["col"], comms.get("fiber")
        n = geometry["pieces"][self.row][self.layer][self.col]
        self.shape = (n, n)
        self.prefix = ""
        # below fp32 the dense rows travel encoded (the sparse blocks, the graph itself, stay exact);
        # ids[k][m]: the global node ids of sub-block (k, m), which key int8
        self.precision, self.ids, self.sites = precision, ids if precision == "int8" else None, WireSites()

    def _bcast(self, tensors: list[torch.Tensor], root: int, comm: Comm) -> None:
        for t in tensors:
            comm.broadcast(t, root, self.prefix + "spmm/bcast")

    def _rank(self, i: int, j: int, l: int) -> int:
        return (i * self.q + j) * self.depth + l

    def _sparse_block(self, mine: SparseOp, nnz: list[int], k: int, like: torch.Tensor) -> SparseOp:
        """``Â_{i,(k,l)}``, broadcast along ``(i, ·, l)`` from ``(i, k, l)``."""
        i, j, l = self.row, self.col, self.layer
        rows, cols = self.g["blocks"][i], self.g["subs"][k][l]
        if k == j:
            ip, ix, vals = mine.indptr.long(), mine.indices.long(), mine.values
        else:
            ip = torch.empty(rows + 1, dtype=torch.int64, device=like.device)
            ix = torch.empty(nnz[k], dtype=torch.int64, device=like.device)
            vals = torch.empty(nnz[k], dtype=like.dtype, device=like.device)
        self._bcast([ip, ix, vals], self._rank(i, k, l), self.row_comm)
        return SparseOp(ip, ix, vals, (rows, cols), symmetric=False)

    def _product(self, mine: SparseOp, nnz: list[int], x: torch.Tensor, backward: bool) -> torch.Tensor:
        q, i, j, l = self.q, self.row, self.col, self.layer
        blocks, subs, pieces = self.g["blocks"], self.g["subs"], self.g["pieces"]
        p, site, key = self.precision, self.sites.next(backward), self.sites.key
        cuts = [len(c) for c in torch.tensor_split(torch.arange(x.shape[1]), q)]
        starts = indptr_from_counts(np.asarray(cuts))
        sub_ids = lambda k, m: self.ids[k][m] if self.ids else None  # noqa: E731
        piece_ids = torch.tensor_split(self.ids[i][l], q) if self.ids else [None] * q
        x = x.contiguous()
        # (1) row pieces -> column slices of sub-block (i, l)
        send = [x[:, starts[c]:starts[c + 1]].contiguous() for c in range(q)]
        xb = torch.cat(exchange_rows(self.row_comm, send, [(pieces[i][l][r], cuts[j]) for r in range(q)],
                                     self.prefix + "spmm/redist", p, rows=[piece_ids[j]] * q,
                                     site=site(WireSites.REDIST_IN), key=key, col0=[int(s) for s in starts[:q]]))
        out = x.new_zeros((blocks[i], cuts[j]))
        # (2) SUMMA over the inner sub-blocks (k, l)
        for k in range(q):
            a = self._sparse_block(mine, nnz, k, x)
            xk = broadcast_rows(self.col_comm, xb if k == i else None, subs[k][l], xb, self._rank(k, j, l),
                                self.prefix + "spmm/bcast", p, rows=sub_ids(k, l), site=site(WireSites.BCAST),
                                key=key, col0=int(starts[j])).wait()
            if nnz[k]:
                out += a.mm(xk)
        # (3) sum the layers' partial products; keep the rows of sub-block (i, l)
        if self.depth > 1 and p == "fp32":
            self.fiber_comm.all_reduce_(out, self.prefix + "spmm/reduce")
            off = int(sum(subs[i][:l]))
            out = out[off:off + subs[i][l]]
        elif self.depth > 1:  # each layer receives only the partial sums of its own rows
            out = reduce_scatter_rows(self.fiber_comm, out, subs[i], self.prefix + "spmm/reduce", p,
                                      rows=torch.cat(self.ids[i]) if self.ids else None,
                                      site=site(WireSites.REDUCE), key=key, col0=int(starts[j]))
        # (4) column slices -> row pieces
        rstart = indptr_from_counts(np.asarray(pieces[i][l]))
        send = [out[rstart[c]:rstart[c + 1]].contiguous() for c in range(q)]
        back = exchange_rows(self.row_comm, send, [(pieces[i][l][j], cuts[c]) for c in range(q)],
                             self.prefix + "spmm/redist", p, rows=piece_ids, site=site(WireSites.REDIST_OUT),
                             key=key, col0=[int(starts[j])] * q)
        return torch.cat(back, 1)

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return self._product(self.a, self.nnz_a, x, False)

    def mm_t(self, x: torch.Tensor) -> torch.Tensor:
        return self._product(self.at, self.nnz_at, x, True)

    def to(self, device) -> "SummaOp":
        shared = self.at is self.a
        self.a = self.a.to(device)
        self.at = self.a if shared else self.at.to(device)
        self.ids = [[t.to(device) for t in row] for row in self.ids] if self.ids else None
        return self


def _summa(row: BlockRow, mesh: Mesh, comms: dict[str, Comm], rank: int, permute: bool, seed: int,
           precision: str = "fp32") -> tuple:
    """The SummaOp of this rank, its rows, and the grid's block rows (for statistics)."""
    q, _, d = mesh.grid
    i, j, l = mesh.coords(rank)
    blocks = row_blocks(row.num_nodes, q, permute, seed)
    subs = [list(torch.tensor_split(b, d)) for b in blocks]
    fine = [subs[k][m] for k in range(q) for m in range(d)]  # inner sub-blocks (k, m), k-major
    a = row.adjacency(fine)
    at = a if row.symmetric else row.adjacency(fine, transpose=True)
    geometry = {"q": q, "depth": d, "blocks": [int(b.numel()) for b in blocks],
                "subs": [[int(t.numel()) for t in row] for row in subs],
                "pieces": [[[len(p) for p in torch.tensor_split(t, q)] for t in row] for row in subs]}
    mine = j * d + l
    op = SummaOp(a[mine], at[mine], [a[k * d + l].nnz for k in range(q)], [at[k * d + l].nnz for k in range(q)],
                 geometry, (i, j, l), comms, precision, subs)
    rows = torch.tensor_split(subs[i][l], q)[j]
    return op, rows, blocks


class SpmmEngine(ReplicatedEngine):
    """Process ``(i, j)`` of an ``R × c`` grid: block row i of every dense matrix, built from this rank's
    :class:`BlockRow` alone (``stats``: the non-zeros per block row, as cut and in node order)."""

    def __init__(self, row: BlockRow, norm: str, comm: Comm, mesh: Mesh, *, overlap: bool = True,
                 permute: bool = True, seed: int = 0, stats: dict | None = None, precision: str = "fp32"):
        self.comm, self.rank, self.world_size, self.ledger = comm, comm.rank, comm.world_size, comm.ledger
        self.device = dev = comm.device
        self.mode = mesh.parallel
        comms = mesh.communicators(comm)  # the grid's named groups, made once, in one order on every rank
        if self.mode in ("spmm-2d", "spmm-3d"):
            self.op, rows, blocks = _summa(row, mesh, comms, comm.rank, permute, seed, precision)
            self.op.to(dev)  # its sparse blocks (and int8's node ids) live where the rows do
            self.c, self.R = self.op.q, self.op.q
            self.row, self.col = self.op.row, self.op.col
            self.grad_comm, self.replica = comm, False  # every process holds distinct rows
        else:
            self.R, self.c = mesh.block_rows, mesh.replication
            self.row, self.col, _ = mesh.coords(comm.rank)
            blocks = row_blocks(row.num_nodes, self.R, permute, seed)
            sizes = [int(b.numel()) for b in blocks]
            a = row.adjacency(blocks)
            at = a if row.symmetric else row.adjacency(blocks, transpose=True)
            rows = row.rows
            self.op = GridOp(a, at, sizes, self.row, self.col, self.c, comms["col"], comms.get("row"), overlap,
                             precision, blocks).to(dev)
            self.grad_comm, self.replica = comms["col"], self.col != 0
        if row.index != self.row or not torch.equal(row.rows, blocks[self.row]):
            raise InputError(f"expected block row {self.row} of {self.R} for rank {self.rank} (got block row "
                             f"{row.index} of {row.blocks})")
        pos = torch.searchsorted(row.rows, rows)  # this rank's rows within its block row
        self.block = Block(self.op, norm, src_ids=rows.to(dev), dst_ids=rows.to(dev))
        self.x = input_features(take_rows(row.x, pos)).to(dev)
        self.y, self.train_mask, self.val_mask, self.test_mask = (
            t[pos].to(dev) for t in (row.y, row.train_mask, row.val_mask, row.test_mask))
        self.num_train, self.num_val, self.num_test = row.num_train, row.num_val, row.num_test
        self.in_dim, self.num_classes = row.num_features, row.num_classes
        self.name = row.name
        stats = stats or {}
        self.block_nnz = stats.get("block_nnz", [])
        self.block_nnz_unpermuted = stats.get("block_nnz_unpermuted", [])

    def describe(self) -> str:
        imb = lambda v: max(v) / (sum(v) / len(v)) if v else float("nan")  # noqa: E731
        return (f"{self.mode} {super().describe()}: grid {self.R} x {self.c}, process ({self.row}, {self.col}); "
                f"non-zeros per block row max/mean {imb(self.block_nnz):.3f} (unpermuted "
                f"{imb(self.block_nnz_unpermuted):.3f})")

    def summary(self) -> dict:
        return {"name": self.name, "grid": [self.R, self.c], "block_nnz": self.block_nnz,
                "block_nnz_unpermuted": self.block_nnz_unpermuted}

    def forward(self, model, epoch: int, training: bool) -> torch.Tensor:
        self.op.prefix = "" if training else "eval/"
        self.op.sites.begin()
        return model(self.block, self.x)

    def step(self, model, epoch: int, step: int = 0) -> float:
        loss = super().step(model, epoch, step)
        return 0.0 if self.replica else loss  # the c replicas of a block row computed the same loss

    def bind_pairs(self) -> None:
        """Link prediction: the pairs' rows are exchanged within a grid column (``Mesh.pair_group``):
        in 1D and 1.5D each column holds every block row once, in 2D and 3D the column is the world."""
        self.pairs = PairOwners(self, self.output_ids(), self.grad_comm)

    def _evaluating_replica(self) -> bool:
        """A replica column while the layout evaluates: grid column 0 scores the pairs, as it reports node
        labels' counts; its replicas would repeat each score."""
        return self.replica and bool(self.op.prefix)

    def pair_share(self, pairs: torch.Tensor) -> torch.Tensor:
        if self._evaluating_replica():
            return torch.zeros(pairs.shape[0], dtype=torch.bool)
        return super().pair_share(pairs)

    def pair_rows(self, out: torch.Tensor, pairs: torch.Tensor, category: str, halves: bool = False):
        if self._evaluating_replica():
            return take_ends(out[:0], pairs[:0, 0], pairs[:0, 1], halves)
        return super().pair_rows(out, pairs, category, halves)

    def eval_masks(self):
        if not self.replica:
            return self.train_mask, self.val_mask, self.test_mask
        none = torch.zeros_like(self.train_mask)
        return none, none, none


def spmm_engine(cfg, norm: str, graph=None, comm: Comm | None = None) -> SpmmEngine:
    """This rank's engine of an ``spmm-*`` run. It reads its block row from ``cfg.parallel.partition_dir`` (a
    folder of block rows the launcher cut for this grid), or cuts it from ``graph`` when one is
    passed in. ``cfg`` has already checked the model and the grid (``TrainConfig``)."""
    from fullgraph.partition.blockrows import load_block_rows_meta

    owns = comm is None
    p, seed = cfg.parallel, cfg.optimization.seed
    mesh = p.mesh
    R, index = mesh.block_rows, mesh.block_row_of(torchrun_env("spmm_engine").rank if owns else comm.rank)
    if graph is not None:
        mesh.check_graph(graph.num_nodes)
        row = block_row(graph, norm, R, index, p.permute, seed)
        stats = {"block_nnz": block_nnz(graph, norm, R, p.permute, seed),
                 "block_nnz_unpermuted": block_nnz(graph, norm, R, False, seed)}
    elif p.partition_dir is not None:
        row = load_block_row(p.partition_dir, index, blocks=R, norm=norm, permute=p.permute, seed=seed)
        stats = load_block_rows_meta(p.partition_dir)
    else:
        raise RuntimeError("an spmm rank needs its block rows (--partition-dir; the launcher prepares them)")
    mesh.check_graph(row.num_nodes)
    comm = world_comm(cfg, "spmm_engine") if owns else comm  # once its inputs are read and checked
    engine = SpmmEngine(row, norm, comm, mesh, overlap=p.overlap, permute=p.permute, seed=seed, stats=stats,
                        precision=p.comm_precision)
    engine.owns_comm = owns
    return engine
