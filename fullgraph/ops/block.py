"""``Block``: the one thing a layer sees of the graph.

A block is a sparse matrix whose rows are the nodes being computed (dst) and whose columns are the
nodes read (src); the dst nodes are the first ``num_dst`` src nodes, so a layer finds a dst node's
own embedding at ``h_src[:num_dst]``. Single-process training uses one block for the whole graph;
the parallel layouts build one per part, stage or chunk and hand it to the same layer code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from fullgraph.ops.adjacency import normalized, normalized_data
from fullgraph.ops.csr import row_ids
from fullgraph.ops.edge_data import EdgeData
from fullgraph.ops.edges import EdgeSums
from fullgraph.ops.sparse import SparseOp

__all__ = ["Block"]


@dataclass(eq=False)
class Block:
    """A normalized aggregation matrix ``[num_dst, num_src]`` plus its edge list on demand.

    Attributes:
        adj: the aggregation matrix the model asked for (``gcn``: D^-1/2 (A+I) D^-1/2, ``mean``:
            row-normalized A, ``self-loops``: A+I with unit values for attention models).
        norm: which of those it is.
        src_ids, dst_ids: global node ids of the src rows this process holds and of the dst rows
            (``None``: ``0..n-1``, the whole graph in one process). Layers use them only to key their
            dropout masks, so that a node is dropped alike in every layout (see ``ops.dropout``).
        reduce: a differentiable sum over the processes that hold the other dst rows of this layer,
            set by a layout that splits them (``None``: this block holds them all). Batch statistics
            use it (``ops.norm``), so that they cover every node of the graph.
        attention: ``attention(wh, s_src, s_dst, weigh)`` -> the attention-weighted sum of ``wh``'s rows
            at the dst rows, set by a layout whose processes hold column slices of ``wh`` while they
            aggregate (``parallel.tensor``): it completes the per-node scores, has ``weigh(e_src,
            e_dst, dst, num_dst)`` turn them into edge weights, and sums (``None``: the layer sums
            over this block's edges itself).
        edata: the data of the entries of ``adj`` (:class:`~fullgraph.ops.edge_data.EdgeData`, in CSR
            order, with the global edge id of each), or ``None`` where the graph's edges carry none.
            A weight is in ``adj``'s values already (the normalization folds it in); a layer that
            reads edges itself (attention, a PyG conv) reads ``edge_weight``, ``edge_attr``,
            ``edge_type`` and ``edge_ids``.
    """

    adj: SparseOp
    norm: str
    _edges: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)
    src_ids: torch.Tensor | None = field(default=None, repr=False)
    dst_ids: torch.Tensor | None = field(default=None, repr=False)
    reduce: Callable[[torch.Tensor], torch.Tensor] | None = field(default=None, repr=False)
    attention: Callable | None = field(default=None, repr=False)
    _sums: EdgeSums | None = field(default=None, repr=False)
    edata: EdgeData | None = field(default=None, repr=False)
    _relations: list | None = field(default=None, repr=False)
    _reads: tuple | None = field(default=None, repr=False)
    _groups: tuple | None = field(default=None, repr=False)
    _stacked: EdgeSums | None = field(default=None, repr=False)
    _order: tuple | None = field(default=None, repr=False)

    @property
    def num_dst(self) -> int:
        return self.adj.shape[0]

    @property
    def num_src(self) -> int:
        return self.adj.shape[1]

    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(src, dst)`` local ids of every stored entry, in CSR order (for attention)."""
        if self._edges is None:
            self._edges = (self.adj.indices, row_ids(self.adj.indptr))
        return self._edges

    @property
    def edge_weight(self) -> torch.Tensor | None:
        """float ``[entries]``: each entry's weight (1 on an added loop), or ``None``."""
        return None if self.edata is None else self.edata.weight

    @property
    def edge_attr(self) -> torch.Tensor | None:
        """float ``[entries, d]``: each entry's features (an added loop's: the mean of its row's), or ``None``."""
        return None if self.edata is None else self.edata.attr

    @property
    def edge_type(self) -> torch.Tensor | None:
        """int64 ``[entries]``: each entry's relation (``num_relations`` on an added loop), or ``None``."""
        return None if self.edata is None else self.edata.type

    @property
    def edge_ids(self) -> torch.Tensor | None:
        """int64 ``[entries]``: each entry's global edge id (``-1 - v`` on a loop added at ``v``), the
        same in every layout. ``None`` where edges carry no data."""
        return None if self.edata is None else self.edata.eid

    def edge_sums(self) -> EdgeSums:
        """Gathers onto the edges and sums over them whose float sums run in a fixed order (attention:
        two runs with the same seed give the same bits; see ``ops.edges``), built on first use and kept."""
        if self._sums is None:
            self._sums = EdgeSums(self.adj, self.edges())
        return self._sums

    def relation_ops(self, num_relations: int) -> list[tuple[SparseOp, torch.Tensor | None, torch.Tensor | None] | None]:
        """The block cut by relation: per relation ``(A_r, cols, rows)``, ``A_r`` holding this block's entries
        of that relation with their values (``None`` where a relation has none here), built on first use
        and kept. R-GCN sums one product per relation (``models.rgcn``). A relation reads the src rows of
        its source type only, and writes the dst rows of its destination type: where those are fewer
        than nine tenths of the block's, ``cols`` (``rows``) lists them and ``A_r``'s columns (rows) are
        positions in it, so that a layer multiplies only the rows read by the relation's weight and adds
        its product into the rows written; else ``None`` and ``A_r`` spans the block's. A compact row
        pointer matters with many relations: a knowledge graph's 1,070 (ogbl-wikikg2's and their
        reverses) would otherwise hold 1,070 row pointers of every dst row."""
        if self._relations is None:
            if self.edge_type is None:
                raise ValueError("relation_ops needs a block whose entries carry relation types")
            adj = self.adj
            rows = row_ids(adj.indptr)
            order, ends = self._by_relation(num_relations)
            ops = []
            for r in range(num_relations):
                pos = order[ends[r] : ends[r + 1]]
                if pos.numel() == 0:
                    ops.append(None)
                    continue
                cols, ix = adj.indices[pos], None
                used = torch.unique(cols)
                if 10 * used.numel() < 9 * self.num_src:  # a gather of the rows read costs less than the rows unread
                    ix = torch.searchsorted(used, cols)
                wrote, at = torch.unique_consecutive(rows[pos], return_inverse=True)  # rows ascend in CSR order
                compact = 10 * wrote.numel() < 9 * self.num_dst
                counts = torch.bincount(at if compact else rows[pos], minlength=wrote.numel() if compact else self.num_dst)
                ip = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
                shape = (wrote.numel() if compact else self.num_dst, adj.shape[1] if ix is None else used.numel())
                op = SparseOp(ip, cols if ix is None else ix, adj.values[pos], shape, symmetric=False)
                ops.append((op, None if ix is None else used, wrote if compact else None))
            self._relations = ops
        return self._relations

    def _by_relation(self, num_relations: int) -> tuple[torch.Tensor, list[int]]:
        """The CSR positions of the entries sorted by relation (stable: each relation's in CSR order) and
        where each relation's run starts: relation ``r`` holds ``order[ends[r] : ends[r + 1]]``. One sort,
        not a pass per relation; kept for the cuts that read it (:meth:`relation_ops`, :meth:`stacked_sums`)."""
        if self._order is None:
            if self.edge_type is None:
                raise ValueError("cutting a block by relation needs entries that carry relation types")
            rel = self.edge_type
            counts = torch.bincount(rel, minlength=num_relations + 1)
            self._order = (torch.argsort(rel, stable=True), [0] + torch.cumsum(counts, 0).tolist())
        return self._order

    def relation_reads(self, num_relations: int) -> tuple[torch.Tensor, list[int]]:
        """The src rows of every relation whose ``cols`` lists them (:meth:`relation_ops`), concatenated in
        relation order, and how many each reads: a layer gathers them in one ``index_select`` and splits
        it. A gather per relation would cost, in backward, a zero-filled gradient of the whole input per
        relation (1,070 of 32 MB at a tenth of ogbl-wikikg2, which glibc's heap kept: 11.7 GB peak)."""
        if self._reads is None:
            cols = [rel[1] for rel in self.relation_ops(num_relations) if rel is not None and rel[1] is not None]
            empty = self.adj.indices.new_zeros(0)
            self._reads = (torch.cat(cols) if cols else empty, [c.numel() for c in cols])
        return self._reads

    def relation_groups(self, num_relations: int) -> tuple[torch.Tensor, list[tuple[int, int, int]]]:
        """Where each relation with entries here reads its src rows, as ``ops.grouped``'s groups, in
        relation order: ``(0, start, stop)``, a run of the src rows themselves (all of them where
        :meth:`relation_ops`' ``cols`` is ``None``, or the run ``cols`` lists when it is one: a type's
        nodes have consecutive ids, so a whole graph reads each relation's source type so), or ``(1, start,
        stop)``, rows of one gather ``h[index]`` of the other relations' ``cols``. The same rows in the same
        order as :meth:`relation_reads`, without gathering the runs. Built on first use and kept."""
        if self._groups is None:
            index, groups, at = [], [], 0
            for rel in self.relation_ops(num_relations):
                if rel is None:
                    continue
                cols = rel[1]
                if cols is None:
                    groups.append((0, 0, self.num_src))
                elif int(cols[-1]) - int(cols[0]) + 1 == cols.numel():  # sorted and unique: a run
                    groups.append((0, int(cols[0]), int(cols[-1]) + 1))
                else:
                    groups.append((1, at, at + cols.numel()))
                    index.append(cols)
                    at += cols.numel()
            self._groups = (torch.cat(index) if index else None, groups)
        return self._groups

    def stacked_sums(self, num_relations: int) -> EdgeSums:
        """``EdgeSums`` over this block's entries whose columns index the relations' src rows stacked: each
        relation with entries here, in order, reads a run of rows of the stack, its :meth:`relation_ops`
        ``cols`` (or every src row where that is ``None``), in :meth:`relation_reads`' order. A layer that
        transforms each relation's rows by weights of its own (HGT's keys and values, ``models.hgt``)
        stacks the products and attends over every entry of a dst row at once: one softmax across the
        relations, in the block's CSR order. Built on first use and kept."""
        if self._stacked is None:
            indices = self.adj.indices
            if self.edge_type is not None and bool((self.edge_type >= num_relations).any()):
                raise ValueError("stacked_sums: an entry of no relation (an added self loop) in the block")
            order, ends = self._by_relation(num_relations)
            col, start = torch.empty(indices.shape, dtype=torch.int64, device=indices.device), 0
            for r, op in enumerate(self.relation_ops(num_relations)):
                if op is None:
                    continue
                pos, cols = order[ends[r] : ends[r + 1]], op[1]
                read = indices[pos].to(torch.int64)
                col[pos] = start + (read if cols is None else torch.searchsorted(cols, read))
                start += self.num_src if cols is None else cols.numel()
            stacked = SparseOp(self.adj.indptr, col, torch.ones_like(self.adj.values), (self.num_dst, start),
                               symmetric=False)
            self._stacked = EdgeSums(stacked, (col, row_ids(self.adj.indptr)))
        return self._stacked

    def to(self, device) -> "Block":
        if self.adj.indptr.device == torch.device(device):
            return self
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Block(self.adj.to(device), self.norm, src_ids=move(self.src_ids), dst_ids=move(self.dst_ids),
                     reduce=self.reduce, attention=self.attention,
                     edata=None if self.edata is None else self.edata.to(device))

    @classmethod
    def from_csr(cls, indptr: torch.Tensor, indices: torch.Tensor, norm: str,
                 num_src: int | None = None) -> "Block":
        """Normalize the in-edge CSR of a square graph and wrap it (single-process blocks)."""
        ip, ix, vals = normalized(indptr, indices, norm)
        n = ip.numel() - 1
        symmetric = None if norm == "gcn" else False
        return cls(SparseOp(ip, ix, vals, (n, num_src or n), symmetric=symmetric), norm)

    @classmethod
    def from_graph(cls, graph, norm: str) -> "Block":
        edata = graph.edge_data()
        if edata is None:
            return cls.from_csr(graph.indptr, graph.indices, norm)
        ip, ix, vals, edata = normalized_data(graph.indptr, graph.indices, norm, edata)
        n = ip.numel() - 1
        symmetric = None if norm == "gcn" else False  # checked, values too: weights may break symmetry
        return cls(SparseOp(ip, ix, vals, (n, n), symmetric=symmetric), norm, edata=edata)
