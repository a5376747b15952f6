"""``Mesh``: every axis of a run's process layout, validated once, and the named groups along them.

A layout places its P processes on a mesh (docs/design.md, "The mesh"):

* graph parallelism, the pipeline and the hybrid on ``stages × graph_ways`` (graph ``1 × P``,
  pipeline ``P × 1``, hybrid ``S × W``); rank ``s·W + w`` is part w of stage s;
* the SpMM layouts on a grid of ``rows × cols × depth`` (CAGNET, MG-GCN): 1D ``P × 1 × 1``,
  1.5D ``P/c × c × 1``, 2D ``q × q × 1`` (q² = P), 3D ``q × q × q`` (q³ = P); process ``(i, j, l)`` is
  rank ``(i·cols + j)·depth + l``, so the ranks of a grid row sit next to each other;
* tensor parallelism (NeutronTP) on ``1 × P``: rank r holds rows ``r`` of the dense matrices
  between layers and column slice r while it aggregates; every rank reads the whole graph's
  structure, so the launcher writes it once as a single block row.

The mesh is the one place that knows these sizes: the configuration validates through it (an
impossible layout is refused before any process starts, each factor printed against the world
size), the launcher cuts as many block rows as it says, the planner's volumes read its grid, and
``communicators`` builds the named sub-communicators every layout talks through.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fullgraph.errors import InputError

__all__ = ["Mesh", "PARALLEL_MODES", "SPMM_MODES"]

SPMM_MODES = ("spmm-1d", "spmm-1.5d", "spmm-2d", "spmm-3d")
PARALLEL_MODES = ("single", "graph", "pipeline", "hybrid", *SPMM_MODES, "tensor")


def _iroot(n: int, k: int) -> int | None:
    """The integer k-th root of n, or None when n is not a k-th power."""
    r = round(n ** (1 / k))
    return next((c for c in (r - 1, r, r + 1) if c > 0 and c ** k == n), None)


@dataclass(frozen=True)
class Mesh:
    """Args:
        parallel: one of ``PARALLEL_MODES``.
        nprocs: world size P.
        stages, graph_ways: the pipeline axis S and the graph axis W (S × W = P; an SpMM layout is
            ``1 × P`` here: every process holds distinct rows of the graph).
        grid: the SpMM grid ``(rows, cols, depth)`` (``(1, 1, 1)`` for the other layouts).
    """

    parallel: str = "single"
    nprocs: int = 1
    stages: int = 1
    graph_ways: int = 1
    grid: tuple[int, int, int] = (1, 1, 1)

    @classmethod
    def for_mode(cls, parallel: str, nprocs: int, stages: int = 0, graph_ways: int = 0,
                 replication: int = 0) -> "Mesh":
        """The mesh of a mode from the flags that shape it (0: not given, worked out from P)."""
        if parallel not in PARALLEL_MODES:
            raise InputError(f"expected --parallel to be one of {', '.join(PARALLEL_MODES)} (got {parallel!r})")
        if nprocs < 1:
            raise InputError(f"expected --nprocs >= 1 (got {nprocs})")
        if replication not in (0, 1) and parallel != "spmm-1.5d":
            raise InputError(f"expected --replication only with --parallel spmm-1.5d (got --parallel {parallel})")
        if parallel == "pipeline":
            if stages not in (0, nprocs) or graph_ways not in (0, 1):
                raise InputError(f"expected --stages {nprocs} (= --nprocs) and --graph-ways 1 with --parallel "
                                 f"pipeline (got --stages {stages}, --graph-ways {graph_ways}); use --parallel hybrid "
                                 f"for groups of graph-parallel processes per stage")
            return cls(parallel, nprocs, stages=nprocs, graph_ways=1)
        if parallel == "hybrid":
            stages, graph_ways = cls._hybrid_axes(nprocs, stages, graph_ways)
            return cls(parallel, nprocs, stages=stages, graph_ways=graph_ways)
        if parallel in SPMM_MODES:
            return cls(parallel, nprocs, stages=1, graph_ways=nprocs, grid=cls._spmm_grid(parallel, nprocs, replication))
        return cls(parallel, nprocs, stages=1, graph_ways=nprocs)

    @staticmethod
    def layouts_of(nprocs: int) -> list[dict]:
        """Every layout P processes could take, as the options that shape it (``fullgraph plan``'s
        candidates): graph, pipeline, each hybrid S × W, each SpMM grid (1.5D with each c that
        divides P), tensor. Whether one fits P and the model is the configuration's to say."""
        out = [dict(parallel="graph"), dict(parallel="pipeline")]
        out += [dict(parallel="hybrid", stages=s, graph_ways=nprocs // s) for s in range(2, nprocs) if nprocs % s == 0]
        for mode in SPMM_MODES:
            if mode == "spmm-1.5d":
                out += [dict(parallel=mode, replication=c) for c in range(2, math.isqrt(nprocs) + 1) if nprocs % c == 0]
            else:
                out.append(dict(parallel=mode))
        return out + [dict(parallel="tensor")]

    @staticmethod
    def _hybrid_axes(nprocs: int, stages: int, graph_ways: int) -> tuple[int, int]:
        if stages <= 0 and graph_ways <= 0:
            raise InputError(f"expected --stages S and --graph-ways W with S × W = --nprocs for --parallel hybrid "
                             f"(got neither, --nprocs {nprocs})")
        if stages > 0 and graph_ways > 0:
            return stages, graph_ways
        known = stages if stages > 0 else graph_ways
        if nprocs % known:
            name = "--stages" if stages > 0 else "--graph-ways"
            raise InputError(f"expected {name} to divide --nprocs {nprocs} (got {known})")
        return (known, nprocs // known) if stages > 0 else (nprocs // known, known)

    @staticmethod
    def _spmm_grid(parallel: str, nprocs: int, replication: int) -> tuple[int, int, int]:
        if parallel == "spmm-1d":
            return (nprocs, 1, 1)
        if parallel == "spmm-1.5d":
            c = replication
            if c < 1 or nprocs % c or c * c > nprocs:
                raise InputError(f"expected --replication c with c dividing --nprocs {nprocs} and c² <= "
                                 f"{nprocs} for --parallel spmm-1.5d (got {c})")
            return (nprocs // c, c, 1)
        if parallel == "spmm-2d":
            q = _iroot(nprocs, 2)
            if q is None:
                raise InputError(f"expected a perfect square --nprocs for --parallel spmm-2d (a √P × √P grid; got "
                                 f"{nprocs})")
            return (q, q, 1)
        q = _iroot(nprocs, 3)
        if q is None:
            raise InputError(f"expected a perfect cube --nprocs for --parallel spmm-3d (a ∛P × ∛P × ∛P grid; got "
                             f"{nprocs})")
        return (q, q, q)

    def __post_init__(self) -> None:
        if self.parallel not in PARALLEL_MODES:
            raise InputError(f"expected --parallel to be one of {', '.join(PARALLEL_MODES)} (got {self.parallel!r})")
        if self.nprocs < 1:
            raise InputError(f"expected --nprocs >= 1 (got {self.nprocs})")
        if self.stages < 1 or self.graph_ways < 1:
            raise InputError(f"expected stages >= 1 and graph ways >= 1 (got {self.stages} and {self.graph_ways})")
        if self.stages * self.graph_ways != self.nprocs:
            raise InputError(f"expected --stages × --graph-ways = --nprocs (got {self.stages} × {self.graph_ways} = "
                             f"{self.stages * self.graph_ways}, nprocs = {self.nprocs})")
        if self.spmm and math.prod(self.grid) != self.nprocs:
            r, c, d = self.grid
            raise InputError(f"expected the grid's rows × cols × depth = --nprocs (got {r} × {c} × {d} = "
                             f"{r * c * d}, nprocs = {self.nprocs})")
        if self.parallel == "single" and self.nprocs != 1:
            raise InputError(f"expected --nprocs 1 with --parallel single (got {self.nprocs}); "
                             f"use --parallel graph to split the graph over {self.nprocs} processes")

    # ------------------------------------------------------------------ sizes
    @property
    def distributed(self) -> bool:
        return self.parallel != "single"

    @property
    def spmm(self) -> bool:
        return self.parallel in SPMM_MODES

    @property
    def chunked(self) -> bool:
        """Whether the layout runs GNNPipe's chunks (the pipeline and the hybrid): it needs a chunk map,
        its stages hold layers, and batch statistics need one chunk per part."""
        return self.parallel in ("pipeline", "hybrid")

    @property
    def prunable(self) -> bool:
        """Whether ``--prune`` applies: one process, or graph parallelism (the layouts whose blocks
        can leave out the rows the loss does not reach)."""
        return self.parallel in ("single", "graph")

    @property
    def owns_node_rows(self) -> bool:
        """Graph parallelism: each rank keeps its own nodes' rows of a node-owned table (R-GCN's embeddings,
        ``parallel.owned``; unless ``--prune``); the other layouts hold such a table whole."""
        return self.parallel == "graph"

    @property
    def summa(self) -> bool:
        """SpMM 2D and 3D: SUMMA over a q × q (× q) grid, every process holding distinct rows (1D and
        1.5D broadcast block rows within grid columns instead)."""
        return self.parallel in ("spmm-2d", "spmm-3d")

    @property
    def tensor(self) -> bool:
        """Tensor parallelism: the feature dimension split, the whole graph on every rank."""
        return self.parallel == "tensor"

    @property
    def reads_block_rows(self) -> bool:
        """Whether the ranks read a folder of block rows (``partition.blockrows``) rather than parts:
        the SpMM layouts (one block row per grid row) and tensor parallelism (one, the whole graph)."""
        return self.spmm or self.tensor

    @property
    def operator_layout(self) -> bool:
        """Whether the layout communicates inside each layer's sparse product (SpMM, tensor), through
        an operator the model multiplies with: recomputing a layer would repeat its traffic, and its
        models must be those whose aggregation is such a product (or attention the layout completes)."""
        return self.spmm or self.tensor

    @property
    def block_rows(self) -> int:
        """SpMM: the block rows of Â and of the dense matrices a grid cuts (R = P / c in 1D and 1.5D,
        q in 2D and 3D), which the launcher writes and the planner counts; tensor parallelism: 1."""
        return self.grid[0]

    @property
    def replication(self) -> int:
        """SpMM 1D / 1.5D: the processes c that hold each block row (1 for 2D and 3D, whose processes
        hold distinct rows)."""
        return self.grid[1] if self.spmm and not self.summa else 1

    @property
    def pair_group(self) -> tuple[int, int]:
        """Link prediction's pair exchange (``parallel.pairs``): ``(ranks, groups)``, how many ranks one
        exchange runs over and how many groups run it in a training step. The world, ``(P, 1)``; SpMM 1D
        and 1.5D: ``(R, c)``, each grid column (1.5D's columns are replicas that each score every pair);
        the pipeline and the hybrid: ``(W, 1)``, the last stage's graph ways. An evaluation runs one."""
        if self.spmm and not self.summa:
            return self.block_rows, self.replication
        if self.chunked:
            return self.graph_ways, 1
        return self.nprocs, 1

    def coords(self, rank: int) -> tuple[int, int, int]:
        """SpMM: process ``(i, j, l)`` of the grid."""
        _, cols, depth = self.grid
        i, rest = divmod(rank, cols * depth)
        return (i, *divmod(rest, depth))

    def block_row_of(self, rank: int) -> int:
        """SpMM: the block row a rank works on."""
        return self.coords(rank)[0]

    def check_graph(self, num_nodes: int) -> None:
        """Refuse a layout with more parts (or block rows) than the graph has nodes."""
        if self.graph_ways > num_nodes and not self.operator_layout:
            raise InputError(f"expected at most one part per node (got {self.graph_ways} parts for {num_nodes} nodes)")
        if self.tensor and self.nprocs > num_nodes:
            raise InputError(f"expected at most one process per node with --parallel tensor (got {self.nprocs} "
                             f"processes for {num_nodes} nodes)")
        if self.spmm and self.block_rows > num_nodes:
            raise InputError(f"expected at most one block row per node (got {self.block_rows} block rows for "
                             f"{num_nodes} nodes)")

    def describe(self) -> str:
        if self.spmm:
            r, c, d = self.grid
            return f"{self.parallel} (grid {r} × {c} × {d} = {self.nprocs} processes)"
        if self.tensor:
            return f"tensor ({self.nprocs} column slices of every activation, the whole graph on each process)"
        return f"{self.parallel} (stages {self.stages} × graph ways {self.graph_ways} = {self.nprocs} processes)"

    # ------------------------------------------------------------------ groups
    def groups(self, axis: str) -> list[list[int]]:
        """The ranks, split into the groups that vary along ``axis`` (each a list of global ranks):

        * ``graph``: the W processes of one stage (they share its layers and split the graph);
        * ``stage``: the S processes that hold the same part, one per stage;
        * ``row``, ``col``, ``fiber``: SpMM processes ``(i, ·, l)``, ``(·, j, l)``, ``(i, j, ·)``."""
        if axis == "graph":
            return [[s * self.graph_ways + w for w in range(self.graph_ways)] for s in range(self.stages)]
        if axis == "stage":
            return [[s * self.graph_ways + w for s in range(self.stages)] for w in range(self.graph_ways)]
        R, C, D = self.grid
        rank = lambda i, j, l: (i * C + j) * D + l  # noqa: E731
        if axis == "row":
            return [[rank(i, j, l) for j in range(C)] for i in range(R) for l in range(D)]
        if axis == "col":
            return [[rank(i, j, l) for i in range(R)] for j in range(C) for l in range(D)]
        if axis == "fiber":
            return [[rank(i, j, l) for l in range(D)] for i in range(R) for j in range(C)]
        raise ValueError(f"unknown mesh axis {axis!r} (expected graph, stage, row, col or fiber)")

    def axes(self) -> tuple[str, ...]:
        """The axes of this layout along which its processes talk in groups, in the order
        ``communicators`` makes them (every rank must make them in the same order)."""
        if self.spmm:  # the block-row broadcasts run along col always; 1D has no row reduction, 2D no fiber
            return ("col",) + (("row",) if self.summa or self.grid[1] > 1 else ()) + (("fiber",) if self.grid[2] > 1 else ())
        if self.parallel == "hybrid" and self.graph_ways > 1:
            return ("graph",)
        return ()

    def communicators(self, comm) -> dict:
        """The named sub-communicators of this rank (``fullgraph.comm.Comm`` views sharing the world's
        ledger and timeout), one per axis of ``axes()``. Collective: every rank calls it once, at set-up."""
        if comm.world_size != self.nprocs:
            raise InputError(f"expected a world of {self.nprocs} processes for {self.describe()} (got "
                             f"{comm.world_size})")
        return {axis: comm.split(self.groups(axis)) for axis in self.axes()}
