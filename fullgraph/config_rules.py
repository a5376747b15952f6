"""The rules of ``TrainConfig`` that join its sections: a layout against the model it trains (the SpMM
and tensor layouts' models, batch statistics, a pipeline's stages against the model's depth).

Each section of ``fullgraph.config`` checks its own options; these need two at once, and live here
so that the configuration module stays a list of options.
"""

from __future__ import annotations

from fullgraph.errors import InputError
from fullgraph.models import MODELS, SPMM_MODELS, is_reference, model_spec

__all__ = ["check_layout_and_model", "check_depth"]


def check_layout_and_model(cfg) -> None:
    """Refuse a ``TrainConfig`` whose layout cannot train its model, in one line."""
    layout, model = cfg.parallel.mesh, cfg.model
    if layout.chunked:
        check_depth(cfg.parallel, None if is_reference(model.name) else model.layers)
    if layout.spmm and model_spec(model.name).spmm is None:
        raise InputError(f"expected a model whose aggregation is one sparse product ({', '.join(SPMM_MODELS)}) "
                         f"with --parallel {cfg.parallel.mode} (got {model.name}); train it with "
                         f"--parallel graph, pipeline or hybrid")
    if layout.tensor:
        _check_tensor(cfg)
    if model.norm == "batch":
        _check_batch_norm(cfg.parallel, layout)


def _check_tensor(cfg) -> None:
    spec, name = model_spec(cfg.model.name), cfg.model.name
    tensor_ready = lambda sp: sp.spmm is not None or sp.attention or sp.separable  # noqa: E731
    if not tensor_ready(spec):
        takes = ", ".join(n for n in MODELS if tensor_ready(model_spec(n)))
        raise InputError(f"expected a model whose aggregation is one sparse product or attention ({takes}) with "
                         f"--parallel tensor (got {name}); train it with --parallel graph, pipeline or hybrid")
    if cfg.parallel.tensor_decoupled and not spec.separable:
        takes = ", ".join(n for n in MODELS if model_spec(n).separable) or "none"
        raise InputError(f"expected a model whose propagation keeps the feature columns apart ({takes}) with "
                         f"--tensor-decoupled (got {name}, whose layers mix columns between aggregations)")


def _check_batch_norm(p, layout) -> None:
    mode, chunks = p.mode, p.chunks
    if layout.spmm:
        raise InputError(f"expected --norm none or layer with --parallel {mode} (got --norm batch); "
                         f"batch statistics run with --parallel single, graph, pipeline or hybrid")
    if layout.chunked and chunks != 1:
        raise InputError(f"expected --chunks 1 with --norm batch and --parallel {mode} (got --chunks "
                         f"{chunks or 'default'}): statistics over all nodes need a layer's whole part "
                         f"at once, and chunks run it piece by piece (a pipeline of S stages needs S chunks, so "
                         f"batch norm runs in hybrid layouts of one stage); or use --norm layer")


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
