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
from fullgraph.models.spec import MemoryModel, ModelSpec, register
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


def stack_params(F: int, H: int, C: int, L: int, heads: int = 1, *, maps: int = 1) -> int:
    """Parameters of ``L`` layers in -> hidden -> ... -> classes, each ``maps`` weight matrices and
    one bias (GCN: one map; GraphSAGE: two)."""
    dims = [F] + [H] * (L - 1) + [C]
    return sum(maps * a * b + b for a, b in zip(dims, dims[1:]))


def plain_kept_bytes(*, nodes: int, halo: int, features: int, hidden: int, layers: int, sparse: bool,
                     dropped_x: int, recompute: bool, sage: bool, fused: bool) -> int:
    """Bytes kept for backward by GCN or GraphSAGE layers (``plan.kept_activation_bytes``)."""
    n, m, F, H, L = nodes, nodes + halo, features, hidden, layers
    between = (L - 1) * 4 * (m if halo else n) * H  # the input of layers 2..L (the fetched copy, with a halo)
    if recompute:
        return dropped_x + between
    first = dropped_x
    if not sparse and F < H:  # the first layer aggregates first: keeps Â X'
        first = 4 * n * F + (4 * n * F if sage else 0)  # + SAGE's X' dst rows (a copy)
    per_layer = 4 * n * H  # fused GCN: its output, from which ReLU and dropout derive
    if sage or not fused:
        # ReLU output, bool mask, dropped output (which the next layer keeps, unless it reads the
        # fetched copy)
        per_layer = (5 if halo else 9) * n * H
    return first + (L - 1) * per_layer + ((L - 1) * 4 * m * H if halo else 0)


def _kept(*, nodes, halo, features, hidden, layers, sparse, dropped_x, recompute, gcn_kernel="fused", **_):
    return plain_kept_bytes(nodes=nodes, halo=halo, features=features, hidden=hidden, layers=layers, sparse=sparse,
                            dropped_x=dropped_x, recompute=recompute, sage=False, fused=gcn_kernel == "fused")


def _build(in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float, gcn_kernel: str = "fused",
           norm: str = "none", **_) -> GCN:
    return GCN(in_dim, hidden, out_dim, layers=layers, dropout=dropout, kernel=gcn_kernel, norm_layer=norm)


SPEC = register(ModelSpec(
    "gcn", _build, norm="gcn", spmm="narrower", options=("layers", "hidden", "dropout", "gcn_kernel", "norm"),
    takes_norm=True, memory=MemoryModel(stack_params, _kept, heap_overhead=(1.85, 2.0), transient=(4.0, 4.0)),
    about="GCN (Kipf & Welling): symmetric-normalized aggregation, one weight per layer"))
