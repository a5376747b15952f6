"""GIN (Xu et al., "How Powerful are Graph Neural Networks?"): ``H' = MLP((1 + ε) H_v + Σ_{u→v} H_u)``
with ε = 0 (GIN-0, the paper's best on most benchmarks), so that the aggregation is one product
with A + I: the ``self-loops`` block, whose values are all one.

Each layer's MLP is two linear maps with a ReLU between them (PyG's ``GINConv`` over an MLP of two
layers); a hidden layer is followed by ReLU and dropout, as in the paper's node-classification
variant. Initialization: ``torch.nn.Linear``'s (what PyG's MLP uses). The spec gives no memory
model: the planner measures it (``fullgraph.plan.measured``), as it does a user's model.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.models.base import GNN, GraphLayer, Linear
from fullgraph.models.spec import ModelSpec, register
from fullgraph.ops import Block, SparseOp, dropout, matmul, spmm


class GINLayer(GraphLayer):
    def __init__(self, d_in: int, d_out: int, *, last: bool, dropout: float):
        super().__init__()
        self.in_width = d_in
        self.lin1, self.lin2 = Linear(d_in, d_out, init="torch"), Linear(d_out, d_out, init="torch")
        self.last, self.dropout = last, dropout

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        if isinstance(h, SparseOp) or self.lin1.weight.shape[1] < self.in_width:
            z = spmm(block.adj, matmul(h, self.lin1.weight)) + self.lin1.bias  # the first map commutes with the sum
        else:
            z = self.lin1(spmm(block.adj, h))
        out = self.lin2(F.relu(z))
        if self.last:
            return out
        return dropout(F.relu(out), self.dropout, self.training, rows=block.dst_ids, site=self.dropout_site)


class GIN(GNN):
    norm = "self-loops"

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float = 0.5):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.layers = nn.ModuleList(GINLayer(dims[i], dims[i + 1], last=i == layers - 1, dropout=dropout)
                                    for i in range(layers))


def _build(in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float, **_) -> GIN:
    return GIN(in_dim, hidden, out_dim, layers=layers, dropout=dropout)


SPEC = register(ModelSpec(
    "gin", _build, norm="self-loops", spmm=None,
    about="GIN-0: a two-layer MLP over the sum of a node and its in-neighbours (memory measured, not derived)"))
