"""R-GCN (Schlichtkrull et al. 2018) on a typed graph, with an input map per node type.

``H'_v = H_v W_0 + sum_r sum_{u in N_r(v)} (1 / |N_r(v)|) H_u W_r + b``: a weight per relation, a
self-connection weight ``W_0`` and the mean over each relation's neighbours, which the block's
``relation-mean`` normalization holds in its values (``ops.adjacency``). The relation weights are
free, or decomposed as the paper does: ``bases`` (``W_r = sum_b a_rb V_b``, shared bases) or
``blocks`` (``W_r`` block-diagonal; an output layer whose width, the classes, the blocks do not divide
keeps whole weights: it is the narrowest layer). Each layer multiplies its input by ``W_r`` first and aggregates
the product with the relation's part of the block (``Block.relation_ops``): backward keeps the input
once, where aggregating first (PyG's ``RGCNConv``) keeps one aggregate per relation.

The input (``pre``, :class:`TypedInput`) maps each node type to the hidden width: a linear map of
its own features (one weight block per type over the column blocks ``NodeTypes`` lays the features
out in, and a bias per type, drawn as ``torch.nn.Linear`` draws them: a wider Glorot draw on
bag-of-words inputs starts far from the per-type ``Linear`` that PyG users write, and on DBLP ended
1.3 points less accurate, benchmarks/README.md), and for a type with no features, per ``featureless``: a learned
``embedding`` per node (the default: its type's table ``[count, hidden]`` drawn by Glorot over that shape,
as PyG's examples draw a featureless type's table), ``one-hot`` (the same table drawn as
``torch.nn.Linear(count, hidden)`` draws its weight, ±1/√count) or ``zeros`` (the type's bias only).
Measured over ACM and DBLP, with their featureless types and with every feature removed
(``benchmarks/featureless_starts.py``), Glorot's draw trains best on average; the draw this default had
before, ±√(6 / 2·hidden) whatever the count, was 0.6 points behind it on average and 2.1 on DBLP.
A node's type follows from its global id, which every layout hands ``pre``, so the map runs on any
rows a layout holds. The embedding table has a row per node: graph parallelism keeps each rank's
nodes' rows with that rank (``hold_rows``; ``parallel.owned`` says how and why), the other layouts
hold it whole like any weight.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.errors import InputError
from fullgraph.models.base import GNN, GraphLayer, glorot_
from fullgraph.models.spec import ModelSpec, register
from fullgraph.ops import Block, dropout, matmul, spmm
from fullgraph.ops.adjacency import GIVE_TYPES
from fullgraph.ops.edge_data import EdgeFacts
from fullgraph.ops.node_types import NodeTypes

__all__ = ["RGCN", "RGCNLayer", "TypedInput", "FEATURELESS", "DECOMPOSITIONS"]

FEATURELESS = ("embedding", "one-hot", "zeros")
"""What a node type without features starts from (``--featureless``; module docstring)."""
DECOMPOSITIONS = ("none", "bases", "blocks")
"""How R-GCN's relation weights are parameterized (``--rgcn-decomposition``)."""


class TypedInput(nn.Module):
    """``pre`` of a typed graph: each node's features mapped by its type's weight block and bias, or its
    type's embedding row (module docstring). ``x``'s rows are the nodes ``rows`` (global ids)."""

    def __init__(self, types: NodeTypes, hidden: int, featureless: str = "embedding"):
        super().__init__()
        if featureless not in FEATURELESS:
            raise InputError(f"expected --featureless one of {', '.join(FEATURELESS)} (got {featureless!r})")
        self.types, self.featureless = types, featureless
        width = types.num_features
        self.weight = nn.Parameter(torch.zeros(max(width, 1), hidden))
        self.bias = nn.Parameter(torch.zeros(types.num_types, hidden))
        cols = types.column_offsets
        for t in range(types.num_types):  # torch.nn.Linear's draw per type: weights and bias U(±1/√F_t)
            if types.widths[t]:
                bound = 1.0 / math.sqrt(types.widths[t])
                nn.init.uniform_(self.weight.data[cols[t] : cols[t + 1]], -bound, bound)
                nn.init.uniform_(self.bias.data[t], -bound, bound)
        self.register_buffer("offsets", torch.tensor(types.offsets), persistent=False)
        # each type's first row in the embedding table (-1: a type with features, or zeros)
        base, rows = [], 0
        for t in range(types.num_types):
            own = types.widths[t] == 0 and featureless != "zeros"
            base.append(rows if own else -1)
            rows += types.counts[t] if own else 0
        self.register_buffer("table_base", torch.tensor(base), persistent=False)
        self.embedding = nn.Parameter(torch.empty(rows, hidden)) if rows else None
        self.register_buffer("held_ids", None, persistent=False)  # the global ids of the rows hold_rows kept
        for t, b in enumerate(base):  # each type's table drawn over its own shape (module docstring)
            if b >= 0 and featureless == "one-hot":  # torch.nn.Linear(count, hidden)'s draw on one-hot rows
                nn.init.uniform_(self.embedding.data[b : b + types.counts[t]], -1 / math.sqrt(types.counts[t]),
                                 1 / math.sqrt(types.counts[t]))
            elif b >= 0:
                glorot_(self.embedding.data[b : b + types.counts[t]])

    def forward(self, x, rows: torch.Tensor | None = None) -> torch.Tensor:
        n = x.shape[0]
        rows = torch.arange(n, device=self.bias.device) if rows is None else rows  # None: the whole graph
        rows = rows % self.types.num_nodes  # the same ids, but a memory probe's block larger than the graph
        t = torch.bucketize(rows, self.offsets[1:-1], right=True)
        h = self.bias[t]
        if self.types.num_features:
            h = h + matmul(x, self.weight)
        if self.embedding is not None:
            base = self.table_base[t]
            own = base >= 0
            at = self._table_rows(rows, own, base + rows - self.offsets[t])
            mine = own.nonzero().flatten()  # the featureless types' rows: their embedding rows added
            h = h.index_add(0, mine, self.embedding[at[mine]])
        return h

    def _table_rows(self, rows: torch.Tensor, own: torch.Tensor, full: torch.Tensor) -> torch.Tensor:
        """Each row's position in the table: ``full`` (its row in the whole table), or among the rows held."""
        if self.held_ids is None:
            return torch.where(own, full, torch.zeros_like(full))
        at = torch.searchsorted(self.held_ids, rows).clamp(max=max(self.held_ids.numel() - 1, 0))
        if self.held_ids.numel() == 0 or not bool((self.held_ids[at] == rows)[own].all()):
            if bool(own.any()):
                raise RuntimeError("TypedInput: asked for embedding rows of nodes this process does not own")
        return torch.where(own, at, torch.zeros_like(at))

    def hold_rows(self, ids: torch.Tensor) -> bool:
        """Keep the embedding rows of the nodes ``ids`` only (sorted global ids; ``GNN.hold_rows``)."""
        if self.embedding is None:
            return False
        ids = ids.to(self.table_base.device)
        t = torch.bucketize(ids, self.offsets[1:-1], right=True)
        own = self.table_base[t] >= 0
        keep = ids[own]
        rows = (self.table_base[t] + ids - self.offsets[t])[own]
        self.embedding = nn.Parameter(self.embedding.detach()[rows].clone())
        self.embedding.node_owned = True  # its gradient is this process's alone: never summed over ranks
        self.held_ids = keep
        return True


class RGCNLayer(GraphLayer):
    """One R-GCN layer (module docstring): ``relations`` weights ``[d_in, d_out]``, free or decomposed."""

    def __init__(self, d_in: int, d_out: int, relations: int, *, decomposition: str = "none", bases: int = 0,
                 last: bool, dropout: float):
        super().__init__()
        self.in_width, self.out_width, self.relations = d_in, d_out, relations
        self.decomposition, self.last, self.dropout = decomposition, last, dropout
        if decomposition == "bases":
            self.basis = nn.Parameter(glorot_(torch.empty(bases, d_in, d_out)))
            self.comp = nn.Parameter(glorot_(torch.empty(relations, bases)))
        elif decomposition == "blocks":
            if d_in % bases or d_out % bases:
                raise InputError(f"expected widths divisible by the {bases} blocks of R-GCN's block-diagonal weights "
                                 f"(got a layer {d_in} -> {d_out}): choose --rgcn-bases dividing --hidden and the classes, "
                                 f"or --rgcn-decomposition bases")
            self.blocks = nn.Parameter(glorot_(torch.empty(relations, bases, d_in // bases, d_out // bases)))
        else:
            self.rel_weight = nn.Parameter(glorot_(torch.empty(relations, d_in, d_out)))
        self.root = nn.Parameter(glorot_(torch.empty(d_in, d_out)))
        self.bias = nn.Parameter(torch.zeros(d_out))

    def relation_weights(self) -> torch.Tensor:
        """``[R, d_in, d_out]``: every relation's weight, composed from the decomposition."""
        if self.decomposition == "bases":
            return torch.einsum("rb,bio->rio", self.comp, self.basis)
        if self.decomposition == "blocks":
            return torch.stack([torch.block_diag(*self.blocks[r]) for r in range(self.relations)])
        return self.rel_weight

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        weights = self.relation_weights().unbind(0)  # one backward for all (a select's makes a zero [R, d, d] each)
        out = matmul(h.rows(block.num_dst) if hasattr(h, "rows") else h[: block.num_dst], self.root) + self.bias
        index, sizes = block.relation_reads(self.relations)
        read = iter(h.index_select(0, index).split(sizes) if sizes else ())  # each relation's rows, one gather
        for r, rel in enumerate(block.relation_ops(self.relations)):
            if rel is not None:  # the rows this relation reads (its source type's), by its weight, aggregated
                op, cols, rows = rel  # into the rows it writes
                got = spmm(op, (h if cols is None else next(read)) @ weights[r])
                out = out.add_(got) if rows is None else out.index_add_(0, rows, got)
        if self.last:
            return out
        return dropout(F.relu(out), self.dropout, self.training, rows=block.dst_ids, site=self.dropout_site)


class RGCN(GNN):
    """R-GCN: :class:`TypedInput` to the hidden width, then ``layers`` :class:`RGCNLayer`, ReLU and dropout
    between them."""

    norm = "relation-mean"
    pre_modules = ("input",)

    def __init__(self, types: NodeTypes, hidden: int, out_dim: int, layers: int, *, dropout: float = 0.5,
                 decomposition: str = "none", bases: int = 0, featureless: str = "embedding"):
        super().__init__()
        if decomposition not in DECOMPOSITIONS:
            raise InputError(f"expected --rgcn-decomposition one of {', '.join(DECOMPOSITIONS)} (got {decomposition!r})")
        if decomposition != "none" and bases < 1:
            raise InputError(f"expected --rgcn-bases >= 1 with --rgcn-decomposition {decomposition} (got {bases})")
        self.types, self.dropout = types, dropout
        self.input = TypedInput(types, hidden, featureless)
        dims = [hidden] * layers + [out_dim]

        def kind(i: int) -> str:  # blocks the classes' width does not divide: that layer's weights stay whole
            fits = decomposition != "blocks" or (dims[i] % bases == 0 and dims[i + 1] % bases == 0)
            return decomposition if fits or i < layers - 1 else "none"

        self.layers = nn.ModuleList(
            RGCNLayer(dims[i], dims[i + 1], types.num_relations, decomposition=kind(i), bases=bases,
                      last=i == layers - 1, dropout=dropout) for i in range(layers))

    def pre(self, x, rows=None):
        return self.input(x, rows)

    def hold_rows(self, ids: torch.Tensor) -> bool:
        self.fetches_input = self.input.hold_rows(ids)
        return self.fetches_input

    @property
    def owned_numel(self) -> int:
        """Elements of the node-owned embedding table (whole): what graph parallelism keeps with the owners."""
        if self.input.embedding is None:
            return 0
        return sum(self.types.counts[t] for t in self.types.featureless) * self.input.embedding.shape[1]

    def owned_tables(self) -> dict[str, torch.Tensor]:
        return {"input.embedding": self.input.held_ids} if self.fetches_input else {}

    @property
    def edge_needs(self) -> EdgeFacts:
        """Every entry's relation: the layers cut their blocks by it."""
        return EdgeFacts(("type",), None, self.types.num_relations)

    def check_edge_data(self, kinds=(), edge_width=None, num_relations=None) -> None:
        facts = kinds if isinstance(kinds, EdgeFacts) else EdgeFacts(tuple(kinds), edge_width, num_relations)
        want = self.types.num_relations
        if "type" not in facts.kinds or facts.relations != want:
            got = "no edge types" if "type" not in facts.kinds else f"{facts.relations} relations"
            raise InputError(f"expected edge types of the {want} relations R-GCN was built for (got {got})")

    def check_node_types(self, types: NodeTypes | None) -> None:
        """Refuse, in one line, a graph whose types are not those the model was built for."""
        if types != self.types:
            raise InputError(f"expected the node types R-GCN was built for ({self.types.describe()}) (got "
                             f"{'a graph of one type' if types is None else types.describe()})")


def _build(in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float, node_types=None,
           rgcn_decomposition: str = "none", rgcn_bases: int = 0, featureless: str = "embedding", **_) -> RGCN:
    if node_types is None:
        raise InputError(f"expected node types for --model rgcn, which maps each type's features with weights of "
                         f"its own (got a graph without node types, whatever relations its edges carry): {GIVE_TYPES}")
    types = node_types if isinstance(node_types, NodeTypes) else NodeTypes.of_record({"node_types": node_types})
    if not types.relations:
        raise InputError(f"expected relations between the node types for --model rgcn (got none: {types.describe()})")
    if in_dim != max(types.num_features, 1):
        raise InputError(f"expected {types.num_features} feature columns, the node types' widths together (got {in_dim})")
    return RGCN(types, hidden, out_dim, layers, dropout=dropout, decomposition=rgcn_decomposition, bases=rgcn_bases,
                featureless=featureless)


SPEC = register(ModelSpec(
    "rgcn", _build, norm="relation-mean", reads_node_types=True,
    options=("layers", "hidden", "dropout", "rgcn_decomposition", "rgcn_bases", "featureless"),
    # peak RSS over the measured live bytes, one process: DBLP 1.29, ACM 1.36, ACM links 1.71, synthetic
    # knowledge graphs (60k entities, 200 relations; 40k, 40 typed) 1.32 and 0.96 (benchmarks/README.md)
    heap_overhead=(1.5, 2.25),
    about="R-GCN on a typed graph: a weight per relation (free, bases or blocks), an input map per node type"))
