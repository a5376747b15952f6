"""PyG's heterogeneous models: which of them fullgraph trains, and one line for the others.

PyG runs a heterogeneous graph per relation: ``to_hetero(model, metadata)`` (and
``to_hetero_with_bases``) rewrites a model into a ``torch.fx.GraphModule`` that holds a copy of each
layer per node or edge type and takes dicts (``x_dict``, ``edge_index_dict``); ``HeteroConv`` runs one
conv per relation on such dicts and sums per destination type; ``HGTConv``, ``HANConv``,
``HeteroDictLinear`` take them too. fullgraph trains a heterogeneous graph as *one typed graph*
(``ops.node_types``, ``data.typed``): one feature matrix (each type's features in a column block of
their own), one block whose entries carry their relation (``Block.edge_type``), split across
processes by rows.

A list of layers in PyG's per-relation form — ``HeteroConv``, ``HGTConv``, a ``to_hetero`` module of one
layer — runs on that typed graph unchanged (``models.pyg_hetero_layer`` feeds each its dicts), given the
graph's node types: a builder on a typed graph (``--model FILE.py:build``), ``from_pyg(layers,
node_types=graph.node_types)``, or ``train_model(model=layers)``, which adapts them once the graph is read
(``train.run_model``); so does a whole ``to_hetero`` model, cut into its layers (``models.pyg_hetero_split``),
and, in one process only, a whole model on dicts that is no chain of layers (a skip across a layer, a module
of the user's own whose ``forward`` takes ``x_dict``). What is refused here, in one line
that says what to do instead: such a module where no node types are known (``as_gnn``, ``from_pyg``
without them), and PyG's modules that do not fit (``HANConv`` needs metapaths; ``HeteroDictLinear`` and
``HeteroJumpingKnowledge`` are not layers).

A fullgraph ``GNN`` is never searched: its layers see the typed block and may split it by
relation themselves, using whatever modules they like.
"""

from __future__ import annotations

import inspect
import typing

from torch import nn

from fullgraph.errors import InputError
from fullgraph.models.base import GNN

__all__ = ["HOW_TO_WRITE_TYPED", "hetero_part", "check_not_hetero", "hetero_layers", "check_hetero_layers"]

HOW_TO_WRITE_TYPED = (
    "fullgraph trains PyG's heterogeneous modules (HeteroConv, HGTConv, to_hetero of one layer) as a list of "
    "layers on a typed graph: return the list from a builder, build(in_dim, out_dim, metadata, in_dims), named "
    "by --model FILE.py:build, or call from_pyg(layers, node_types=graph.node_types); or write the model with "
    "convolutions that take edge_type (RGCNConv, FastRGCNConv), or use --model rgcn or --model hgt "
    "(docs/your-model.md, Heterogeneous graphs with your own model)")
"""What every refusal ends with."""

_LAYERS = ("HeteroConv", "HGTConv")
"""PyG's heterogeneous modules that are one layer each (with ``to_hetero``'s modules of one layer)."""

_PYG_HETERO = ("HeteroConv", "HGTConv", "HANConv", "HeteroDictLinear", "HeteroJumpingKnowledge")
"""PyG's modules (``torch_geometric.nn``) that run on dicts of per-type or per-relation tensors, where
this PyG has them; a user's module whose ``forward`` takes ``x_dict`` is found by its signature, and
``to_hetero``'s models by their fx graph's dict inputs."""


def _pyg_hetero_classes() -> tuple[type, ...]:
    try:
        import torch_geometric.nn as pyg_nn
    except ImportError:
        return ()
    return tuple(c for c in (getattr(pyg_nn, n, None) for n in _PYG_HETERO) if isinstance(c, type))


def _dict_placeholders(module) -> list[str]:
    """The inputs of an fx ``GraphModule`` typed as dicts: ``to_hetero``'s ``x``, ``edge_index``, ..."""
    import torch.fx

    if not isinstance(module, torch.fx.GraphModule):
        return []
    nodes = list(module.graph.nodes)
    placeholders = [n.name for n in nodes if n.op == "placeholder"]
    if any(n.op == "call_function" and getattr(n.target, "__name__", "") == "get_dict" for n in nodes):
        return placeholders  # to_hetero's graph reads every input as a dict (its get_dict), annotated or not
    return [n.name for n in nodes if n.op == "placeholder" and typing.get_origin(n.type) in (dict, typing.Dict)]


def _takes_dicts(module) -> bool:
    """Whether the module's ``forward`` takes a dict first (``x_dict``, ``xs_dict``, ``args_dict``)."""
    try:
        params = [p for p in inspect.signature(type(module).forward).parameters.values()][1:]
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0].name.endswith("_dict")


def _in_module(module: nn.Module, classes: tuple[type, ...]) -> str | None:
    """What in ``module``'s tree runs per type or relation, said in a few words, or None."""
    for name, sub in module.named_modules():
        where = f" at {name}" if name else ""
        placeholders = _dict_placeholders(sub)
        if placeholders:
            return (f"a to_hetero model{where}: a torch.fx GraphModule on dicts {', '.join(placeholders[:2])}, "
                    f"a copy of each layer per node or edge type")
        if isinstance(sub, classes) or _takes_dicts(sub):
            return f"{type(sub).__name__}{where}, which runs on dicts of per-type tensors"
    return None


def hetero_part(obj) -> str | None:
    """What in ``obj`` — a module, or a list, tuple or dict of them — is one of PyG's heterogeneous
    forms (module docstring), in a few words for a refusal; ``None`` where there is none. A fullgraph
    ``GNN`` is not searched."""
    if isinstance(obj, GNN):
        return None
    if isinstance(obj, (dict, nn.ModuleDict)):
        keys = [k for k in obj if isinstance(k, tuple) or (isinstance(k, str) and "__" in k)]
        if keys:
            return f"a dict of modules per relation ({', '.join(map(str, keys[:2]))}, ...)"
        items = list(obj.values())
    elif isinstance(obj, (list, tuple, nn.ModuleList, nn.Sequential)):
        items = list(obj)
    else:
        items = [obj]
    classes = _pyg_hetero_classes()
    for i, item in enumerate(items):
        if isinstance(item, nn.Module) and not isinstance(item, GNN):
            found = _in_module(item, classes)
            if found:
                return found if len(items) == 1 else f"{found}, in item {i}"
    return None


def check_not_hetero(obj, expected: str = "a model over one typed graph") -> None:
    """Refuse, in one line, a model in PyG's per-relation form (``to_hetero``, ``HeteroConv``, ...);
    ``expected`` begins the message (``user`` names the builder there)."""
    found = hetero_part(obj)
    if found:
        raise InputError(f"expected {expected} (got {found}): {HOW_TO_WRITE_TYPED}")


def _layer_kind(module) -> str | None:
    """``None`` where ``module`` is one of the modules fullgraph runs (module docstring: a layer, or a whole
    model on dicts, which ``PyGHeteroModel.whole_graph`` keeps to one process), else what it is."""
    classes = _pyg_hetero_classes()
    if isinstance(module, classes) and type(module).__name__ in _LAYERS:
        return None
    if type(module).__name__ == "HANConv":
        return "HANConv, which needs metapaths: add the metapaths' relations to the graph and use HGTConv or HeteroConv"
    if _dict_placeholders(module) or (_takes_dicts(module) and not isinstance(module, classes)):
        return None
    return f"{type(module).__name__}, which is not a layer: pass layers (HeteroConv, HGTConv) as a list"


def hetero_layers(obj) -> list | None:
    """``obj`` as a list of modules where it holds PyG's heterogeneous forms (``hetero_part``), else ``None``."""
    if hetero_part(obj) is None:
        return None
    return list(obj) if isinstance(obj, (list, tuple, nn.ModuleList, nn.Sequential)) else [obj]


def check_hetero_layers(modules: list, expected: str = "a list of PyG's heterogeneous layers") -> None:
    """Refuse, in one line, a module of the list that is not one of the layers fullgraph runs."""
    for i, module in enumerate(modules):
        if hetero_part(module) is not None:
            kind = _layer_kind(module)
            if kind is not None:
                raise InputError(f"expected {expected} (got {kind}, item {i}): {HOW_TO_WRITE_TYPED}")

