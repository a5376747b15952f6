"""A user's model, named by reference: ``path/to/file.py:build`` or ``package.module:build``.

``build(in_dim, out_dim, **model_args)`` returns a fullgraph ``GNN``, a PyG convolution, a list of
them, or a PyG ``BasicGNN`` (the last three through ``from_pyg``). On a typed graph it may also return
a list of PyG's heterogeneous layers (``HeteroConv``, ``HGTConv``, ``to_hetero`` of one layer, then
node-wise modules: ``models.pyg_hetero_layer``), and it is handed what PyG users build those from where
its signature names them (:data:`TYPED_ARGS`): ``metadata`` (PyG's ``(node_types, edge_types)``),
``in_dims`` (each node type's input width: its features', or ``--hidden`` for a featureless type's
learned table, which is why ``--hidden`` is taken with such a builder) and ``node_types`` (the
``NodeTypes``). The builder is imported in every
process that needs the model — the launcher's ranks and torchrun's re-run the command line, which
names it — so a model known only to the user's file reaches every rank. Its spec says nothing
fixed: the normalization is the built model's own (``GNN.norm``), its aggregation is not taken as
one sparse product (the SpMM layouts refuse it), and its memory is measured, not derived.

Every way this can go wrong — no such file, no such module or function, a builder that raises,
returns something else, or does not take a ``--model-arg`` — is one ``InputError`` naming the
reference.

Importing the builder's file runs its top-level code. A script that calls ``fullgraph.train_model``
at its top level, not under ``if __name__ == "__main__":``, would run that call again in the import
(in every rank, and in ``evaluate``, ``predict``, ``--resume``): a second run nested in the first, or
a launch that fails in a way that names neither the script nor the fix. So the import is marked
while it runs (:func:`check_not_importing`), and a ``train_model`` call made during it is refused as
:class:`ReimportedCall`, which passes through unwrapped and says where the guard goes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path

from fullgraph.errors import InputError
from fullgraph.models.spec import ModelSpec

__all__ = ["is_reference", "absolute_reference", "user_spec", "load_builder", "check_model_args", "check_options",
           "BUILDER_DECIDES", "TYPED_ARGS", "typed_args", "reads_hidden", "ReimportedCall", "check_not_importing"]

BUILDER_DECIDES = ("layers", "hidden", "heads", "norm", "gcnii_alpha", "gcnii_lambda", "appnp_alpha", "gcn_kernel")
"""The model options a user's builder decides instead (``--dropout`` too is the builder's: ignored)."""

TYPED_ARGS = ("metadata", "in_dims", "node_types")
"""What a builder is handed on a typed graph, where its signature names it (module docstring)."""

_FUNCTION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")

_IMPORTING: list[str] = []
"""The files (or modules) this process is importing for a builder, innermost last."""


class ReimportedCall(InputError):
    """``fullgraph.train_model`` called while a builder's module is being imported: the script's own
    top-level call, run again by the import. Raised unwrapped through :func:`load_builder`, so the
    outermost caller sees where the guard goes, not "expected FILE to import"."""


def check_not_importing(call: str = "fullgraph.train_model") -> None:
    """Refuse ``call`` while a builder's module is being imported in this process (module docstring)."""
    if _IMPORTING:
        where = _IMPORTING[-1]
        raise ReimportedCall(f"put the {call}(...) call in {where} under `if __name__ == \"__main__\":`: every "
                             f"process that trains (and evaluate, predict, --resume) imports {where} to find the "
                             f"builder, and the import ran the call again")


@contextlib.contextmanager
def _importing(where: str):
    _IMPORTING.append(where)
    try:
        yield
    finally:
        _IMPORTING.pop()


def is_reference(name: str) -> bool:
    """Whether ``--model`` names a builder (``something:function``) rather than a built-in model."""
    return ":" in name


def _split(ref: str) -> tuple[str, str]:
    where, _, fn = ref.rpartition(":")
    if not where or not _FUNCTION.match(fn):
        raise InputError(f"expected --model as path/to/file.py:function or package.module:function (got {ref!r})")
    return where, fn


def _is_path(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def absolute_reference(ref: str) -> str:
    """The reference with a file path made absolute, so that a run folder's ``config.json`` still
    finds the builder from another working directory (``evaluate``, ``predict``, ``--resume``)."""
    where, fn = _split(ref)
    return f"{Path(where).expanduser().resolve()}:{fn}" if _is_path(where) else ref


@functools.lru_cache(maxsize=None)
def load_builder(ref: str):
    """The builder function a reference names, its module imported once per process."""
    where, fn = _split(ref)
    if _is_path(where):
        path = Path(where).expanduser().resolve()
        if not path.is_file():
            raise InputError(f"expected a Python file at {path} for --model {ref} (got no such file)")
        name = "fullgraph_user_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # pickling and dataclasses look a class's module up here
        try:
            with _importing(str(path)):
                spec.loader.exec_module(module)
        except ReimportedCall:
            sys.modules.pop(name, None)
            raise
        except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's module: whatever it raises is reported
            sys.modules.pop(name, None)
            raise InputError(f"expected {path} to import for --model {ref} (it raised {_one_line(e)})") from None
    else:
        try:
            with _importing(where):
                module = importlib.import_module(where)
        except ReimportedCall:
            raise
        except ModuleNotFoundError as e:
            raise InputError(f"expected an importable module {where!r} for --model {ref} (got {_one_line(e)})") \
                from None
        except (Exception, SystemExit) as e:  # noqa: BLE001
            raise InputError(f"expected module {where!r} to import for --model {ref} (it raised {_one_line(e)})") \
                from None
    builder = getattr(module, fn, None)
    if not callable(builder):
        raise InputError(f"expected a function {fn!r} in {where} for --model {ref} (got "
                         f"{'nothing by that name' if builder is None else type(builder).__name__})")
    return builder


def _typed_params(ref: str) -> list[str]:
    """The :data:`TYPED_ARGS` the builder's signature names."""
    params = inspect.signature(load_builder(ref)).parameters
    return [n for n in TYPED_ARGS if n in params]


def reads_hidden(ref: str) -> bool:
    """Whether ``--hidden`` shapes the builder's model: a featureless type's table width, its ``in_dims``."""
    return "in_dims" in _typed_params(ref)


def typed_args(node_types=None, hidden: int = 64, featureless: str = "embedding") -> dict | None:
    """What a builder's typed graph is (``_build``'s ``_typed``; ``model.pt`` records it): the node types as
    their JSON record, a featureless type's table width and draw; ``None`` for a graph of one type."""
    if node_types is None:
        return None
    record = node_types if isinstance(node_types, dict) else node_types.record()["node_types"]
    return {"node_types": record, "hidden": int(hidden), "featureless": featureless}


def check_model_args(ref: str, model_args: dict) -> None:
    """Refuse a ``--model-arg`` the builder does not take (unless it takes ``**kwargs``), or one of the
    typed graph's own arguments (:data:`TYPED_ARGS`)."""
    params = inspect.signature(load_builder(ref)).parameters
    given = sorted(set(model_args) & set(TYPED_ARGS))
    if given:
        raise InputError(f"expected no --model-arg {', '.join(given)} for {ref} (got one): fullgraph hands the "
                         f"builder the typed graph's {', '.join(given)} itself")
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    named = [n for n, p in list(params.items())[2:] if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
             and n not in TYPED_ARGS]
    unknown = sorted(set(model_args) - set(named))
    if unknown:
        raise InputError(f"unknown --model-arg {', '.join(unknown)} for {ref} (it takes "
                         f"{', '.join(named) if named else 'none beyond in_dim and out_dim'})")


def check_options(opts) -> None:
    """``ModelOptions`` naming a builder: the reference made absolute, the builder imported (a missing
    file or function is refused now, before any graph is read), the ``--model-arg`` given taken by it,
    and none of the options it decides set."""
    from dataclasses import fields

    opts.name = absolute_reference(opts.name)
    load_builder(opts.name)
    check_model_args(opts.name, opts.args)
    typed = reads_hidden(opts.name)  # --hidden: a featureless type's table width (in_dims)
    decided = [f"--{f.name.replace('_', '-')} {getattr(opts, f.name)}" for f in fields(opts)
               if f.name in BUILDER_DECIDES and getattr(opts, f.name) != f.default and not (typed and f.name == "hidden")]
    if decided:
        raise InputError(f"expected no {', '.join(decided)} with --model {opts.name}: its builder decides the "
                         f"model (pass its keywords with --model-arg key=value)")


def _build(ref: str, in_dim: int, out_dim: int, _typed: dict | None = None, **model_args):
    from fullgraph.models.base import GNN
    from fullgraph.models.pyg import adaptable, from_pyg
    from fullgraph.models.pyg_hetero import check_hetero_layers, check_not_hetero, hetero_layers

    check_model_args(ref, model_args)
    types, typed = _typed_inputs(ref, _typed)
    try:
        made = load_builder(ref)(in_dim, out_dim, **model_args, **typed)
    except InputError:
        raise
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's builder
        raise InputError(f"expected {ref}(in_dim={in_dim}, out_dim={out_dim}"
                         + "".join(f", {k}={v!r}" for k, v in model_args.items())
                         + f") to build a model (it raised {_one_line(e)})") from None
    if isinstance(made, GNN):
        return made
    layers = hetero_layers(made)
    if types is not None and layers is not None:  # HeteroConv, HGTConv, ... on a typed graph
        check_hetero_layers(layers, f"{ref} to return a model over one typed graph, or a list of PyG's heterogeneous "
                                    f"layers")
        return from_pyg(made, node_types=types, featureless_width=_typed["hidden"], featureless=_typed["featureless"])
    check_not_hetero(made, f"{ref} to return a model over one typed graph" + (
        "" if types is None else ", or a list of PyG's heterogeneous layers"))
    if adaptable(made):
        return from_pyg(made)
    raise InputError(f"expected {ref} to return a fullgraph GNN, a PyG convolution, a list of them or a PyG "
                     f"BasicGNN (got {type(made).__module__}.{type(made).__name__})")  # as_gnn's, naming the builder


def _typed_inputs(ref: str, typed: dict | None) -> tuple[object, dict]:
    """The node types of ``typed`` (``typed_args``'s record) and the builder's typed arguments by name."""
    if typed is None:
        params = inspect.signature(load_builder(ref)).parameters
        needed = [n for n in _typed_params(ref) if params[n].default is inspect.Parameter.empty]
        if needed:
            raise InputError(f"expected a typed graph (node types and relations) for {ref}, whose builder takes "
                             f"{', '.join(needed)} (got a graph of one type): train it on a heterogeneous dataset "
                             f"(docs/data.md, Heterogeneous graphs), or give {', '.join(needed)} defaults")
        return None, {}
    from fullgraph.ops.node_types import NodeTypes

    types = NodeTypes.of_record({"node_types": typed["node_types"]})
    every = {"metadata": (list(types.names), [tuple(r) for r in types.relations]),
             "in_dims": {n: w or typed["hidden"] for n, w in zip(types.names, types.widths)}, "node_types": types}
    return types, {n: every[n] for n in _typed_params(ref)}


@functools.lru_cache(maxsize=None)
def user_spec(ref: str) -> ModelSpec:
    """The spec of a user's model: its builder, and nothing assumed (see the module docstring)."""
    load_builder(ref)  # a missing file or function is reported now, before any graph is read
    return ModelSpec(ref, functools.partial(_build, ref), norm=None, spmm=None, options=(), memory=None,
                     about=f"the model {ref} builds")


def _one_line(e: BaseException) -> str:
    """A user's exception as one line. ``SystemExit`` is caught with the rest: a builder or module that
    calls ``sys.exit`` would otherwise end the run with its status (0 included) and nothing trained."""
    if isinstance(e, SystemExit):
        return f"SystemExit: sys.exit({e.code!r}) was called, which would end the run with nothing trained"
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}" if text else type(e).__name__
