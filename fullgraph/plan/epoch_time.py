"""What an epoch costs in time: the model's kernels timed on this machine, a network of a given
bandwidth and latency, and the pipeline's bubble.

The estimate of one layout is the slowest rank's

    compute  (its share of the sparse products and dense transforms, forward, backward and the
              evaluation's forward, at the rates ``Kernels.calibrate`` measured here)
  + bubble   (a pipeline of S stages and K chunks idles (S - 1) chunk-times per epoch)
  + exposed communication (its bytes over the bandwidth plus its messages times the latency, less
              what the layout overlaps with compute: the pipeline's chunk stream runs while other
              chunks compute, the SpMM layouts broadcast the next block while multiplying this one;
              a halo exchange or an all-reduce waits in full).

It is a model, not a measurement: ``benchmarks/cluster.py`` is where it meets measured epochs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

__all__ = ["Network", "Kernels", "RankWork", "EpochEstimate", "estimate_epoch"]


@dataclass(frozen=True)
class Network:
    """Links between the processes: ``bandwidth_gbps`` Gbit/s each way, ``latency_us`` per message."""

    bandwidth_gbps: float = 10.0
    latency_us: float = 50.0

    def seconds(self, nbytes: float, messages: float) -> float:
        return nbytes * 8 / (self.bandwidth_gbps * 1e9) + messages * self.latency_us * 1e-6


@dataclass(frozen=True)
class Kernels:
    """This machine's rates: seconds per (stored non-zero × column) of a sparse product, per
    multiply-add of a dense one, and the fixed cost of one pass of one layer over a block (dispatch,
    autograd and indexing: what a pipeline pays once per chunk, however small the chunk)."""

    spmm_s: float
    gemm_s: float
    step_s: float = 0.0

    @classmethod
    def calibrate(cls, threads: int = 1, width: int = 64, nodes: int = 20_000, degree: int = 16, repeat: int = 3,
                  seed: int = 0) -> "Kernels":
        """Time ``torch.sparse.mm`` (CSR, ``nodes × nodes``, ``degree`` per row) against a
        ``nodes × width`` matrix, and a ``nodes × width × width`` matmul, the fastest of ``repeat``,
        on ``threads`` threads (a rank's)."""
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return cls._timed(width, nodes, degree, repeat, seed)
        finally:
            torch.set_num_threads(before)

    @classmethod
    def _timed(cls, width: int, nodes: int, degree: int, repeat: int, seed: int) -> "Kernels":
        g = torch.Generator().manual_seed(seed)
        nnz = nodes * degree
        crow = torch.arange(0, nnz + 1, degree, dtype=torch.int64)
        col = torch.randint(0, nodes, (nnz,), generator=g)
        a = torch.sparse_csr_tensor(crow, col, torch.rand(nnz, generator=g), (nodes, nodes), check_invariants=False)
        x, w = torch.rand(nodes, width, generator=g), torch.rand(width, width, generator=g)
        best_s = best_g = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            torch.sparse.mm(a, x)
            t1 = time.perf_counter()
            x @ w
            t2 = time.perf_counter()
            best_s, best_g = min(best_s, t1 - t0), min(best_g, t2 - t1)
        return cls(best_s / (nnz * width), best_g / (nodes * width * width), _step_seconds(seed))

    def layer_seconds(self, rows: int, src_rows: int, nnz: int, d_in: int, d_out: int, passes: int = 1) -> float:
        """One layer's forward over ``passes`` blocks: the product at its narrower width, the
        transform of the rows read, and each pass's fixed cost."""
        return (nnz * min(d_in, d_out) * self.spmm_s + max(rows, src_rows) * d_in * d_out * self.gemm_s
                + passes * self.step_s)


def _step_seconds(seed: int, repeat: int = 30) -> float:
    """A GCN layer's forward and backward over a 32-node block, per layer and pass (median of
    ``repeat``): the cost that does not shrink with the block."""
    import statistics

    from fullgraph.data.synthetic import planted_partition
    from fullgraph.models import build_model
    from fullgraph.ops import Block

    g = planted_partition(num_nodes=32, num_classes=2, num_features=8, seed=seed)
    model = build_model("gcn", 8, 2, layers=2, hidden=8, dropout=0.0)
    block = Block.from_graph(g, "gcn")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        model(block, g.x).sum().backward()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / 2 / 3  # two layers; a pass is one of forward, backward's two


@dataclass(frozen=True)
class RankWork:
    """The slowest rank's share of an epoch.

    Args:
        rows, src_rows, nnz: rows it computes, rows it reads (its own and its halo), the non-zeros of
            its block of Â.
        dims: the widths through its layers (``dims[i]`` in, ``dims[i+1]`` out).
        stages, chunks: the pipeline's S and K (1, 1 without one).
        bytes_sent: what it sends per epoch, ``overlapped_bytes`` the part of it the layout overlaps
            with compute; ``messages``: how many separate transfers it makes.
    """

    rows: int
    src_rows: int
    nnz: int
    dims: tuple[int, ...]
    stages: int = 1
    chunks: int = 1
    bytes_sent: float = 0.0
    overlapped_bytes: float = 0.0
    messages: float = 0.0


@dataclass(frozen=True)
class EpochEstimate:
    compute_s: float
    comm_s: float
    bubble_s: float

    @property
    def total_s(self) -> float:
        return self.compute_s + self.comm_s + self.bubble_s


def estimate_epoch(work: RankWork, kernels: Kernels, network: Network, evaluate: bool = True) -> EpochEstimate:
    """The epoch time of the rank doing ``work`` (see the module docstring): training is a forward
    and a backward of about twice its cost; an evaluation adds one more forward."""
    forward = sum(kernels.layer_seconds(work.rows, work.src_rows, work.nnz, a, b, work.chunks)
                  for a, b in zip(work.dims, work.dims[1:]))
    compute = forward * (3 + (1 if evaluate else 0))
    bubble = compute * (work.stages - 1) / work.chunks if work.stages > 1 else 0.0
    waited = network.seconds(work.bytes_sent - work.overlapped_bytes, work.messages)
    hidden = network.seconds(work.overlapped_bytes, 0)
    return EpochEstimate(compute, waited + max(0.0, hidden - compute), bubble)
