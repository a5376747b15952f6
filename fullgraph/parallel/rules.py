"""Each layout's rules for a whole ``TrainConfig``: its layout against the model it trains (the SpMM
and tensor layouts' models, batch statistics, a pipeline's stages against the model's depth) and
against the options that only make sense elsewhere.

Each layout's record (``parallel.registry.Layout.check``) names its rule here, and ``TrainConfig``
asks the record; each section of ``fullgraph.config`` checks its own options alone.
"""

from __future__ import annotations

from fullgraph.errors import InputError
from fullgraph.models import MODELS, SPMM_MODELS, is_reference, model_spec
from fullgraph.models.base import reads_every_layer_refusal

__all__ = ["check_chunked", "check_readout", "check_spmm", "check_tensor", "check_depth", "check_segments"]


def check_chunked(cfg) -> None:
    """The pipeline and the hybrid: batch statistics only with one stage and one chunk per part (first:
    its refusal says what runs, where the stage and chunk rules would each ask for the other), their
    stages against the model's depth, a model whose output reads only its last layer, no boundary
    sampling."""
    p, model = cfg.parallel, cfg.model
    if model.norm == "batch" and (p.chunks != 1 or p.mesh.stages > 1):
        s = p.mesh.stages
        raise InputError(f"expected --norm layer (or none) with --parallel {p.mode} of {s} stage{'s' * (s > 1)} and "
                         f"--chunks {p.chunks or 'default'} (got --norm batch): batch statistics need a layer's whole "
                         f"part at once, so one chunk, and S stages need at least S chunks; batch norm runs with "
                         f"--parallel graph, or a hybrid of one stage with one chunk (--stages 1 --chunks 1)")
    check_depth(p, None if is_reference(model.name) else model.layers)
    check_readout(cfg, model_spec(model.name).reads_every_layer, model.name)
    if p.boundary_rate < 1.0:
        raise InputError(f"expected --boundary-rate 1 with --parallel {p.mode} (got {p.boundary_rate}); boundary "
                         f"sampling runs with --parallel graph")


def check_segments(cfg, model=None) -> None:
    """``--recompute-segment`` (``GNN.recompute_segment``): one process only, and a model that runs its layers
    through ``GNN.forward`` and whose ``post`` reads only the last one; ``model``: the built model, where a
    user's builder made it (``None``: the spec's facts)."""
    k = cfg.model.recompute_segment
    if not k:
        return
    if cfg.parallel.mode != "single":
        raise InputError(f"expected --recompute-segment only with --parallel single (got --parallel "
                         f"{cfg.parallel.mode}): its ranks exchange rows between or inside the layers, and "
                         f"recomputing a segment would exchange them again; --recompute keeps one layer's input per "
                         f"layer there")
    spec = model_spec(cfg.model.name)
    if k > cfg.model.layers and model is None and spec.builtin:
        raise InputError(f"expected --recompute-segment at most --layers ({cfg.model.layers}) (got {k})")
    every = spec.reads_every_layer if model is None else getattr(model, "reads_every_layer", False)
    if every:
        raise InputError(f"expected a model whose output reads only its last graph layer with --recompute-segment "
                         f"(got {cfg.model.name}, which reads every layer's output, so keeps them all anyway)")
    from fullgraph.models.base import GNN

    if model is not None and type(model).forward is not GNN.forward:
        raise InputError(f"expected a model that runs its layers through fullgraph's GNN.forward with "
                         f"--recompute-segment (got {type(model).__name__}, whose own forward decides what it keeps)")


def check_readout(cfg, reads_every_layer: bool, what: str) -> None:
    """A layout whose ranks do not hold every layer's output (``parallel.registry.Layout.holds_every_layer``:
    a pipeline stage holds its own layers') against a model whose ``post`` reads them all (jumping
    knowledge), ``what`` naming it: from its spec here, from the built model for a user's
    (``parallel.registry.check_model_layout``)."""
    if reads_every_layer:
        raise InputError(reads_every_layer_refusal(what, cfg.parallel.mode))


def check_spmm(cfg) -> None:
    """The SpMM layouts: a model whose aggregation is one sparse product, and no batch statistics."""
    mode, model = cfg.parallel.mode, cfg.model
    if model_spec(model.name).spmm is None:
        raise InputError(f"expected a model whose aggregation is one sparse product ({', '.join(SPMM_MODELS)}) "
                         f"with --parallel {mode} (got {model.name}); train it with "
                         f"--parallel graph, pipeline or hybrid")
    if model.norm == "batch":
        raise InputError(f"expected --norm none or layer with --parallel {mode} (got --norm batch); "
                         f"batch statistics run with --parallel single, graph, pipeline or hybrid")


def check_tensor(cfg) -> None:
    """Tensor parallelism: a model whose aggregation it can split by columns, every halo (there is no
    boundary to sample), and ``--tensor-decoupled`` only for a separable model, unchunked."""
    p = cfg.parallel
    if p.boundary_rate < 1.0:
        raise InputError(f"expected --boundary-rate 1 with --parallel tensor (got {p.boundary_rate}): every "
                         f"process aggregates over the whole graph, so there is no boundary to sample; boundary "
                         f"sampling runs with --parallel graph")
    if p.tensor_decoupled and p.tensor_chunks:
        raise InputError("expected --tensor-chunks 0 with --tensor-decoupled (the decoupled pass keeps its "
                         "column slices between steps, so there is no per-step product to chunk): give one of them")
    _check_tensor_model(cfg)


def _check_tensor_model(cfg) -> None:
    spec, name = model_spec(cfg.model.name), cfg.model.name
    tensor_ready = lambda sp: sp.spmm is not None or sp.attention or sp.separable  # noqa: E731
    if not tensor_ready(spec):
        takes = ", ".join(n for n in MODELS if tensor_ready(model_spec(n)))
        raise InputError(f"expected a model whose aggregation is one sparse product or attention ({takes}) with "
                         f"--parallel tensor (got {name}); train it with --parallel graph, pipeline or hybrid")
    if cfg.parallel.tensor_decoupled and not spec.separable:
        takes = ", ".join(n for n in MODELS if model_spec(n).separable) or "none"
        raise InputError(f"expected a model whose propagation keeps the feature columns apart ({takes}) with "
                         f"--tensor-decoupled (got {name}, whose layers mix columns between aggregations); train "
                         f"it with --parallel tensor without --tensor-decoupled")


def check_depth(p, layers: int | None) -> None:
    """The pipeline's stages against a model of ``layers`` graph layers (``None``: a user's model,
    whose builder decides its depth: checked again once it is built)."""
    stages = p.mesh.stages
    if layers is not None and stages > layers:
        raise InputError(f"expected at most one stage per layer (got {stages} stages for {layers} layers); "
                         f"use --parallel hybrid --stages S --graph-ways W to give each stage several processes")
    if p.stage_layers and layers is not None:
        try:
            sizes = [int(v) for v in p.stage_layers.split(",")]
        except ValueError:
            raise InputError(f"expected --stage-layers as comma-separated integers, e.g. 8,8,8,8 "
                             f"(got {p.stage_layers!r})") from None
        if len(sizes) != stages or sum(sizes) != layers or min(sizes) < 1:
            raise InputError(f"expected --stage-layers to give {stages} stages of >= 1 layer summing to "
                             f"{layers} (got {p.stage_layers!r})")
    if p.num_chunks < stages:
        raise InputError(f"expected --chunks >= the number of stages {stages}, or the pipeline never fills "
                         f"(got --chunks {p.chunks})")
