"""The small checks every data-layer boundary shares: a tensor's description for an error message,
a value taken as a tensor of an expected dtype, and a typed graph's fields against its node types
(below ``data.graph`` and ``data.typed``, which both use it)."""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.errors import InputError
from fullgraph.ops.node_types import NodeTypes

__all__ = ["describe", "as_tensor", "check_node_types"]


def describe(t) -> str:
    if isinstance(t, torch.Tensor):
        layout = "" if t.layout == torch.strided else f" {t.layout}"
        return f"{t.dtype}{layout} tensor of shape {tuple(t.shape)}"
    return type(t).__name__


def as_tensor(name: str, value, dtype: torch.dtype | None = None) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(np.ascontiguousarray(value))
    if not isinstance(value, torch.Tensor):
        raise InputError(f"expected '{name}' to be a tensor or numpy array (got {type(value).__name__})")
    if dtype is not None and value.dtype != dtype:
        raise InputError(f"expected '{name}' to have dtype {dtype} (got {describe(value)})")
    return value


def check_node_types(graph) -> None:
    """A typed graph's fields against its types (``Graph`` calls this): sizes, each edge's ends against
    its relation, features within their type's columns, labels and splits on the labelled types only."""
    types: NodeTypes = graph.node_types
    if types.num_nodes != graph.num_nodes:
        raise InputError(f"expected the node types to count the graph's {graph.num_nodes} nodes (got "
                         f"{types.num_nodes}: {types.describe()})")
    if types.num_features != graph.num_features and not (types.num_features == 0 and graph.num_features == 1):
        raise InputError(f"expected the feature widths of the node types to sum to the graph's {graph.num_features} "
                         f"columns (got {types.num_features})")
    if types.relations:
        if graph.edge_type is None or graph.num_relations != types.num_relations:
            raise InputError(f"expected edge types for the {types.num_relations} relations of a typed graph (got "
                             f"{'none' if graph.edge_type is None else graph.num_relations})")
        src, dst = graph.edges()
        off = torch.tensor(types.offsets)
        ends = torch.tensor([[types.index(s), types.index(d)] for s, _, d in types.relations])
        for ids, side, what in ((src, 0, "source"), (dst, 1, "destination")):
            want = ends[graph.edge_type, side]
            bad = (ids < off[want]) | (ids >= off[want + 1])
            if bool(bad.any()):
                e = int(bad.nonzero()[0])
                r = int(graph.edge_type[e])
                raise InputError(f"expected every edge of relation {types.relation_name(r)} to have a "
                                 f"{types.relations[r][2 * side]} {what} (got node {int(ids[e])} of type "
                                 f"{types.names[int(types.type_of(ids[e:e + 1]))]})")
    node_type = types.type_of(torch.arange(graph.num_nodes))
    if graph.x.layout == torch.sparse_csr and types.num_features:
        rows = node_type.repeat_interleave(graph.x.crow_indices().diff())
        cols, coff = graph.x.col_indices(), torch.tensor(types.column_offsets)
        if bool(((cols < coff[rows]) | (cols >= coff[rows + 1])).any()):
            raise InputError("expected each node's features within its type's columns (got a value in another "
                             "type's columns)")
    labelled = torch.zeros(types.num_types, dtype=torch.bool)
    labelled[[types.index(t) for t in types.labelled]] = True
    outside = ~labelled[node_type]
    split = graph.train_mask | graph.val_mask | graph.test_mask
    if bool((split & outside).any()):
        raise InputError(f"expected splits on the labelled node types ({', '.join(types.labelled)}) only (got "
                         f"{int((split & outside).sum())} nodes of other types in a split)")
