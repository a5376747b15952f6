"""APPNP (Klicpera et al., 2019): predict with an MLP, then propagate with personalized PageRank.

``H0 = MLP(X)`` (two dense layers, ReLU and dropout between, as the paper's and PyG's examples),
then ``layers`` steps of ``H ← (1−α) Â H + α H0`` with the GCN-normalized Â; the last H is the
logits. The propagation has no weights and never mixes feature columns: each output column depends
on the same column of H0 only. That makes it *separable*: tensor parallelism may run every step on
column slices and switch between rows and columns once per pass (``--tensor-decoupled``).

Initialization follows PyG's ``Linear`` (``torch.nn.Linear``'s default, U(±1/√fan_in)).
"""

from __future__ import annotations

from torch import nn
from torch.nn import functional as F

from fullgraph.models.base import GNN, GraphLayer, Linear
from fullgraph.models.spec import ModelSpec, register
from fullgraph.ops import Block, dropout, spmm


class Propagate(GraphLayer):
    """One step ``(1−α) Â h + α h0``; it reads only the columns it writes."""

    def __init__(self, width: int, alpha: float):
        super().__init__()
        self.in_width, self.alpha = width, alpha

    def compute(self, block: Block, h, h0=None):
        return spmm(block.adj, h) * (1.0 - self.alpha) + h0 * self.alpha


class APPNP(GNN):
    norm = "gcn"
    uses_h0 = True
    pre_modules = ("lin_in", "lin_out")

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float = 0.5,
                 alpha: float = 0.1):
        super().__init__()
        self.dropout = dropout
        self.lin_in = Linear(in_dim, hidden, init="torch")
        self.lin_out = Linear(hidden, out_dim, init="torch")
        self.layers = nn.ModuleList(Propagate(out_dim, alpha) for _ in range(layers))

    @property
    def hidden_site(self) -> int:
        """The dropout site between the two dense layers: past ``post``'s, which APPNP leaves unused."""
        return self.post_site + 1

    def pre(self, x, rows=None):
        h = F.relu(self.lin_in(dropout(x, self.dropout, self.training, rows=rows, site=self.PRE_SITE)))
        return self.lin_out(dropout(h, self.dropout, self.training, rows=rows, site=self.hidden_site))


def _build(in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float, appnp_alpha: float = 0.1,
           **_) -> APPNP:
    return APPNP(in_dim, hidden, out_dim, layers=layers, dropout=dropout, alpha=appnp_alpha)


SPEC = register(ModelSpec(
    "appnp", _build, norm="gcn", spmm="hidden", separable=True, options=("layers", "hidden", "dropout", "appnp_alpha"),
    about="APPNP: an MLP, then personalized-PageRank propagation (--layers steps; --tensor-decoupled)"))
