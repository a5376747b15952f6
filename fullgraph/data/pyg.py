"""Conversion to and from PyTorch Geometric's ``Data``.

Why: PyG is the reference most GNN numbers are reported with; converting lets the benchmarks run a
PyG model on exactly our graph, and lets a user bring any PyG dataset in. ``torch_geometric`` is
an optional dependency, imported only inside these functions.

Conventions: ``edge_index`` is ``[2, E]`` with row 0 the source and row 1 the destination (PyG's
``flow="source_to_target"``), which is ``Graph.edges()`` stacked.

:func:`write_pyg` stores a ``Data`` as a native dataset folder (:mod:`fullgraph.data.formats.native`),
so that ``fullgraph train --dataset FOLDER`` trains on any graph PyG can build.

Edge data goes both ways, by PyG's names: ``edge_weight`` (float ``[E]``; ``[E, 1]`` is taken as
``[E]``), ``edge_attr`` (``[E, d]`` features; a 1-D ``edge_attr`` is ``[E, 1]`` features, as PyG's
layers that read ``edge_attr`` view it, never reinterpreted as a weight: a weight is PyG's
``edge_weight``) and ``edge_type`` (integer relations ``0..R-1``, ``R`` from ``data.num_relations``
when set, else the largest type + 1). Each row belongs to the edge of the same column of
``edge_index``; :meth:`Graph.from_edges` puts them in CSR order with their edges (an edge listed
twice has its weights summed, and is refused with features or a type). Integer or boolean
``edge_attr`` and half or double precision values become float32, as ``x`` does. Any other
``edge_*`` tensor (``edge_time``, ...) is refused in one line, not dropped: a ``Graph`` cannot hold
it, and a model silently trained without it would be another model than the user's. ``edge_label``
(with ``edge_label_index``, or one per column of ``edge_index``) is what an edge task learns, no layer's
input: :func:`write_pyg` keeps it beside the folder as its labelled edges (``data.edge_sources``).
"""

from __future__ import annotations

import torch

from fullgraph.data.graph import Graph
from fullgraph.data import pyg_fields
from fullgraph.data.typed.pyg import graph_from_hetero, graph_to_hetero, is_hetero
from fullgraph.data.splits import per_class_split
from fullgraph.errors import InputError

__all__ = ["to_pyg", "from_pyg", "pyg_graph", "write_pyg", "graph_from_hetero", "graph_to_hetero"]


def _pyg_data_class():
    try:
        from torch_geometric.data import Data
    except ImportError:
        raise InputError(
            "expected torch_geometric to be installed for PyG conversion (pip install torch_geometric)"
        ) from None
    return Data


def to_pyg(graph: Graph, *, dense_x: bool = True):
    """A ``torch_geometric.data.Data`` with the graph's edges, features, labels and masks.

    ``dense_x``: PyG layers expect dense features, so sparse ones are densified unless this is False.
    """
    Data = _pyg_data_class()
    src, dst = graph.edges()
    x = graph.dense_x() if dense_x else graph.x
    edge = graph.edge_fields()  # edge_weight, edge_attr, edge_type, num_relations (CSR order)
    return Data(
        x=x, edge_index=torch.stack([src, dst]), y=graph.y, train_mask=graph.train_mask,
        val_mask=graph.val_mask, test_mask=graph.test_mask, num_nodes=graph.num_nodes, name=graph.name, **edge,
    )


CARRIED = ("edge_weight", "edge_attr", "edge_type")
"""The edge tensors of a PyG ``Data`` that a ``Graph`` holds (module doc)."""
EDGE_LABEL = ("edge_label", "edge_label_index")
"""The edge tensors of a PyG ``Data`` that name labelled edges (:func:`take_edge_labels`)."""


def _edge_data(data) -> list[str]:
    """The names of the edge tensors on ``data`` besides ``edge_index`` (``edge_weight``, ``edge_attr``,
    ``edge_type``, ...) that are set."""
    keys = getattr(data, "keys", None)
    names = keys() if callable(keys) else CARRIED
    return sorted(k for k in names
                  if k.startswith("edge_") and k != "edge_index" and getattr(data, k, None) is not None)


def check_no_edge_data(data) -> None:
    """Refuse the edge tensors a ``Graph`` cannot hold (any ``edge_*`` but :data:`CARRIED`) in one
    line (what, why, what to do), rather than drop them silently."""
    found = [k for k in _edge_data(data) if k not in CARRIED]
    if "edge_label" in found:
        raise InputError("expected no edge_label on the PyG Data given to train on directly (got one): write it "
                         "with fullgraph.data.pyg.write_pyg(data, folder), which keeps it as the folder's labelled "
                         "edges, and train --task edge on the folder")
    if found:
        drop = "; ".join(f"data.{k} = None" for k in found)
        raise InputError(f"expected no edge data on the PyG Data but {', '.join(CARRIED)} (got {', '.join(found)}): "
                         f"fullgraph's graphs carry only those, so the others cannot be kept; to train without "
                         f"them, drop them first ({drop}), knowing the model will not see them")


def _edge_fields(data, e: int) -> dict:
    """``edge_weight``, ``edge_attr``, ``edge_type`` (and ``num_relations``) of ``data`` as
    :meth:`Graph.from_edges` takes them, checked against the ``e`` columns of ``edge_index``."""
    out = {}
    for name in CARRIED:
        t = getattr(data, name, None)
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise InputError(f"expected data.{name} to be a torch tensor (got {type(t).__name__})")
        if t.shape[:1] != (e,):
            raise InputError(f"expected data.{name} to have one row per column of edge_index, {e} rows "
                             f"(got shape {list(t.shape)})")
        if t.layout != torch.strided:
            t = t.to_dense()
        if name == "edge_weight":
            if t.dim() == 2 and t.shape[1] == 1:
                t = t[:, 0]
            if t.dim() != 1:
                raise InputError(f"expected data.edge_weight of shape [{e}] (got {list(t.shape)}; features of "
                                 f"several columns go in data.edge_attr)")
            t = t.to(torch.float32)
        elif name == "edge_attr":
            if t.dim() == 1:  # as PyG's layers read it: one feature per edge
                t = t.unsqueeze(1)
            if t.dim() != 2:
                raise InputError(f"expected data.edge_attr of shape [{e}, d] (got {list(t.shape)})")
            t = t.to(torch.float32)
        else:
            if t.dim() == 2 and t.shape[1] == 1:
                t = t[:, 0]
            if t.dim() != 1 or t.is_floating_point() or t.is_complex():
                raise InputError(f"expected data.edge_type to be integer relation ids of shape [{e}] "
                                 f"(got {t.dtype} of shape {list(t.shape)})")
            t = t.to(torch.int64)
        out[name] = t.contiguous()
    r = getattr(data, "num_relations", None)
    if "edge_type" in out and r is not None:
        out["num_relations"] = int(r)
    return out


def from_pyg(data, name: str | None = None, *, split: int = 0, seed: int | None = None) -> Graph:
    """A ``Graph`` from a PyG ``Data`` (edges kept as given: no symmetrization).

    Masks of shape ``[N, S]`` pick column ``split``. Without masks, ``seed`` draws the per-class
    split of :func:`fullgraph.data.splits.per_class_split`; with neither, this is an error. Edge
    data ``edge_weight``, ``edge_attr`` and ``edge_type`` is carried, any other ``edge_*`` tensor
    refused (:func:`check_no_edge_data`: see the module docstring).

    A ``HeteroData`` becomes a typed graph (:func:`fullgraph.data.typed.pyg.graph_from_hetero`, its
    defaults: no reverse relations added; its masks required, ``seed`` unused).
    """
    if is_hetero(data):
        return graph_from_hetero(data, name=name, split=split)
    check_no_edge_data(data)
    edge_index = getattr(data, "edge_index", None)
    if not isinstance(edge_index, torch.Tensor) or edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise InputError(
            f"expected 'edge_index' of shape [2, E] on the PyG data (got {getattr(edge_index, 'shape', None)})"
        )
    n = int(data.num_nodes)
    x, y = pyg_fields.features(getattr(data, "x", None)), pyg_fields.labels(getattr(data, "y", None), n)
    masks = [pyg_fields.mask(data, k, split) for k in ("train_mask", "val_mask", "test_mask")]
    if any(m is None for m in masks):
        if seed is None:
            raise InputError(
                "expected train_mask, val_mask and test_mask on the PyG data, or a seed for a per-class split"
            )
        masks = list(per_class_split(y, seed=seed))
    edge = _edge_fields(data, edge_index.shape[1])
    fields = dict(x=x, y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2],
                  name=name or getattr(data, "name", None) or "pyg")
    if "num_relations" in edge:  # a field of the Graph, not of from_edges' edge data
        fields["num_relations"] = edge.pop("num_relations")
    return Graph.from_edges(edge_index[0], edge_index[1], n, **edge, **fields)


def write_pyg(data, out_dir, name: str | None = None, *, split: int = 0, seed: int | None = None,
              preprocess: bool = True, feature_norm: str = "none", **options) -> dict:
    """Write a PyG ``Data`` or ``HeteroData`` as a native dataset folder at ``out_dir``; returns what
    :func:`fullgraph.data.formats.native.write_native` returns (its meta.json and ``total_bytes``). A
    ``HeteroData`` is stored as the typed graph ``graph_from_hetero`` reads (its node types in meta.json).

    The graph is read by :func:`from_pyg` (``split``, ``seed`` as there). ``preprocess``: store it
    symmetrized, deduplicated and without self loops, as every named dataset is loaded, so that
    training reads the folder as stored; with ``False`` the edges are stored as given, and
    ``fullgraph train --dataset FOLDER`` preprocesses them on each load instead. ``feature_norm``:
    what ``--feature-norm auto`` means for it (``row`` for bag-of-words features like Planetoid's).
    Other ``options`` go to ``write_native`` (``source``, ``block_bytes``).
    """
    from fullgraph.data.edge_sources import write_labelled_edges
    from fullgraph.data.formats.native import write_native

    data, edges = take_edge_labels(data)
    graph = pyg_graph(data, name, split=split, seed=seed, preprocess=preprocess)
    meta = write_native(graph, out_dir, preprocessed=True if preprocess else None, feature_norm=feature_norm,
                        **options)
    if edges is not None:
        write_labelled_edges(edges, out_dir)
    return meta


def take_edge_labels(data):
    """``(data without its edge labels, LabelledEdges | None)``: PyG's ``edge_label`` ([M], or [M, 1]) of the pairs
    ``edge_label_index`` ([2, M]), or without it of the columns of ``edge_index`` (whose ``edge_attr`` rows are then
    the edges' features), as :func:`write_pyg` keeps them (``data.edge_sources``); the ``Data`` given is
    not changed."""
    import copy

    import numpy as np

    from fullgraph.data.edge_sources import LabelledEdges

    label = getattr(data, "edge_label", None)
    if is_hetero(data) or label is None:
        return data, None
    index = getattr(data, "edge_label_index", None)
    pairs = data.edge_index if index is None else index
    if not isinstance(label, torch.Tensor) or not isinstance(pairs, torch.Tensor) or pairs.dim() != 2 \
            or pairs.shape[0] != 2 or label.reshape(label.shape[0], -1).shape != (pairs.shape[1], 1):
        raise InputError(f"expected data.edge_label of shape [M] beside {'edge_index' if index is None else 'edge_label_index'} "
                         f"[2, M] (got {list(getattr(label, 'shape', []))} and {list(getattr(pairs, 'shape', []))})")
    x = getattr(data, "edge_attr", None) if index is None else None
    if x is not None:
        x = (x.unsqueeze(1) if x.dim() == 1 else x).float().numpy()
    rest = copy.copy(data)
    for key in EDGE_LABEL:
        if getattr(rest, key, None) is not None:
            delattr(rest, key)
    return rest, LabelledEdges(pairs.T.long().numpy().copy(), label.reshape(-1).double().numpy(), "data.edge_label",
                               None if x is None else np.ascontiguousarray(x))


def pyg_graph(data, name: str | None = None, *, split: int = 0, seed: int | None = None,
              preprocess: bool = True) -> Graph:
    """The ``Graph`` :func:`write_pyg` writes for ``data`` (same arguments): :func:`from_pyg`, then the
    standard preprocessing where ``preprocess``. ``fullgraph.train_model(data=...)`` trains on it, so
    that a ``Data`` given in memory trains exactly as its folder would."""
    graph = from_pyg(data, name, split=split, seed=seed)
    if preprocess:
        from fullgraph.data.datasets import preprocess as standard

        graph = standard(graph)
    return graph
