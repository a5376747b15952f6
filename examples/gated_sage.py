"""A layer of your own, trained full-graph under every layout: GraphSAGE with a per-node gate.

    h'_v = h_v W_self + σ(h_v W_gate) ⊙ mean_{u -> v} h_u W_neigh + b

Each node decides, channel by channel, how much of its neighbourhood to take in (a gated residual,
as in GatedGCN; fullgraph's built-in SAGE adds the two terms as they are). It is written once,
against the layer contract of docs/your-model.md, and runs unchanged in one process, with graph
parallelism, in a pipeline and in the hybrid:

    fullgraph train --dataset cora --model examples/gated_sage.py:build --model-arg hidden=64
    fullgraph train --dataset cora --model examples/gated_sage.py:build --parallel graph --nprocs 4
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.models import GNN, GraphLayer, Linear, dst_rows
from fullgraph.ops import dropout, spmm


class GatedMeanLayer(GraphLayer):
    def __init__(self, d_in: int, d_out: int, *, last: bool, p: float):
        super().__init__()
        self.in_width = d_in  # what a pipeline stage receives: required of every layer
        self.self_lin = Linear(d_in, d_out)
        self.gate = Linear(d_in, d_out)
        self.neigh_lin = Linear(d_in, d_out, bias=False)
        self.last, self.p = last, p

    def compute(self, block, h, h0=None):
        # h: the block's src rows (dense, or on the first layer perhaps the sparse input features,
        # which Linear multiplies as they are); its first block.num_dst rows are the dst rows.
        mean = spmm(block.adj, self.neigh_lin(h))  # block.adj: the row-normalized A the model asked for
        own = dst_rows(h, block)
        out = self.self_lin(own) + torch.sigmoid(self.gate(own)) * mean
        if self.last:
            return out
        # keyed by global node id: every layout drops the same entries
        return dropout(F.relu(out), self.p, self.training, rows=block.dst_ids, site=self.dropout_site)


class GatedSAGE(GNN):
    norm = "mean"  # blocks hold D^-1 A: a row's values average its in-neighbours

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, p: float):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.layers = nn.ModuleList(GatedMeanLayer(dims[i], dims[i + 1], last=i == layers - 1, p=p)
                                    for i in range(layers))


def build(in_dim: int, out_dim: int, hidden: int = 64, layers: int = 2, dropout: float = 0.5) -> GNN:
    """``--model examples/gated_sage.py:build --model-arg hidden=64 --model-arg layers=3``."""
    return GatedSAGE(in_dim, hidden, out_dim, layers, dropout)
