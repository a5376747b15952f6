"""``Layout``: everything fullgraph asks of one layout beyond its shape, registered once.

The ``Mesh`` (``comm.mesh``) knows a layout's shape: its axes, its grid, its communicators. Everything
else is here, one record per family of ``--parallel`` modes: which options only it takes, how it
checks a configuration against the model (``parallel.rules``), how a rank builds its ``Engine``, and
what ``fullgraph plan`` needs of it — the bytes an epoch moves (``plan.volumes``), what each rank
computes and sends (``plan.rank_work``) and the largest rank's peak memory (``plan.rank_memory``).
The configuration, the trainer and the planner ask the record; none of them branches on the layout.
Adding a layout is its own modules and one entry in ``LAYOUTS``.

A builder reads only what its rank needs: the single process loads the graph, a graph or hybrid rank
its part, a pipeline rank the structure (and, on the first stage, the features), an SpMM rank its
block row(s), a tensor rank the whole graph's structure and its rows of the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from fullgraph.parallel import rules
from fullgraph.comm.mesh import PARALLEL_MODES, SPMM_MODES
from fullgraph.errors import InputError
from fullgraph.ops.edge_data import EDGE_FIELDS, EdgeFacts
from fullgraph.parallel.engine import Engine
from fullgraph.plan import rank_memory, rank_work, volumes

__all__ = ["Layout", "LAYOUTS", "layout_of", "build_engine", "layout_volume", "rank_works", "peak_per_rank",
           "check_layout", "check_model_layout", "check_edge_data", "edge_kinds_read", "edge_layout_error", "refuse_foreign_options"]


@dataclass(frozen=True)
class Layout:
    """One family of ``--parallel`` modes.

    Attributes:
        modes: the ``--parallel`` values it covers.
        build: ``build(cfg, norm, graph=None, layers=None)`` -> this rank's ``Engine``.
        options: the options only these modes take (refused with any other, when not at their default).
        check: ``check(cfg)`` refuses, in one line, a ``TrainConfig`` these modes cannot train.
        volume: its own bytes per epoch by ledger category, ``volume(mesh, model_shape, **sizes)``
            (``plan.volumes.epoch_volume`` adds what every layout moves); ``None``: one process.
        works: every rank's ``RankWork`` (``plan.rank_work.partition_works`` gives the arguments).
        peak: the largest rank's peak bytes, ``peak(cfg, graph, parts, bounds, release_memory)``.
        holds_every_layer: whether each rank holds its rows of every graph layer's output when the
            forward ends, so that a model whose ``post`` reads them all (jumping knowledge) runs; a
            pipeline stage holds only its own layers' (``rules.check_readout``).
        edge_kinds: the edge data its blocks hand a layer: all of it where a block is a set of the
            graph's rows and their edges; the algebraic layouts keep only a weight, in Â's values.
    """

    modes: tuple[str, ...]
    build: Callable[..., Engine]
    options: tuple[str, ...] = ()
    check: Callable | None = None
    volume: Callable | None = None
    works: Callable | None = None
    peak: Callable | None = None
    holds_every_layer: bool = True
    edge_kinds: tuple[str, ...] = EDGE_FIELDS


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


_PARTITIONED = dict(volume=volumes.partition_volume, works=rank_work.partition_works, peak=rank_memory.partition_peak)

LAYOUTS = (
    Layout(("single",), _single),
    Layout(("graph",), _graph, **_PARTITIONED),
    Layout(("pipeline", "hybrid"), _chunked, options=("stage_layers", "chunks"), check=rules.check_chunked,
           holds_every_layer=False, **_PARTITIONED),
    Layout(SPMM_MODES, _spmm, check=rules.check_spmm, volume=volumes.spmm_epoch_volume,
           works=rank_work.spmm_works, peak=rank_memory.spmm_peak, edge_kinds=("weight",)),
    Layout(("tensor",), _tensor, options=("tensor_chunks", "tensor_decoupled"), check=rules.check_tensor,
           volume=volumes.tensor_epoch_volume, works=rank_work.tensor_works, peak=rank_memory.tensor_peak,
           edge_kinds=("weight",)),
)
"""Every layout, once. ``PARALLEL_MODES`` (the mesh's list) and these modes must be the same set."""

_BY_MODE = {mode: layout for layout in LAYOUTS for mode in layout.modes}
assert sorted(_BY_MODE) == sorted(PARALLEL_MODES), "every --parallel mode needs exactly one Layout"


def layout_of(mode: str) -> Layout:
    """The record of ``--parallel mode`` (one of ``PARALLEL_MODES``: the configuration has checked it)."""
    return _BY_MODE[mode]


def refuse_foreign_options(p) -> None:
    """Refuse a layout's own options (``Layout.options``) set away from their defaults under another
    layout (``p``: a ``ParallelOptions``), naming them and the modes that take them."""
    from dataclasses import fields

    defaults = {f.name: f.default for f in fields(p)}
    for layout in LAYOUTS:
        if p.mode not in layout.modes and any(getattr(p, o) != defaults[o] for o in layout.options):
            flags = " and ".join("--" + o.replace("_", "-") for o in layout.options)
            raise InputError(f"expected {flags} only with --parallel {' or '.join(layout.modes)} (got --parallel "
                             f"{p.mode}): leave them out, or use --parallel {' or '.join(layout.modes)}")


def check_layout(cfg) -> None:
    """``cfg``'s layout against its model and the rest of its options (the layout's ``check``)."""
    layout = layout_of(cfg.parallel.mode)
    rules.check_segments(cfg)
    if layout.check is not None:
        layout.check(cfg)


def check_model_layout(cfg, model) -> None:
    """``cfg``'s layout against the built ``model``: what a spec cannot say of a user's model before
    its builder has run (``check_layout`` checks the spec's). One line, before any epoch: a model
    whose ``post`` reads every layer's output where the layout's ranks do not hold them all."""
    if not layout_of(cfg.parallel.mode).holds_every_layer:
        what = f"jk={model.jk_mode!r}" if getattr(model, "jk_mode", None) else type(model).__name__
        rules.check_readout(cfg, getattr(model, "reads_every_layer", False), what)
    rules.check_segments(cfg, model)
    if getattr(model, "whole_graph", False) and (cfg.parallel.mode != "single" or cfg.parallel.prune):
        raise InputError(f"expected layers of one hop each with --parallel {cfg.parallel.mode}"
                         f"{' --prune' if cfg.parallel.prune else ''} (got a whole model on dicts, {cfg.model.name}: "
                         f"its layers run as one, which reads the whole graph): train it in one process without "
                         f"--prune, or return its layers as a list, [to_hetero(Layer(...), metadata), ...] or "
                         f"HeteroConv/HGTConv layers, which run in every layout a typed model does")


def build_engine(cfg, norm: str, graph=None, layers: int | None = None) -> Engine:
    """This rank's engine for ``cfg.parallel.mode``; ``graph`` (already loaded) is used by the layouts that
    hold the whole graph (single process, and SpMM when tests pass one in); ``layers``: the model's
    depth, where the layout splits its layers (default: ``cfg.model.layers``; a user's builder decides it)."""
    engine = layout_of(cfg.parallel.mode).build(cfg, norm, graph=graph, layers=layers)
    if engine.fingerprint is None:  # read from the graph or the folder the rank read (once)
        engine.fingerprint, edges, types = _graph_record(cfg, getattr(engine, "graph", graph))
        engine.edges = engine.edges if engine.edges.kinds else edges
        engine.node_types = engine.node_types if engine.node_types is not None else types
    return engine


def layout_volume(mesh, model, **sizes) -> dict[str, int]:
    """Bytes per epoch by ledger category of ``mesh``'s layout, summed over ranks (``plan.volumes.epoch_volume``
    with the layout's own ``volume``): what ``fullgraph plan`` prints and the tests hold every ledger to."""
    own = layout_of(mesh.parallel).volume
    return volumes.epoch_volume(mesh, model, own, **sizes) if own is not None else {}


def rank_works(cfg, *args, **kwargs) -> list:
    """Every rank's ``RankWork`` under ``cfg``'s layout (the arguments of ``plan.rank_work.partition_works``)."""
    return layout_of(cfg.parallel.mode).works(cfg, *args, **kwargs)


def peak_per_rank(cfg, graph, parts, bounds, release_memory: bool = False, task_bytes: dict | None = None) -> int:
    """The largest rank's estimated peak bytes under ``cfg``'s layout (``parts``: the partition's
    statistics, for the layouts that have one; ``bounds``: each stage's layers; ``task_bytes``: what the
    task holds on a rank, ``Task.memory``)."""
    return layout_of(cfg.parallel.mode).peak(cfg, graph, parts, bounds, release_memory, task_bytes)


def _graph_record(cfg, graph):
    """The trained graph's fingerprint, edge facts and node types: the loaded graph's, or those its rank's
    folder records."""
    from fullgraph.ops.node_types import NodeTypes

    if graph is not None:
        return graph.fingerprint(), graph.edge_facts(), graph.node_types
    pdir = cfg.parallel.partition_dir
    if pdir is None:
        return None, EdgeFacts(), None
    if cfg.parallel.mesh.reads_block_rows:
        from fullgraph.partition.blockrows import load_block_rows_meta

        doc = load_block_rows_meta(pdir)
    else:
        from fullgraph.partition.store import load_meta

        doc = load_meta(pdir)
    return doc.get("fingerprint"), EdgeFacts.of_record(doc), NodeTypes.of_record(doc)


_EDGE_WORDS = {"weight": "weights", "attr": "features", "type": "types"}


def check_edge_data(cfg, model, engine: Engine) -> None:
    """Refuse, in one line before the first epoch, a model that reads edge data its layers will not get:
    data the graph lacks (the model says what, ``GNN.check_edge_data``), or data the layout does not hand
    a layer (the algebraic layouts keep only a weight, in Â's values)."""
    check = getattr(model, "check_edge_data", None)
    if check is None:  # a model of the user's own that is no GNN: it reads what its layers read
        return
    kinds = layout_of(cfg.parallel.mode).edge_kinds
    given = engine.edges.only(kinds)
    if given == engine.edges:
        check(*given)
        return
    try:
        check(*given)
    except InputError:
        check(*engine.edges)  # the graph itself lacks what the model reads: that message
        needs = getattr(model, "edge_needs", None)
        read = needs.kinds if isinstance(needs, EdgeFacts) and needs.kinds else engine.edges.kinds
        raise edge_layout_error(cfg.parallel.mode, type(model).__name__, read, engine.edges) from None


def edge_kinds_read(model: str, probe=None) -> tuple[str, ...]:
    """The edge data a model reads (before any graph is at hand): a built-in model's spec says so (GAT
    reads edge features where the graph has them); a user's model as built (``probe``) says what its
    layers cannot run without."""
    from fullgraph.models import is_reference, model_spec

    if is_reference(model):
        return probe.edge_needs.kinds if probe is not None and hasattr(probe, "edge_needs") else ()
    return ("attr",) if model_spec(model).reads_edge_features else ()


def edge_layout_error(mode: str, model: str, reads: tuple[str, ...], edges: EdgeFacts) -> InputError | None:
    """The one-line refusal of a model that reads edge data (``reads``: its kinds) which the graph's
    edges carry (``edges``) and layout ``mode`` does not hand a layer; ``None`` where it does."""
    held = [k for k in edges.kinds if k in reads and k not in layout_of(mode).edge_kinds]
    if not held:
        return None
    takes = ", ".join(m for lay in LAYOUTS for m in lay.modes if set(held) <= set(lay.edge_kinds))
    return InputError(f"expected a model that reads no edge {' and '.join(_EDGE_WORDS[k] for k in held)} with "
                      f"--parallel {mode} (got {model}, which reads them): this layout hands a layer the edge "
                      f"weights only, in Â's values; edge features and types reach a layer under --parallel {takes}")
