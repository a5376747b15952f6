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
from fullgraph.models.spec import MemoryModel, ModelSpec, register
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
    """The output map is ``head`` (DeeperGCN calls it the decoder; that name is link prediction's decoder,
    which a link task attaches beside it: ``tasks.decoders``)."""

    norm = "gcn"
    pre_modules, post_modules = ("encoder",), ("final_norm", "head")

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float = 0.5):
        super().__init__()
        self.dropout = dropout
        self.encoder = Linear(in_dim, hidden, init="torch")
        self.layers = nn.ModuleList(ResGCNLayer(hidden, first=i == 0, dropout=dropout) for i in range(layers))
        self.final_norm = nn.LayerNorm(hidden)
        self.head = Linear(hidden, out_dim, init="torch")
        self._register_load_state_dict_pre_hook(_named_head)

    def pre(self, x, rows=None):
        return self.encoder(x)

    def post(self, h, rows=None):
        return self.head(dropout(F.relu(self.final_norm(h)), self.dropout, self.training, rows=rows,
                                 site=self.post_site))


def _named_head(state: dict, prefix: str, *args) -> None:
    """A state saved before the output map was named ``head`` (``decoder.weight``, ``decoder.bias`` and no
    ``head.*``) loads into ``head``; a link decoder's own ``decoder.*`` keys come with ``head.*`` beside them."""
    if prefix + "head.weight" not in state and prefix + "decoder.weight" in state:
        for name in ("weight", "bias"):
            state[f"{prefix}head.{name}"] = state.pop(f"{prefix}decoder.{name}")


def _kept(*, nodes, halo, hidden, layers, recompute, **_):
    n, m, H, L = nodes, nodes + halo, hidden, layers
    pre = 4 * m * H  # the encoder output (it reads X itself)
    post = 4 * n * H + 4 * n * H + n * H + 4 * n * H  # norm input, ReLU output, mask, decoder input
    if recompute:
        return pre + (L - 1) * 4 * (m if halo else n) * H + post
    outputs = (L - 1) * 4 * m * H if halo else 4 * n * H * (L - 1)  # each layer's input but the first
    later = (L - 1) * 9 * m * H  # ReLU output, mask, dropped conv input
    return pre + outputs + later + post


def _build(in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float, **_) -> ResGCNPlus:
    return ResGCNPlus(in_dim, hidden, out_dim, layers=layers, dropout=dropout)


SPEC = register(ModelSpec(
    "resgcn+", _build, norm="gcn", spmm="hidden",
    memory=MemoryModel(lambda F, H, C, L, heads=1: F * H + H + L * (H * H + H) + (L - 1) * 2 * H + 2 * H + H * C + C,
                       _kept, heap_overhead=(2.3, 4.5), transient=(2.0, 2.0)),
    about="ResGCN+ (DeepGCNs): pre-activation residual blocks with their own LayerNorm (no --norm)"))
