"""Conversion to and from PyTorch Geometric's ``HeteroData``, as typed homogeneous graphs.

Why: PyG is where most heterogeneous datasets and models live (OGB's ogbn-mag, DBLP, IMDB; HGT,
``to_hetero``). Converting lets a user bring any ``HeteroData`` in as one typed ``Graph``
(:mod:`fullgraph.ops.node_types`: ids contiguous per type, one relation per edge), and lets a PyG
model run on exactly our graph. ``torch_geometric`` is imported only where a ``HeteroData`` is built.

Reading (:func:`graph_from_hetero`) goes through :func:`fullgraph.data.typed.typed_graph`, the one
path every heterogeneous reader takes, so its checks and numbering are the same ones: node types
in ``data.node_types`` order, relations in ``data.edge_types`` order, ``edge_index`` in each type's
own ids. ``reverse`` is off by default, unlike ``typed_graph``'s: a PyG user usually has applied
``T.ToUndirected()`` already (which adds exactly the ``rev_<name>`` relations and in-place symmetric
relations ``typed_graph(reverse=True)`` would), and adding them again would give ``rev_rev_``
relations. Pass ``reverse=True`` for raw, directed data instead of ``ToUndirected``.

Writing (:func:`graph_to_hetero`) gives every relation of the graph, the ``rev_`` ones included,
as a plain edge type, so that reading it back with ``reverse=False`` reproduces the graph exactly
(same fingerprint). Features come as each type's column block: dense where the graph stores them
dense, else a torch sparse CSR tensor, which PyG's ``Linear`` (the per-type input projection of
``HGTConv``, ``to_hetero`` models, ``HeteroDictLinear``) multiplies as is; message-passing layers
that index ``x`` need it dense (``dense_x=True``, or ``x.to_dense()``).

Edge data per relation (``edge_attr``, ``edge_weight``, any ``edge_*``) is refused in one line, not
dropped: typed graphs do not carry it yet.
"""

from __future__ import annotations

import sys

import torch

from fullgraph.data import pyg_fields
from fullgraph.errors import InputError

__all__ = ["graph_from_hetero", "graph_to_hetero", "is_hetero"]

SPLITS = ("train_mask", "val_mask", "test_mask")


def is_hetero(data) -> bool:
    """Whether ``data`` is a PyG ``HeteroData`` (without importing PyG where nobody did: a caller
    that holds one has imported it)."""
    module = sys.modules.get("torch_geometric.data")
    return module is not None and isinstance(data, module.HeteroData)


def _hetero_class():
    try:
        from torch_geometric.data import HeteroData
    except ImportError:
        raise InputError("expected torch_geometric to be installed for HeteroData conversion "
                         "(pip install torch_geometric)") from None
    return HeteroData


# ------------------------------------------------------------------------------------ reading
def _count(data, t: str) -> int:
    n = data[t].num_nodes
    if n is None:
        raise InputError(f"expected a node count for node type {t!r} of the HeteroData (got none: set "
                         f"data[{t!r}].num_nodes, or give it features x)")
    return int(n)


def _type_features(store, t: str):
    """Type ``t``'s features (float32, dense or sparse CSR), or ``None`` where it has no ``x``."""
    x = store["x"] if "x" in store else None
    if x is None:
        return None
    if not isinstance(x, torch.Tensor):
        raise InputError(f"expected the features x of node type {t!r} to be a torch tensor (got "
                         f"{type(x).__name__})")
    return pyg_fields.features(x)


def _relation_edges(data) -> dict:
    """``{(src type, name, dst type): (src ids, dst ids)}``, type-local ids as PyG keeps them; any edge
    tensor besides ``edge_index`` refused in one line (module doc)."""
    edges = {}
    for key in data.edge_types:
        store = data[key]
        other = sorted(k for k in store.keys() if k != "edge_index")
        if other:
            raise InputError(f"expected only edge_index on relation {'__'.join(key)} of the HeteroData (got "
                             f"{', '.join(other)}): edge data is not supported for typed graphs yet; to "
                             f"train without it, delete it first (del data[{key!r}].{other[0]})")
        ei = store["edge_index"] if "edge_index" in store else None
        if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.shape[0] != 2:
            raise InputError(f"expected edge_index of shape [2, E] on relation {'__'.join(key)} of the HeteroData "
                             f"(got {getattr(ei, 'shape', type(ei).__name__)})")
        edges[tuple(key)] = (ei[0], ei[1])
    return edges


def _label_type(data, label_type: str | None) -> str:
    """The one node type with labels ``y``: ``label_type`` where given, else the only one that has them."""
    with_y = [t for t in data.node_types if "y" in data[t]]
    if label_type is not None:
        if label_type not in with_y:
            raise InputError(f"expected labels y on label_type {label_type!r} (got y on "
                             f"{', '.join(with_y) or 'no node type'})")
        return label_type
    if len(with_y) != 1:
        got = ", ".join(with_y) if with_y else "none"
        raise InputError(f"expected labels y on exactly one node type of the HeteroData, or label_type= naming "
                         f"the one to train on (got y on {got})")
    return with_y[0]


def _splits(store, t: str, n: int, split: int) -> dict:
    """The labelled type's ``train``/``val``/``test`` ids from its boolean masks (``[n, S]``: column
    ``split``, as :func:`fullgraph.data.pyg.from_pyg` reads them)."""
    missing = [k for k in SPLITS if k not in store]
    if missing:
        raise InputError(f"expected {', '.join(SPLITS)} on the labelled node type {t!r} (got no "
                         f"{', '.join(missing)}): set them, e.g. with torch_geometric.transforms.RandomNodeSplit")
    out = {}
    for key in SPLITS:
        m = pyg_fields.mask(store, key, split)
        if m.shape != (n,):
            raise InputError(f"expected {key} of node type {t!r} of shape [{n}] (got {list(m.shape)})")
        out[key.removesuffix("_mask")] = m.nonzero()[:, 0]
    return out


def graph_from_hetero(data, *, label_type: str | None = None, name: str | None = None, reverse: bool = False,
                      split: int = 0):
    """One typed ``Graph`` from a PyG ``HeteroData``.

    Args:
        data: node types with ``num_nodes`` (or ``x``), optional features ``x`` (dense or torch sparse;
            a type without ``x`` is featureless), relations with ``edge_index`` in type-local ids.
        label_type: the node type whose ``y`` and ``train_mask``/``val_mask``/``test_mask`` train;
            by default the one type that has ``y`` (several: an error that asks for this).
        name: the graph's name (default: ``data.name`` where set, else ``"graph"``).
        reverse: add reverse relations as ``typed_graph`` does; off, since PyG users apply
            ``T.ToUndirected()`` themselves (module doc).
        split: the column of ``[n, S]`` masks to use.
    """
    from fullgraph.data.typed import typed_graph

    if not is_hetero(data):
        raise InputError(f"expected a torch_geometric HeteroData (got {type(data).__name__})")
    counts = {t: _count(data, t) for t in data.node_types}
    features = {t: f for t in data.node_types if (f := _type_features(data[t], t)) is not None}
    edges = _relation_edges(data)
    lt = _label_type(data, label_type)
    if not isinstance(data[lt]["y"], torch.Tensor):
        raise InputError(f"expected labels y of node type {lt!r} to be a torch tensor (got "
                         f"{type(data[lt]['y']).__name__})")
    y = pyg_fields.labels(data[lt]["y"], counts[lt])
    splits = _splits(data[lt], lt, counts[lt], split)
    num_classes = _global(data, "num_classes")
    return typed_graph(counts, features, edges, (lt, y), splits, name=str(name or _global(data, "name") or "graph"),
                       num_classes=int(num_classes) if num_classes is not None else None, reverse=reverse)


def _global(data, key: str):
    """A graph-level attribute of ``data`` (``name``, ``num_classes``), or ``None``: ``HeteroData``
    reads ``data.key`` from its global store and raises ``AttributeError`` where it is unset."""
    return getattr(data, key, None)


# ------------------------------------------------------------------------------------ writing
def _block(x: torch.Tensor, lo: int, hi: int, c0: int, c1: int, dense: bool) -> torch.Tensor:
    """Rows ``lo..hi-1`` and columns ``c0..c1-1`` of ``x``: a type's features. A sparse CSR ``x``
    gives a sparse CSR block (its rows hold values in their type's columns only: ``check_node_types``)."""
    if x.layout != torch.sparse_csr:
        return x[lo:hi, c0:c1].contiguous()
    crow = x.crow_indices()[lo : hi + 1]
    a, b = int(crow[0]), int(crow[-1])
    block = torch.sparse_csr_tensor(crow - a, x.col_indices()[a:b] - c0, x.values()[a:b], size=(hi - lo, c1 - c0),
                                    check_invariants=False)  # the graph's were checked, and a row slice keeps them
    return block.to_dense() if dense else block


def _hetero_edges(graph, types) -> list[tuple[tuple[str, str, str], torch.Tensor]]:
    """Each relation's ``edge_index`` in type-local ids, in relation-id order (edges in CSR order)."""
    if graph.edge_type is None:
        if graph.num_edges:
            raise InputError(f"expected edge types on a typed graph with edges (got {graph.num_edges} edges and no "
                             f"relations): a HeteroData keys every edge by its relation")
        return []
    src, dst = graph.edges()
    out = []
    for r, (s, rel, d) in enumerate(types.relations):
        sel = graph.edge_type == r
        ei = torch.stack([src[sel] - types.offsets[types.index(s)], dst[sel] - types.offsets[types.index(d)]])
        out.append(((s, rel, d), ei))
    return out


def graph_to_hetero(graph, *, dense_x: bool = False):
    """A PyG ``HeteroData`` of a typed graph, the inverse of :func:`graph_from_hetero` (module doc).

    Per node type: ``num_nodes``, ``x`` (its column block; none for a featureless type), and on the
    labelled types ``y`` and the three masks; per relation (the ``rev_`` ones included), ``edge_index``
    in type-local ids; ``name`` and ``num_classes`` on the graph. ``dense_x``: densify sparse features
    (module doc: which PyG layers take them sparse).
    """
    if graph.node_types is None:
        raise InputError(f"expected a typed graph (with node_types) to convert to a HeteroData (got graph "
                         f"{graph.name!r} of one type: fullgraph.data.pyg.to_pyg converts it to a Data)")
    HeteroData = _hetero_class()
    types = graph.node_types
    data = HeteroData()
    for t, name in enumerate(types.names):
        lo, hi = types.offsets[t], types.offsets[t + 1]
        store = data[name]
        store.num_nodes = hi - lo
        if types.widths[t]:
            store.x = _block(graph.x, lo, hi, types.column_offsets[t], types.column_offsets[t + 1], dense_x)
        if name in types.labelled:
            store.y = graph.y[lo:hi]
            for key in ("train_mask", "val_mask", "test_mask"):
                store[key] = getattr(graph, key)[lo:hi]
    for key, ei in _hetero_edges(graph, types):
        data[key].edge_index = ei
    data.name = graph.name
    data.num_classes = graph.num_classes
    return data
