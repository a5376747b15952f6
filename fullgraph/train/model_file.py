"""``RUN/model.pt``: the trained model as one single-process state dict, whatever layout trained it.

The file is a plain dict of tensors, strings and numbers, written by ``torch.save`` and read with
``weights_only=True``, so loading one never runs code from it. Beside the weights it holds what is
needed to rebuild the model (``build_model``'s arguments), the graph it was trained on (name,
feature width, classes, nodes) and the run's options and selected metrics. A file is refused, with
what differs, when it is not a fullgraph model, or when the graph it is applied to has another
feature width or class count.
"""

from __future__ import annotations

from pathlib import Path

import torch

from fullgraph.errors import InputError
from fullgraph.options import PAIR_TASKS
from fullgraph.train.disk import writing

__all__ = ["FORMAT", "MODEL_FILE", "model_args", "save_model", "load_model", "check_graph", "embedding_hook"]

FORMAT = "fullgraph-model/1"
MODEL_FILE = "model.pt"


def model_args(cfg, in_dim: int, num_classes: int, edge_dim: int | None = None, node_types=None) -> dict:
    """``build_model``'s arguments for the model ``cfg`` trains (one source for trainer and loader);
    ``edge_dim``: the width of the graph's edge features, for a built-in model that reads them;
    ``node_types``: the graph's ``NodeTypes``, for a built-in model that maps each type itself (as a
    JSON record: ``model.pt`` keeps it, and loading it runs no code)."""
    from fullgraph.models import is_reference, model_spec

    m = cfg.model
    if is_reference(m.name):  # a user's builder: its reference, its keywords and a typed graph's types
        from fullgraph.models.user import typed_args

        typed = typed_args(node_types, m.hidden, m.featureless)
        return dict(name=m.name, in_dim=in_dim, out_dim=num_classes, model_args=dict(m.args)) | (
            {"typed": typed} if typed else {})
    spec = model_spec(m.name)
    edge = {"edge_dim": edge_dim} if edge_dim and spec.reads_edge_features else {}
    if node_types is not None and spec.reads_node_types:
        edge["node_types"] = node_types.record()["node_types"]
    return dict(name=m.name, in_dim=in_dim, out_dim=num_classes) | {k: getattr(m, k) for k in spec.options} | edge


def save_model(path: str | Path, *, state: dict, args: dict, graph: dict, config: dict, metrics: dict) -> None:
    """Write the file atomically (a temporary name, then a rename)."""
    path = Path(path)
    obj = {"format": FORMAT, "model_args": args, "graph": graph, "config": config, "metrics": metrics,
           "state_dict": {k: v.detach().cpu().contiguous() for k, v in state.items()}}
    tmp = path.with_name(path.name + ".tmp")
    with writing(path, run=path.parent, partial=[tmp]):
        torch.save(obj, tmp)
        tmp.replace(path)


def load_model(path: str | Path, device="cpu"):
    """The model of a ``model.pt`` (in eval mode) and the file's dict (without the weights)."""
    from fullgraph.models import build_model

    path = Path(path)
    if path.is_dir():
        path = path / MODEL_FILE
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise InputError(f"expected a trained model at {path} (a run writes it when it has --out)") from None
    except Exception as err:  # noqa: BLE001 - a foreign or damaged file, whatever torch says of it
        raise InputError(f"expected a fullgraph model file at {path} ({type(err).__name__}: "
                         f"{str(err).splitlines()[0][:200]})") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise InputError(f"expected a fullgraph model file ({FORMAT}) at {path} (got "
                         f"{obj.get('format') if isinstance(obj, dict) else type(obj).__name__!r})")
    args = dict(obj["model_args"])
    name = args.pop("name")
    if name.startswith("<"):
        raise InputError(f"expected a model fullgraph can rebuild in {path} (got one trained from a Python object, "
                         f"{name}): build it again and load the file's 'state_dict' (torch.load(path, "
                         f"weights_only=True)), or train it by its builder")
    out_dim = args.pop("out_dim")
    model = build_model(name, args.pop("in_dim"), out_dim, **args)
    config = obj.get("config") or {}
    if config.get("task") in PAIR_TASKS:  # the decoder's weights are the model's too (``tasks.decoders``)
        from fullgraph.tasks.decoders import attach_decoder

        rel = obj["state_dict"].get("decoder.relation")  # typed links: the relation count the decoder was built for
        types = args.get("node_types") or {}
        relations = int(rel.shape[0]) if rel is not None else len(types.get("relations", ())) or None
        facts = obj.get("graph") or {}  # an edge task's outputs (a logit per class, or one number), edge features
        bias = obj["state_dict"].get("decoder.out.bias")  # (a file written before the facts: the MLP's own count)
        outputs = facts.get("edge_outputs", bias.numel() if bias is not None else None)
        attach_decoder(model, config.get("decoder", "dot"), out_dim, relations,
                       None if config["task"] == "link" else outputs, facts.get("edge_features", 0))
    try:
        model.load_state_dict(obj["state_dict"])
    except RuntimeError as err:
        detail = " ".join(line.strip() for line in str(err).splitlines()[1:])[:300]
        raise InputError(f"expected the weights in {path} to fit model {name} as saved ({detail}; the file was "
                         f"edited or written by another version)") from None
    info = {k: v for k, v in obj.items() if k != "state_dict"}
    return model.to(device).eval(), info


def check_graph(info: dict, num_features: int, num_classes: int, name: str, where) -> None:
    """Refuse to apply a model to a graph of another feature width or class count."""
    want = info["graph"]
    differ = []
    if want["features"] != num_features:
        differ.append(f"{want['features']} features, {name} has {num_features}")
    if want["classes"] != num_classes:
        differ.append(f"{want['classes']} classes, {name} has {num_classes}")
    if differ:
        raise InputError(f"expected a graph like the one {where} was trained on ({want['name']}: "
                         + "; ".join(differ) + ")")


def embedding_hook(model, store: list):
    """Register a hook that appends the last hidden representation to ``store``: the input of the
    module that maps to classes (the last graph layer, or a dense output map for GCNII and
    ResGCN+). Returns the hook's handle."""
    if model.post_modules:
        return getattr(model, model.post_modules[-1]).register_forward_pre_hook(
            lambda mod, args: store.append(args[0].detach()))
    return model.layers[-1].register_forward_pre_hook(lambda mod, args: store.append(args[1].detach()))
