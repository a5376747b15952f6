"""``Layout``: every process-layout size in one validated object.

The mesh is ``stages × graph_ways`` (DESIGN.md): graph parallelism is ``1 × P``, a pipeline ``S × 1``,
the hybrid ``S × W``. A layout that cannot work is refused here, before any process starts, with
each factor printed against the world size.
"""

from __future__ import annotations

from dataclasses import dataclass

from fullgraph.errors import InputError

__all__ = ["Layout", "PARALLEL_MODES"]

PARALLEL_MODES = ("single", "graph", "pipeline", "hybrid", "spmm-1d", "spmm-1.5d", "spmm-2d", "spmm-3d")


@dataclass(frozen=True)
class Layout:
    """Args:
        parallel: ``single``, ``graph``, ``pipeline``, ``hybrid``, ``spmm-1d`` or ``spmm-1.5d`` (the SpMM
            layouts' process grid is their own business; here they count as ``1 × P``).
        nprocs: world size P.
        stages: pipeline stages S (1 for graph parallelism).
        graph_ways: parts per stage W (P for graph parallelism).
    """

    parallel: str = "single"
    nprocs: int = 1
    stages: int = 1
    graph_ways: int = 1

    @classmethod
    def for_mode(cls, parallel: str, nprocs: int, stages: int = 0, graph_ways: int = 0) -> "Layout":
        """The mesh of a mode: graph ``1 × P``, pipeline ``P × 1``, hybrid ``S × W`` (give both, or one
        and let P decide the other)."""
        if parallel == "pipeline":
            if stages not in (0, nprocs) or graph_ways not in (0, 1):
                raise InputError(f"expected --stages {nprocs} (= --nprocs) and --graph-ways 1 with --parallel "
                                 f"pipeline (got --stages {stages}, --graph-ways {graph_ways}); use --parallel hybrid "
                                 f"for groups of graph-parallel processes per stage")
            return cls(parallel, nprocs, stages=nprocs, graph_ways=1)
        if parallel == "hybrid":
            if stages <= 0 and graph_ways <= 0:
                raise InputError(f"expected --stages S and --graph-ways W with S × W = --nprocs for --parallel hybrid "
                                 f"(got neither, --nprocs {nprocs})")
            if stages <= 0 or graph_ways <= 0:
                known = stages if stages > 0 else graph_ways
                if nprocs % known:
                    name = "--stages" if stages > 0 else "--graph-ways"
                    raise InputError(f"expected {name} to divide --nprocs {nprocs} (got {known})")
                stages, graph_ways = (known, nprocs // known) if stages > 0 else (nprocs // known, known)
            return cls(parallel, nprocs, stages=stages, graph_ways=graph_ways)
        return cls(parallel, nprocs, stages=1, graph_ways=nprocs)

    def __post_init__(self) -> None:
        if self.parallel not in PARALLEL_MODES:
            raise InputError(f"expected --parallel to be one of {', '.join(PARALLEL_MODES)} (got {self.parallel!r})")
        if self.nprocs < 1:
            raise InputError(f"expected --nprocs >= 1 (got {self.nprocs})")
        if self.stages < 1 or self.graph_ways < 1:
            raise InputError(f"expected stages >= 1 and graph ways >= 1 (got {self.stages} and {self.graph_ways})")
        if self.stages * self.graph_ways != self.nprocs:
            raise InputError(
                f"expected --stages × --graph-ways = --nprocs (got {self.stages} × {self.graph_ways} = "
                f"{self.stages * self.graph_ways}, nprocs = {self.nprocs})"
            )
        if self.parallel == "single" and self.nprocs != 1:
            raise InputError(f"expected --nprocs 1 with --parallel single (got {self.nprocs}); "
                             f"use --parallel graph to split the graph over {self.nprocs} processes")

    @property
    def distributed(self) -> bool:
        return self.parallel != "single"

    def check_graph(self, num_nodes: int) -> None:
        """Refuse a layout with more parts than the graph has nodes."""
        if self.graph_ways > num_nodes:
            raise InputError(f"expected at most one part per node (got {self.graph_ways} parts for {num_nodes} nodes)")

    def describe(self) -> str:
        return f"{self.parallel} (stages {self.stages} × graph ways {self.graph_ways} = {self.nprocs} processes)"
