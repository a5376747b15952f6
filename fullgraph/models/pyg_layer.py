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

Sparse input features (a ``SparseOp``) go through the conv's first linear map as a sparse
product where that map comes first (``GCNConv``, ``SAGEConv``) and through the residual's
projection; other convs get the block's rows densified.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.errors import InputError
from fullgraph.models.base import GraphLayer
from fullgraph.ops import Block, SparseOp, dropout, matmul, spmm
from fullgraph.ops.norm import batch_norm_over, graph_layer_norm_over

__all__ = ["PyGLayer", "MULTI_HOP", "ACTIVATIONS", "conv_name", "in_width", "out_width", "is_normalizing_gcn"]

MULTI_HOP = ("TAGConv", "SGConv", "SSGConv", "APPNP", "ChebConv", "MixHopConv", "ARMAConv", "DNAConv")
"""Convolutions whose aggregation reaches beyond one hop within one layer: refused, with advice."""

PYG_WHOLE_GRAPH = "graph"
"""PyG ``LayerNorm``'s default mode: one mean and variance over every entry of every node (a PyG word,
not a ``--parallel`` layout); fullgraph calls that norm kind ``whole``."""

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


def _activation(act) -> nn.Module | None:
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
        self.act = None if last else _activation(act)
        self.act_first, self.p, self.last = act_first, 0.0 if last else float(dropout), last
        self._fast = _fast_path(conv)
        self._pair = _takes_pair(conv)

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
        if self._fast is not None:
            return self._fast(self.conv, block, h)
        h = _dense(h)
        src, dst = block.edges()
        edge_index = torch.stack([src, dst])
        n = block.num_dst
        if self._pair:
            return self.conv((h, h[:n]), edge_index)
        return self.conv(h, edge_index)[:n]
