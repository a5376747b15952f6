"""One PyG convolution as a fullgraph layer: :class:`PyGLayer` (``from_pyg`` stacks them, ``models.pyg``).

How each convolution is fed a block:

* ``edge_index`` in the block's local ids (source first, as PyG has it), the dst rows being the
  first ``num_dst`` src rows;
* bipartite ``(h_src, h_src[:num_dst])`` to convolutions that take a pair (``SAGEConv``,
  ``GraphConv``, ``GINConv``, ``GATConv``, ...), and ``h_src`` to the others, whose output is cut to
  the dst rows;
* for a normalizing ``GCNConv``, the block's *global* normalization D^-1/2 (A+I) D^-1/2 rather
  than one the conv would compute from a part's local degrees (which are not the graph's): the
  product runs on the block's own sparse kernel, with the conv's weight and bias. ``SAGEConv``
  with mean aggregation runs on that kernel too, with the row-normalized block. Both are the
  convs' own math (``tests/models/test_pyg.py`` checks them against PyG's forward).

What follows the conv, as PyG's ``BasicGNN`` orders it: the residual (``from_pyg(residual=True)``:
added to the conv's output, where PyG's ``GATConv(residual=True)`` adds its own), then norm,
activation, dropout (or activation first). Dropout is keyed by global node id (``ops.dropout``), so
every layout drops the same entries; the statistics of a BatchNorm and of PyG's
``LayerNorm(mode='graph')`` are summed over the processes that hold a layer's rows (``Block.reduce``).

Edge data (``Block.edge_weight``, ``edge_attr``, ``edge_type``, in the block's CSR order, the order of
``block.edges()``) goes to every conv whose ``forward`` takes it (``edge_weight``, ``edge_attr``,
``edge_type``: ``GraphConv``, ``GCNConv(normalize=False)``, ``GATConv``, ``GINEConv``, ``NNConv``,
``RGCNConv``, ...); a normalizing ``GCNConv`` finds the weights in the block's Â already. What a conv
cannot do without (``GINEConv``'s features, ``GATConv(edge_dim=d)``'s, ``RGCNConv``'s types) is said by
:func:`edge_needs` and refused before training (``PyGModel.check_edge_data``).

Attention dropout inside ``GATConv``, ``GATv2Conv`` and ``TransformerConv`` (``dropout=p``) is keyed
during a keyed training step: the conv's own is set to 0 for the call, and each message
``alpha_e * value_e`` ``[E', heads, C]`` is multiplied by ``keep[e, head] / (1 - p)`` — dropout on
alpha, since the messages are linear in it — with ``keep`` a hash of the edge's two global node
ids, the head, the layer's dropout site, the seed and the epoch (``ops.dropout.keyed_edge_keep``).
The edges are those the conv passes on (``GATConv``'s appended self loops included, keyed ``(v, v)``),
read from its ``propagate``. Every layout thus drops the same attention entries. Outside a keyed step
PyG's own dropout runs.

Sparse input features (a ``SparseOp``) go through the conv's first linear map as a sparse
product where that map comes first (``GCNConv``, ``SAGEConv``) and through the residual's
projection; other convs get the rows densified, the constant input features once (``_densified``).
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.errors import InputError
from fullgraph.models.base import GraphLayer
from fullgraph.ops import Block, SparseOp, dropout, matmul, spmm
from fullgraph.ops.dropout import current_key, keyed_edge_keep
from fullgraph.ops.norm import batch_norm_over, graph_layer_norm_over

__all__ = ["PyGLayer", "MULTI_HOP", "ACTIVATIONS", "EDGE_ARGS", "KEYED_ATTENTION", "conv_name", "in_width",
           "out_width", "activation", "is_normalizing_gcn", "edge_args", "edge_needs", "keyed_attention"]

MULTI_HOP = ("TAGConv", "SGConv", "SSGConv", "APPNP", "ChebConv", "MixHopConv", "ARMAConv", "DNAConv")
"""Convolutions whose aggregation reaches beyond one hop within one layer: refused, with advice."""

PYG_WHOLE_GRAPH = "graph"
"""PyG ``LayerNorm``'s default mode: one mean and variance over every entry of every node (a PyG word,
not a ``--parallel`` layout); fullgraph calls that norm kind ``whole``."""

EDGE_ARGS = {"weight": "edge_weight", "attr": "edge_attr", "type": "edge_type"}
"""Each kind of edge data (``ops.edge_data.EDGE_FIELDS``) by the name of the ``forward`` argument (and of
the ``Block`` property) that carries it, as PyG names them."""

KEYED_ATTENTION = ("GATConv", "GATv2Conv", "TransformerConv")
"""Convolutions whose attention dropout (``dropout=p``) is keyed in a keyed training step (module docstring)."""

ACTIVATIONS = {"relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU, "leaky_relu": nn.LeakyReLU, "tanh": nn.Tanh,
               "sigmoid": nn.Sigmoid, "silu": nn.SiLU}


# ---------------------------------------------------------------- how each convolution is fed
def conv_name(conv) -> str:
    return type(conv).__name__


def is_normalizing_gcn(conv) -> bool:
    from torch_geometric.nn import GCNConv

    return isinstance(conv, GCNConv) and conv.normalize


def _takes_pair(conv) -> bool:
    """Whether the conv's ``forward`` takes ``x`` as a pair (PyG annotates it ``PairTensor``)."""
    param = inspect.signature(type(conv).forward).parameters.get("x")
    note = str(param.annotation) if param is not None else ""
    return any(word in note for word in ("Pair", "Tuple", "tuple"))


def in_width(conv) -> int:
    """The width of the rows the conv reads (a pipeline stage receives them; a residual adds them)."""
    width = getattr(conv, "in_channels", None)
    if isinstance(width, (tuple, list)):
        width = width[0]
    if width is None:  # GINConv and its kind: the width of the first linear map of the conv's network
        first = next((m for m in conv.modules() if m is not conv and hasattr(m, "weight")
                      and (hasattr(m, "in_features") or hasattr(m, "in_channels"))), None)
        width = getattr(first, "in_features", getattr(first, "in_channels", None))
    if not isinstance(width, int) or width < 1:
        raise InputError(f"expected {conv_name(conv)} to be built with its input width (got in_channels={width!r}; "
                         f"lazy widths (-1) cannot be planned across processes: give the width)")
    return width


def out_width(conv, why: str = "to size its norm", instead: str = "pass the norms as a list of modules") -> int:
    """The width of the conv's output rows (heads concatenated)."""
    width = getattr(conv, "out_channels", None)
    heads, concat = getattr(conv, "heads", 1), getattr(conv, "concat", False)
    if not isinstance(width, int) or width < 1:
        raise InputError(f"expected {conv_name(conv)} to have out_channels {why} (got {width!r}): build it with "
                         f"its output width, or {instead}")
    return width * heads if concat else width


def edge_args(conv) -> tuple[str, ...]:
    """The kinds of edge data the conv's ``forward`` takes (``weight``, ``attr``, ``type``), by its signature
    (what PyG's ``BasicGNN`` says with ``supports_edge_weight`` / ``supports_edge_attr``); features not
    to a conv built with ``edge_dim=None``, which reads none (``GATv2Conv`` would fail on them)."""
    params = inspect.signature(type(conv).forward).parameters
    reads_no_features = hasattr(conv, "edge_dim") and getattr(conv, "edge_dim") is None  # GATv2Conv would fail
    return tuple(k for k, arg in EDGE_ARGS.items() if arg in params and not (k == "attr" and reads_no_features))


def _first_in_features(module) -> int | None:
    first = next((m for m in module.modules() if hasattr(m, "weight")
                  and (hasattr(m, "in_features") or hasattr(m, "in_channels"))), None)
    width = getattr(first, "in_features", getattr(first, "in_channels", None))
    return width if isinstance(width, int) and width > 0 else None


def edge_needs(conv) -> dict[str, int | None]:
    """The edge data the conv cannot run without: ``{"attr": width, "type": relations}`` (a value
    ``None``: any width). ``GINEConv`` (features of its ``edge_dim``, else of its input's width),
    ``NNConv`` (features of its network's input width), a conv built with an int ``edge_dim``
    (``GATConv``, ``GATv2Conv``, ``TransformerConv``, ...), ``RGCNConv`` and ``FastRGCNConv`` (types, at
    most ``num_relations``), another conv that takes types with ``num_relations > 1``. A weight is
    never needed: a conv without one weighs every edge 1."""
    from torch_geometric.nn import FastRGCNConv, GINEConv, NNConv, RGCNConv

    takes, needs = edge_args(conv), {}
    if "attr" in takes:
        if isinstance(conv, GINEConv):
            lin = conv.lin
            needs["attr"] = in_width(conv) if lin is None else (lin.in_channels if lin.in_channels > 0 else None)
        elif isinstance(conv, NNConv):
            needs["attr"] = _first_in_features(conv.nn)
        elif isinstance(getattr(conv, "edge_dim", None), int) and not isinstance(conv.edge_dim, bool):
            needs["attr"] = conv.edge_dim if conv.edge_dim > 0 else None
    if "type" in takes:
        r = getattr(conv, "num_relations", None)
        if isinstance(conv, (RGCNConv, FastRGCNConv)) or (isinstance(r, int) and r > 1):
            needs["type"] = r if isinstance(r, int) else None
    return needs


def keyed_attention(conv) -> bool:
    """Whether the conv's attention dropout is keyed (PyG's own ``GATConv``, ``GATv2Conv`` or
    ``TransformerConv``, not a subclass, whose messages may be other than ``alpha * value``)."""
    import torch_geometric.nn as pyg_nn

    return any(type(conv) is getattr(pyg_nn, name) for name in KEYED_ATTENTION)


def _check_conv(conv) -> None:
    name = conv_name(conv)
    if name in MULTI_HOP:
        raise InputError(f"expected one-hop convolutions (got {name}, which aggregates over several hops in one "
                         f"layer): write each hop as a layer (K layers that each aggregate once: a fullgraph GNN of your "
                         f"own, docs/your-model.md)")
    from torch_geometric.nn import GCNConv

    if isinstance(conv, GCNConv) and conv.normalize and (conv.improved or not conv.add_self_loops):
        raise InputError(f"expected GCNConv with improved=False and add_self_loops=True when it normalizes (got "
                         f"improved={conv.improved}, add_self_loops={conv.add_self_loops}): the blocks carry "
                         f"D^-1/2 (A+I) D^-1/2; build it with the defaults, or write the layer against the contract "
                         f"(docs/your-model.md)")
    in_width(conv)


def _dense(h) -> torch.Tensor:
    return h.to_dense() if isinstance(h, SparseOp) else h


def _dst(h, n: int):
    return h.rows(n) if isinstance(h, SparseOp) else h[:n]


def _linear(h, lin) -> torch.Tensor:
    """PyG's ``Linear`` (weight ``[out, in]``) on dense or constant sparse rows."""
    out = matmul(h, lin.weight.t())
    return out if getattr(lin, "bias", None) is None else out + lin.bias


def _gcn(conv, block: Block, h) -> torch.Tensor:
    """``GCNConv``: Â (h W) + b, with the block's global Â."""
    out = spmm(block.adj, matmul(h, conv.lin.weight.t()))
    return out if conv.bias is None else out + conv.bias


def _sage_mean(conv, block: Block, h) -> torch.Tensor:
    """``SAGEConv`` (mean, no projection): mean_{u→v} h_u W_l + b_l + h_v W_r, aggregating the narrower side."""
    w = conv.lin_l.weight.t()
    if isinstance(h, SparseOp) or w.shape[1] < w.shape[0]:
        out = spmm(block.adj, matmul(h, w))
    else:
        out = spmm(block.adj, h) @ w
    if conv.lin_l.bias is not None:
        out = out + conv.lin_l.bias
    if conv.root_weight:
        out = out + _linear(_dst(h, block.num_dst), conv.lin_r)
    return F.normalize(out, p=2.0, dim=-1) if conv.normalize else out


def _fast_path(conv):
    """The block-kernel form of the conv, where its math is exactly that (else ``None``)."""
    from torch_geometric.nn import GCNConv, SAGEConv

    if isinstance(conv, GCNConv) and conv.normalize:
        return _gcn
    if isinstance(conv, SAGEConv) and conv.aggr == "mean" and not conv.project:
        return _sage_mean
    return None


# ---------------------------------------------------------------- after the convolution
def _residual_map(conv, residual: bool):
    """``None`` (no residual), ``nn.Identity`` where the conv keeps the width, else PyG's bias-free
    ``Linear`` with glorot weights, as ``GATConv(residual=True)`` builds its own."""
    if not residual:
        return None
    if getattr(conv, "residual", False) or getattr(conv, "res", None) is not None:
        raise InputError(f"expected one residual per layer (got from_pyg(residual=True) around "
                         f"{conv_name(conv)}(residual=True)): set one of them to False")
    d_in, d_out = in_width(conv), out_width(conv, "to size its residual",
                                            "add the skip in a layer of your own (docs/your-model.md)")
    if d_in == d_out:
        return nn.Identity()
    from torch_geometric.nn import Linear

    return Linear(d_in, d_out, bias=False, weight_initializer="glorot")


def norm_kind(norm) -> str | None:
    """``batch`` (BatchNorm over all nodes), ``whole`` (PyG's ``LayerNorm(mode='graph')``: one mean and
    variance over every entry of every node), ``row`` (each node on its own) or ``None``; refuses the others."""
    if norm is None or isinstance(norm, nn.Identity):
        return None
    if isinstance(norm, nn.BatchNorm1d):
        bn = norm
    elif type(norm).__name__ == "BatchNorm" and isinstance(getattr(norm, "module", None), nn.BatchNorm1d):
        bn = norm.module  # PyG's BatchNorm wraps torch's
    elif isinstance(norm, nn.LayerNorm) or (type(norm).__name__ == "LayerNorm" and getattr(norm, "mode", "") == "node"):
        return "row"
    elif type(norm).__name__ == "LayerNorm" and getattr(norm, "mode", "") == PYG_WHOLE_GRAPH:
        return "whole"
    else:
        mode = getattr(norm, "mode", None)
        raise InputError(f"expected a BatchNorm, a LayerNorm (mode 'node' or 'graph') or none between the "
                         f"convolutions (got {type(norm).__name__}" + (f" with mode={mode!r}" if mode else "")
                         + "): use one of those, or write the norm into a layer of your own (docs/your-model.md)")
    if bn.momentum is None:
        raise InputError("expected BatchNorm with a momentum (got momentum=None, a cumulative average): give it "
                         "one (0.1 is torch's default)")
    return "batch"


def _apply_norm(norm, kind: str | None, h: torch.Tensor, reduce) -> torch.Tensor:
    if kind is None:
        return h
    if kind == "batch":
        return batch_norm_over(norm if isinstance(norm, nn.BatchNorm1d) else norm.module, h, reduce)
    if kind == "whole":
        return graph_layer_norm_over(norm, h, reduce)
    return norm(h)


def activation(act) -> nn.Module | None:
    if act is None or isinstance(act, nn.Module):
        return act
    if isinstance(act, str):
        if act.lower() not in ACTIVATIONS:
            raise InputError(f"unknown activation {act!r} (expected one of {', '.join(ACTIVATIONS)}, a module or None)")
        return ACTIVATIONS[act.lower()]()
    raise InputError(f"expected an activation name, a torch module or None (got {type(act).__name__})")


class PyGLayer(GraphLayer):
    """One PyG convolution and what follows it (residual, norm, activation, dropout), as a fullgraph layer.

    ``last``: the model's output layer, which PyG's ``BasicGNN`` leaves without norm, activation and
    dropout (unless it reads every layer at the end, jumping knowledge: then every layer has them)."""

    def __init__(self, conv, *, norm=None, act=None, act_first: bool = False, dropout: float = 0.0,
                 last: bool = False, residual: bool = False):
        super().__init__()
        _check_conv(conv)
        self.conv = conv
        self.in_width = in_width(conv)
        self.res = _residual_map(conv, residual)
        self.norm_kind = None if last else norm_kind(norm)
        self.norm = norm if self.norm_kind else None
        self.act = None if last else activation(act)
        self.act_first, self.p, self.last = act_first, 0.0 if last else float(dropout), last
        self._fast = _fast_path(conv)
        self._pair = _takes_pair(conv)
        self._edge_args = edge_args(conv)
        self._needs = edge_needs(conv)
        self._keyed_attention = keyed_attention(conv)
        self._dense_input: tuple | None = None  # (the sparse input rows, their dense copy): _densified

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        out = self._conv(block, h)
        if self.res is not None:  # h_dst W_res (or h_dst), added to the conv's output as GATConv adds its own
            own = _dst(h, block.num_dst)
            out = out + (_dense(own) if isinstance(self.res, nn.Identity) else _linear(own, self.res))
        if self.last:
            return out
        if self.act is not None and self.act_first:
            out = self.act(out)
        out = _apply_norm(self.norm, self.norm_kind, out, block.reduce)
        if self.act is not None and not self.act_first:
            out = self.act(out)
        return dropout(out, self.p, self.training, rows=block.dst_ids, site=self.dropout_site)

    def _conv(self, block: Block, h) -> torch.Tensor:
        if self._fast is not None:  # a normalizing GCNConv: the weights are in the block's Â already
            return self._fast(self.conv, block, h)
        h = self._densified(h)
        src, dst = block.edges()
        edge_index = torch.stack([src, dst])
        edges = self._edge_data(block)
        n = block.num_dst
        with self._attention_dropout(block):
            if self._pair and block.num_src != n:  # a part's or a chunk's rows: the dst rows lead the src rows
                return self.conv((h, h[:n]), edge_index, **edges)
            # every src row is a dst row (the whole graph): PyG's own call runs GATConv's lin once, not twice
            return self.conv(h, edge_index, **edges)[:n]

    def _densified(self, h):
        """Dense rows for a conv that takes no sparse input. Sparse input rows are the graph's constant
        features (a model's first layer), the same object every step: their dense copy is made once and
        kept, where a copy per step costs a zero fill of the whole matrix (autograd keeps it through the
        step anyway, so keeping it adds nothing to the peak; found by ``benchmarks/edge_data.py``)."""
        if not isinstance(h, SparseOp):
            return h
        if self._dense_input is None or self._dense_input[0] is not h:
            self._dense_input = None  # other rows (a dropped copy, another part): the old copy goes first
            self._dense_input = (h, h.to_dense())
        return self._dense_input[1]

    def _edge_data(self, block: Block) -> dict:
        """The block's edge data the conv takes, by argument name, in the order of ``block.edges()``."""
        edges = {}
        for kind in self._edge_args:
            value = getattr(block, EDGE_ARGS[kind])
            if value is not None:
                edges[EDGE_ARGS[kind]] = value
            elif kind in self._needs:
                what = {"attr": "features (edge_attr)", "type": "types (edge_type)"}[kind]
                raise InputError(f"expected edge {what} for {conv_name(self.conv)} (got a block whose edges carry "
                                 f"none): give the graph its edge {what.split()[0]} (docs/data.md), or use a conv "
                                 f"that reads none")
        return edges

    @contextmanager
    def _attention_dropout(self, block: Block):
        """Keyed attention dropout for the call, in a keyed training step (module docstring)."""
        conv = self.conv
        p = getattr(conv, "dropout", 0.0) if self._keyed_attention else 0.0
        key = current_key()
        if not (p > 0 and conv.training and key is not None and self.dropout_site is not None):
            yield
            return
        site, scale, seen = self.dropout_site, 1.0 / (1.0 - p), {}

        def take_edges(module, inputs):  # propagate's edge_index: the block's edges and the conv's own loops
            seen["edges"] = inputs[0]

        def drop(module, inputs, out):  # out: alpha * value, [E', heads, C]
            s, d = seen["edges"][0], seen["edges"][1]
            s = s if block.src_ids is None else block.src_ids[s]
            d = d if block.dst_ids is None else block.dst_ids[d]
            keep = keyed_edge_keep(s, d, out.shape[1], p, key, site)
            return out * keep.unsqueeze(-1) * scale

        handles = [conv.register_propagate_forward_pre_hook(take_edges), conv.register_message_forward_hook(drop)]
        conv.dropout = 0.0
        try:
            yield
        finally:
            conv.dropout = p
            for handle in handles:
                handle.remove()
