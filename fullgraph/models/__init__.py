"""Models as stacks of block layers. No distributed code lives here."""

from __future__ import annotations

from fullgraph.errors import InputError
from fullgraph.models.base import GNN
from fullgraph.models.gat import GAT
from fullgraph.models.gcn import GCN
from fullgraph.models.gcnii import GCNII
from fullgraph.models.resgcn import ResGCNPlus
from fullgraph.models.sage import GraphSAGE

MODELS = {"gcn": GCN, "sage": GraphSAGE, "gat": GAT, "gcnii": GCNII, "resgcn+": ResGCNPlus}
NORM_MODELS = ("gcn", "sage", "gat")
"""The models ``--norm`` applies to (ResGCN+ has its own LayerNorm; GCNII none, as its paper)."""
SPMM_MODELS = ("gcn", "sage", "gcnii", "resgcn+")
"""The models whose aggregation is one plain sparse product, which the SpMM layouts distribute (GAT's
attention weighs each edge by both its ends: no fixed matrix)."""

__all__ = ["GNN", "GCN", "GraphSAGE", "GAT", "GCNII", "ResGCNPlus", "MODELS", "NORM_MODELS", "SPMM_MODELS",
           "build_model"]


def build_model(name: str, in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float,
                heads: int = 8, gcnii_alpha: float = 0.1, gcnii_lambda: float = 0.5, gcn_kernel: str = "fused",
                recompute: bool = False, norm: str = "none") -> GNN:
    """The model called ``name`` with its own keyword set; unknown names are an ``InputError``.

    ``recompute``: the graph layers keep only their inputs and recompute the rest in backward
    (``GraphLayer``); same numbers, less activation memory. ``norm``: ``none``, ``layer`` or ``batch``
    after each hidden layer (GCN, GraphSAGE and GAT; see ``ops.norm``)."""
    if norm != "none" and name not in NORM_MODELS:
        raise InputError(f"expected norm 'none' for model {name!r} (got {norm!r}): only {', '.join(NORM_MODELS)} "
                         f"take one")
    model = _build(name, in_dim, out_dim, layers=layers, hidden=hidden, dropout=dropout, heads=heads,
                   gcnii_alpha=gcnii_alpha, gcnii_lambda=gcnii_lambda, gcn_kernel=gcn_kernel, norm=norm)
    model.recompute = recompute
    return model


def _build(name, in_dim, out_dim, *, layers, hidden, dropout, heads, gcnii_alpha, gcnii_lambda, gcn_kernel,
           norm) -> GNN:
    if name not in MODELS:
        raise InputError(f"unknown model {name!r} (expected one of {', '.join(MODELS)})")
    common = dict(layers=layers, dropout=dropout)
    if name == "gat":
        return GAT(in_dim, hidden, out_dim, heads=heads, norm_layer=norm, **common)
    if name == "gcnii":
        return GCNII(in_dim, hidden, out_dim, alpha=gcnii_alpha, lam=gcnii_lambda, **common)
    if name == "gcn":
        return GCN(in_dim, hidden, out_dim, kernel=gcn_kernel, norm_layer=norm, **common)
    if name == "sage":
        return GraphSAGE(in_dim, hidden, out_dim, norm_layer=norm, **common)
    return MODELS[name](in_dim, hidden, out_dim, **common)
