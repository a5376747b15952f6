"""GCN (Kipf & Welling): ``H' = dropout(relu(Â H W + b))``, the last layer without ReLU/dropout.

Initialization follows the paper's code and PyG's ``GCNConv``: Glorot weights, zero bias.
``norm_layer`` (``ops.norm``) puts a LayerNorm or BatchNorm between each hidden layer's sum and its
ReLU, as PyG's recipes do; the layer then runs as plain ops, not the fused kernel.
"""

from __future__ import annotations

import torch
from torch import nn

from torch.nn import functional as F

from fullgraph.models.base import GNN, GraphLayer, glorot_
from fullgraph.ops import Block, dropout, gcn_layer, matmul, spmm
from fullgraph.ops.norm import BatchNorm, apply_norm, make_norm

KERNELS = ("fused", "autograd")


class GCNLayer(GraphLayer):
    """``kernel``: ``fused`` (one autograd function that keeps one activation per layer: MG-GCN's
    buffer reuse) or ``autograd`` (the same math as separate PyTorch ops, each keeping its own
    buffers: the comparison point of ``benchmarks/spmm_layouts.py``)."""

    def __init__(self, d_in: int, d_out: int, *, last: bool, dropout: float, kernel: str = "fused",
                 norm: str = "none"):
        super().__init__()
        self.in_width = d_in
        self.weight = nn.Parameter(glorot_(torch.empty(d_in, d_out)))
        self.norm = None if last else make_norm(norm, d_out)
        self.bias = None if isinstance(self.norm, BatchNorm) else nn.Parameter(torch.zeros(d_out))  # see ops.norm
        self.last, self.dropout, self.kernel = last, dropout, kernel

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        if self.kernel == "autograd" or self.norm is not None:  # a norm sits inside the fused steps
            z = spmm(block.adj, matmul(h, self.weight))
            z = apply_norm(self.norm, z if self.bias is None else z + self.bias, block.reduce)
            return z if self.last else dropout(F.relu(z), self.dropout, self.training, rows=block.dst_ids,
                                               site=self.dropout_site)
        return gcn_layer(block.adj, h, self.weight, self.bias, relu=not self.last,
                         dropout=0.0 if self.last else self.dropout, training=self.training,
                         rows=block.dst_ids, site=self.dropout_site)


class GCN(GNN):
    """``layers`` GCN layers: in → hidden → … → classes. Input features are dropped out too."""

    norm = "gcn"

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float = 0.5,
                 kernel: str = "fused", norm_layer: str = "none"):
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.dropout = dropout
        self.layers = nn.ModuleList(
            GCNLayer(dims[i], dims[i + 1], last=i == layers - 1, dropout=dropout, kernel=kernel, norm=norm_layer)
            for i in range(layers)
        )

    def pre(self, x, rows=None):
        return dropout(x, self.dropout, self.training, rows=rows, site=self.PRE_SITE)
