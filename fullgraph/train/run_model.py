"""``RunModel``: which model a run trains, and what a layout needs of it before it exists.

A run trains the model its options name — a built-in one, or a user's builder (``--model
FILE.py:build``) — or a model object its caller built (``fullgraph.train_model``, one process or
torchrun). The engine is built before the model (it gives the graph's widths), yet needs the model's
block normalization and depth: a spec says them, a builder's model is built once to learn them, an
object has them.
"""

from __future__ import annotations

from dataclasses import dataclass

from fullgraph.models import GNN, as_gnn, build_model, model_spec, norm_and_depth
from fullgraph.models.user import BUILDER_DECIDES
from fullgraph.train.model_file import model_args

__all__ = ["RunModel", "MODEL_DECIDES", "recorded_options", "build_planned_model"]


@dataclass
class RunModel:
    cfg: object
    """The run's ``TrainConfig``."""
    obj: GNN | None = None
    """A model object to train instead of the one the options name (adapted: ``models.as_gnn``)."""
    obj_name: str = ""
    """The object's class name, as its caller built it."""
    pending: list | None = None
    """PyG's heterogeneous layers (``HeteroConv``, ``HGTConv``, ...) handed over as an object: adapted in
    :meth:`build`, once the graph's node types are known (``models.pyg_hetero_layer``)."""

    @classmethod
    def of(cls, cfg, model=None) -> "RunModel":
        """The model ``cfg`` names, or ``model``: a fullgraph GNN, PyG convolutions or a BasicGNN, or PyG's
        heterogeneous layers (a list, or one module) for a typed graph."""
        from fullgraph.models.pyg_hetero import check_hetero_layers, hetero_layers

        if model is None:
            return cls(cfg)
        layers = hetero_layers(model)
        if layers is not None:
            check_hetero_layers(layers)
            return cls(cfg, None, type(model).__name__, layers)
        return cls(cfg, as_gnn(model), type(model).__name__)

    @property
    def named(self) -> bool:
        """Whether the run trains the model its options name (not an object)."""
        return self.obj is None and self.pending is None

    @property
    def name(self) -> str:
        """What the run trains: ``--model``, or ``<ClassName>`` for an object."""
        return self.cfg.model.name if self.named else f"<{self.obj_name}>"

    @property
    def has_memory_model(self) -> bool:
        """Whether the memory estimate before training applies: to a model the options name (its
        spec's memory model, or one measured: ``fullgraph.plan.measured``), not to an object."""
        return self.named

    def shape(self, widths) -> tuple[str, int]:
        """The block normalization and the depth (``widths()``: the graph's feature width and classes,
        read only for a user's builder), the depth checked against the pipeline's stages."""
        cfg = self.cfg
        if self.pending is not None:  # PyG's heterogeneous layers: each one a graph layer
            from fullgraph.models.pyg_hetero import hetero_part
            from fullgraph.models.pyg_hetero_layer import PyGHeteroModel

            norm, layers = PyGHeteroModel.norm, sum(1 for m in self.pending if hetero_part(m))
        elif self.obj is not None:
            norm, layers = self.obj.norm, self.obj.num_layers
        else:
            norm, layers = norm_and_depth(cfg.model.name, cfg.model.layers, cfg.model.args, widths)
        if cfg.parallel.mesh.chunked:
            cfg.check_depth(layers)
        return norm, layers

    def build(self, in_dim: int, num_classes: int, edge_dim: int | None = None, node_types=None) -> GNN:
        """The model to train (the caller seeds the generator first); an object is returned as it is.
        ``edge_dim``: the width of the graph's edge features (``None``: it has none); ``node_types``: the
        graph's ``NodeTypes`` (``None``: a graph of one type)."""
        if self.pending is not None and self.obj is None:
            from fullgraph.errors import InputError
            from fullgraph.models import from_pyg

            if node_types is None:
                raise InputError(f"expected a typed graph (node types and relations) for PyG's heterogeneous layers "
                                 f"({self.obj_name}) (got a graph of one type)")
            self.obj = from_pyg(self.pending, node_types=node_types, featureless_width=self.cfg.model.hidden,
                                featureless=self.cfg.model.featureless)
        if self.obj is not None:
            self.obj.recompute = self.cfg.model.recompute
            self.obj.recompute_segment = self.cfg.model.recompute_segment
            return self.obj
        args = model_args(self.cfg, in_dim, num_classes, edge_dim, node_types)
        model = build_model(args.pop("name"), args.pop("in_dim"), args.pop("out_dim"),
                            recompute=self.cfg.model.recompute, **args)
        model.recompute_segment = self.cfg.model.recompute_segment
        return model

    def hidden(self, model: GNN) -> int:
        """The hidden width: the option's for a built-in model, else the widest input of a layer after the first."""
        if self.named and model_spec(self.cfg.model.name).builtin:
            return self.cfg.model.hidden
        widths = model.layer_input_widths()
        return max(widths[1:], default=widths[0])

    def options(self) -> dict:
        """The run's options as its files record them (an object's name in place of ``--model``)."""
        return recorded_options(self.cfg, None if self.named else self.obj_name)

    def file_args(self, in_dim: int, num_classes: int, edge_dim: int | None = None, node_types=None) -> dict:
        """What ``model.pt`` records to rebuild the model (an object's name only: it is not rebuilt)."""
        if not self.named:
            return {"name": self.name, "in_dim": in_dim, "out_dim": num_classes}
        return model_args(self.cfg, in_dim, num_classes, edge_dim, node_types)


MODEL_DECIDES = BUILDER_DECIDES + ("dropout",)
"""The options that shape a built-in model only: a builder or a model object decides them itself (those
a builder refuses when given, and ``--dropout``, which it ignores)."""


def recorded_options(cfg, object_name: str | None = None) -> dict:
    """The options a run's files (``config.json``, ``summary.json``, ``model.pt``) record: all of them,
    but for a user's builder or a model object (``object_name``: its class) without the built-in
    models' shape options, which such a model never reads (recording ``hidden 64`` would say
    something false of it)."""
    from fullgraph.models import is_reference

    from fullgraph.models.user import reads_hidden

    options = cfg.options()
    if object_name is None and not is_reference(cfg.model.name):
        return options
    kept = ("hidden",) if object_name is None and reads_hidden(cfg.model.name) else ()  # a typed builder's table width
    options = {k: v for k, v in options.items() if k not in MODEL_DECIDES or k in kept}
    return options | ({"model": f"<{object_name}>"} if object_name is not None else {})


def build_planned_model(cfg, graph):
    """The model ``cfg`` trains, built from the trainer's own arguments (what the plan times and counts)."""
    from fullgraph.tasks import output_width, with_task_head

    out = output_width(cfg, graph.num_classes)  # a link's encoder: embeddings
    args = model_args(cfg, graph.num_features, out, graph.edge_facts().width, graph.node_types)
    typed = graph.node_types is not None and bool(graph.node_types.relations)  # a typed graph's links are typed
    return with_task_head(build_model(args.pop("name"), args.pop("in_dim"), args.pop("out_dim"), **args), cfg, out,
                          graph.num_relations if typed else None)
