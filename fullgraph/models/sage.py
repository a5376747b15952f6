"""GraphSAGE with mean aggregation: ``H'_v = H_v W_self + mean_{u→v} H_u W_neigh + b``."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.models.base import GNN, GraphLayer, Linear
from fullgraph.ops import Block, SparseOp, dropout, matmul, spmm


class SAGELayer(GraphLayer):
    def __init__(self, d_in: int, d_out: int, *, last: bool, dropout: float):
        super().__init__()
        self.self_lin = Linear(d_in, d_out, bias=True)
        self.neigh_lin = Linear(d_in, d_out, bias=False)
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
        return dropout(F.relu(out), self.dropout, self.training, rows=block.dst_ids, site=self.dropout_site)


class GraphSAGE(GNN):
    norm = "mean"

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float = 0.5):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.dropout = dropout
        self.layers = nn.ModuleList(
            SAGELayer(dims[i], dims[i + 1], last=i == layers - 1, dropout=dropout) for i in range(layers)
        )

    def pre(self, x, rows=None):
        return dropout(x, self.dropout, self.training, rows=rows, site=self.PRE_SITE)
