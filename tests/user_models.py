"""Builders of user models for the tests: ``--model tests/user_models.py:NAME`` (and by module,
``tests.user_models:NAME``). Each is a model as a PyG user writes it, with keyed dropout between the
layers, so that every layout draws the same masks; ``examples/gated_sage.py`` is the user-written layer."""

from __future__ import annotations

from torch_geometric.nn import GATConv, GCNConv, GINConv, GraphConv, SAGEConv
from torch_geometric.nn.models import GraphSAGE

from fullgraph.models import from_pyg


def gcn(in_dim, out_dim, hidden=16, dropout=0.5):
    return from_pyg([GCNConv(in_dim, hidden), GCNConv(hidden, out_dim)], dropout=dropout)


def sage(in_dim, out_dim, hidden=16, layers=2, dropout=0.5, norm="batch_norm"):
    """PyG's own BasicGNN, BatchNorm between its convolutions."""
    return GraphSAGE(in_dim, hidden, layers, out_dim, dropout=dropout, norm=norm)


def gat(in_dim, out_dim, hidden=8, heads=2, dropout=0.5):
    return from_pyg([GATConv(in_dim, hidden, heads=heads), GATConv(hidden * heads, out_dim)], act="elu",
                    dropout=dropout)


def gin(in_dim, out_dim, hidden=16, dropout=0.5):
    from torch import nn

    def mlp(a, b):
        return nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, b))

    return from_pyg([GINConv(mlp(in_dim, hidden)), GINConv(mlp(hidden, out_dim))], dropout=dropout)


def graphconv(in_dim, out_dim, hidden=16, dropout=0.5):
    return from_pyg([GraphConv(in_dim, hidden, aggr="mean"), GraphConv(hidden, out_dim, aggr="mean")],
                    norm="layer", dropout=dropout)


def sage_jk(in_dim, out_dim, hidden=16, layers=3, jk="cat", dropout=0.5):
    """PyG's GraphSAGE with jumping knowledge: its JumpingKnowledge and final Linear read every layer's output."""
    return GraphSAGE(in_dim, hidden, layers, out_dim, dropout=dropout, jk=jk)


def residual_sage(in_dim, out_dim, hidden=16, layers=3, dropout=0.5):
    """SAGEConvs with from_pyg's residual: a projection into and out of the hidden width, the identity between."""
    widths = [in_dim] + [hidden] * (layers - 1) + [out_dim]
    return from_pyg([SAGEConv(widths[i], widths[i + 1]) for i in range(layers)], residual=True, dropout=dropout)


def sage_graph_norm(in_dim, out_dim, hidden=16, layers=3, dropout=0.5):
    """PyG's GraphSAGE with norm="layer_norm": PyG's LayerNorm in its default mode='graph' (statistics over
    every node) between the convolutions."""
    return GraphSAGE(in_dim, hidden, layers, out_dim, dropout=dropout, norm="layer_norm")


def one_conv(in_dim, out_dim):
    """A single convolution, returned as it is: the builder's result is adapted."""
    return SAGEConv(in_dim, out_dim)


def raises(in_dim, out_dim):
    raise ValueError("no such width")


def not_a_model(in_dim, out_dim):
    return {"layers": 2}


def multi_hop(in_dim, out_dim):
    from torch_geometric.nn import TAGConv

    return [TAGConv(in_dim, 16, K=2), TAGConv(16, out_dim, K=2)]


# ---------------------------------------------------------------- convs that read edge data (issue 51)
def gat_edges(in_dim, out_dim, hidden=8, heads=2, dropout=0.5, edge_dim=3):
    """GATConv(edge_dim) with PyG's attention dropout inside (keyed by the edge's global ends)."""
    return from_pyg([GATConv(in_dim, hidden, heads=heads, edge_dim=edge_dim, dropout=0.3),
                     GATConv(hidden * heads, out_dim, edge_dim=edge_dim, dropout=0.3)], act="elu", dropout=dropout)


def gine(in_dim, out_dim, hidden=16, dropout=0.5, edge_dim=3):
    from torch import nn
    from torch_geometric.nn import GINEConv

    def mlp(a, b):
        return nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, b))

    return from_pyg([GINEConv(mlp(in_dim, hidden), edge_dim=edge_dim), GINEConv(mlp(hidden, out_dim), edge_dim=edge_dim)],
                    dropout=dropout)


def rgcn(in_dim, out_dim, hidden=16, dropout=0.5, relations=3):
    from torch_geometric.nn import RGCNConv

    return from_pyg([RGCNConv(in_dim, hidden, relations, num_bases=2), RGCNConv(hidden, out_dim, relations)],
                    dropout=dropout)

