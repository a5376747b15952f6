"""The partition book: what each part owns, what it reads from the others, and its local block.

``PartitionBook.build(graph, node_part)`` computes, in one process and with vectorized array
operations only (loops run over parts and over blocks of a few million edges, never over single
nodes or edges), the global bookkeeping of a partition; ``book.part(i)`` then cuts out the
:class:`Part` that rank ``i`` needs — its inner and halo nodes, its per-peer send/recv lists, its
local in-edge CSR, the global degrees its normalization needs, and its feature / label / mask rows —
and nothing more.

Memory. ``build`` keeps node-sized arrays only (the halo lists are ``α N`` long); its one pass over
the edges carries part ids in the smallest integer type and keeps only distinct halo pairs. A
part's local CSR is made when the part is, from that part's rows, so writing a partition needs one
part at a time (about 20-25 bytes per directed edge of the graph above the loaded graph and the
features, measured by ``benchmarks/prep_memory.py``).

The parts it cuts out (local ids, normalization, boundary sampling): :mod:`fullgraph.partition.part`.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.data.edge_list import EDGE_BLOCK, row_blocks, shrink_, unique_sorted_
from fullgraph.data.graph import Graph
from fullgraph.data.preprocess import self_loop_positions
from fullgraph.errors import InputError
from fullgraph.ops.csr import csr_rows, indptr_from_counts, row_ids, take_rows
from fullgraph.partition.part import NORMS, Part
from fullgraph.partition.partitioners import check_node_part

__all__ = ["Part", "PartitionBook", "NORMS"]


def _check_simple(graph: Graph) -> None:
    """The book assumes the loaders' standard structure: no self loops, no duplicate edges (an
    edge equal to the one before it in its row, relation included where edges carry one). Checked
    block by block: no edge-sized copies."""
    loops = self_loop_positions(graph.indptr, graph.indices).size
    if loops:
        raise InputError(
            f"expected a graph without self loops (got {loops} in {graph.name!r}); preprocess it with "
            "fullgraph.data.datasets.preprocess, since each normalization adds the loops it wants")
    ip, ix = graph.indptr.numpy(), graph.indices.numpy()
    types = None if graph.edge_type is None else graph.edge_type.numpy()
    dups = 0
    for r0, r1 in row_blocks(ip):
        a, b = int(ip[r0]), int(ip[r1])
        rows, cols = row_ids(ip, r0, r1), ix[a:b]
        same = (cols[1:] == cols[:-1]) & (rows[1:] == rows[:-1])
        if types is not None:  # an edge is (src, dst, relation): one pair may stand in several relations
            same &= types[a + 1 : b] == types[a : b - 1]
        dups += int(np.count_nonzero(same))
    if dups:
        raise InputError(
            f"expected a graph without duplicate edges (got {dups} in {graph.name!r}); preprocess it "
            "with fullgraph.data.datasets.preprocess")


def _part_dtype(parts: int) -> np.dtype:
    """The smallest integer type holding part ids: what the per-edge passes carry."""
    return np.dtype(np.int8 if parts <= 127 else np.int16 if parts <= 32767 else np.int32)


def _halo_keys(graph: Graph, node_part: np.ndarray, parts: int) -> tuple[np.ndarray, int]:
    """The sorted distinct halo keys ``(p * P + q) * N + u`` (node ``u`` of part ``q`` is an
    in-neighbour of a node of part ``p != q``) and the number of cut edges.

    One pass over the edges in blocks: each block's distinct keys are kept and merged with the
    earlier ones whenever they outgrow them, so memory stays near the number of halo pairs
    (``α N``), never the number of cut edges."""
    ip, ix = graph.indptr.numpy(), graph.indices.numpy()
    n = ip.size - 1
    part = node_part.astype(_part_dtype(parts))
    deg = np.diff(ip)
    merged, pending, pending_size, cut = np.zeros(0, dtype=np.int64), [], 0, 0
    for r0, r1 in row_blocks(ip):
        a, b = int(ip[r0]), int(ip[r1])
        pd = np.repeat(part[r0:r1], deg[r0:r1])
        ps = part[ix[a:b]]
        cross = pd != ps
        cut += int(np.count_nonzero(cross))
        key = pd[cross].astype(np.int64)
        key *= parts
        key += ps[cross]
        key *= n
        key += ix[a:b][cross]
        pending.append(_distinct(key))
        pending_size += pending[-1].size
        if pending_size > max(merged.size, EDGE_BLOCK):
            merged, pending, pending_size = _distinct(np.concatenate([merged, *pending]), runs=True), [], 0
    if pending:
        merged = _distinct(np.concatenate([merged, *pending]), runs=True)
    return merged, cut


def _distinct(keys: np.ndarray, runs: bool = False) -> np.ndarray:
    """The distinct values of ``keys`` (which it owns), sorted, in its own memory. ``runs``: it is a
    concatenation of sorted runs, which a merging sort (numpy's stable sort) joins in few passes."""
    keys.sort(kind="stable" if runs else None)
    return shrink_(keys, unique_sorted_(keys))


class PartitionBook:
    """Global view of a partition, built once: per-part inner/halo lists, send lists, local CSRs.

    Use :meth:`build`; then ``book.part(i)`` (built on demand and kept), ``book.parts``,
    ``book.stats()``, ``book.replication_factor``.
    """

    def __init__(self, graph: Graph, node_part: torch.Tensor, num_parts: int, s: dict):
        self.graph = graph
        self.node_part = node_part
        self.num_parts = num_parts
        self._s = s
        self._parts: dict[int, Part] = {}

    @classmethod
    def build(cls, graph: Graph, node_part, num_parts: int | None = None) -> "PartitionBook":
        """The node-level bookkeeping of a partition (inner lists, halo lists, send lists, counts).

        Edge-level work is one pass over the edges in blocks (part ids of both ends in the
        smallest integer type, the distinct halo pairs); each part's local CSR is made only when
        the part is (:meth:`part`), from its own rows. So memory stays at node-sized arrays plus
        one block of edges, whatever the number of edges."""
        n, P0 = graph.num_nodes, num_parts
        node_part = check_node_part(node_part, n, P0)
        P = int(node_part.max()) + 1 if P0 is None else int(P0)
        _check_simple(graph)
        sizes = torch.bincount(node_part, minlength=P)
        part_off = indptr_from_counts(sizes)
        order = torch.argsort(node_part, stable=True)  # inner nodes of part 0, then 1, ...; ascending ids
        pos = torch.empty(n, dtype=torch.int64)
        pos[order] = torch.arange(n)
        local = pos - part_off[node_part]
        del pos
        part_edges = torch.zeros(P, dtype=torch.int64).index_add_(0, node_part, graph.in_degrees())

        # halo pairs (p, owner q, node u), sorted by p, then q, then u
        hkey, cut_edges = _halo_keys(graph, node_part.numpy(), P)
        hkey = torch.from_numpy(hkey)
        halo_u, pq = hkey % n, hkey // n
        halo_p, halo_q = pq // P, pq % P
        comm = torch.bincount(pq, minlength=P * P).view(P, P)  # [p, q]: rows p receives from q
        halo_off = indptr_from_counts(comm.sum(1))
        # send lists: pairs sorted by sender q, then receiver p, then node u
        sorder = torch.argsort((halo_q * P + halo_p) * n + halo_u)
        send_local = local[halo_u[sorder]]
        send_off = indptr_from_counts(comm.sum(0))
        s = dict(sizes=sizes, part_off=part_off, order=order, halo_u=halo_u, halo_q=halo_q, comm=comm,
                 halo_off=halo_off, part_edges=part_edges, send_local=send_local, send_off=send_off,
                 cut_edges=cut_edges)
        return cls(graph, node_part, P, s)

    # ------------------------------------------------------------------ per part
    def part(self, i: int) -> Part:
        if not 0 <= i < self.num_parts:
            raise InputError(f"expected a part index in [0, {self.num_parts}) (got {i})")
        if i not in self._parts:
            self._parts[i] = self._make_part(i)
        return self._parts[i]

    @property
    def parts(self) -> list[Part]:
        return [self.part(i) for i in range(self.num_parts)]

    def _local_csr(self, inner: torch.Tensor, halo: torch.Tensor):
        """The in-edge CSR of the rows ``inner`` over local column ids (inner ``0..n_inner-1``, then
        halo), sorted within each row: gathered and sorted block by block of whole rows. With edge
        data, also each local entry's global edge id (its position in the graph's CSR), by which
        the part takes its edges' data: ``(indptr, indices, eid)`` (``eid`` ``None`` without)."""
        ip, ix = self.graph.indptr, self.graph.indices.numpy()
        carry = bool(self.graph.edge_kinds)
        n_inner, n_local = inner.numel(), inner.numel() + halo.numel()
        indptr = indptr_from_counts(ip[inner + 1] - ip[inner]).numpy()
        colmap = np.empty(ip.numel() - 1, dtype=np.int64)  # global id -> local id, for the local nodes only
        colmap[inner.numpy()] = np.arange(n_inner)
        colmap[halo.numpy()] = n_inner + np.arange(halo.numel())
        indices = np.empty(int(indptr[-1]), dtype=np.int64)
        eid = np.empty(int(indptr[-1]), dtype=np.int64) if carry else None
        for j0, j1 in row_blocks(indptr):
            e0, e1 = int(indptr[j0]), int(indptr[j1])
            row_base = row_ids(indptr, j0, j1) * n_local
            pos = csr_rows(ip, inner[j0:j1])[1].numpy()
            key = colmap[ix[pos]]  # these rows' columns, in local ids
            key += row_base
            if carry:  # the entries' order, to take their data by: stable, so that one pair's relations
                order = np.argsort(key, kind="stable")  # keep the graph's (column, type) order
                key, eid[e0:e1] = key[order], pos[order]
            else:
                key.sort()  # rows stay in order; columns sorted within each row
            np.subtract(key, row_base, out=indices[e0:e1])
        return torch.from_numpy(indptr), torch.from_numpy(indices), None if eid is None else torch.from_numpy(eid)

    def _degree(self) -> torch.Tensor:
        """The in-degree the normalizations read, of every node (weighted where edges carry weights), made once."""
        if "degree" not in self._s:
            self._s["degree"] = self.graph.aggregation_degree()
        return self._s["degree"]

    def _make_part(self, i: int) -> Part:
        s, g = self._s, self.graph
        a, b = int(s["part_off"][i]), int(s["part_off"][i + 1])
        inner = s["order"][a:b].clone()
        h0, h1 = int(s["halo_off"][i]), int(s["halo_off"][i + 1])
        halo = s["halo_u"][h0:h1].clone()
        s0, s1 = int(s["send_off"][i]), int(s["send_off"][i + 1])
        indptr, indices, eid = self._local_csr(inner, halo)
        local_nodes = torch.cat([inner, halo])
        edata = None if eid is None else g.edge_data().take(eid)
        return Part(
            part_id=i, num_parts=self.num_parts, inner=inner, halo=halo, halo_owner=s["halo_q"][h0:h1].clone(),
            recv_counts=s["comm"][i].clone(), send_idx=s["send_local"][s0:s1].clone(),
            send_counts=s["comm"][:, i].clone(), indptr=indptr, indices=indices,
            degree=self._degree()[local_nodes], edata=edata, x=take_rows(g.x, local_nodes), y=g.y[inner],
            train_mask=g.train_mask[inner], val_mask=g.val_mask[inner], test_mask=g.test_mask[inner],
            global_num_nodes=g.num_nodes, global_num_train=int(g.train_mask.sum()),
            num_classes=int(g.num_classes), name=g.name,
        )

    # ------------------------------------------------------------------ statistics
    @property
    def comm_matrix(self) -> torch.Tensor:
        """``[P, P]``: entry ``[p, q]`` = halo nodes of part ``p`` owned by ``q`` (rows ``q`` sends ``p``)."""
        return self._s["comm"].clone()

    @property
    def replication_factor(self) -> float:
        """α = Σ_parts |halo| / N."""
        return int(self._s["comm"].sum()) / self.graph.num_nodes

    def stats(self) -> list[dict]:
        """Per part: inner and halo nodes, halo/inner ratio, local edges, rows sent."""
        s = self._s
        inner = s["sizes"].tolist()
        halo = s["comm"].sum(1).tolist()
        send = s["comm"].sum(0).tolist()
        edges = s["part_edges"].tolist()
        return [{"part": i, "inner": inner[i], "halo": halo[i], "halo_ratio": halo[i] / inner[i],
                 "edges": edges[i], "send": send[i]} for i in range(self.num_parts)]

    def summary(self) -> dict:
        st = self.stats()
        inner = [r["inner"] for r in st]
        return {
            "parts": self.num_parts, "nodes": self.graph.num_nodes, "edges": self.graph.num_edges,
            "cut_edges": self._s["cut_edges"], "halo_total": sum(r["halo"] for r in st),
            "replication_factor": self.replication_factor,
            "max_halo_ratio": max(r["halo_ratio"] for r in st),
            "imbalance": max(inner) / (sum(inner) / len(inner)),
        }

    def __repr__(self) -> str:
        return (f"PartitionBook(graph={self.graph.name!r}, parts={self.num_parts}, "
                f"alpha={self.replication_factor:.3f})")
