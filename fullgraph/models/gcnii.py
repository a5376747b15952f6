"""GCNII (Chen et al., 2020): initial residual and identity mapping, for deep models.

``H' = relu(((1-α) Â H + α H0) ((1-β_l) I + β_l W_l))`` with ``β_l = log(λ / l + 1)``. The input goes
through a dense layer to give ``H0``; a dense layer at the end gives the logits. The conv weights
and the dense weights are decayed separately, as in the paper (0.01 and 5e-4 on Cora).

Initialization follows the paper's code: conv weights U(±1/√hidden), the dense input and output
layers ``torch.nn.Linear``'s default (U(±1/√fan_in), bias too).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.models.base import GNN, GraphLayer, Linear
from fullgraph.models.spec import MemoryModel, ModelSpec, register
from fullgraph.ops import Block, dropout, spmm


class GCNIILayer(GraphLayer):
    def __init__(self, hidden: int, layer_index: int, *, alpha: float, lam: float, dropout: float):
        super().__init__()
        self.in_width = hidden
        # the paper's initialization, U(-1/sqrt(hidden), 1/sqrt(hidden)): narrower than Glorot's,
        # which matters at 64 layers
        bound = 1.0 / math.sqrt(hidden)
        self.weight = nn.Parameter(torch.empty(hidden, hidden).uniform_(-bound, bound))
        self.alpha, self.dropout = alpha, dropout
        self.beta = math.log(lam / layer_index + 1.0)

    def compute(self, block: Block, h, h0) -> torch.Tensor:
        h = dropout(h, self.dropout, self.training, rows=block.src_ids, site=self.dropout_site)
        # fused forms of (1-α)·ÂH + α·H0 and (1-β)·S + β·S W: two kernels instead of six
        support = torch.add(h0 * self.alpha, spmm(block.adj, h), alpha=1.0 - self.alpha)
        return F.relu(torch.addmm(support, support, self.weight, beta=1.0 - self.beta, alpha=self.beta))


class GCNII(GNN):
    norm = "gcn"
    uses_h0 = True
    pre_modules, post_modules = ("fc_in",), ("fc_out",)

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float = 0.6,
                 alpha: float = 0.1, lam: float = 0.5):
        super().__init__()
        self.dropout = dropout
        self.fc_in = Linear(in_dim, hidden, init="torch")
        self.fc_out = Linear(hidden, out_dim, init="torch")
        self.layers = nn.ModuleList(
            GCNIILayer(hidden, i + 1, alpha=alpha, lam=lam, dropout=dropout) for i in range(layers)
        )

    def pre(self, x, rows=None):
        return F.relu(self.fc_in(dropout(x, self.dropout, self.training, rows=rows, site=self.PRE_SITE)))

    def post(self, h, rows=None):
        return self.fc_out(dropout(h, self.dropout, self.training, rows=rows, site=self.post_site))

    def param_groups(self, weight_decay: float, conv_weight_decay: float | None = None) -> list[dict]:
        conv = [p for p in self.layers.parameters()]
        dense = list(self.fc_in.parameters()) + list(self.fc_out.parameters())
        cwd = weight_decay if conv_weight_decay is None else conv_weight_decay
        return [{"params": conv, "weight_decay": cwd}, {"params": dense, "weight_decay": weight_decay}]


def _kept(*, nodes, halo, hidden, layers, dropped_x, recompute, **_):
    n, m, H, L = nodes, nodes + halo, hidden, layers
    pre = dropped_x + 4 * m * H  # fc_in's input and H0
    post = n * H + 4 * n * H  # dropout mask and fc_out's input
    if recompute:
        return pre + (L - 1) * 4 * (m if halo else n) * H + post
    return pre + L * (m * H + 8 * n * H) + post  # mask, support, ReLU output (fetched copies: dropped)


def _build(in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float, gcnii_alpha: float = 0.1,
           gcnii_lambda: float = 0.5, **_) -> GCNII:
    return GCNII(in_dim, hidden, out_dim, layers=layers, dropout=dropout, alpha=gcnii_alpha, lam=gcnii_lambda)


SPEC = register(ModelSpec(
    "gcnii", _build, norm="gcn", spmm="hidden", options=("layers", "hidden", "dropout", "gcnii_alpha", "gcnii_lambda"),
    memory=MemoryModel(lambda F, H, C, L, heads=1: F * H + H + L * H * H + H * C + C, _kept,
                       heap_overhead=(3.0, 4.25), transient=(2.0, 4.0)),
    about="GCNII: initial residual and identity mapping, for deep models (no --norm, as its paper)"))
