"""A whole ``to_hetero`` model cut into its layers, so that every layout trains it.

``to_hetero(model, metadata)`` traces a model of several convs into one ``torch.fx`` graph on dicts: per
relation a copy of each conv, per node type a copy of each node-wise step (``relu``, a ``Linear``, a
residual sum). Run whole it reads the whole graph, so only one process could train it
(``PyGHeteroModel.whole_graph``). Cut at its convs it is a list of one-hop modules on dicts, which
:class:`~fullgraph.models.pyg_hetero_layer.PyGHeteroLayer` feeds from any block, as it feeds
``HeteroConv``:

* each graph node's *stage* is the number of convs on the longest path into it (a conv counts itself);
  stage ``k`` is the ``k``-th conv of every relation and the node-wise steps after it, up to the next
  conv (the steps before the first conv go with it: node-wise, they give the same rows on a part);
* between stages ``k`` and ``k + 1`` one tensor per node type may pass: stage ``k + 1`` reads it from
  its input dict as the first stage reads ``x``, and stage ``k`` returns it in a dict by type;
* the model's own output (its dict, or the labelled type's rows) is the last stage's.

Where the graph is not such a chain — a later conv that reads rows from before the previous conv (a skip
across a layer, ``torch.cat`` of every layer's output as jumping knowledge does), or two tensors of one
type passing a cut — :func:`split_to_hetero` returns ``None`` and the model stays whole, in one process.
The stages are ``GraphModule``\\ s over the same submodules: the parameters are the model's own.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["split_to_hetero"]


def split_to_hetero(module: nn.Module, node_types: tuple[str, ...]) -> list[nn.Module] | None:
    """``module``'s stages (module docstring) where it is a ``to_hetero`` graph of more than one conv that
    cuts into a chain, else ``None``. ``node_types``: the graph's, which name ``to_hetero``'s per-type copies."""
    import torch.fx

    if not isinstance(module, torch.fx.GraphModule):
        return None
    module = _without_trims(module)
    nodes = list(module.graph.nodes)
    plumbing = _plumbing(nodes)
    types = _types(module, nodes, plumbing, set(node_types))
    stage = _stages(module, nodes, plumbing, types)
    if stage is None or max(stage.values(), default=0) < 2:
        return None
    crossing = _crossing(nodes, stage, plumbing, types)
    if crossing is None:
        return None
    return [_stage_module(module, nodes, plumbing, stage, crossing, k, types)
            for k in range(1, max(stage.values()) + 1)]


def _without_trims(module: nn.Module) -> nn.Module:
    """``module`` with PyG's ``TrimToLayer`` steps taken out (``BasicGNN``'s: ``GraphSAGE``, ``GCN``, ...):
    without sampled hop counts, which fullgraph never passes, each returns its ``(x, edge_index, edge_attr)``
    as they came, and its outputs are those inputs. Left in, they would carry a relation's rows and edges
    from one conv to the next, which no cut by node type passes. A new graph; the module's is untouched."""
    import operator

    import torch.fx
    from torch_geometric.utils._trim_to_layer import TrimToLayer

    graph, env = torch.fx.Graph(), {}
    env_out = graph.graph_copy(module.graph, env)
    graph.output(env_out)
    for n in list(graph.nodes):
        if n.op != "call_module" or not isinstance(module.get_submodule(n.target), TrimToLayer):
            continue
        given = list(n.args[3:]) + [n.kwargs.get(k) for k in ("x", "edge_index", "edge_attr")[len(n.args) - 3:]]
        for u in list(n.users):
            if u.op != "call_function" or u.target is not operator.getitem:
                return module
            for reader in list(u.users):
                reader.args = torch.fx.node.map_arg(reader.args, lambda a, u=u: given[u.args[1]] if a is u else a)
                reader.kwargs = torch.fx.node.map_arg(reader.kwargs, lambda a, u=u: given[u.args[1]] if a is u else a)
            graph.erase_node(u)
        graph.erase_node(n)
    return torch.fx.GraphModule(module, graph, class_name=type(module).__name__)


def _plumbing(nodes: list) -> set:
    """The inputs and their unpacking (placeholders, ``get_dict``, ``.get(key)`` on them): copied into
    every stage rather than cut."""
    out = set()
    for n in nodes:
        if n.op == "placeholder":
            out.add(n)
        elif n.op == "call_function" and getattr(n.target, "__name__", "") == "get_dict" and n.args[0] in out:
            out.add(n)
        elif n.op == "call_method" and n.target == "get" and n.args and n.args[0] in out:
            out.add(n)
    return out


def _features(nodes: list, plumbing: set) -> set:
    """The input rows of each type: ``.get(type)`` on the first input's dict (``x``; the others, such as
    ``num_sampled_nodes_dict``, are copied into every stage as they are)."""
    x = next(n for n in nodes if n.op == "placeholder")
    unpacked = {n for n in plumbing if n.op == "call_function" and n.args[0] is x} | {x}
    return {n for n in plumbing if n.op == "call_method" and n.args[0] in unpacked and isinstance(n.args[1], str)}


def _is_conv(module: nn.Module, n) -> bool:
    from torch_geometric.nn.conv import MessagePassing

    return n.op == "call_module" and isinstance(module.get_submodule(n.target), MessagePassing)


def _inputs(n) -> list:
    return list(n.all_input_nodes)


def _types(module: nn.Module, nodes: list, plumbing: set, names: set) -> dict:
    """The node type of each node that holds one type's rows: an input's key, a conv's destination type
    (its copy's key, ``src__rel__dst``), a per-type copy's key, else the one type of its inputs where
    every input has it. Nodes of a relation (``to_hetero``'s per-relation copies of other steps, their
    tuples) and of several types are left out."""
    types, features = {}, _features(nodes, plumbing)
    for n in nodes:
        key = str(n.target).rpartition(".")[2] if n.op == "call_module" else None
        if n in plumbing:
            if n in features:
                types[n] = n.args[1]
        elif n.op == "output":
            continue
        elif _is_conv(module, n):
            types[n] = key.split("__")[-1] if key.count("__") == 2 else None
        elif key in names:
            types[n] = key
        else:
            seen = {types.get(m) for m in _inputs(n)}
            types[n] = seen.pop() if len(seen) == 1 else None
    return {n: t for n, t in types.items() if t is not None}


def _stages(module: nn.Module, nodes: list, plumbing: set, types: dict) -> dict | None:
    """Each node's stage: a conv's is the number of convs on the longest path into it (itself counted); a
    node of one type goes with the conv before it (the first, where none is), and a node of a relation
    with the conv that reads it (its rows are cut for that conv). ``None`` where no such order holds."""
    stage = {}
    for n in nodes:
        if n not in plumbing and n.op != "output":
            before = max((stage.get(m, 0) for m in _inputs(n)), default=0)
            stage[n] = before + 1 if _is_conv(module, n) else before
    last = max(stage.values(), default=0)
    for n in reversed(nodes):  # a relation's steps: as late as their readers allow
        if n in stage and n not in types and not _is_conv(module, n):
            stage[n] = min((stage.get(u, last) for u in n.users), default=last)
    for n in stage:
        stage[n] = max(stage[n], 1)
    if any(stage.get(m, 0) > stage[n] for n in stage for m in _inputs(n)):
        return None
    return stage


def _crossing(nodes: list, stage: dict, plumbing: set, types: dict) -> dict | None:
    """``{k: {type: node}}``: what stage ``k`` hands to stage ``k + 1``; ``None`` where the graph is no chain."""
    crossing: dict = {}
    for n in nodes:
        if n.op == "output":
            continue
        for m in _inputs(n):
            if m in plumbing:
                if n in stage and stage[n] > 1 and m in types:  # the input features read past the first conv
                    return None
                continue
            if stage[m] == stage.get(n, stage[m]):
                continue
            if stage[n] != stage[m] + 1 or types.get(m) is None:
                return None
            given = crossing.setdefault(stage[m], {}).setdefault(types[m], m)
            if given is not m:
                return None
    out = next(n for n in nodes if n.op == "output")
    last = max(stage.values())
    if any(stage[m] != last for m in _inputs(out)):
        return None
    return crossing


def _stage_module(module: nn.Module, nodes: list, plumbing: set, stage: dict, crossing: dict, k: int,
                  types: dict) -> nn.Module:
    """Stage ``k`` as a ``GraphModule`` with the model's inputs: ``x`` is the previous stage's dict from the
    second stage on."""
    import torch.fx

    graph, env = torch.fx.Graph(), {}
    for n in nodes:
        if n in plumbing:
            env[n] = graph.node_copy(n, lambda m: env[m])
    if k > 1:
        gets = {types[n]: env[n] for n in nodes if n in plumbing and n in types}
        for t, m in crossing[k - 1].items():
            env[m] = gets[t]
    for n in nodes:
        if stage.get(n) == k:
            env[n] = graph.node_copy(n, lambda m: env[m])
    out = next(n for n in nodes if n.op == "output")
    if k == max(stage.values()):
        graph.node_copy(out, lambda m: env[m])
    else:
        graph.output({t: env[m] for t, m in crossing[k].items()})
    out = torch.fx.GraphModule(module, graph, class_name=f"ToHeteroLayer{k}")
    out.graph.eliminate_dead_code()  # the unpacking a stage does not read (its inputs stay)
    out.recompile()
    return out
