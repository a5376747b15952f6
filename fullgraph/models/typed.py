"""What the typed models (R-GCN, HGT) share: an input map per node type, and a node type per row.

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
before, ±√(6 / 2·hidden) whatever the count, was 0.6 points behind it on average and 2.1 on DBLP. A
table's rows are the type's whole input, with no type bias added: the bias would be the same function
with a second parameter, which Adam moves at a rate of its own (the rows' common part at twice the
learning rate); HGT on ACM trained 3 points less accurate with it than PyG's table alone, from the same
initial weights (benchmarks/README.md, "HGT").
A node's type follows from its global id, which every layout hands ``pre`` and every block holds
(``src_ids``), so the map runs on any rows a layout holds, and a layer finds its rows' types the same
way (:func:`row_types`, :func:`per_type`). The embedding table has a row per node: graph parallelism keeps
each rank's nodes' rows with that rank (``hold_rows``; ``parallel.owned`` says how and why), the other
layouts hold it whole like any weight.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from fullgraph.errors import InputError
from fullgraph.models.base import GNN, glorot_
from fullgraph.ops import Block, SparseOp, matmul
from fullgraph.ops.adjacency import GIVE_TYPES
from fullgraph.ops.edge_data import EdgeFacts
from fullgraph.ops.grouped import grouped_linear
from fullgraph.ops.node_types import NodeTypes

__all__ = ["TypeTables", "TypedInput", "TypedColumns", "TypedGNN", "FEATURELESS", "types_of", "row_types", "per_type", "typed_build_types"]

FEATURELESS = ("embedding", "one-hot", "zeros")
"""What a node type without features starts from (``--featureless``; module docstring)."""


class TypeTables(nn.Module):
    """The learned rows of the featureless types: one table ``[count, width]`` per such type, stacked, drawn
    per ``featureless`` (module docstring; ``zeros``: no table), and the rows a graph-parallel rank holds
    (:meth:`hold_rows`). :class:`TypedInput` maps the features beside them; :class:`TypedColumns` passes them on."""

    def __init__(self, types: NodeTypes, width: int, featureless: str = "embedding"):
        super().__init__()
        if featureless not in FEATURELESS:
            raise InputError(f"expected --featureless one of {', '.join(FEATURELESS)} (got {featureless!r})")
        self.types, self.featureless = types, featureless
        self.register_buffer("offsets", torch.tensor(types.offsets), persistent=False)
        # each type's first row in the embedding table (-1: a type with features, or zeros)
        base, rows = [], 0
        for t in range(types.num_types):
            own = types.widths[t] == 0 and featureless != "zeros"
            base.append(rows if own else -1)
            rows += types.counts[t] if own else 0
        self.register_buffer("table_base", torch.tensor(base), persistent=False)
        self.embedding = nn.Parameter(torch.empty(rows, width)) if rows else None
        self.register_buffer("held_ids", None, persistent=False)  # the global ids of the rows hold_rows kept
        for t, b in enumerate(base):  # each type's table drawn over its own shape (module docstring)
            if b >= 0 and featureless == "one-hot":  # torch.nn.Linear(count, hidden)'s draw on one-hot rows
                nn.init.uniform_(self.embedding.data[b : b + types.counts[t]], -1 / math.sqrt(types.counts[t]),
                                 1 / math.sqrt(types.counts[t]))
            elif b >= 0:
                glorot_(self.embedding.data[b : b + types.counts[t]])

    def table(self, rows: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For the rows ``rows`` (global ids; ``None``: the whole graph's ``n``): each row's type, the
        positions of the featureless types' rows, and their table rows (``[len(mine), width]``)."""
        rows = torch.arange(n, device=self.offsets.device) if rows is None else rows
        rows = rows % self.types.num_nodes  # the same ids, but a memory probe's block larger than the graph
        t = types_of(rows, self.offsets)
        if self.embedding is None:
            return t, rows.new_zeros(0), self.offsets.new_zeros(0, 0)
        base = self.table_base[t]
        own = base >= 0
        at = self._table_rows(rows, own, base + rows - self.offsets[t])
        mine = own.nonzero().flatten()
        return t, mine, self.embedding[at[mine]]

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
        t = types_of(ids, self.offsets)
        own = self.table_base[t] >= 0
        keep = ids[own]
        rows = (self.table_base[t] + ids - self.offsets[t])[own]
        self.embedding = nn.Parameter(self.embedding.detach()[rows].clone())
        self.embedding.node_owned = True  # its gradient is this process's alone: never summed over ranks
        self.held_ids = keep
        return True


class TypedInput(TypeTables):
    """``pre`` of a typed graph: each node's features mapped by its type's weight block and bias, or its
    type's embedding row (module docstring). ``x``'s rows are the nodes ``rows`` (global ids)."""

    def __init__(self, types: NodeTypes, hidden: int, featureless: str = "embedding"):
        super().__init__(types, hidden, featureless)
        width = types.num_features
        self.weight = nn.Parameter(torch.zeros(max(width, 1), hidden))
        self.bias = nn.Parameter(torch.zeros(types.num_types, hidden))
        cols = types.column_offsets
        for t in range(types.num_types):  # torch.nn.Linear's draw per type: weights and bias U(±1/√F_t)
            if types.widths[t]:
                bound = 1.0 / math.sqrt(types.widths[t])
                nn.init.uniform_(self.weight.data[cols[t] : cols[t + 1]], -bound, bound)
                nn.init.uniform_(self.bias.data[t], -bound, bound)

    def forward(self, x, rows: torch.Tensor | None = None) -> torch.Tensor:
        t, mine, table = self.table(rows, x.shape[0])
        h = self.bias[t]
        if self.embedding is not None:  # a table's rows are its own, no type bias beside them
            h = h.index_fill(0, mine, 0.0)
        if self.types.num_features:
            h = h + matmul(x, self.weight)
        return h.index_add(0, mine, table) if self.embedding is not None else h


class TypedColumns(TypeTables):
    """``pre`` of PyG's heterogeneous modules (``models.pyg_hetero_layer``): each node's own feature columns
    as they are (the column blocks of ``NodeTypes``, dense), and a featureless type's table row, of width
    ``width``, in columns of its own after them: ``[x | table]``. :meth:`columns` says where each type's input
    lies, and so each type's input width (the builder's ``in_dims``)."""

    def __init__(self, types: NodeTypes, width: int, featureless: str = "embedding"):
        if featureless == "zeros":
            raise InputError("expected --featureless embedding or one-hot with PyG's heterogeneous modules (got zeros, "
                             "which gives a featureless type no input columns for its modules to read)")
        super().__init__(types, width, featureless)
        self.lead = max(types.num_features, 1)  # the feature columns (one zero column when no type has any)
        self.out_width = self.lead + (width if self.embedding is not None else 0)

    def columns(self) -> list[tuple[int, int]]:
        """Each type's input columns ``(start, stop)`` in this map's output."""
        cols = self.types.column_offsets
        return [(cols[t], cols[t + 1]) if w else (self.lead, self.out_width) for t, w in enumerate(self.types.widths)]

    def forward(self, x, rows: torch.Tensor | None = None) -> torch.Tensor:
        dense = x.to_dense() if isinstance(x, SparseOp) else x
        if self.embedding is None:
            return dense
        _, mine, table = self.table(rows, x.shape[0])
        tail = dense.new_zeros(x.shape[0], self.embedding.shape[1]).index_copy(0, mine, table)
        return torch.cat([dense, tail], 1)


def types_of(ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The node type of each global id in ``ids`` (``offsets``: ``NodeTypes.offsets`` as a tensor on their
    device): ids are contiguous per type."""
    return torch.bucketize(ids, offsets[1:-1], right=True)


def row_types(types: NodeTypes, block: Block, offsets: torch.Tensor) -> torch.Tensor:
    """The node type of each src row of ``block`` (its dst rows are the first ``num_dst``): from the global
    ids, ``offsets`` being ``types.offsets`` as a tensor on the block's device. Ids past the graph (a memory
    probe's block is larger than it) wrap around, as :class:`TypedInput`'s do."""
    n = block.num_src
    ids = torch.arange(n, device=offsets.device) if block.src_ids is None else block.src_ids
    return types_of(ids % types.num_nodes, offsets)


def per_type(h: torch.Tensor, t: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``h[i] @ weight[t[i]] + bias[t[i]]``: each row by its type's weight (``weight`` ``[T, d_in, d_out]``).

    The rows are grouped by type with one stable sort, multiplied a type at a time into one output
    (``ops.grouped``: no copies of the rows or their gradients) and put back with the inverse permutation
    (a gather: its backward adds no two terms, so the bits do not depend on threads). Rows already
    grouped (one process's whole graph: ids, hence types, ascend) skip both gathers."""
    counts = torch.bincount(t, minlength=weight.shape[0]).tolist()
    grouped = bool((t[1:] >= t[:-1]).all()) if t.numel() > 1 else True
    order = None if grouped else torch.argsort(t, stable=True)
    ends = [0, *itertools.accumulate(counts)]
    groups = [(0, ends[k], ends[k + 1]) for k in range(len(counts))]
    out = grouped_linear((h if order is None else h.index_select(0, order),), groups, weight, bias)
    if order is None:
        return out
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    return out.index_select(0, inverse)


class TypedGNN(GNN):
    """Base of the models built for a typed graph's node types: :class:`TypedInput` as ``pre`` (the
    subclass sets ``self.input`` and ``self.types``), its embeddings held by their owners under graph
    parallelism, and the checks that refuse a graph of other types or of untyped edges in one line."""

    pre_modules = ("input",)
    label = "a typed model"
    """The model's name in messages."""

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
            raise InputError(f"expected edge types of the {want} relations {self.label} was built for (got {got})")

    def check_node_types(self, types: NodeTypes | None) -> None:
        """Refuse, in one line, a graph whose types are not those the model was built for."""
        if types != self.types:
            raise InputError(f"expected the node types {self.label} was built for ({self.types.describe()}) (got "
                             f"{'a graph of one type' if types is None else types.describe()})")


def typed_build_types(model: str, in_dim: int, node_types) -> NodeTypes:
    """The ``NodeTypes`` a typed model's builder is handed (a record or the object), refused in one line
    where there are none, no relations between them, or features of another width."""
    if node_types is None:
        raise InputError(f"expected node types for --model {model}, which maps each type's features with weights of "
                         f"its own (got a graph without node types, whatever relations its edges carry): {GIVE_TYPES}")
    types = node_types if isinstance(node_types, NodeTypes) else NodeTypes.of_record({"node_types": node_types})
    if not types.relations:
        raise InputError(f"expected relations between the node types for --model {model} (got none: {types.describe()})")
    if in_dim != max(types.num_features, 1):
        raise InputError(f"expected {types.num_features} feature columns, the node types' widths together (got {in_dim})")
    return types
