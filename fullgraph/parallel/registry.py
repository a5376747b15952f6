"""``build_engine(cfg, norm)``: the one place a configured layout becomes this rank's ``Engine``.

Each layout registers a builder under the names ``--parallel`` accepts. A builder reads only what
its rank needs: the single process loads the graph, a graph or hybrid rank its part, a pipeline rank
the structure (and, on the first stage, the features), an SpMM rank its block row(s), a tensor rank
the whole graph's structure and its rows of the rest. The trainer never branches on the layout;
adding one is one module and one entry here.
"""

from __future__ import annotations

from typing import Callable

from fullgraph.comm.mesh import PARALLEL_MODES
from fullgraph.parallel.engine import Engine

__all__ = ["ENGINES", "build_engine"]


def _single(cfg, norm: str, graph=None, layers=None) -> Engine:
    from fullgraph.data.load import load_graph
    from fullgraph.device import resolve_device
    from fullgraph.parallel.engine import SingleEngine

    return SingleEngine(load_graph(cfg) if graph is None else graph, norm, resolve_device(cfg.run.device),
                        prune=cfg.parallel.prune)


def _graph(cfg, norm: str, graph=None, layers=None) -> Engine:
    from fullgraph.parallel.graph import graph_engine

    return graph_engine(cfg, norm)


def _chunked(cfg, norm: str, graph=None, layers=None) -> Engine:
    from fullgraph.parallel.pipeline import chunked_engine

    return chunked_engine(cfg, norm, layers=layers)


def _spmm(cfg, norm: str, graph=None, layers=None) -> Engine:
    from fullgraph.parallel.spmm import spmm_engine

    return spmm_engine(cfg, norm, graph=graph)


def _tensor(cfg, norm: str, graph=None, layers=None) -> Engine:
    from fullgraph.parallel.tensor_engine import tensor_engine

    return tensor_engine(cfg, norm, graph=graph)


ENGINES: dict[str, Callable[..., Engine]] = {
    "single": _single,
    "graph": _graph,
    "pipeline": _chunked,
    "hybrid": _chunked,
    **{mode: _spmm for mode in PARALLEL_MODES if mode.startswith("spmm")},
    "tensor": _tensor,
}
assert set(ENGINES) == set(PARALLEL_MODES), "every layout needs a builder"


def build_engine(cfg, norm: str, graph=None, layers: int | None = None) -> Engine:
    """This rank's engine for ``cfg.parallel.mode``; ``graph`` (already loaded) is used by the layouts that
    hold the whole graph (single process, and SpMM when tests pass one in); ``layers``: the model's
    depth, where the layout splits its layers (default: ``cfg.model.layers``; a user's builder decides it)."""
    engine = ENGINES[cfg.parallel.mode](cfg, norm, graph=graph, layers=layers)
    if engine.fingerprint is None:
        engine.fingerprint = _fingerprint(cfg, getattr(engine, "graph", graph))
    return engine


def _fingerprint(cfg, graph) -> str | None:
    """The trained graph's fingerprint: the loaded graph's, or the one its rank's folder records."""
    if graph is not None:
        return graph.fingerprint()
    pdir = cfg.parallel.partition_dir
    if pdir is None:
        return None
    if cfg.parallel.mesh.reads_block_rows:
        from fullgraph.partition.blockrows import load_block_rows_meta

        return load_block_rows_meta(pdir).get("fingerprint")
    from fullgraph.partition.store import load_meta

    return load_meta(pdir).get("fingerprint")
