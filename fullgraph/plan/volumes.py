"""What each layout must move: analytic communication volumes, in bytes per training epoch summed
over ranks. The benchmarks print these next to the ledger; the tests derive the same expressions on
their own and check them against the counters.
"""

from __future__ import annotations

import torch

__all__ = ["gcn_product_widths", "spmm_volume"]


def gcn_product_widths(dims: list[int], sparse_input: bool) -> list[int]:
    """Widths of the dense matrices a GCN epoch multiplies by Â (forward) and Âᵀ (backward).

    The fused layer multiplies Â by ``H W`` (width d_out) unless d_in < d_out, when it aggregates
    first (width d_in); sparse input features are always transformed first. Its backward product has
    the same width and is skipped only in the first layer when that layer aggregated first (its input
    needs no gradient).
    """
    widths = []
    for i in range(len(dims) - 1):
        d_in, d_out = dims[i], dims[i + 1]
        aggregate_first = not (i == 0 and sparse_input) and d_in < d_out
        w = d_in if aggregate_first else d_out
        widths += [w] if (i == 0 and aggregate_first) else [w, w]
    return widths


def spmm_volume(mode: str, widths: list[int], n: int, nprocs: int, nnz: int, replication: int = 1,
                permute: bool = True, seed: int = 0) -> dict[str, int]:
    """Bytes per epoch of an ``spmm-*`` layout for products of the given widths.

    * 1D / 1.5D (R = P/c block rows): every block row of width w goes once to the other R - 1
      processes of one grid column, ``(R-1)·n·w·4``; 1.5D adds the grid-row reduction, to which each
      of the c replicas contributes its partial block row, ``c·n·w·4``. Per process this is CAGNET
      §4.1/§4.2: ≈ n·w (1D) and ≈ n·w/c + n·w·c/P (1.5D).
    * 2D (q = √P, d = 1) and 3D (q = ∛P, d = q layers): column slices trade places within grid rows
      before and after the product (``spmm/redist``), dense blocks are broadcast along grid columns,
      ``(q-1)·n·w·4``, sparse blocks along grid rows, ``(q-1)·(8·q·d·(n+q) + 12·nnz)`` (int64 row
      pointers and column indices, float32 values); 3D sums the d layers' partial products along
      each fiber, ``d·n·w·4``.
    """
    from fullgraph.comm.mesh import Mesh
    from fullgraph.partition.blockrows import row_blocks

    out = {"spmm/bcast": 0, "spmm/reduce": 0, "spmm/redist": 0}
    if mode not in ("spmm-1d", "spmm-1.5d", "spmm-2d", "spmm-3d"):
        raise ValueError(f"no volume model for {mode!r}")
    mesh = Mesh.for_mode(mode, nprocs, replication=replication if mode == "spmm-1.5d" else 0)
    if mode in ("spmm-1d", "spmm-1.5d"):
        R, c = mesh.block_rows, mesh.replication
        for w in widths:
            out["spmm/bcast"] += (R - 1) * n * w * 4
            out["spmm/reduce"] += c * n * w * 4 if c > 1 else 0
        return out
    q, _, d = mesh.grid
    blocks = [b.numel() for b in row_blocks(n, q, permute, seed)]
    subs = [[len(t) for t in torch.tensor_split(torch.arange(nb), d)] for nb in blocks]
    for w in widths:
        cuts = [len(x) for x in torch.tensor_split(torch.arange(w), q)]
        for i in range(q):
            for m in range(d):
                pieces = [len(p) for p in torch.tensor_split(torch.arange(subs[i][m]), q)]
                for j in range(q):
                    out["spmm/redist"] += (pieces[j] * (w - cuts[j]) + (subs[i][m] - pieces[j]) * cuts[j]) * 4
        out["spmm/bcast"] += (q - 1) * n * w * 4 + (q - 1) * (8 * q * d * (n + q) + 12 * nnz)
        out["spmm/reduce"] += d * n * w * 4 if d > 1 else 0
    return out


# ---------------------------------------------------------------- memory per rank
