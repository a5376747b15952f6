"""``ModelSpec``: everything the rest of fullgraph asks of a model, in one record per model.

The layouts, the planner, the configuration and the command line never test a model's name: they
read its spec. A spec says how to build the model, which normalization its blocks need, whether its
aggregation is one sparse product (so that the SpMM layouts can distribute it), which options it
reads, and how much memory it keeps per row — or nothing, in which case the planner measures it.

Built-in models register their spec in their own module (``register``); every module of the
``fullgraph.models`` package is imported by the package, so adding a model is adding one file. A
user's model is named by reference (``path/to/file.py:build`` or ``package.module:build``) and gets
its spec from :mod:`fullgraph.models.user`: it goes through the same path as the built-in ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

__all__ = ["MemoryModel", "ModelSpec", "register", "SPECS"]


@dataclass(frozen=True)
class MemoryModel:
    """How much a model holds, derived from its shape (``fullgraph.plan.rank_memory`` sums it up).

    ``params(F, H, C, L, heads)``: trainable parameters. ``kept(**sizes)``: bytes a training forward
    leaves alive for backward (the keywords of ``plan.kept_activation_bytes``). ``heap_overhead``
    and ``transient``: peak RSS over live bytes under glibc's heap, and the temporaries of a step's
    peak moment in units of one activation, each as (without, with ``--recompute``), measured per
    model. ``per_edge``: that unit is a message ``[E', hidden]`` rather than an activation
    ``[n, hidden]`` (attention). ``width``: the activation's width, where it is not ``--hidden`` (a
    measured model's widest layer). ``owned``: parameters owned by nodes (an embedding row per node), of
    which a graph-parallel rank holds only its own nodes' rows."""

    params: Callable[..., int]
    kept: Callable[..., int]
    heap_overhead: tuple[float, float]
    transient: tuple[float, float]
    per_edge: bool = False
    width: int | None = None
    owned: int = 0


@dataclass(frozen=True)
class ModelSpec:
    """One model, as every part of fullgraph sees it.

    Attributes:
        name: the ``--model`` value (a built-in name, or the user's reference).
        build: ``build(in_dim, out_dim, **options)`` -> ``GNN``. Built-in models take the options
            of ``ModelOptions`` by name (``layers``, ``hidden``, ...) and ignore the others; a user's
            builder takes ``--model-arg`` values.
        norm: the block normalization its layers aggregate with (``gcn``, ``mean``, ``self-loops``);
            ``None``: the built model says (``GNN.norm``), as for a user's model.
        spmm: how its aggregation is one sparse product ``Â·H``, for the SpMM layouts and their
            volumes: ``narrower`` (each layer multiplies the narrower of its input and output,
            GCN and GraphSAGE), ``hidden`` (every layer multiplies its input rows: GCNII and
            ResGCN+ hidden ones, APPNP the classes'), or ``None`` (no fixed matrix: attention, or a model that does not say).
        attention: its layers weigh each edge by both its ends through ``Block.attention`` (GAT), which
            a layout holding column slices completes (``parallel.tensor``).
        separable: its graph layers keep the feature columns apart (pure propagation, APPNP), so a
            layout may run every layer on column slices without switching between them.
        reads_every_layer: its ``post`` reads every graph layer's output (jumping knowledge,
            ``GNN.reads_every_layer``), which the pipeline and the hybrid refuse (a stage holds only
            its own layers' outputs). A user's model says it once built (``parallel.registry.check_model_layout``).
        reads_edge_features: its builder takes ``edge_dim``, the width of the graph's edge features,
            and its layers read them (GAT, as PyG's ``GATConv(edge_dim=...)``); the trainer passes it
            where the graph's edges carry features, and ``model.pt`` records it.
        reads_node_types: its builder takes ``node_types`` (the graph's ``NodeTypes`` record: types, counts,
            feature widths, relations) and maps each type's input itself (R-GCN); the trainer passes it and
            ``model.pt`` records it. Such a model refuses a graph of one type.
        options: the ``ModelOptions`` fields its builder reads: what the trainer passes it and
            ``model.pt`` records to rebuild it.
        takes_norm: whether ``--norm`` (a norm between hidden layers) applies to it.
        memory: its memory model; ``None``: measured from a forward and backward on a small block.
        heap_overhead: for a built-in model whose memory is measured, its own peak RSS over live bytes under
            glibc's heap (without, with ``--recompute``) where measured (``None``: ``plan.measured.HEAP``,
            near the most demanding built-in's).
        hidden_step: ``hidden`` must be a multiple of this (GAT: the heads), given the options.
        check: validates the options beyond their ranges; returns what is wrong, or ``None``.
        about: one line for listings and ``--help``.
    """

    name: str
    build: Callable
    norm: str | None
    spmm: str | None = None
    attention: bool = False
    separable: bool = False
    reads_every_layer: bool = False
    reads_edge_features: bool = False
    reads_node_types: bool = False
    options: tuple[str, ...] = ("layers", "hidden", "dropout")
    takes_norm: bool = False
    memory: MemoryModel | None = None
    heap_overhead: tuple[float, float] | None = None
    hidden_step: Callable = field(default=lambda opts: 1)
    check: Callable | None = None
    about: str = ""

    @property
    def builtin(self) -> bool:
        return self.name in SPECS


SPMM_KINDS = ("narrower", "hidden")

SPECS: dict[str, ModelSpec] = {}
"""The built-in models by name, in registration order (the models' modules, alphabetically)."""


def register(spec: ModelSpec) -> ModelSpec:
    """Add a built-in model; its module calls this once, at import."""
    if spec.name in SPECS:
        raise ValueError(f"model {spec.name!r} is registered twice")
    if spec.spmm not in (None, *SPMM_KINDS):
        raise ValueError(f"spec {spec.name!r}: spmm must be one of {SPMM_KINDS} or None (got {spec.spmm!r})")
    SPECS[spec.name] = spec
    return spec
