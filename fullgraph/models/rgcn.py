"""R-GCN (Schlichtkrull et al. 2018) on a typed graph, with an input map per node type.

``H'_v = H_v W_0 + sum_r sum_{u in N_r(v)} (1 / |N_r(v)|) H_u W_r + b``: a weight per relation, a
self-connection weight ``W_0`` and the mean over each relation's neighbours, which the block's
``relation-mean`` normalization holds in its values (``ops.adjacency``). The relation weights are
free, or decomposed as the paper does: ``bases`` (``W_r = sum_b a_rb V_b``, shared bases) or
``blocks`` (``W_r`` block-diagonal; an output layer whose width, the classes, the blocks do not divide
keeps whole weights: it is the narrowest layer). Each layer multiplies its input by ``W_r`` first and aggregates
the product with the relation's part of the block (``Block.relation_ops``): backward keeps the input
once, where aggregating first (PyG's ``RGCNConv``) keeps one aggregate per relation.

The input (``pre``) is the typed models' own (``models.typed``): a linear map per node type, or a learned
embedding per node of a featureless type, held by the node's owner under graph parallelism.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.errors import InputError
from fullgraph.models.base import GraphLayer, glorot_
from fullgraph.models.spec import ModelSpec, register
from fullgraph.models.typed import FEATURELESS, TypedGNN, TypedInput, typed_build_types
from fullgraph.ops import Block, dropout, matmul, spmm
from fullgraph.ops.node_types import NodeTypes

__all__ = ["RGCN", "RGCNLayer", "TypedInput", "FEATURELESS", "DECOMPOSITIONS"]

DECOMPOSITIONS = ("none", "bases", "blocks")
"""How R-GCN's relation weights are parameterized (``--rgcn-decomposition``)."""


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


class RGCN(TypedGNN):
    """R-GCN: :class:`TypedInput` to the hidden width, then ``layers`` :class:`RGCNLayer`, ReLU and dropout
    between them."""

    norm = "relation-mean"
    label = "R-GCN"

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


def _build(in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float, node_types=None,
           rgcn_decomposition: str = "none", rgcn_bases: int = 0, featureless: str = "embedding", **_) -> RGCN:
    types = typed_build_types("rgcn", in_dim, node_types)
    return RGCN(types, hidden, out_dim, layers, dropout=dropout, decomposition=rgcn_decomposition, bases=rgcn_bases,
                featureless=featureless)


SPEC = register(ModelSpec(
    "rgcn", _build, norm="relation-mean", reads_node_types=True,
    options=("layers", "hidden", "dropout", "rgcn_decomposition", "rgcn_bases", "featureless"),
    # peak RSS over the measured live bytes, one process: DBLP 1.29, ACM 1.36, ACM links 1.71, synthetic
    # knowledge graphs (60k entities, 200 relations; 40k, 40 typed) 1.32 and 0.96 (benchmarks/README.md)
    heap_overhead=(1.5, 2.25),
    about="R-GCN on a typed graph: a weight per relation (free, bases or blocks), an input map per node type"))
