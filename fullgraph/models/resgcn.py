"""ResGCN+ (DeeperGCN's pre-activation residual): ``H' = H + GCN(dropout(relu(norm(H))))``.

The first layer is a plain GCN convolution; every later layer adds its input back. Normalization is
per node (LayerNorm), not BatchNorm: batch statistics would couple all nodes of the graph, so a
part, stage or chunk could not compute its rows without the others, and every layout would need
extra collectives to stay exact.

Initialization follows DeeperGCN's code and PyG's ``DeepGCNLayer`` example: the encoder and decoder
are ``torch.nn.Linear`` (U(±1/√fan_in), bias too), the convolutions PyG's ``GCNConv`` (Glorot,
zero bias), LayerNorm weight one and bias zero.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.models.base import GNN, GraphLayer, Linear, glorot_
from fullgraph.ops import Block, dropout, gcn_layer


class ResGCNLayer(GraphLayer):
    def __init__(self, hidden: int, *, first: bool, dropout: float):
        super().__init__()
        self.in_width = hidden
        self.first, self.dropout = first, dropout
        self.norm = None if first else nn.LayerNorm(hidden)
        self.weight = nn.Parameter(glorot_(torch.empty(hidden, hidden)))
        self.bias = nn.Parameter(torch.zeros(hidden))

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        if self.first:
            return gcn_layer(block.adj, h, self.weight, self.bias, relu=False)
        z = dropout(F.relu(self.norm(h)), self.dropout, self.training, rows=block.src_ids, site=self.dropout_site)
        return h[: block.num_dst] + gcn_layer(block.adj, z, self.weight, self.bias, relu=False)


class ResGCNPlus(GNN):
    norm = "gcn"
    pre_modules, post_modules = ("encoder",), ("final_norm", "decoder")

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float = 0.5):
        super().__init__()
        self.dropout = dropout
        self.encoder = Linear(in_dim, hidden, init="torch")
        self.layers = nn.ModuleList(ResGCNLayer(hidden, first=i == 0, dropout=dropout) for i in range(layers))
        self.final_norm = nn.LayerNorm(hidden)
        self.decoder = Linear(hidden, out_dim, init="torch")

    def pre(self, x, rows=None):
        return self.encoder(x)

    def post(self, h, rows=None):
        return self.decoder(dropout(F.relu(self.final_norm(h)), self.dropout, self.training, rows=rows,
                                    site=self.post_site))
