"""Pruned training (``--prune``): each layer computes only the rows that reach the loss.

The loss reads the logits of the training nodes only. So layer L is needed at the training nodes,
layer L−1 at those and their in-neighbours, and so on, one hop more per layer down to the input
features: the receptive field of the training nodes, grown backwards. Rows outside it feed nothing
the loss reads, so leaving them out changes neither the loss nor any gradient (docs/design.md,
"Exact layouts"); every random draw is keyed by global node id (``ops.dropout``), so the rows that remain
see the same masks as in full computation. With 20 labelled nodes per class and three layers, a
sparse split computes a fraction of the rows a full forward does. Evaluation stays the full forward.

Row order. The rows a layer needs contain the rows the next layer needs. Ordering a part's inner
rows by the deepest layer that needs them (the training rows first, then the rows only layer L−1
needs, ...) makes every layer's dst rows a prefix of its src rows, which is the ``Block`` convention:
layer l's output is layer l+1's src as it stands, and a layer finds its dst rows' own input (and
GCNII's ``H0``) as the first rows, as it does unpruned. The training rows come first in node order,
so the logits line up with ``y[train_mask]``.

Graph parallelism. A part needs its halo nodes' rows only where its needed rows read them, and
their owners must compute those rows in the layer before: before each layer l ≥ 2 a part tells the
owners which of its halo rows layer l reads (``ask``), and an owner adds the rows it is asked for to
what its layer l−1 computes. That is one exchange of ids per layer, once, at set-up (left out of
the epochs' ledger, as the other set-up traffic is); afterwards each layer's halo exchange sends only the rows asked
for, so ``halo/fwd`` and ``halo/bwd`` shrink with the pruning. The first layer reads features, which
a part holds for its halo too. With boundary sampling the field is that of the unsampled graph and
the sampled halo is cut from it: a few rows more than the sampled graph needs, the same loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from fullgraph.ops import Block, SparseOp
from fullgraph.ops.sparse import columns_read
from fullgraph.ops.csr import csr_rows, indptr_from_counts, row_ids

__all__ = ["feature_rows", "Pruning", "receptive_field", "pruned_block", "pruned_blocks", "whole_statistics", "labelled_field"]

Ask = Callable[[int, torch.Tensor], torch.Tensor]
"""``ask(layer, halo_read)``: tell the owners which halo rows (bool ``[n_halo]``) ``layer`` reads;
returns which inner rows (bool ``[n_inner]``) the other parts' ``layer`` reads from this one."""


@dataclass
class Pruning:
    """The rows each layer of one part computes, in the order the pruned blocks hold them."""

    order: torch.Tensor
    """Inner rows (local ids) that any layer needs, the deepest-needed first."""
    rows: list[int]
    """``rows[l]``: how many rows layer ``l`` computes, the first ``rows[l]`` of ``order``
    (``rows[0]``: the feature rows the first layer reads; ``rows[L]``: the training rows)."""
    halo: list[torch.Tensor]
    """``halo[l - 1]``: bool ``[n_halo]``, the halo rows layer ``l`` reads."""
    position: torch.Tensor
    """``position[v]``: where inner row ``v`` stands in ``order`` (−1: no layer needs it)."""

    @property
    def layers(self) -> int:
        return len(self.halo)


def receptive_field(adj: SparseOp, seeds: torch.Tensor, layers: int, ask: Ask | None = None) -> Pruning:
    """The rows of a part that ``layers`` graph layers need for the loss at ``seeds``.

    Args:
        adj: the part's block structure ``[n_inner, n_inner + n_halo]`` (inner columns first, as
            ``Part.block`` and the single-process block hold them).
        seeds: bool ``[n_inner]``, the rows the loss reads (this part's training rows).
        layers: L, the number of graph layers.
        ask: the exchange with the other parts (graph parallelism); ``None`` in one process.
    """
    n = adj.shape[0]
    need = seeds.to(torch.bool).clone()
    level = torch.where(need, layers, -1)  # the deepest layer that needs each row
    halo: list[torch.Tensor] = [torch.zeros(0, dtype=torch.bool)] * layers
    for layer in range(layers, 0, -1):
        read = columns_read(adj, need)
        halo[layer - 1] = read[n:]
        need = need | read[:n]
        if ask is not None and layer > 1:  # the first layer reads features: the part holds its halo's
            need = need | ask(layer, halo[layer - 1])
        level[need & (level < 0)] = layer - 1
    needed = (level >= 0).nonzero().flatten()
    order = needed[torch.sort(-level[needed], stable=True).indices]
    position = torch.full((n,), -1, dtype=torch.int64, device=need.device)
    position[order] = torch.arange(order.numel(), device=need.device)
    rows = [int((level >= layer).sum()) for layer in range(layers + 1)]
    return Pruning(order, rows, halo, position)


def pruned_block(block: Block, pr: Pruning, layer: int, halo_cols: torch.Tensor | None = None,
                 scale: float = 1.0) -> Block:
    """Layer ``layer``'s block: the rows ``order[:rows[layer]]`` of a part's ``block``, reading the
    rows ``order[:rows[layer - 1]]`` (the previous layer's output as it stands) and then the halo
    rows ``halo_cols`` (default: all that the layer reads; fewer under boundary sampling, with
    their values times ``scale``, the sampling's 1/p). Values are those of the unpruned block; the
    columns are renumbered and each row sorted again (a canonical CSR, as the sparse kernels of
    every device accept), so a row sums in another order than unpruned: the last bits may differ."""
    adj = block.adj
    n = adj.shape[0]
    m = pr.rows[layer - 1]
    halo_cols = pr.halo[layer - 1] if halo_cols is None else halo_cols
    kept_halo = halo_cols.nonzero().flatten()
    new_col = torch.full((adj.shape[1],), -1, dtype=torch.int64, device=adj.indptr.device)
    new_col[pr.order[:m]] = torch.arange(m, device=new_col.device)
    new_col[n + kept_halo] = m + torch.arange(kept_halo.numel(), device=new_col.device)
    sub, pos = csr_rows(adj.indptr, pr.order[: pr.rows[layer]])
    cols = new_col[adj.indices[pos]]
    keep = cols >= 0  # every inner column is kept (the field contains it); halo ones may be sampled out
    cols, vals = cols[keep], adj.values[pos][keep]
    if scale != 1.0:
        vals = torch.where(cols >= m, vals * scale, vals)
    indptr = indptr_from_counts(keep)[sub]
    shape = (pr.rows[layer], m + kept_halo.numel())
    by_row = torch.sort(row_ids(indptr) * shape[1] + cols, stable=True).indices  # a pair's relations keep their order
    cols, vals = cols[by_row], vals[by_row]
    edata = None if block.edata is None else block.edata.take(pos[keep][by_row])
    src, dst = _ids(block, n), _ids(block, n, dst=True)
    src_ids = torch.cat([dst[pr.order[:m]], src[n + kept_halo]])
    return Block(SparseOp(indptr, cols, vals, shape, symmetric=False), block.norm, src_ids=src_ids,
                 dst_ids=dst[pr.order[: pr.rows[layer]]], reduce=block.reduce, edata=edata)


def pruned_blocks(block: Block, x, pr: Pruning) -> tuple[list[Block], object]:
    """One process's pruned blocks, layer by layer, and the feature rows the first reads: a layer that
    computes every row, reading every row as they lie, keeps ``block`` itself (no copy)."""
    n = block.num_dst
    whole = pr.rows[0] == n and bool((pr.order == torch.arange(n, device=pr.order.device)).all())
    return ([block if whole and pr.rows[layer] == n else pruned_block(block, pr, layer) for layer in range(1, pr.layers + 1)],
            x if whole else feature_rows(x, pr.order[: pr.rows[0]]))


def feature_rows(x: torch.Tensor | SparseOp, idx: torch.Tensor):
    """Rows ``idx`` of dense features or of a ``SparseOp``."""
    if not isinstance(x, SparseOp):
        return x[idx]
    indptr, pos = csr_rows(x.indptr, idx)
    return SparseOp(indptr, x.indices[pos], x.values[pos], (idx.numel(), x.shape[1]))


def _ids(block: Block, n: int, dst: bool = False) -> torch.Tensor:
    """The global ids of a block's src (or dst) rows; ``None`` there means ``0..n-1``."""
    ids = block.dst_ids if dst else block.src_ids
    if ids is None:
        return torch.arange(n if dst else block.num_src, device=block.adj.indptr.device)
    return ids


def whole_statistics(model) -> bool:
    """Whether ``model`` takes statistics over all the rows it computes (batch normalization, PyG's
    ``LayerNorm(mode='graph')``): computing fewer rows would change them, so such a model is never pruned."""
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) or getattr(m, "graph_statistics", False)
               for m in model.modules())


def labelled_field(block: Block, types, model) -> Pruning | None:
    """What a training step of a node task on a typed graph computes in one process without ``--prune``:
    every row in every layer but the last, which computes only the labelled types' rows (``None``: no
    typed graph, every type labelled, or a model that cannot be pruned). The loss and the metrics read no
    other type's output (``NodeTypes``: every other node is out of every split), so leaving those rows out
    of the last layer changes no loss or gradient: on HeCo's ACM, where 4,019 of 11,246 nodes are papers,
    it took 15–19% off HGT's step (``benchmarks/hgt.py``). Evaluation still computes every row (``predict``
    writes them all). Where the labelled types come first in id order (HeCo's and the typed folder's loaders
    put them first), the blocks are the unpruned ones' rows as they lie; else they are renumbered."""
    if types is None or not types.labelled or getattr(model, "whole_graph", False) or whole_statistics(model):
        return None
    seeds = torch.zeros(block.num_dst, dtype=torch.bool, device=block.adj.indptr.device)
    for name in types.labelled:
        t = types.index(name)
        seeds[types.offsets[t] : types.offsets[t] + types.counts[t]] = True
    if bool(seeds.all()):
        return None
    return receptive_field(block.adj, seeds, model.num_layers)
