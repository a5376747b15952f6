"""GraphSAGE with mean aggregation: ``H'_v = H_v W_self + mean_{u→v} H_u W_neigh + b``.

Initialization follows PyG's ``SAGEConv`` (two ``torch.nn.Linear``-style maps: weights and bias
U(±1/√d_in), the bias on one of them), which is also what the GraphSAGE and BNS-GCN reference code
inherit from ``torch.nn.Linear``. ``norm_layer`` (``ops.norm``) puts a LayerNorm or BatchNorm between
each hidden layer's sum and its ReLU (BNS-GCN trains SAGE with LayerNorm). Not Glorot: on wide
inputs it draws weights up to twice as wide, which over the two maps and several layers starts
training far from ln(classes) and ends it less accurate than PyG's SAGE.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.models.base import GNN, GraphLayer, Linear
from fullgraph.models.gcn import plain_kept_bytes, stack_params
from fullgraph.models.spec import MemoryModel, ModelSpec, register
from fullgraph.ops import Block, SparseOp, dropout, matmul, spmm
from fullgraph.ops.norm import BatchNorm, apply_norm, make_norm


class SAGELayer(GraphLayer):
    def __init__(self, d_in: int, d_out: int, *, last: bool, dropout: float, norm: str = "none"):
        super().__init__()
        self.in_width = d_in
        self.norm = None if last else make_norm(norm, d_out)
        self.self_lin = Linear(d_in, d_out, bias=not isinstance(self.norm, BatchNorm), init="torch")  # see ops.norm
        self.neigh_lin = Linear(d_in, d_out, bias=False, init="torch")
        self.last, self.dropout = last, dropout

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        if isinstance(h, SparseOp):
            h_dst = h.rows(block.num_dst)
            neigh = spmm(block.adj, matmul(h, self.neigh_lin.weight))
        else:
            h_dst = h[: block.num_dst]
            if h.shape[1] < self.neigh_lin.weight.shape[1]:  # aggregate the narrower side
                neigh = spmm(block.adj, h) @ self.neigh_lin.weight
                if h.shape[0] > block.num_dst:
                    # backward needs only the dst rows: a view would keep the src rows (halo
                    # included) alive until then, a copy lets them go after this product
                    h_dst = h_dst.clone()
            else:  # h @ W keeps h for backward anyway; the view costs nothing
                neigh = spmm(block.adj, h @ self.neigh_lin.weight)
        out = self.self_lin(h_dst) + neigh
        if self.last:
            return out
        out = apply_norm(self.norm, out, block.reduce)
        return dropout(F.relu(out), self.dropout, self.training, rows=block.dst_ids, site=self.dropout_site)


class GraphSAGE(GNN):
    norm = "mean"

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float = 0.5,
                 norm_layer: str = "none"):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.dropout = dropout
        self.layers = nn.ModuleList(
            SAGELayer(dims[i], dims[i + 1], last=i == layers - 1, dropout=dropout, norm=norm_layer)
            for i in range(layers)
        )

    def pre(self, x, rows=None):
        return dropout(x, self.dropout, self.training, rows=rows, site=self.PRE_SITE)


def _kept(*, nodes, halo, features, hidden, layers, sparse, dropped_x, recompute, **_):
    return plain_kept_bytes(nodes=nodes, halo=halo, features=features, hidden=hidden, layers=layers, sparse=sparse,
                            dropped_x=dropped_x, recompute=recompute, sage=True, fused=False)


def _build(in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float, norm: str = "none",
           **_) -> GraphSAGE:
    return GraphSAGE(in_dim, hidden, out_dim, layers=layers, dropout=dropout, norm_layer=norm)


SPEC = register(ModelSpec(
    "sage", _build, norm="mean", spmm="narrower", options=("layers", "hidden", "dropout", "norm"), takes_norm=True,
    memory=MemoryModel(lambda F, H, C, L, heads=1: stack_params(F, H, C, L, maps=2), _kept,
                       heap_overhead=(2.5, 4.5), transient=(3.2, 5.5)),
    about="GraphSAGE with mean aggregation: a self map and a neighbour map per layer"))
