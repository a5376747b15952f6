"""Models as stacks of block layers. No distributed code lives here.

The extension API is :class:`GNN` (``pre``, ``layers``, ``post``) and :class:`GraphLayer`
(``compute(block, h, h0)``); ``docs/your-model.md`` says what a layer may rely on and what it must
not do. PyG convolutions become such layers through :func:`from_pyg`. Every model, built-in or the
user's, is described by one :class:`ModelSpec`; the built-in ones register theirs in their own
module, and every module of this package is imported here, so a new model is one new file.
"""

from __future__ import annotations

import importlib
import pkgutil

from fullgraph.errors import InputError
from fullgraph.models.base import GNN, GraphLayer, Linear, dst_rows
from fullgraph.models.spec import SPECS, MemoryModel, ModelSpec

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_mod}")  # each model module registers its spec

from fullgraph.models.gat import GAT  # noqa: E402 - the classes, for callers that build them directly
from fullgraph.models.gcn import GCN  # noqa: E402
from fullgraph.models.gcnii import GCNII  # noqa: E402
from fullgraph.models.pyg import from_pyg  # noqa: E402
from fullgraph.models.resgcn import ResGCNPlus  # noqa: E402
from fullgraph.models.sage import GraphSAGE  # noqa: E402
from fullgraph.models.user import is_reference, user_spec  # noqa: E402

MODELS: dict[str, ModelSpec] = SPECS
"""The built-in models' specs by name (``--model`` also takes a user's reference: ``model_spec``)."""
NORM_MODELS = tuple(name for name, s in SPECS.items() if s.takes_norm)
"""The models ``--norm`` applies to."""
UNTYPED_MODELS = tuple(name for name, s in SPECS.items() if not s.reads_node_types)
"""The models that train any graph; the others (R-GCN) are built for a typed graph's node types."""
SPMM_MODELS = tuple(name for name, s in SPECS.items() if s.spmm is not None)
"""The models whose aggregation is one plain sparse product, which the SpMM layouts distribute."""

__all__ = ["GNN", "GraphLayer", "Linear", "dst_rows", "GCN", "GraphSAGE", "GAT", "GCNII", "ResGCNPlus", "MODELS", "NORM_MODELS",
           "SPMM_MODELS", "UNTYPED_MODELS", "ModelSpec", "MemoryModel", "build_model", "model_spec", "norm_and_depth", "from_pyg",
           "is_reference", "as_gnn", "check_options"]


def model_spec(name: str) -> ModelSpec:
    """The spec of a built-in model, or of the user's model named by reference (``file.py:build``,
    ``package.module:build``; its module is imported, once). Anything else is an ``InputError``."""
    if name in SPECS:
        return SPECS[name]
    if is_reference(name):
        return user_spec(name)
    raise InputError(f"expected model to be one of {', '.join(SPECS)}, or a builder as path/to/file.py:function or "
                     f"package.module:function (got {name!r})")


def build_model(name: str, in_dim: int, out_dim: int, *, recompute: bool = False, model_args: dict | None = None,
                **options) -> GNN:
    """The model called ``name``: a built-in one from its options by name (``layers``, ``hidden``,
    ``dropout``, ``heads``, ``norm``, ...; those it does not read are ignored), or a user's from
    ``model_args`` (its builder's keywords).

    ``recompute``: the graph layers keep only their inputs and recompute the rest in backward
    (``GraphLayer``); same numbers, less activation memory."""
    spec = model_spec(name)
    if spec.builtin:
        norm = options.get("norm", "none")
        options = {k: v for k, v in options.items() if k != "model_args"}
        if norm != "none" and not spec.takes_norm:
            raise InputError(f"expected norm 'none' for model {name!r} (got {norm!r}): only "
                             f"{', '.join(NORM_MODELS)} take one")
        model = spec.build(in_dim, out_dim, **options)
    else:  # typed: a typed graph's node types for a builder (models.user.typed_args)
        typed = {"_typed": options["typed"]} if options.get("typed") else {}
        model = spec.build(in_dim, out_dim, **(model_args or {}), **typed)
    model.recompute = recompute
    return model


def norm_and_depth(name: str, layers: int, model_args: dict, widths) -> tuple[str, int]:
    """The block normalization and the number of graph layers of model ``name``, which a layout needs
    before the model is built: the spec's and ``layers`` for a built-in model; for a user's model,
    whose builder decides both, those of the model built once for ``widths()`` (feature width,
    classes and node types, ``parallel.setup.input_widths``: a callable, so that a built-in model never
    reads them)."""
    spec = model_spec(name)
    if spec.norm is not None:
        return spec.norm, layers
    import torch

    from fullgraph.models.user import typed_args

    in_dim, out_dim, *types = widths()
    with torch.random.fork_rng():  # built to be looked at: the caller's generator is left as it was
        probe = build_model(name, in_dim, out_dim, model_args=model_args, typed=typed_args(*types[:1]))
    return probe.norm, probe.num_layers


def as_gnn(model) -> GNN:
    """A model object as fullgraph trains it: a ``GNN`` as it is; PyG convolutions, a list of them
    or a PyG ``BasicGNN`` through :func:`from_pyg`; anything else is an ``InputError``."""
    from fullgraph.models.pyg import adaptable

    if isinstance(model, GNN):
        return model
    if adaptable(model):
        return from_pyg(model)
    raise InputError(f"expected a fullgraph GNN, a PyG convolution, a list of them or a PyG BasicGNN (got "
                     f"{type(model).__module__}.{type(model).__name__})")


def check_options(opts) -> None:
    """``ModelOptions`` against the model they name: a user's builder imported, taking the
    ``--model-arg`` given and deciding the rest (``user.check_options``); a built-in model's spec
    checks (``ModelSpec.check``), and ``--norm`` only where it applies."""
    if is_reference(opts.name):
        from fullgraph.models.user import check_options as check_builder

        check_builder(opts)
        return
    spec = model_spec(opts.name)  # an unknown name is refused here
    if opts.args:
        raise InputError(f"expected --model-arg only with a model's builder (path/to/file.py:build) (got "
                         f"--model {opts.name} with --model-arg {', '.join(opts.args)}); the built-in models "
                         f"take their own flags")
    problem = spec.check(opts) if spec.check else None
    if problem:
        raise InputError(problem)
    if opts.norm != "none" and not spec.takes_norm:
        raise InputError(f"expected --norm none with --model {opts.name} (got --norm {opts.norm}); "
                         f"--norm applies to {', '.join(NORM_MODELS)}"
                         + ("; ResGCN+ has its own LayerNorm" if opts.name == "resgcn+" else ""))
