"""Builders in PyG's heterogeneous forms, for ``--model tests/hetero_user_models.py:NAME``: whole models
(``to_hetero_sage``, ``hetero_gnn``) are refused in one line that says what to do instead where the graph has
no node types (``fullgraph.models.pyg_hetero``); lists of layers (``hetero_convs``, ``hgt_layers``,
``sage_layers``) and whole ``to_hetero`` models cut into their layers (``to_hetero_gnn``) train on a typed
graph (``models.pyg_hetero_layer``, ``models.pyg_hetero_split``). ``tests/models/test_pyg_typed.py`` and
``tests/models/test_pyg_hetero.py`` use them."""

from __future__ import annotations

from torch import nn

METADATA = (["paper", "author"], [("paper", "by", "author"), ("author", "rev_by", "paper"),
                                  ("paper", "cites", "paper")])
"""A tiny ``HeteroData.metadata()``: node types, edge types."""


def to_hetero_sage(in_dim, out_dim, hidden=8):
    """PyG's ``to_hetero`` of a GraphSAGE: a ``torch.fx.GraphModule`` with a copy per relation."""
    from torch_geometric.nn import to_hetero
    from torch_geometric.nn.models import GraphSAGE

    return to_hetero(GraphSAGE((-1, -1), hidden, 2, out_dim), METADATA)


def hetero_conv(in_dim, out_dim, hidden=8):
    """One ``HeteroConv``: a SAGEConv per relation."""
    from torch_geometric.nn import HeteroConv, SAGEConv

    return HeteroConv({rel: SAGEConv((-1, -1), out_dim) for rel in METADATA[1]}, aggr="sum")


class HeteroGNN(nn.Module):
    """PyG's usual heterogeneous model: ``HeteroConv`` layers over ``x_dict`` and ``edge_index_dict``."""

    def __init__(self, hidden, out_dim, layers=2):
        super().__init__()
        from torch_geometric.nn import HeteroConv, SAGEConv

        self.convs = nn.ModuleList(HeteroConv({rel: SAGEConv((-1, -1), hidden) for rel in METADATA[1]})
                                   for _ in range(layers))
        self.lin = nn.Linear(hidden, out_dim)

    def forward(self, x_dict, edge_index_dict):
        for conv in self.convs:
            x_dict = {k: v.relu() for k, v in conv(x_dict, edge_index_dict).items()}
        return self.lin(x_dict["paper"])


def hetero_gnn(in_dim, out_dim, hidden=8):
    return HeteroGNN(hidden, out_dim)


def hetero_convs(in_dim, out_dim, hidden=8):
    """A list of ``HeteroConv``, as a list of convs is given to ``from_pyg``."""
    return [hetero_conv(in_dim, hidden), hetero_conv(hidden, out_dim)]


def hgt_layers(in_dim, out_dim, metadata, in_dims, node_types, hidden=16, heads=2, dropout=0.0):
    """PyG's ``hgt_dblp`` model as fullgraph takes it: ``HGTConv`` layers from each type's input width
    (``in_dims``: a featureless type's learned table among them), a ``Linear`` to the classes; keyed
    dropout between the layers (``from_pyg(..., dropout=)``)."""
    from torch_geometric.nn import HGTConv

    from fullgraph.models import from_pyg

    layers = [HGTConv(in_dims, hidden, metadata, heads), HGTConv(hidden, hidden, metadata, heads),
              nn.Linear(hidden, out_dim)]
    table = next((in_dims[n] for n, w in zip(node_types.names, node_types.widths) if not w), 64)  # --hidden
    return from_pyg(layers, node_types=node_types, act=None, dropout=dropout, featureless_width=table)


def sage_layers(in_dim, out_dim, metadata, hidden=16):
    """``HeteroConv`` of lazy ``SAGEConv`` per relation, twice: the widths drawn at build (PyG's usual form)."""
    from torch_geometric.nn import HeteroConv, SAGEConv

    return [HeteroConv({rel: SAGEConv((-1, -1), hidden) for rel in metadata[1]}),
            HeteroConv({rel: SAGEConv((-1, -1), out_dim) for rel in metadata[1]})]


class GNN(nn.Module):
    """PyG's own example for ``to_hetero`` (its heterogeneous guide), with a linear map to the classes."""

    def __init__(self, hidden, out_dim):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.conv1, self.conv2 = SAGEConv((-1, -1), hidden), SAGEConv((-1, -1), hidden)
        self.lin = nn.Linear(hidden, out_dim)

    def forward(self, x, edge_index):
        x = self.conv1(x, edge_index).relu()
        x = self.conv2(x, edge_index).relu()
        return self.lin(x)


def to_hetero_gnn(in_dim, out_dim, metadata, in_dims, hidden=16):
    """The whole ``to_hetero`` model a PyG user writes; fullgraph cuts it into its two layers. ``in_dims``
    (unread: the lazy convs find their widths) says that a featureless type's table is ``--hidden`` wide."""
    from torch_geometric.nn import to_hetero

    return to_hetero(GNN(hidden, out_dim), metadata, aggr="sum")
