"""GAT (Veličković et al.): multi-head attention over in-neighbours (self loops included).

Hidden layers concatenate ``heads`` heads of ``hidden / heads`` features each and apply ELU; the
last layer has one head. The softmax runs over each dst node's in-edges of the block, so a block
holding only some dst rows computes exactly those rows' attention.

Initialization follows PyG's ``GATConv``: Glorot for the weights and both attention vectors, zero
bias (the paper's code draws the same family, Glorot with gain √2 on the weights). ``norm_layer``
(``ops.norm``) puts a LayerNorm or BatchNorm on each hidden layer's concatenated heads, before ELU.

Edge features (a graph with ``edge_attr``; ``edge_dim``: their width) enter the attention as in PyG's
``GATConv(edge_dim=...)``: each edge's features through a bias-free linear map to ``heads × d_head``,
scored by a third attention vector and added to its ends' scores before the LeakyReLU; an added
self loop reads the mean of its node's in-edges' features (the block fills it so, ``ops.edge_data``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fullgraph.errors import InputError
from fullgraph.models.base import GNN, GraphLayer, glorot_
from fullgraph.models.spec import MemoryModel, ModelSpec, register
from fullgraph.ops import Block, dropout, matmul
from fullgraph.ops.edge_data import EdgeFacts
from fullgraph.ops.edges import EdgeSums
from fullgraph.ops.norm import BatchNorm, apply_norm, make_norm


def edge_softmax(scores: torch.Tensor, dst: torch.Tensor, num_dst: int, sums: EdgeSums | None = None) -> torch.Tensor:
    """Softmax of ``scores [E, heads]`` over the edges that share a dst node.

    The per-node maximum subtracted for stability is a constant to autograd (as in PyG): the softmax
    does not depend on it, so its exact gradient is zero. ``sums`` (the block's ``EdgeSums``) sums
    the denominators and their gradients in a fixed order, so that a run gives the same bits every
    time (``ops.edges``). Without it (``parallel.tensor``'s own edges) they run through ``index_add_``
    and ``gather``, deterministic on CPU too; whether that layout's run is depends on its gathers."""
    heads = scores.shape[1]
    idx = dst.unsqueeze(1).expand(-1, heads)
    with torch.no_grad():
        top = torch.full((num_dst, heads), float("-inf"), dtype=scores.dtype, device=scores.device)
        top = top.scatter_reduce(0, idx, scores, reduce="amax", include_self=True).gather(0, idx)
    e = (scores - top).exp()
    if sums is not None:
        return e / sums.gather_dst(sums.sum_at_dst(e))
    denom = torch.zeros((num_dst, heads), dtype=scores.dtype, device=scores.device).index_add_(0, dst, e)
    return e / denom.gather(0, idx)


def weigh(e_src: torch.Tensor, e_dst: torch.Tensor, dst: torch.Tensor, num_dst: int,
          sums: EdgeSums | None = None, e_edge: torch.Tensor | None = None) -> torch.Tensor:
    """Each edge's attention weight ``[E, heads]`` from its ends' scores (and its own, ``e_edge``, from
    its features): LeakyReLU (slope 0.2) of their sum, softmax over the edges that share a dst node
    (``sums``: see :func:`edge_softmax`)."""
    scores = e_src + e_dst if e_edge is None else e_src + e_dst + e_edge
    return edge_softmax(F.leaky_relu(scores, 0.2), dst, num_dst, sums)


class GATLayer(GraphLayer):
    def __init__(self, d_in: int, d_head: int, heads: int, *, last: bool, dropout: float, norm: str = "none",
                 edge_dim: int | None = None):
        super().__init__()
        self.in_width, self.edge_dim = d_in, edge_dim
        self.norm = None if last else make_norm(norm, heads * d_head)
        self.heads, self.d_head, self.last, self.dropout = heads, d_head, last, dropout
        self.weight = nn.Parameter(glorot_(torch.empty(d_in, heads * d_head)))
        self.att_src = nn.Parameter(glorot_(torch.empty(heads, d_head)))
        self.att_dst = nn.Parameter(glorot_(torch.empty(heads, d_head)))
        self.bias = None if isinstance(self.norm, BatchNorm) else nn.Parameter(torch.zeros(heads * d_head))
        if edge_dim:
            self.edge_weight = nn.Parameter(glorot_(torch.empty(edge_dim, heads * d_head)))
            self.att_edge = nn.Parameter(glorot_(torch.empty(heads, d_head)))

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        h = dropout(h, self.dropout, self.training, rows=block.src_ids, site=self.dropout_site)
        wh = matmul(h, self.weight).view(-1, self.heads, self.d_head)
        s_src = (wh * self.att_src).sum(-1)  # [num_src, heads]
        s_dst = (wh[: block.num_dst] * self.att_dst).sum(-1)
        if block.attention is not None:  # the layout holds column slices while it sums (parallel.tensor)
            out = block.attention(wh.reshape(wh.shape[0], -1), s_src, s_dst, weigh)
        else:
            # gathers and sums through the block's EdgeSums: a fixed summation order, the same bits
            # every run (x[src]'s backward, an accumulating index_put_, adds in thread order)
            sums = block.edge_sums()
            s_edge = None
            if self.edge_dim:
                if block.edge_attr is None:
                    raise InputError(f"expected the block's edges to carry features of width {self.edge_dim} for a GAT "
                                     f"built with edge_dim={self.edge_dim} (got none)")
                s_edge = (matmul(block.edge_attr, self.edge_weight).view(-1, self.heads, self.d_head)
                          * self.att_edge).sum(-1)
            alpha = weigh(sums.gather_src(s_src), sums.gather_dst(s_dst), sums.dst, block.num_dst, sums, s_edge)
            msg = sums.gather_src(wh) * alpha.unsqueeze(-1)
            out = sums.sum_at_dst(msg).reshape(block.num_dst, -1)  # msg's precision
        out = out if self.bias is None else out + self.bias
        return out if self.last else F.elu(apply_norm(self.norm, out, block.reduce))


class GAT(GNN):
    norm = "self-loops"

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, heads: int = 8,
                 dropout: float = 0.6, norm_layer: str = "none", edge_dim: int | None = None):
        super().__init__()
        if hidden % heads:
            raise InputError(f"expected --hidden to be a multiple of --heads (got hidden={hidden}, heads={heads})")
        d_head = hidden // heads
        dims = [in_dim] + [hidden] * (layers - 1)
        mods = [GATLayer(dims[i], d_head, heads, last=False, dropout=dropout, norm=norm_layer, edge_dim=edge_dim)
                for i in range(layers - 1)]
        mods.append(GATLayer(dims[-1], out_dim, 1, last=True, dropout=dropout, edge_dim=edge_dim))
        self.layers = nn.ModuleList(mods)
        self.edge_dim = edge_dim

    @property
    def edge_needs(self) -> EdgeFacts:
        return EdgeFacts(("attr",), self.edge_dim) if self.edge_dim else EdgeFacts()

    def check_edge_data(self, kinds=(), edge_width=None, num_relations=None) -> None:
        """Built with ``edge_dim``, it reads edge features of that width: refused where a layer gets none."""
        if not self.edge_dim:
            return
        if "attr" not in kinds:
            raise InputError(f"expected edge features for gat built with edge_dim={self.edge_dim} (got edges that "
                             f"carry {', '.join(kinds) or 'no data'})")
        if edge_width != self.edge_dim:
            raise InputError(f"expected edge features of width {self.edge_dim} for gat (got {edge_width})")


def _params(F: int, H: int, C: int, L: int, heads: int = 8) -> int:
    dims = [F] + [H] * (L - 1)
    return sum(a * H + 3 * H for a in dims[:-1]) + dims[-1] * C + 3 * C


def _kept(*, nodes, halo, block_nnz, classes, hidden, layers, heads, dropped_x, recompute, **_):
    n, m, E, C, H, L, k = nodes, nodes + halo, block_nnz, classes, hidden, layers, heads
    between = (L - 1) * 4 * (m if halo else n) * H
    if recompute:
        return between
    total = 0
    for i in range(L):
        last = i == L - 1
        width, hk = (C, 1) if last else (H, k)
        inp = dropped_x if i == 0 else 5 * m * H  # X', or mask and dropped input
        # the messages once, four [E', heads] score tensors (the gathers and sums of ops.edges keep none)
        edge = 4 * E * width + 4 * 4 * E * hk
        total += inp + 4 * m * width + edge + (0 if last else 4 * n * width)  # Wh; ELU output
    return total  # (a fetched copy is dropped out at once: its mask and copy are counted)


def _check(opts) -> str | None:
    if opts.hidden % opts.heads:
        return f"expected hidden to be a multiple of heads for gat (got hidden={opts.hidden}, heads={opts.heads})"
    return None


def _build(in_dim: int, out_dim: int, *, layers: int, hidden: int, dropout: float, heads: int = 8,
           norm: str = "none", edge_dim: int | None = None, **_) -> GAT:
    return GAT(in_dim, hidden, out_dim, layers=layers, heads=heads, dropout=dropout, norm_layer=norm,
               edge_dim=edge_dim)


SPEC = register(ModelSpec(
    "gat", _build, norm="self-loops", spmm=None, attention=True, reads_edge_features=True,
    options=("layers", "hidden", "dropout", "heads", "norm"),
    takes_norm=True, memory=MemoryModel(_params, _kept, heap_overhead=(1.2, 1.35), transient=(1.7, 4.5),
                                        per_edge=True),
    hidden_step=lambda opts: opts.heads, check=_check,
    about="GAT: multi-head attention over in-neighbours; each edge weighed by both its ends "
          "(tensor parallelism; no SpMM layouts)"))
