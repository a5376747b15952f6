"""PyTorch Geometric convolutions as fullgraph layers, unchanged: :func:`from_pyg`.

A PyG convolution computes a node's output from its in-neighbours; a fullgraph layer computes the
dst rows of a block from its src rows. :class:`~fullgraph.models.pyg_layer.PyGLayer` feeds the one
to the other (``models.pyg_layer`` says how); :class:`PyGModel` stacks them as PyG's ``BasicGNN``
does: conv, then norm, activation and dropout between convs, and, with jumping knowledge
(``BasicGNN(jk=...)``), PyG's own ``JumpingKnowledge`` and final ``Linear`` over every layer's output.

``from_pyg(convs, residual=True)`` adds a residual to every conv: ``conv(h) + R h`` with ``R`` the
identity where the conv keeps the width and a bias-free linear map where it does not, added to
the conv's output before norm and activation — where PyG's ``GATConv(residual=True)`` adds its own
(which is always a linear map). PyG's convs have no such option in general, and ``BasicGNN`` none
of its own; this is theirs where it exists, with the parameter-free skip of He et al. where the
widths allow it.

What cannot be made the same in every layout is refused before training, in one line
(:meth:`PyGModel.check_layout`): randomness inside a conv (an MLP's dropout, the attention dropout of
convs other than ``GATConv``, ``GATv2Conv`` and ``TransformerConv``, whose is keyed by edge:
``models.pyg_layer``) and batch statistics inside a conv (GIN's default MLP) in a multi-process
layout. Edge data a conv cannot run without (``GINEConv``'s features, ``RGCNConv``'s types) and the
graph lacks, or has in another width or number, is refused before training too
(:meth:`PyGModel.check_edge_data`).
Convolutions that reach several hops inside one layer (``TAGConv``, ``SGConv``, ``APPNP``,
``ChebConv``, ...) are refused: written as one layer per hop, they run in every layout. Jumping
knowledge reads every layer's output at the end, which a pipeline stage does not hold. PyG's
heterogeneous layers (``HeteroConv``, ``HGTConv``, ``to_hetero`` of one layer) run on a typed graph given its
node types (``from_pyg(layers, node_types=...)``: ``models.pyg_hetero_layer``); convs that take ``edge_type``
run on a typed graph as on any.
"""

from __future__ import annotations

import torch
from torch import nn

from fullgraph.errors import InputError
from fullgraph.models.base import GNN, reads_every_layer_refusal
from fullgraph.models.pyg_hetero import check_hetero_layers, check_not_hetero, hetero_layers
from fullgraph.models.pyg_layer import (EDGE_ARGS, KEYED_ATTENTION, MULTI_HOP, PyGLayer, conv_name,
                                        is_normalizing_gcn, keyed_attention, out_width)
from fullgraph.ops import Block
from fullgraph.ops.edge_data import EDGE_FIELDS, EdgeFacts
from fullgraph.ops.node_types import NodeTypes

__all__ = ["from_pyg", "adaptable", "PyGLayer", "PyGModel", "MULTI_HOP"]


def _pyg():
    try:
        import torch_geometric.nn as pyg_nn
    except ImportError:
        return None
    return pyg_nn


def adaptable(obj) -> bool:
    """Whether ``obj`` is something :func:`from_pyg` takes: a PyG convolution, a list of them, or a
    PyG ``BasicGNN``. PyG's heterogeneous forms (``to_hetero``'s models, ``HeteroConv``, ...) are
    refused here, in one line that says how to write the model typed (``models.pyg_hetero``)."""
    pyg_nn = _pyg()
    if pyg_nn is None:
        return False
    check_not_hetero(obj)
    from torch_geometric.nn.conv import MessagePassing
    from torch_geometric.nn.models.basic_gnn import BasicGNN

    if isinstance(obj, (MessagePassing, BasicGNN)):
        return True
    return isinstance(obj, (list, tuple, nn.ModuleList)) and len(obj) > 0 and all(
        isinstance(c, MessagePassing) for c in obj)


class PyGModel(GNN):
    """A stack of :class:`PyGLayer`; its blocks are normalized as its convolutions need.

    ``jk``: PyG's jumping-knowledge mode (``cat``, ``max``, ``lstm``, ``last`` or ``None``), with the
    ``BasicGNN``'s own ``JumpingKnowledge`` module (``jk_module``; ``None`` for ``last``) and final
    ``Linear`` (``lin``), which ``post`` applies to the layers' outputs as ``BasicGNN.forward`` does."""

    def __init__(self, layers: list[PyGLayer], *, jk: str | None = None, jk_module: nn.Module | None = None,
                 lin: nn.Module | None = None):
        super().__init__()
        gcn = [is_normalizing_gcn(layer.conv) for layer in layers]
        if any(gcn) and not all(gcn):
            kinds = ", ".join(sorted({conv_name(layer.conv) for layer in layers}))
            raise InputError(f"expected either every convolution to be a normalizing GCNConv or none (got {kinds}): "
                             f"the layers share one block normalization; build the GCNConvs with normalize=False "
                             f"(they then sum over the in-edges) or use one kind of convolution")
        self.norm = "gcn" if all(gcn) else "mean"  # mean: the in-edges as the graph has them (values unused)
        self.layers = nn.ModuleList(layers)
        self.jk_mode = jk
        if jk_module is not None:
            self.jk = jk_module
        if lin is not None:
            self.lin = lin
        self.reads_every_layer = jk is not None and jk != "last"
        self.post_modules = tuple(m for m in ("jk", "lin") if hasattr(self, m))
        # a norm between the convs takes its statistics over every node (PyG's LayerNorm(mode='graph'))
        self.graph_statistics = any(layer.norm_kind == "whole" for layer in layers)

    def forward(self, blocks: Block | list[Block], x, fetch=None) -> torch.Tensor:
        """``GNN.forward``; blocks given one per layer (``--prune``: each layer computes only the rows the
        loss reads) are refused with a whole-graph LayerNorm, whose statistics those rows would change."""
        if self.graph_statistics and not isinstance(blocks, Block):
            raise InputError("expected no LayerNorm(mode='graph') with --prune (its statistics are over the rows "
                             "computed, which pruning changes): train without --prune, or use "
                             "LayerNorm(mode='node')")
        return super().forward(blocks, x, fetch)

    def post(self, h, rows=None) -> torch.Tensor:
        """As ``BasicGNN.forward`` ends: ``lin(jk(xs))``, ``lin(x)`` for ``jk='last'``, else ``x``."""
        if self.reads_every_layer:
            if isinstance(h, torch.Tensor):  # a layout that ran the layers itself, stage by stage
                raise InputError(reads_every_layer_refusal(f"jk={self.jk_mode!r}"))
            h = self.jk(h)
        return self.lin(h) if hasattr(self, "lin") else h

    def check_layout(self, distributed: bool) -> None:
        """Refuse, in one line, what would make a multi-process run differ from one process: random
        draws inside a conv that are not keyed (an MLP's dropout; the attention dropout of convs other
        than those of ``KEYED_ATTENTION``, whose is keyed by edge) and batch statistics inside a conv
        (over a part's rows only)."""
        if not distributed:
            return
        for i, layer in enumerate(self.layers):
            name = conv_name(layer.conv)
            p = getattr(layer.conv, "dropout", 0.0)
            if isinstance(p, float) and p > 0 and not keyed_attention(layer.conv):
                raise InputError(f"expected dropout=0 inside {name} (layer {i}) in a multi-process layout (got "
                                 f"{name}(dropout={p})): its draws cannot be keyed by node or edge, so each process "
                                 f"would drop differently; set dropout=0 on the conv and give the dropout between "
                                 f"layers to from_pyg(convs, dropout=p), where it is keyed (attention dropout is "
                                 f"keyed in {', '.join(KEYED_ATTENTION)})")
            for mod_name, mod in layer.conv.named_modules():
                if isinstance(mod, nn.Dropout) and mod.p > 0:
                    raise InputError(f"expected no dropout inside {name} (layer {i}) in a multi-process layout (got "
                                     f"{mod_name}: Dropout(p={mod.p})): set it to 0 (dropout between layers is keyed)")
                if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                    raise InputError(f"expected no BatchNorm inside {name} (layer {i}) in a multi-process layout (got "
                                     f"{mod_name}: {type(mod).__name__}, whose statistics would cover one part's "
                                     f"rows): build its MLP with norm=None, and put BatchNorm between the layers")

    @property
    def edge_needs(self) -> EdgeFacts:
        """The edge data some conv cannot run without: the kinds (``attr``, ``type``), the features'
        width and the fewest relations any conv has weights for (``None`` where no conv says). A probe
        block (``models.contract``) must carry such data for these convs to run on it."""
        kinds, width, relations = [], None, None
        for layer in self.layers:
            for kind, want in layer._needs.items():
                kinds += [kind] if kind not in kinds else []
                if kind == "attr" and width is None:
                    width = want
                if kind == "type" and want is not None:
                    relations = want if relations is None else min(relations, want)
        return EdgeFacts(tuple(sorted(kinds, key=EDGE_FIELDS.index)), width, relations)

    def check_edge_data(self, kinds: EdgeFacts | tuple[str, ...] = (), edge_width: int | None = None,
                        num_relations: int | None = None) -> None:
        """Refuse, in one line, a conv that needs edge data the graph lacks, or has in another width
        (``GATConv(edge_dim=8)`` on 3 edge features) or with more relations than the conv has weights
        for (``RGCNConv(num_relations=4)`` on 6). ``kinds``: what the edges carry (``Graph.edge_kinds``,
        a subset of ``("weight", "attr", "type")``; ``edge_weight`` ... are read too) with ``edge_width``
        the features' width and ``num_relations`` the graph's; or one ``EdgeFacts`` that says all three.
        Data a conv does not read is left unread (a weight given to ``GATConv``)."""
        facts = _edge_facts(kinds, edge_width, num_relations)
        for i, layer in enumerate(self.layers):
            name = conv_name(layer.conv)
            for kind, want in layer._needs.items():
                arg = EDGE_ARGS[kind]
                what = {"attr": "features", "type": "types"}[kind]
                if kind not in facts.kinds:
                    carried = ", ".join(EDGE_ARGS[k] for k in facts.kinds) or "no data"
                    raise InputError(f"expected edge {what} ({arg}) for {name} (layer {i}), which cannot run without "
                                     f"them (got edges that carry {carried}): give the graph its {arg} (docs/data.md: "
                                     f"an edge list's columns, a native folder's {arg}.npy, Data.{arg}), or use a conv "
                                     f"that reads no edge {what}")
                if kind == "attr" and want is not None and facts.width is not None and facts.width != want:
                    raise InputError(f"expected edge features of width {want} for {name} (layer {i}) (got "
                                     f"{facts.width} per edge): build the conv for {facts.width} edge features "
                                     f"(edge_dim={facts.width})")
                if kind == "type" and want is not None and facts.relations is not None and facts.relations > want:
                    raise InputError(f"expected at most {want} relations for {name} (layer {i}, num_relations="
                                     f"{want}) (got a graph with {facts.relations}): build the conv with "
                                     f"num_relations={facts.relations}")


def _edge_facts(kinds, width, relations) -> EdgeFacts:
    if isinstance(kinds, EdgeFacts):
        return kinds
    named = tuple(k[len("edge_"):] if k.startswith("edge_") else k for k in kinds)
    return EdgeFacts(named, width, relations)


def from_pyg(model: nn.Module | list[nn.Module], *, act: str | nn.Module | None = "relu",
             norm: str | list[nn.Module] | None = None, dropout: float = 0.0, act_first: bool = False,
             residual: bool = False, node_types: NodeTypes | None = None, featureless_width: int = 64,
             featureless: str = "embedding") -> GNN:
    """A fullgraph model from PyG convolutions, unchanged (see the module docstring).

    Args:
        model: a convolution, a list of convolutions, or a PyG ``BasicGNN`` (``GCN``, ``GraphSAGE``,
            ``GAT``, ``GIN``, ...; its activation, norms, dropout, ``act_first`` and ``jk`` are read
            from it, and ``act``, ``norm``, ``dropout`` and ``act_first`` below are ignored).
        act: between convolutions of a list: an activation name (``relu``, ``elu``, ...), a module, or None.
        norm: between convolutions of a list: ``None``, ``"batch"`` (BatchNorm over all nodes),
            ``"layer"`` (LayerNorm per node), or a list of norm modules, one per hidden layer (PyG's
            ``LayerNorm`` in either mode among them).
        dropout: between convolutions of a list: keyed dropout after each hidden layer.
        act_first: activation before the norm, as ``BasicGNN(act_first=True)``.
        residual: every conv's output plus its input, ``conv(h) + R h`` (``R``: the identity where the
            widths agree, else a bias-free linear map), before norm and activation; for a list and a
            ``BasicGNN`` alike.
        node_types: the typed graph's ``NodeTypes`` (``graph.node_types``), for a list of PyG's heterogeneous
            layers (``HeteroConv``, ``HGTConv``, ``to_hetero`` of one layer) and node-wise modules after them
            (``models.pyg_hetero_layer``); ``act`` and ``dropout`` go between those layers.
        featureless_width: a featureless type's learned table's width (``--hidden``): that type's input
            width (``in_dims``).
        featureless: how that table is drawn (``--featureless``: ``embedding`` or ``one-hot``).
    """
    if _pyg() is None:
        raise InputError("expected torch_geometric to be installed for from_pyg (pip install torch_geometric)")
    from torch_geometric.nn.conv import MessagePassing
    from torch_geometric.nn.models.basic_gnn import BasicGNN

    layers = hetero_layers(model)
    if layers is not None and node_types is not None:
        from fullgraph.models.pyg_hetero_layer import from_pyg_hetero

        check_hetero_layers(layers)
        return from_pyg_hetero(layers, node_types, width=featureless_width, featureless=featureless, act=act,
                               dropout=dropout)
    check_not_hetero(model, "PyG convolutions over one typed graph, or node_types with PyG's heterogeneous layers")
    jk = {}
    if isinstance(model, BasicGNN):
        convs, norms = list(model.convs), list(model.norms)
        act, act_first, dropout = model.act, model.act_first, model.dropout.p
        if model.jk_mode is not None:
            jk = dict(jk=model.jk_mode, jk_module=getattr(model, "jk", None), lin=model.lin)
    else:
        convs = list(model) if isinstance(model, (list, tuple, nn.ModuleList)) else [model]
        if not convs or not all(isinstance(c, MessagePassing) for c in convs):
            raise InputError(f"expected PyG convolutions (MessagePassing) (got "
                             f"{', '.join(sorted({type(c).__name__ for c in convs})) or 'an empty list'}): pass a "
                             f"conv, a list of convs or a BasicGNN; other modules go in a fullgraph GNN's pre or "
                             f"post (docs/your-model.md)")
        norms = _norm_modules(norm, convs)
    last = len(convs) - 1
    return PyGModel([PyGLayer(conv, norm=norms[i] if i < len(norms) else None, act=act, act_first=act_first,
                              dropout=dropout, last=i == last and not jk, residual=residual)
                     for i, conv in enumerate(convs)], **jk)


def _norm_modules(norm, convs) -> list:
    hidden = len(convs) - 1
    if norm is None:
        return [None] * hidden
    if isinstance(norm, str):
        widths = [out_width(c) for c in convs[:-1]]
        if norm == "batch":
            return [nn.BatchNorm1d(w) for w in widths]
        if norm == "layer":
            return [nn.LayerNorm(w) for w in widths]
        raise InputError(f"expected norm None, 'batch' or 'layer' (got {norm!r})")
    norm = list(norm)
    if len(norm) != hidden:
        raise InputError(f"expected one norm per hidden layer, {hidden} (got {len(norm)})")
    return norm
