"""A layer of your own, trained full-graph under every layout: GraphSAGE with max-pooling.

    h'_v = h_v W_self + max_{u -> v} relu(h_u W_pool + b_pool) W_neigh + b

(Hamilton et al.'s pooling aggregator; fullgraph's built-in SAGE takes the mean.) It is written once,
against the layer contract of docs/your-model.md, and runs unchanged in one process, with graph
parallelism, in a pipeline and in the hybrid:

    fullgraph train --dataset cora --model examples/max_sage.py:build --model-arg hidden=64
    fullgraph train --dataset cora --model examples/max_sage.py:build --parallel graph --nprocs 4
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.models import GNN, GraphLayer, Linear, dst_rows
from fullgraph.ops import dropout


class MaxPoolLayer(GraphLayer):
    def __init__(self, d_in: int, d_out: int, *, last: bool, p: float):
        super().__init__()
        self.in_width = d_in  # what a pipeline stage receives: required of every layer
        self.pool = Linear(d_in, d_in)
        self.self_lin = Linear(d_in, d_out)
        self.neigh_lin = Linear(d_in, d_out, bias=False)
        self.last, self.p = last, p

    def compute(self, block, h, h0=None):
        # h: the block's src rows (dense, or on the first layer perhaps the sparse input features,
        # which Linear multiplies as they are); its first block.num_dst rows are the dst rows
        src, dst = block.edges()  # local ids of every in-edge, source first
        msg = F.relu(self.pool(h))[src]  # one message per in-edge
        pooled = msg.new_zeros(block.num_dst, msg.shape[1]).index_reduce_(0, dst, msg, "amax", include_self=False)
        out = self.self_lin(dst_rows(h, block)) + self.neigh_lin(pooled)
        if self.last:
            return out
        # keyed by global node id: every layout drops the same entries
        return dropout(F.relu(out), self.p, self.training, rows=block.dst_ids, site=self.dropout_site)


class MaxSAGE(GNN):
    norm = "mean"  # the block's edges are the graph's in-edges, no self loops (the values go unused)

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, p: float):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.layers = nn.ModuleList(MaxPoolLayer(dims[i], dims[i + 1], last=i == layers - 1, p=p)
                                    for i in range(layers))


def build(in_dim: int, out_dim: int, hidden: int = 64, layers: int = 2, dropout: float = 0.5) -> GNN:
    """``--model examples/max_sage.py:build --model-arg hidden=64 --model-arg layers=3``."""
    return MaxSAGE(in_dim, hidden, out_dim, layers, dropout)
