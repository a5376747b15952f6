"""A part: everything one graph-parallel rank needs of the graph, in local ids of its own.

Local ids. A part numbers its nodes ``0..n_inner-1`` for the inner nodes (ascending global id),
then ``n_inner..n_inner+n_halo-1`` for the halo nodes. The halo is grouped by owner part
(ascending), ascending global id inside a group, so the rows received from peer ``q`` are one
contiguous range of the halo, and peer ``q`` sends exactly those nodes in exactly that order
(``send_idx`` of ``q``, for peer ``p``). Embeddings laid out as ``cat([h_inner, h_recv])`` are
therefore directly the source rows of the part's block.

Normalization. A part's block holds the rows of the **full-graph** Â that belong to its inner
nodes: ``gcn`` uses the global degrees of both endpoints (``degree`` holds them for halo nodes
too), ``mean`` the global in-degree of the row. The values come from the one builder of Â,
:func:`fullgraph.ops.adjacency.block_adjacency`, that builds the whole graph's, so concatenating the
parts' blocks (rows mapped back to global ids) gives ``Block.from_graph(graph, norm)`` exactly; the
tests check this.

Boundary node sampling (BNS-GCN). ``part.block(norm, halo_keep, scale)`` drops the halo columns
not kept and **compacts** the column space to ``inner, then kept halo nodes in halo order``
(``n_inner + halo_keep.sum()`` columns): only kept rows are received, so the received tensor can be
appended to the inner embeddings as it comes, with no scatter into a mostly empty buffer. The kept
halo columns are multiplied by ``scale`` (``1/p`` for an unbiased estimate); inner columns,
including the self loop, are untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from fullgraph.errors import InputError
from fullgraph.ops.adjacency import NORMS, block_adjacency_data, check_norm
from fullgraph.ops.block import Block
from fullgraph.ops.edge_data import EdgeData, EdgeFacts
from fullgraph.ops.csr import indptr_from_counts
from fullgraph.ops.sparse import SparseOp

__all__ = ["Part", "NORMS"]


@dataclass(eq=False)
class Part:
    """Everything rank ``part_id`` needs of the graph (see the module docstring for local ids).

    Attributes:
        part_id, num_parts: this part and how many there are.
        inner: int64 ``[n_inner]``, global ids of the inner nodes, ascending.
        halo: int64 ``[n_halo]``, global ids of the halo nodes, grouped by owner ascending, then id.
        halo_owner: int64 ``[n_halo]``, the part owning each halo node.
        recv_counts: int64 ``[P]``, halo rows received from each peer (0 for ``part_id`` itself).
        send_idx: int64, local (inner) ids sent to the peers, concatenated by peer ascending; for peer
            ``q`` in exactly the order of ``q``'s halo group of this part.
        send_counts: int64 ``[P]``, rows sent to each peer.
        indptr, indices: local in-edge CSR of ``A`` (no self loops), rows = inner nodes, columns =
            local ids, sorted within each row.
        degree: ``[n_inner + n_halo]``, global in-degree (of ``A``) of every local node: int64, or
            float32 weighted in-degree where the edges carry weights (``Graph.aggregation_degree``).
        edata: the data of the local edges, aligned with ``indices``, with their global edge ids
            (``ops.edge_data.EdgeData``), or ``None`` where the graph's edges carry none.
        x: float32 features of the inner then halo rows (dense, or sparse CSR like the graph's).
        y, train_mask, val_mask, test_mask: labels and splits of the inner rows.
        global_num_nodes, global_num_train: ``N`` and the global number of training nodes (the
            loss is a mean over all of them, so every part divides by this, not its own count).
        num_classes, name: of the graph.
    """

    part_id: int
    num_parts: int
    inner: torch.Tensor
    halo: torch.Tensor
    halo_owner: torch.Tensor
    recv_counts: torch.Tensor
    send_idx: torch.Tensor
    send_counts: torch.Tensor
    indptr: torch.Tensor
    indices: torch.Tensor
    degree: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    global_num_nodes: int
    global_num_train: int
    num_classes: int
    name: str = "graph"
    edata: EdgeData | None = None
    _base: dict = field(default_factory=dict, repr=False)
    _halo_sorted: tuple | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ sizes and ranges
    @property
    def num_inner(self) -> int:
        return self.inner.numel()

    @property
    def num_halo(self) -> int:
        return self.halo.numel()

    @property
    def num_local(self) -> int:
        return self.num_inner + self.num_halo

    @property
    def num_edges(self) -> int:
        """Local edges of ``A`` (in-edges of the inner nodes, self loops excluded)."""
        return self.indices.numel()

    @property
    def multilabel(self) -> bool:
        return self.y.dim() == 2

    @property
    def edge_facts(self) -> EdgeFacts:
        """What the part's edges carry (kinds, feature width, relations): the graph's facts."""
        return EdgeFacts() if self.edata is None else self.edata.facts()

    @property
    def local_nodes(self) -> torch.Tensor:
        """Global id of every local node: ``cat([inner, halo])``."""
        return torch.cat([self.inner, self.halo])

    @property
    def recv_offsets(self) -> torch.Tensor:
        """``[P+1]``: rows from peer ``q`` are halo positions ``recv_offsets[q]:recv_offsets[q+1]``."""
        return indptr_from_counts(self.recv_counts)

    @property
    def send_offsets(self) -> torch.Tensor:
        """``[P+1]``: rows for peer ``q`` are ``send_idx[send_offsets[q]:send_offsets[q+1]]``."""
        return indptr_from_counts(self.send_counts)

    def recv_range(self, peer: int) -> tuple[int, int]:
        """Halo positions (not local ids: add ``num_inner``) of the rows received from ``peer``."""
        off = self.recv_offsets
        return int(off[peer]), int(off[peer + 1])

    def send_nodes(self, peer: int) -> torch.Tensor:
        """Local ids of the inner rows sent to ``peer``, in the order ``peer`` stores them."""
        off = self.send_offsets
        return self.send_idx[int(off[peer]) : int(off[peer + 1])]

    def global_to_local(self, global_ids) -> torch.Tensor:
        """Local id of each global id (inner ``0..n_inner-1``, halo after), or ``-1`` if not local."""
        ids = torch.as_tensor(global_ids, dtype=torch.int64)
        out = torch.full_like(ids, -1)
        if self.num_inner:
            pos = torch.searchsorted(self.inner, ids).clamp_(max=self.num_inner - 1)
            hit = self.inner[pos] == ids
            out[hit] = pos[hit]
        if self.num_halo:
            if self._halo_sorted is None:
                self._halo_sorted = torch.sort(self.halo)
            hs, perm = self._halo_sorted
            pos = torch.searchsorted(hs, ids).clamp_(max=self.num_halo - 1)
            hit = hs[pos] == ids
            out[hit] = self.num_inner + perm[pos[hit]]
        return out

    def kept_recv_counts(self, halo_keep: torch.Tensor) -> torch.Tensor:
        """``[P]``: kept halo rows per owner peer (what arrives under boundary node sampling)."""
        keep = self._check_keep(halo_keep)
        return torch.bincount(self.halo_owner[keep], minlength=self.num_parts)

    # ------------------------------------------------------------------ the local block
    def _check_keep(self, halo_keep) -> torch.Tensor:
        if not isinstance(halo_keep, torch.Tensor) or halo_keep.dtype != torch.bool \
                or halo_keep.shape != (self.num_halo,):
            got = f"{halo_keep.dtype} tensor of shape {tuple(halo_keep.shape)}" \
                if isinstance(halo_keep, torch.Tensor) else type(halo_keep).__name__
            raise InputError(f"expected halo_keep to be a bool tensor of shape ({self.num_halo},) (got {got})")
        return halo_keep

    def _base_block(self, norm: str):
        """``(indptr, indices, values)`` of the unsampled normalized block, computed once by the
        one builder of Â from the **global** degrees the part carries, so that its rows equal the
        full graph's."""
        if norm not in self._base:
            check_norm(norm)
            self._base[norm] = block_adjacency_data(self.indptr, self.indices, norm, self.degree, self.edata,
                                                    node_ids=self.inner)
        return self._base[norm]

    def block(self, norm: str, halo_keep: torch.Tensor | None = None, scale: float = 1.0) -> Block:
        """This part's rows of the full-graph ``Â`` as a ``Block`` ``[n_inner, n_inner + n_halo]``.

        Args:
            norm: ``gcn`` (D̂^-1/2 (A+I) D̂^-1/2, D̂ = degree + 1), ``mean`` (1/degree per in-edge) or
                ``self-loops`` (A+I, values 1).
            halo_keep: optional bool ``[n_halo]`` (boundary node sampling): halo columns not kept are
                dropped and the column space is compacted to inner + kept halo nodes, in halo order.
            scale: multiplies the values of the kept halo columns (``1/p``); inner columns untouched.

        The unsampled, unscaled block is built once and the same object returned on every call, so
        its transpose (for the backward pass) is built once too; a sampled block costs a few
        vectorized passes over the local edges.
        """
        indptr, cols, vals, edata = self._base_block(norm)
        n, m = self.num_inner, self.num_local
        if halo_keep is None:
            if scale == 1.0 and (norm, "block") in self._base:  # kept: its transpose is built once
                return self._base[norm, "block"]
            if scale != 1.0:
                vals = torch.where(cols >= n, vals * scale, vals)
            symmetric = None if (self.num_halo == 0 and norm == "gcn") else False
            blk = Block(SparseOp(indptr, cols, vals, (n, m), symmetric=symmetric), norm,
                        src_ids=self.local_nodes, dst_ids=self.inner, edata=edata)
            if scale == 1.0:
                self._base[norm, "block"] = blk
            return blk
        keep = self._check_keep(halo_keep)
        keep_col = torch.cat([torch.ones(n, dtype=torch.bool), keep])
        new_col = torch.cumsum(keep_col, 0) - 1
        mask = keep_col[cols]
        cols_k, vals_k = cols[mask], vals[mask]
        if scale != 1.0:
            vals_k = torch.where(cols_k >= n, vals_k * scale, vals_k)
        kept = indptr_from_counts(mask)
        indptr_k = kept[indptr]  # kept entries before each row start
        del kept
        num_src = n + int(keep.sum())
        return Block(SparseOp(indptr_k, new_col[cols_k], vals_k, (n, num_src), symmetric=False), norm,
                     src_ids=self.local_nodes[keep_col], dst_ids=self.inner,
                     edata=None if edata is None else edata.take(mask))  # a dropped column drops its edges' data

    # ------------------------------------------------------------------ serialization
    _TENSORS = ("inner", "halo", "halo_owner", "recv_counts", "send_idx", "send_counts", "indptr", "indices",
                "degree", "y", "train_mask", "val_mask", "test_mask")
    _SCALARS = {"part_id": int, "num_parts": int, "global_num_nodes": int, "global_num_train": int,
                "num_classes": int, "name": str}

    _EDGE = {"edge_eid": "eid", "edge_weight": "weight", "edge_attr": "attr", "edge_type": "type"}

    def state_dict(self) -> dict:
        """Plain tensors, ints and strings only (loadable with ``torch.load(weights_only=True)``)."""
        state = {k: getattr(self, k) for k in self._TENSORS}
        state.update({k: getattr(self, k) for k in self._SCALARS})
        if self.edata is not None:
            state.update({k: getattr(self.edata, f) for k, f in self._EDGE.items() if getattr(self.edata, f) is not None})
            if self.edata.num_relations is not None:
                state["num_relations"] = self.edata.num_relations
        if self.x.layout == torch.sparse_csr:
            state.update(x_layout="sparse_csr", x_crow=self.x.crow_indices(), x_col=self.x.col_indices(),
                         x_values=self.x.values(), x_shape=torch.tensor(list(self.x.shape)))
        else:
            state.update(x_layout="dense", x=self.x)
        return state

    @classmethod
    def from_state(cls, state: dict, where: str = "part state") -> "Part":
        """Rebuild from :meth:`state_dict`, checking it; ``InputError`` naming ``where`` if it is wrong."""
        if not isinstance(state, dict):
            raise InputError(f"expected a dict in {where} (got {type(state).__name__})")
        missing = [k for k in (*cls._TENSORS, *cls._SCALARS, "x_layout") if k not in state]
        if missing:
            raise InputError(f"expected {where} to hold {', '.join(missing)} (missing)")
        for k in cls._TENSORS:
            if not isinstance(state[k], torch.Tensor):
                raise InputError(f"expected '{k}' in {where} to be a tensor (got {type(state[k]).__name__})")
        for k, typ in cls._SCALARS.items():
            if not isinstance(state[k], typ):
                raise InputError(f"expected '{k}' in {where} to be {typ.__name__} (got {type(state[k]).__name__})")
        if state["x_layout"] == "sparse_csr":
            try:
                x = torch.sparse_csr_tensor(state["x_crow"], state["x_col"], state["x_values"],
                                            size=tuple(int(s) for s in state["x_shape"]),
                                            check_invariants=False)  # the file's sha256 was checked
            except (KeyError, RuntimeError, TypeError, ValueError) as e:
                raise InputError(f"expected sparse features in {where} (got unusable ones: {e})") from None
        elif state["x_layout"] == "dense" and isinstance(state.get("x"), torch.Tensor):
            x = state["x"]
        else:
            raise InputError(f"expected features 'x' in {where} (got layout {state['x_layout']!r})")
        fields = {k: state[k] for k in (*cls._TENSORS, *cls._SCALARS)}
        edata = None
        if "edge_eid" in state:
            edge = {f: state.get(k) for k, f in cls._EDGE.items()}
            if not all(v is None or isinstance(v, torch.Tensor) for v in edge.values()):
                raise InputError(f"expected the edge data in {where} to be tensors")
            edata = EdgeData(**edge, num_relations=state.get("num_relations"))
        part = cls(x=x, edata=edata, **fields)
        part.check(where)
        return part

    def check(self, where: str = "part") -> None:
        """Consistency of the shapes and counts (cheap; run on every load)."""
        n, h, P = self.num_inner, self.num_halo, self.num_parts
        problems = []
        if not 0 <= self.part_id < P:
            problems.append(f"part_id {self.part_id} outside [0, {P})")
        if self.indptr.numel() != n + 1 or int(self.indptr[-1]) != self.indices.numel():
            problems.append("indptr does not match inner nodes and indices")
        if self.indices.numel() and (int(self.indices.min()) < 0 or int(self.indices.max()) >= n + h):
            problems.append("column ids outside the local nodes")
        if self.edata is not None and any(getattr(self.edata, f).shape[:1] != self.indices.shape
                                          for f in ("eid", *self.edata.kinds)):
            problems.append("edge data does not match the local edges")
        if self.degree.numel() != n + h or self.x.shape[0] != n + h:
            problems.append("degree/x rows do not match inner + halo nodes")
        if self.halo_owner.numel() != h or self.recv_counts.numel() != P or self.send_counts.numel() != P:
            problems.append("halo_owner/recv_counts/send_counts have wrong sizes")
        elif int(self.recv_counts.sum()) != h or int(self.send_counts.sum()) != self.send_idx.numel():
            problems.append("recv/send counts do not add up")
        if self.send_idx.numel() and (int(self.send_idx.min()) < 0 or int(self.send_idx.max()) >= n):
            problems.append("send_idx outside the inner nodes")
        for k in ("y", "train_mask", "val_mask", "test_mask"):
            if getattr(self, k).shape[:1] != (n,):
                problems.append(f"{k} does not have one row per inner node")
        if problems:
            raise InputError(f"expected a consistent partition in {where} (got: {'; '.join(problems)})")

    def __repr__(self) -> str:
        return (f"Part({self.part_id}/{self.num_parts}, graph={self.name!r}, inner={self.num_inner}, "
                f"halo={self.num_halo}, edges={self.num_edges})")
