"""PyTorch Geometric convolutions as fullgraph layers, unchanged: :func:`from_pyg`.

A PyG convolution computes a node's output from its in-neighbours; a fullgraph layer computes the
dst rows of a block from its src rows. :class:`PyGLayer` feeds the one to the other:

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

Between convolutions, as PyG's ``BasicGNN`` does: norm, activation, dropout (or activation first).
Dropout is keyed by global node id (``ops.dropout``), so every layout drops the same entries; a
BatchNorm's statistics are summed over the processes that hold a layer's rows (``Block.reduce``).
What cannot be made the same in every layout is refused before training, in one line
(:meth:`PyGModel.check_layout`): randomness inside a conv (GAT's attention dropout, an MLP's
dropout) and batch statistics inside a conv (GIN's default MLP) in a multi-process layout.
Convolutions that reach several hops inside one layer (``TAGConv``, ``SGConv``, ``APPNP``,
``ChebConv``, ...) are refused: written as one layer per hop, they run in every layout.

Sparse input features (a ``SparseOp``) go through the conv's first linear map as a sparse
product where that map comes first (``GCNConv``, ``SAGEConv``); other convs get the block's rows
densified.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.errors import InputError
from fullgraph.models.base import GNN, GraphLayer
from fullgraph.ops import Block, SparseOp, dropout, matmul, spmm
from fullgraph.ops.norm import batch_norm_over

__all__ = ["from_pyg", "adaptable", "PyGLayer", "PyGModel", "MULTI_HOP"]

MULTI_HOP = ("TAGConv", "SGConv", "SSGConv", "APPNP", "ChebConv", "MixHopConv", "ARMAConv", "DNAConv")
"""Convolutions whose aggregation reaches beyond one hop within one layer: refused, with advice."""

ACTIVATIONS = {"relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU, "leaky_relu": nn.LeakyReLU, "tanh": nn.Tanh,
               "sigmoid": nn.Sigmoid, "silu": nn.SiLU}


def _pyg():
    try:
        import torch_geometric.nn as pyg_nn
    except ImportError:
        return None
    return pyg_nn


def adaptable(obj) -> bool:
    """Whether ``obj`` is something :func:`from_pyg` takes: a PyG convolution, a list of them, or a
    PyG ``BasicGNN``."""
    pyg_nn = _pyg()
    if pyg_nn is None:
        return False
    from torch_geometric.nn.conv import MessagePassing
    from torch_geometric.nn.models.basic_gnn import BasicGNN

    if isinstance(obj, (MessagePassing, BasicGNN)):
        return True
    return isinstance(obj, (list, tuple, nn.ModuleList)) and len(obj) > 0 and all(
        isinstance(c, MessagePassing) for c in obj)


# ---------------------------------------------------------------- how each convolution is fed
def _name(conv) -> str:
    return type(conv).__name__


def _is_normalizing_gcn(conv) -> bool:
    from torch_geometric.nn import GCNConv

    return isinstance(conv, GCNConv) and conv.normalize


def _takes_pair(conv) -> bool:
    """Whether the conv's ``forward`` takes ``x`` as a pair (PyG annotates it ``PairTensor``)."""
    param = inspect.signature(type(conv).forward).parameters.get("x")
    note = str(param.annotation) if param is not None else ""
    return any(word in note for word in ("Pair", "Tuple", "tuple"))


def _in_width(conv) -> int:
    width = getattr(conv, "in_channels", None)
    if isinstance(width, (tuple, list)):
        width = width[0]
    if width is None:  # GINConv and its kind: the width of the first linear map of the conv's network
        first = next((m for m in conv.modules() if m is not conv and hasattr(m, "weight")
                      and (hasattr(m, "in_features") or hasattr(m, "in_channels"))), None)
        width = getattr(first, "in_features", getattr(first, "in_channels", None))
    if not isinstance(width, int) or width < 1:
        raise InputError(f"expected {_name(conv)} to be built with its input width (got in_channels={width!r}; "
                         f"lazy widths (-1) cannot be planned across processes: give the width)")
    return width


def _check_conv(conv) -> None:
    name = _name(conv)
    if name in MULTI_HOP:
        raise InputError(f"expected one-hop convolutions (got {name}, which aggregates over several hops in one "
                         f"layer): write each hop as a layer (K layers that each aggregate once: a fullgraph GNN of your "
                         f"own, docs/your-model.md)")
    from torch_geometric.nn import GCNConv

    if isinstance(conv, GCNConv) and conv.normalize and (conv.improved or not conv.add_self_loops):
        raise InputError(f"expected GCNConv with improved=False and add_self_loops=True when it normalizes (got "
                         f"improved={conv.improved}, add_self_loops={conv.add_self_loops}): the blocks carry "
                         f"D^-1/2 (A+I) D^-1/2")
    _in_width(conv)


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


# ---------------------------------------------------------------- between convolutions
def _norm_kind(norm) -> str | None:
    """``batch``, ``row`` (each node on its own) or ``None`` for nothing; refuses the others."""
    if norm is None or isinstance(norm, nn.Identity):
        return None
    if isinstance(norm, nn.BatchNorm1d):
        bn = norm
    elif type(norm).__name__ == "BatchNorm" and isinstance(getattr(norm, "module", None), nn.BatchNorm1d):
        bn = norm.module  # PyG's BatchNorm wraps torch's
    elif isinstance(norm, nn.LayerNorm) or (type(norm).__name__ == "LayerNorm" and getattr(norm, "mode", "") == "node"):
        return "row"
    else:
        mode = getattr(norm, "mode", None)
        raise InputError(f"expected a BatchNorm, a LayerNorm (per node) or none between the convolutions (got "
                         f"{type(norm).__name__}" + (f" with mode={mode!r}" if mode else "") + "; PyG's LayerNorm "
                         f"takes mode='node')")
    if bn.momentum is None:
        raise InputError("expected BatchNorm with a momentum (got momentum=None, a cumulative average)")
    return "batch"


def _apply_norm(norm, kind: str | None, h: torch.Tensor, reduce) -> torch.Tensor:
    if kind is None:
        return h
    if kind == "batch":
        return batch_norm_over(norm if isinstance(norm, nn.BatchNorm1d) else norm.module, h, reduce)
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
    """One PyG convolution and what follows it (norm, activation, dropout), as a fullgraph layer."""

    def __init__(self, conv, *, norm=None, act=None, act_first: bool = False, dropout: float = 0.0,
                 last: bool = False):
        super().__init__()
        _check_conv(conv)
        self.conv = conv
        self.in_width = _in_width(conv)
        self.norm_kind = None if last else _norm_kind(norm)
        self.norm = norm if self.norm_kind else None
        self.act = None if last else _activation(act)
        self.act_first, self.p, self.last = act_first, 0.0 if last else float(dropout), last
        self._fast = _fast_path(conv)
        self._pair = _takes_pair(conv)

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        out = self._conv(block, h)
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


class PyGModel(GNN):
    """A stack of :class:`PyGLayer`; its blocks are normalized as its convolutions need."""

    def __init__(self, layers: list[PyGLayer]):
        super().__init__()
        gcn = [_is_normalizing_gcn(layer.conv) for layer in layers]
        if any(gcn) and not all(gcn):
            kinds = ", ".join(sorted({_name(layer.conv) for layer in layers}))
            raise InputError(f"expected either every convolution to be a normalizing GCNConv or none (got {kinds}): "
                             f"the layers share one block normalization")
        self.norm = "gcn" if all(gcn) else "mean"  # mean: the in-edges as the graph has them (values unused)
        self.layers = nn.ModuleList(layers)

    def check_layout(self, distributed: bool) -> None:
        """Refuse, in one line, what would make a multi-process run differ from one process: random
        draws inside a conv (they cannot be keyed by node id) and batch statistics inside a conv
        (over a part's rows only)."""
        if not distributed:
            return
        for i, layer in enumerate(self.layers):
            name = _name(layer.conv)
            p = getattr(layer.conv, "dropout", 0.0)
            if isinstance(p, float) and p > 0:
                raise InputError(f"expected dropout=0 inside {name} (layer {i}) in a multi-process layout (got "
                                 f"{name}(dropout={p})): its draws cannot be keyed by node id, so each process would "
                                 f"drop differently; set dropout=0 on the conv and give the dropout between layers to "
                                 f"from_pyg(convs, dropout=p), where it is keyed (PyG's GAT model puts its dropout "
                                 f"into every GATConv)")
            for mod_name, mod in layer.conv.named_modules():
                if isinstance(mod, nn.Dropout) and mod.p > 0:
                    raise InputError(f"expected no dropout inside {name} (layer {i}) in a multi-process layout (got "
                                     f"{mod_name}: Dropout(p={mod.p})): set it to 0 (dropout between layers is keyed)")
                if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                    raise InputError(f"expected no BatchNorm inside {name} (layer {i}) in a multi-process layout (got "
                                     f"{mod_name}: {type(mod).__name__}, whose statistics would cover one part's "
                                     f"rows): build its MLP with norm=None, and put BatchNorm between the layers")


def from_pyg(model: nn.Module | list[nn.Module], *, act: str | nn.Module | None = "relu",
             norm: str | list[nn.Module] | None = None, dropout: float = 0.0, act_first: bool = False) -> PyGModel:
    """A fullgraph model from PyG convolutions, unchanged (see the module docstring).

    Args:
        model: a convolution, a list of convolutions, or a PyG ``BasicGNN`` (``GCN``, ``GraphSAGE``,
            ``GAT``, ``GIN``, ...; its activation, norms, dropout and ``act_first`` are read from it,
            and the arguments below are ignored). A ``BasicGNN`` with ``jk`` is refused.
        act: between convolutions of a list: an activation name (``relu``, ``elu``, ...), a module, or None.
        norm: between convolutions of a list: ``None``, ``"batch"`` (BatchNorm over all nodes),
            ``"layer"`` (LayerNorm per node), or a list of norm modules, one per hidden layer.
        dropout: between convolutions of a list: keyed dropout after each hidden layer.
        act_first: activation before the norm, as ``BasicGNN(act_first=True)``.
    """
    if _pyg() is None:
        raise InputError("expected torch_geometric to be installed for from_pyg (pip install torch_geometric)")
    from torch_geometric.nn.conv import MessagePassing
    from torch_geometric.nn.models.basic_gnn import BasicGNN

    if isinstance(model, BasicGNN):
        if model.jk_mode is not None:
            raise InputError(f"expected a {type(model).__name__} without jumping knowledge (got jk={model.jk_mode!r}): "
                             f"its final map reads every layer's output at once")
        convs, norms = list(model.convs), list(model.norms)
        act, act_first, dropout = model.act, model.act_first, model.dropout.p
    else:
        convs = [model] if isinstance(model, MessagePassing) else list(model)
        if not convs or not all(isinstance(c, MessagePassing) for c in convs):
            raise InputError(f"expected PyG convolutions (MessagePassing) (got "
                             f"{', '.join(sorted({type(c).__name__ for c in convs})) or 'an empty list'})")
        norms = _norm_modules(norm, convs)
    last = len(convs) - 1
    return PyGModel([PyGLayer(conv, norm=norms[i] if i < len(norms) else None, act=act, act_first=act_first,
                              dropout=dropout, last=i == last) for i, conv in enumerate(convs)])


def _norm_modules(norm, convs) -> list:
    hidden = len(convs) - 1
    if norm is None:
        return [None] * hidden
    if isinstance(norm, str):
        widths = [_out_width(c) for c in convs[:-1]]
        if norm == "batch":
            return [nn.BatchNorm1d(w) for w in widths]
        if norm == "layer":
            return [nn.LayerNorm(w) for w in widths]
        raise InputError(f"expected norm None, 'batch' or 'layer' (got {norm!r})")
    norm = list(norm)
    if len(norm) != hidden:
        raise InputError(f"expected one norm per hidden layer, {hidden} (got {len(norm)})")
    return norm


def _out_width(conv) -> int:
    width = getattr(conv, "out_channels", None)
    heads, concat = getattr(conv, "heads", 1), getattr(conv, "concat", False)
    if not isinstance(width, int) or width < 1:
        raise InputError(f"expected {_name(conv)} to have out_channels to size its norm (got {width!r})")
    return width * heads if concat else width
