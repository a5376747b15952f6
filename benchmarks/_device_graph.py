"""An R-MAT graph made where it will be trained: drawn, symmetrized and normalized by PyTorch on the
device (issue 65, item 4: the largest graph one GPU trains, ~10^9 edges, generated in seconds rather
than by the package's NumPy generator and SciPy's transposes on the host).

The same model of graph as ``fullgraph.data.synthetic.rmat`` (one bit per level from the quadrant
probabilities, node ids permuted, duplicates and self loops dropped, symmetrized; a random class per
node, features its class centroid plus noise), from PyTorch's generator instead of NumPy's, so not the
same graph for a seed. The GCN block, ``D^-1/2 (A + I) D^-1/2``, is built on the device too, with the
values ``fullgraph.ops.Block.from_csr`` gives (tests/test_device_check.py checks both on the CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PROBS = (0.57, 0.19, 0.19, 0.05)


@dataclass
class DeviceGraph:
    """The in-edge CSR (symmetric, rows sorted, no repeats or loops), features, labels and training
    rows of a generated graph, all on one device."""

    indptr: torch.Tensor
    indices: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    train_rows: torch.Tensor
    num_classes: int

    @property
    def num_nodes(self) -> int:
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self.indices.numel()


def _draws(scale: int, num_edges: int, gen: torch.Generator, device) -> torch.Tensor:
    """``num_edges`` R-MAT draws as keys ``src * n + dst`` (int64), one uniform per edge per level."""
    cum = torch.tensor(PROBS, dtype=torch.float64).cumsum(0)[:3].tolist()
    src = torch.zeros(num_edges, dtype=torch.int64, device=device)
    dst = torch.zeros_like(src)
    for level in range(scale):
        r = torch.rand(num_edges, generator=gen, device=device)
        q = (r >= cum[0]).to(torch.int64) + (r >= cum[1]) + (r >= cum[2])  # the quadrant, 0..3
        del r
        bit = 1 << (scale - 1 - level)
        src |= (q >> 1) * bit
        dst |= (q & 1) * bit
    perm = torch.randperm(1 << scale, generator=gen, device=device)  # break R-MAT's id/degree correlation
    return perm[src] * (1 << scale) + perm[dst]


def symmetric_csr(keys: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The symmetric CSR of the directed edges ``keys`` (``src * n + dst``): both directions, sorted,
    without repeats or self loops."""
    src, dst = keys // n, keys % n
    keep = src != dst
    src, dst = src[keep], dst[keep]
    both = torch.unique(torch.cat([dst * n + src, src * n + dst]))  # sorted: rows, then columns
    rows = both // n
    indptr = torch.zeros(n + 1, dtype=torch.int64, device=keys.device)
    indptr[1:] = torch.bincount(rows, minlength=n).cumsum(0)
    return indptr, both % n


def device_rmat(scale: int, num_edges: int, *, num_features: int = 128, num_classes: int = 16,
                noise: float = 4.0, seed: int = 0, device="cuda", train_fraction: float = 0.6) -> DeviceGraph:
    """An R-MAT graph of ``2**scale`` nodes from ``num_edges`` draws, made on ``device``."""
    gen = torch.Generator(device=device).manual_seed(seed)
    n = 1 << scale
    indptr, indices = symmetric_csr(_draws(scale, num_edges, gen, device), n)
    y = torch.randint(0, num_classes, (n,), generator=gen, device=device)
    centroids = torch.randn(num_classes, num_features, generator=gen, device=device)
    x = torch.randn(n, num_features, generator=gen, device=device).mul_(noise).add_(centroids[y])
    train = torch.rand(n, generator=gen, device=device) < train_fraction
    return DeviceGraph(indptr, indices, x, y, train.nonzero().squeeze(1), num_classes)


def mean_block(graph: DeviceGraph):
    """``fullgraph.ops.Block`` of ``D^-1 A`` (``norm="mean"``, GraphSAGE's), built where the graph is, with
    its transpose held as the package holds one (int32 structure, each entry's position in ``A``, values):
    ``A`` is symmetric, so ``Aᵀ`` has its structure and an entry ``(r, c)`` sits where ``(c, r)`` does."""
    from fullgraph.ops import Block, SparseOp

    n, ip, ix = graph.num_nodes, graph.indptr, graph.indices
    rows = torch.repeat_interleave(torch.arange(n, device=ip.device), ip.diff())
    deg = ip.diff().clamp(min=1).to(torch.float32)
    op = SparseOp(ip, ix, deg.reciprocal()[rows], (n, n), symmetric=False)
    keys = rows * n + ix
    positions = torch.searchsorted(keys, ix * n + rows).to(op._kernel_indices[1].dtype)
    del keys, rows
    op._perm, (op._t_indptr, op._t_indices) = positions, op._kernel_indices
    return Block(op, "mean")


def gcn_block(graph: DeviceGraph):
    """``fullgraph.ops.Block`` of ``D^-1/2 (A + I) D^-1/2`` (``norm="gcn"``), built where the graph is."""
    from fullgraph.ops import Block, SparseOp

    n, ip = graph.num_nodes, graph.indptr
    rows = torch.repeat_interleave(torch.arange(n, device=ip.device), ip.diff())
    keys = torch.cat([rows * n + graph.indices, torch.arange(n, device=ip.device) * (n + 1)]).sort().values
    del rows
    rows, cols = keys // n, keys % n
    del keys
    dinv = (ip.diff() + 1).to(torch.float32).rsqrt()
    values = dinv[rows] * dinv[cols]
    indptr = ip + torch.arange(n + 1, device=ip.device)  # one loop more in every row
    return Block(SparseOp(indptr, cols, values, (n, n), symmetric=True), "gcn")
