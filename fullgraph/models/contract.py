"""The layer contract, checked before training: :func:`check_model`.

Every layout hands a layer a block and the src rows it read, in an order of its own: a part puts its
inner nodes first and its halo after them, a pipeline chunk its own rows first and the others after.
A layer that keeps to the contract (``docs/your-model.md``) computes the same dst rows whatever that
order. What can be seen from outside is tried here, on a small random block, before any epoch:

* the layer returns one row per dst node (``block.num_dst`` rows);
* permuting the rows after the dst rows (the halo), with the block's columns permuted alike, leaves
  the output unchanged — a layer that reads ``h`` by position beyond the dst rows, or ignores the
  block, fails this;
* for a multi-process layout, the model's own ``check_layout`` refuses what it knows cannot be the
  same in every layout (a PyG conv's internal dropout, say).

A layer that fails is refused in one line that names it. What cannot be seen from outside (a layer
that talks to a process group, or draws unkeyed random numbers in training) is the contract's to state.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fullgraph.errors import InputError
from fullgraph.ops import Block, SparseOp
from fullgraph.ops.adjacency import normalized_data
from fullgraph.ops.csr import row_ids
from fullgraph.ops.edge_data import EdgeData, EdgeFacts, random_edge_data

__all__ = ["check_model", "probe_block"]

DST, HALO = 12, 9
"""The probe block's dst rows and halo rows: small, and enough to see a misread row."""
RTOL, ATOL = 1e-4, 1e-5
"""How close a permuted run must come: float32 sums in another order (tests/_equality.py, FLOAT32_CHAINED)."""


def probe_block(norm: str, *, dst: int = DST, halo: int = HALO, seed: int = 0, density: float = 0.3,
                edges: EdgeFacts = EdgeFacts()) -> tuple[Block, torch.Tensor]:
    """A random graph of ``dst + halo`` nodes cut as a part would be: the block of its first ``dst``
    rows over all columns, normalized as ``norm`` asks on the whole graph (as a part's block is),
    its edges carrying random data of the kinds ``edges`` names (a conv that cannot run without
    edge features or types needs them: ``PyGModel.edge_needs``). Returns the block and a
    permutation of its halo rows (the dst rows stay first)."""
    rng = np.random.default_rng(seed)
    n = dst + halo
    a = sp.random(n, n, density=density / 2, random_state=rng, format="csr")  # symmetrized below
    a = ((a + a.T) > 0).astype(np.float32).tocsr()
    a.setdiag(0)
    a.eliminate_zeros()
    a.sort_indices()
    indptr, indices = torch.from_numpy(a.indptr.astype(np.int64)), torch.from_numpy(a.indices.astype(np.int64))
    e, gen = indices.numel(), torch.Generator().manual_seed(seed)
    data = random_edge_data(edges, e, gen) or EdgeData(torch.arange(e))
    ip, ix, vals, data = normalized_data(indptr, indices, norm, data)
    cut = int(ip[dst])  # the first dst rows, over every column
    ids = torch.arange(n)
    block = Block(SparseOp(ip[: dst + 1].clone(), ix[:cut], vals[:cut], (dst, n)), norm, src_ids=ids,
                  dst_ids=ids[:dst], edata=data.take(torch.arange(cut)) if edges.kinds else None)
    perm = np.concatenate([np.arange(dst), dst + rng.permutation(halo)])
    return block, torch.from_numpy(perm)


def _permuted(block: Block, perm: torch.Tensor) -> Block:
    """``block`` with its src rows in the order ``perm`` (src row ``j`` is the old row ``perm[j]``) and
    its columns renumbered alike, each row sorted again, the entries' edge data moved with them."""
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel())
    a = block.adj
    cols = inv[a.indices]
    order = torch.sort(row_ids(a.indptr) * a.shape[1] + cols, stable=True).indices
    return Block(SparseOp(a.indptr, cols[order], a.values[order], a.shape), block.norm,
                 src_ids=block.src_ids[perm], dst_ids=block.dst_ids,
                 edata=None if block.edata is None else block.edata.take(order))


def check_model(model, *, distributed: bool) -> None:
    """Refuse, in one line naming the layer, a model whose layers break the contract where it shows;
    then the model's own ``check_layout`` (if it has one) for this layout."""
    check_layout = getattr(model, "check_layout", None)
    if check_layout is not None:
        check_layout(distributed)
    needs = getattr(model, "edge_needs", None)
    block, perm = probe_block(model.norm, edges=needs if needs is not None else EdgeFacts())
    rows = block.num_dst
    permuted = _permuted(block, perm)
    gen = torch.Generator().manual_seed(0)
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            for i, layer in enumerate(model.layers):
                width = layer.in_width
                h = torch.randn(block.num_src, width, generator=gen)
                h0 = torch.randn(rows, model.layers[0].in_width, generator=gen) if model.uses_h0 else None
                out = _run(layer, i, block, h, h0)
                if out.dim() != 2 or out.shape[0] != rows:
                    raise InputError(f"expected layer {i} ({type(layer).__name__}) to return one row per dst node of "
                                     f"its block, {rows} (got shape {tuple(out.shape)}): the dst rows are "
                                     f"h[:block.num_dst]")
                again = _run(layer, i, permuted, h[perm], h0)
                if not torch.allclose(again, out, rtol=RTOL, atol=ATOL):
                    worst = float((again - out).abs().max())
                    raise InputError(f"expected layer {i} ({type(layer).__name__}) to give the same dst rows when the "
                                     f"halo rows and the block's columns are permuted alike (got a difference of "
                                     f"{worst:.3g}): read h only through the block (block.adj, block.edges()), "
                                     f"never by position beyond block.num_dst")
    finally:
        model.train(was)


def _run(layer, i: int, block: Block, h: torch.Tensor, h0) -> torch.Tensor:
    try:
        return layer(block, h, h0)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's layer: whatever it raises is reported
        text = " ".join(str(e).split())[:300]
        raise InputError(f"expected layer {i} ({type(layer).__name__}) to run on a block of {block.num_dst} dst and "
                         f"{block.num_src} src rows of width {h.shape[1]} (it raised {type(e).__name__}: {text}): "
                         f"make it take any block the contract allows (docs/your-model.md)") from None
