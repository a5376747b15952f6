"""HGT, the Heterogeneous Graph Transformer (Hu et al., WWW 2020), on a typed graph.

The typed attention model fullgraph builds in. HGT rather than R-GAT: HGT is the typed attention model
PyG users train (``HGTConv``, its ``hgt_dblp`` example) and GraphStorm offers, and its parts map onto the
typed graph as it is stored: keys, queries and values are per *node type* (a node's type follows from its
id, :func:`~fullgraph.models.typed.per_type`), the relation enters through a matrix per relation and head
on the keys and values and a prior per relation and head on the scores, and one softmax runs over all of a
node's in-edges, whatever their relation — one pass over the block's entries, with each relation's
transformed source rows stacked (``Block.stacked_sums``). R-GAT's per-relation softmax variants would need
a pass per relation.

One layer, ``h`` of width ``F`` in ``heads`` heads of ``D = F / heads``::

    k, q, v = h W_kqv[type] + b_kqv[type]              (per node type, [F, 3F])
    score(e: u -r-> v) = <q_v, k_u A_r> · p_r / √D     (per head; A_r, M_r [D, D] per relation and head)
    α = softmax of the scores over v's in-edges
    out_v = W_out[type] gelu(sum_e α_e v_u M_r) + b_out[type]
    h'_v = β_t out_v + (1 − β_t) h_v,  β_t = sigmoid(skip[type])

exactly as PyG's ``HGTConv`` (tests/models/test_hgt.py checks forward and gradients against it in
float64), with its draws: ``torch.nn.Linear``'s for the per-type maps, U(±1/√D) for ``A_r`` and ``M_r``,
ones for the priors and the skips. The model is PyG's example's: the typed input map
(``models.typed``) with ReLU, ``layers`` HGT layers at ``--hidden`` with ``--heads``, and a linear map
to the classes; dropout on each HGT layer's input, keyed by node as every model's is.

The scores and the aggregation keep, per layer, node rows and one number per edge and head for backward
(``ops.edges.edge_dot``, ``weighted_sum``), where a message-passing layer keeps its ``[E, F]`` gathered
queries, keys and values; the gathers are redone in backward. They run over the block's entries split into
heads (``EdgeSums.headed``): the rows ``[n, F]`` that the per-type and per-relation products make are the
``[n · heads, D]`` rows of that graph as they lie, so one kernel serves every head, with no heads-first copy
of queries, keys or values (the copies and stacks it replaced cost about a quarter of a layer on ACM).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.errors import InputError
from fullgraph.models.base import GraphLayer, Linear
from fullgraph.models.gat import edge_softmax
from fullgraph.models.spec import ModelSpec, register
from fullgraph.models.typed import TypedGNN, TypedInput, per_type, row_types, typed_build_types
from fullgraph.ops import Block, dropout
from fullgraph.ops.edges import edge_dot, weighted_sum
from fullgraph.ops.grouped import grouped_linear
from fullgraph.ops.node_types import NodeTypes

__all__ = ["HGT", "HGTLayer", "HEADED_ENTRIES"]

HEADED_ENTRIES = 1 << 24
"""The most (entry, head) pairs a block's attention runs over split into heads (``HGTLayer._attend``): 16 M,
about 1.1 GB of index arrays kept with the block; past it, a product per head on heads-first copies, whose
cost is a copy of the keys and values per step rather than heads times the block's structure."""


def _uniform(shape: tuple[int, ...], fan_in: int) -> nn.Parameter:
    bound = 1.0 / math.sqrt(fan_in)  # torch.nn.Linear's draw, U(±1/√fan_in), which PyG's HGTConv keeps
    return nn.Parameter(torch.empty(shape).uniform_(-bound, bound))


class HGTLayer(GraphLayer):
    """One HGT layer at width ``width`` (module docstring): ``types.num_types`` key/query/value and output
    maps, ``types.num_relations`` key and value matrices and priors per head."""

    def __init__(self, types: NodeTypes, width: int, heads: int, *, dropout: float):
        super().__init__()
        if width % heads:
            raise InputError(f"expected --hidden to be a multiple of --heads for hgt (got hidden={width}, heads={heads})")
        T, R, D = types.num_types, types.num_relations, width // heads
        self.types, self.heads, self.d_head, self.dropout = types, heads, D, dropout
        self.in_width = self.out_width = width
        self.kqv_weight, self.kqv_bias = _uniform((T, width, 3 * width), width), _uniform((T, 3 * width), width)
        self.k_rel, self.v_rel = _uniform((R, heads, D, D), D), _uniform((R, heads, D, D), D)
        self.p_rel = nn.Parameter(torch.ones(R, heads))
        self.out_weight, self.out_bias = _uniform((T, width, width), width), _uniform((T, width), width)
        self.skip = nn.Parameter(torch.ones(T))
        self.register_buffer("offsets", torch.tensor(types.offsets), persistent=False)
        self.register_buffer("rel_src", torch.tensor([types.index(src) for src, _, _ in types.relations],
                                                     dtype=torch.int64), persistent=False)  # each relation's source type

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        h = dropout(h, self.dropout, self.training, rows=block.src_ids, site=self.dropout_site)
        n, width = block.num_dst, self.in_width
        t = row_types(self.types, block, self.offsets)[:n]
        h_dst = h if n == h.shape[0] else h[:n]  # a slice's backward writes a zero gradient of all of h
        keys, values = self._relation_rows(block, h)
        if keys is None:  # no entry in this block: every row's aggregate is zero
            agg = h.new_zeros(n, width)
        else:
            q = per_type(h_dst, t, self.kqv_weight[:, :, width : 2 * width], self.kqv_bias[:, width : 2 * width])
            agg = self._attend(block, q, keys, values)
        out = per_type(F.gelu(agg), t, self.out_weight, self.out_bias)
        beta = torch.sigmoid(self.skip)[t].unsqueeze(1)
        return torch.lerp(h_dst, out, beta)  # beta out + (1 - beta) h, one pass

    def _attend(self, block: Block, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Each dst row's attention over its in-edges, ``[n, F]``, from node-major ``[rows, F]`` queries, keys
        and values. Over the block split into heads (``EdgeSums.headed``: the rows as they lie, one kernel for
        every head) where its index arrays, ~70 bytes per entry and head, stay within ``HEADED_ENTRIES``; else
        a product per head over the block itself, on heads-first copies (the same sums, in the same order)."""
        n, H, D, R, width = q.shape[0], self.heads, self.d_head, self.types.num_relations, self.in_width
        stacked = block.stacked_sums(R)
        if stacked.src.numel() * H > HEADED_ENTRIES:
            heads_first = lambda x: x.view(x.shape[0], H, D).transpose(0, 1)  # noqa: E731
            score = edge_dot(stacked, heads_first(q), heads_first(keys)) * (self.p_rel[block.edge_type] / math.sqrt(D))
            alpha = edge_softmax(score, stacked.dst, n, stacked)
            return weighted_sum(stacked, alpha, heads_first(values)).transpose(0, 1).reshape(n, width)
        sums = stacked.headed(H)
        prior = (self.p_rel.view(-1)[block.edge_type[sums.edge] * H + sums.head] if H > 1
                 else self.p_rel[block.edge_type, 0])
        score = edge_dot(sums, q.view(1, n * H, D), keys.view(1, -1, D)) * (prior / math.sqrt(D)).unsqueeze(1)
        alpha = edge_softmax(score, sums.dst, n * H, sums)
        return weighted_sum(sums, alpha, values.view(1, -1, D)).view(n, width)

    def _relation_maps(self) -> tuple[torch.Tensor, ...]:
        """Every relation's key and value maps composed with its source type's: ``(h W_k + b_k) A_r`` is
        ``h (W_k A_r) + b_k A_r`` per head, so one product ``[d_in, F]`` per relation gives its keys (and
        one its values) from the layer's input rows (no key and value rows of every node, no product per
        head). Composed for all relations at once: key weights ``[R, d_in, F]``, key biases ``[R, F]``,
        value weights, value biases."""
        R, H, D, width = self.types.num_relations, self.heads, self.d_head, self.in_width
        w, b = self.kqv_weight.index_select(0, self.rel_src), self.kqv_bias.index_select(0, self.rel_src)
        maps = []
        for part, rel in ((slice(0, width), self.k_rel), (slice(2 * width, 3 * width), self.v_rel)):
            maps.append(torch.einsum("rihd,rhde->rihe", w[..., part].reshape(R, -1, H, D), rel).reshape(R, -1, width))
            maps.append(torch.einsum("rhd,rhde->rhe", b[:, part].reshape(R, H, D), rel).reshape(R, width))
        return tuple(maps)

    def _relation_rows(self, block: Block, h: torch.Tensor):
        """Each relation's keys and values of its source rows, stacked in the order ``Block.stacked_sums``
        numbers them: ``[rows read, F]`` twice, each row its heads side by side (``None``: no entries).
        A relation reads a run of the input rows as they lie, or rows of one gather
        (``Block.relation_groups``); each relation's product writes its rows of the stack in place
        (``ops.grouped``)."""
        R = self.types.num_relations
        index, groups = block.relation_groups(R)
        inputs = (h,) if index is None else (h, h.index_select(0, index))
        present = [r for r, rel in enumerate(block.relation_ops(R)) if rel is not None]
        if not groups:
            return None, None
        maps = self._relation_maps()
        if len(present) < R:
            keep = torch.tensor(present, device=h.device)
            maps = tuple(m.index_select(0, keep) for m in maps)
        kw, kb, vw, vb = maps
        return grouped_linear(inputs, groups, kw, kb), grouped_linear(inputs, groups, vw, vb)


class HGT(TypedGNN):
    """HGT: :class:`TypedInput` with ReLU to the hidden width, ``layers`` :class:`HGTLayer`, a linear map to
    the classes (module docstring)."""

    norm = "relation-mean"  # its structure and relations only: the layers weigh the entries themselves
    label = "HGT"
    post_modules = ("head",)

    def __init__(self, types: NodeTypes, hidden: int, out_dim: int, layers: int, *, heads: int = 8,
                 dropout: float = 0.5, featureless: str = "embedding"):
        super().__init__()
        self.types, self.dropout = types, dropout
        self.input = TypedInput(types, hidden, featureless)
        self.layers = nn.ModuleList(HGTLayer(types, hidden, heads, dropout=dropout) for _ in range(layers))
        self.head = Linear(hidden, out_dim, init="torch")

    def pre(self, x, rows=None):
        return F.relu(self.input(x, rows))

    def post(self, h, rows=None):
        return self.head(h)


def _check(opts) -> str | None:
    if opts.hidden % opts.heads:
        return f"expected hidden to be a multiple of heads for hgt (got hidden={opts.hidden}, heads={opts.heads})"
    return None


def _build(in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float, heads: int = 8, node_types=None,
           featureless: str = "embedding", **_) -> HGT:
    types = typed_build_types("hgt", in_dim, node_types)
    return HGT(types, hidden, out_dim, layers, heads=heads, dropout=dropout, featureless=featureless)


SPEC = register(ModelSpec(
    "hgt", _build, norm="relation-mean", reads_node_types=True,
    options=("layers", "hidden", "dropout", "heads", "featureless"), hidden_step=lambda opts: opts.heads, check=_check,
    about="HGT on a typed graph: attention per head with keys, queries and values per node type and a matrix "
          "and prior per relation; one softmax over every relation"))
