"""The ``Graph`` container: the global input every layout starts from.

A graph is stored as CSR over **in-edges**: row ``v`` lists the sources ``u`` of the edges ``u -> v``,
so that ``indptr[v]:indptr[v+1]`` are the nodes ``v`` aggregates from. This matches the block
convention of docs/design.md (rows are the nodes being computed, columns the nodes read).

Everything is validated once, in ``__post_init__``; code after construction trusts the fields.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import torch

from fullgraph.data.checks import as_tensor, check_node_types, describe
from fullgraph.data.edge_list import csr_from_edges, csr_with_edge_data
from fullgraph.data.labels import check_inferred_classes, used_classes
from fullgraph.errors import InputError
from fullgraph.ops.csr import _sorted_unique_entries, canonical, row_ids
from fullgraph.ops.edge_data import EDGE_FIELDS, EdgeData, EdgeFacts
from fullgraph.ops.node_types import NodeTypes

__all__ = ["Graph"]  # the edge-list passes are data.edge_list's; the class count of labels data.labels'


_FEATURE_BLOCK = 1 << 24  # feature entries per block of the finiteness check


@dataclass(eq=False)
class Graph:
    """A node-classification graph.

    Attributes:
        indptr: int64 ``[N+1]``, CSR row pointers over in-edges (row = destination node).
        indices: int64 ``[E]``, the source node of each in-edge, sorted within each row.
        x: float32 node features ``[N, F]``, dense or sparse CSR (sparse features stay sparse: a
            bag-of-words matrix is often 99% zeros, and the first layer multiplies it as such).
        y: labels: int64 ``[N]`` with classes ``0..C-1`` (``-1`` marks a node with no label, which
            may not be in any split), float32 ``[N, C]`` of 0/1 for multi-label graphs, or float32
            ``[N]``, a number per node (node regression; ``C`` = 1, NaN: none, finite in every split).
        train_mask, val_mask, test_mask: bool ``[N]``, non-empty and pairwise disjoint.
        name: a short name used in logs and summaries.
        num_classes: ``C``; when not given, inferred from ``y`` as its largest label + 1, and refused
            when that leaves most classes without a node (:func:`check_inferred_classes`).
        edge_weight: optional float32 ``[E]``, each CSR entry's weight (finite).
        edge_attr: optional float32 ``[E, d]``, each CSR entry's features (finite).
        edge_type: optional int64 ``[E]``, each CSR entry's relation in ``0..num_relations-1``.
        num_relations: ``R``, given or inferred as the largest type + 1 (only with ``edge_type``).
        node_types: optional :class:`~fullgraph.ops.node_types.NodeTypes` of a heterogeneous graph: ids
            contiguous per type, a feature width per type, a relation per edge type, labels and splits
            on the labelled types only (``data.typed`` builds and checks it).

    Edge data sits beside the CSR entries, in their order, and a graph that has any lists each edge
    at most once, rows sorted: an edge is a ``(src, dst)`` pair, or with relation types a
    ``(src, dst, relation)`` triple, so that one pair joined by two relations is two entries, sorted
    by type (:meth:`from_edges` sums repeated weights, keeps a repeated triple once and refuses
    repeated edges with features): every path that cuts entries then carries the data by the same
    positions (``ops.edge_data``).
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    name: str = "graph"
    num_classes: int | None = None
    edge_weight: torch.Tensor | None = None
    edge_attr: torch.Tensor | None = None
    edge_type: torch.Tensor | None = None
    num_relations: int | None = None
    node_types: NodeTypes | None = None
    _fingerprint: str | None = field(default=None, repr=False)

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_edges(cls, src, dst, num_nodes: int, *, edge_weight=None, edge_attr=None, edge_type=None,
                   **fields) -> "Graph":
        """Build from an edge list ``src[i] -> dst[i]`` (kept as given: no symmetrization).

        Edge data given per listed edge (``edge_weight[i]`` belongs to edge ``i``) is put in CSR
        order with its edges. An edge listed twice keeps its repeats without edge data; with a
        weight, its weights are summed into one edge (as ``coalesce`` sums them in PyG and SciPy);
        with features it is refused, since no sum of those means anything. With types an edge is
        ``(src, dst, relation)``: one pair in two relations is two edges, a triple listed twice one."""
        edge = {k: v for k, v in (("edge_weight", edge_weight), ("edge_attr", edge_attr), ("edge_type", edge_type))
                if v is not None}
        if not edge:
            indptr, indices = csr_from_edges(src, dst, num_nodes)
            return cls(indptr=indptr, indices=indices, **fields)
        indptr, indices, edge = csr_with_edge_data(src, dst, num_nodes, edge)
        return cls(indptr=indptr, indices=indices, **edge, **fields)

    def __post_init__(self) -> None:
        self.indptr = as_tensor("indptr", self.indptr)
        self.indices = as_tensor("indices", self.indices)
        self.x = as_tensor("x", self.x)
        self.y = as_tensor("y", self.y)
        for m in ("train_mask", "val_mask", "test_mask"):
            setattr(self, m, as_tensor(m, getattr(self, m)))
        self._check_structure()
        self._check_edge_data()
        self._check_features()
        self._check_labels()
        self._check_masks()
        if self.node_types is not None:
            check_node_types(self)

    def _check_structure(self) -> None:
        ip, ix = self.indptr, self.indices
        if ip.dim() != 1 or ip.dtype != torch.int64:
            raise InputError(f"expected 'indptr' to be a 1-D int64 tensor (got {describe(ip)})")
        n = ip.numel() - 1
        if n <= 0:
            raise InputError("expected a graph with at least one node (got an empty graph)")
        if ix.dim() != 1 or ix.dtype != torch.int64:
            raise InputError(f"expected 'indices' to be a 1-D int64 tensor (got {describe(ix)})")
        if int(ip[0]) != 0 or int(ip[-1]) != ix.numel():
            raise InputError(
                f"expected 'indptr' to start at 0 and end at len(indices)={ix.numel()} "
                f"(got {int(ip[0])} and {int(ip[-1])})"
            )
        if n > 1 and bool((ip[1:] < ip[:-1]).any()):
            raise InputError("expected 'indptr' to be non-decreasing (got a decreasing step)")
        if ix.numel() and (int(ix.min()) < 0 or int(ix.max()) >= n):
            bad = ix[(ix < 0) | (ix >= n)]
            raise InputError(
                f"expected edge ids in [0, {n}) (got {bad.numel()} out of range, e.g. {int(bad[0])})"
            )

    def _check_edge_data(self) -> None:
        e, given = self.num_edges, False
        for name, dims, dtype in (("edge_weight", 1, torch.float32), ("edge_attr", 2, torch.float32),
                                  ("edge_type", 1, torch.int64)):
            value = getattr(self, name)
            if value is None:
                continue
            given = True
            value = as_tensor(name, value)
            if value.dtype != dtype or value.dim() != dims or value.layout != torch.strided:
                shape = "[E]" if dims == 1 else "[E, d]"
                raise InputError(f"expected '{name}' to be a dense {dtype} tensor {shape} (got {describe(value)})")
            if value.shape[0] != e:
                raise InputError(f"expected '{name}' to have one row per edge, {e} rows (got {value.shape[0]})")
            if dims == 2 and value.shape[1] == 0:
                raise InputError(f"expected 'edge_attr' to have at least one column (got {describe(value)})")
            if dtype.is_floating_point and value.numel() and not bool(torch.isfinite(value).all()):
                bad = int((~torch.isfinite(value)).sum())
                raise InputError(f"expected finite values in '{name}' (got {bad} NaN or infinite entries)")
            setattr(self, name, value)
        t = self.edge_type
        if t is not None:
            if t.numel() and int(t.min()) < 0:
                raise InputError(f"expected edge types >= 0 (got {int(t.min())})")
            top = int(t.max()) + 1 if t.numel() else 1
            if self.num_relations is None:
                if top > max(t.numel(), 1):  # inferred: a count past the edges' would size tables by a typo
                    raise InputError(f"expected edge types numbered from 0, each below the edge count {t.numel()} "
                                     f"(got a type {top - 1}): number the relations 0..R-1, or give num_relations")
                self.num_relations = top
            if top > self.num_relations:
                raise InputError(f"expected edge types in [0, {self.num_relations}) (got a type {top - 1}, "
                                 f"num_relations={self.num_relations})")
        elif self.num_relations is not None:
            raise InputError(f"expected 'edge_type' with num_relations={self.num_relations} (got no edge types)")
        if given and not _sorted_unique_entries(self.indptr, self.indices, self.edge_type):
            what = "(src, dst, relation)" if self.edge_type is not None else "edge"
            raise InputError(f"expected a graph with edge data to list each {what} once, rows sorted (got repeated or "
                             "unsorted entries): build it with Graph.from_edges, which sorts the edges with their data")

    def _check_features(self) -> None:
        x, n = self.x, self.num_nodes
        if x.layout not in (torch.strided, torch.sparse_csr):
            raise InputError(f"expected 'x' to be dense or sparse CSR (got {describe(x)})")
        if x.dim() != 2:
            raise InputError(f"expected 'x' to be two-dimensional [N, F] (got {describe(x)})")
        if x.dtype != torch.float32:
            raise InputError(f"expected 'x' to have dtype torch.float32 (got {describe(x)})")
        if x.shape[0] != n:
            raise InputError(f"expected 'x' to have one row per node, {n} rows (got {x.shape[0]})")
        if x.shape[1] == 0:
            raise InputError(f"expected 'x' to have at least one feature column (got {describe(x)})")
        vals = x.values() if x.layout == torch.sparse_csr else x
        rows = max(1, _FEATURE_BLOCK // max(1, vals[0].numel() if vals.dim() == 2 and len(vals) else 1))
        bad = 0  # checked in blocks of rows: a whole-matrix mask would be a quarter of the features
        for a in range(0, vals.shape[0], rows):
            block = vals[a : a + rows]
            if not bool(torch.isfinite(block).all()):
                bad += int((~torch.isfinite(block)).sum())
        if bad:
            raise InputError(f"expected finite features (got {bad} NaN or infinite entries in 'x')")

    def _check_labels(self) -> None:
        y, n = self.y, self.num_nodes
        if y.shape[:1] != (n,):
            raise InputError(f"expected 'y' to have one row per node, {n} rows (got {describe(y)})")
        if y.dim() == 1 and y.is_floating_point():  # a number per node (node regression)
            if y.dtype != torch.float32:
                raise InputError(f"expected numeric 'y' to be float32 (got {describe(y)})")
            self.num_classes = 1  # one output column
        elif y.dim() == 1:
            if y.dtype != torch.int64:
                raise InputError(f"expected single-label 'y' to be int64 (got {describe(y)})")
            labelled = y[y >= 0]
            if labelled.numel() == 0:
                raise InputError("expected at least one labelled node (got none: every label is -1)")
            if int(y.min()) < -1:
                raise InputError(f"expected labels >= 0, or -1 for unlabelled (got {int(y.min())})")
            top = int(labelled.max())
            if self.num_classes is None:  # inferred: refused where most of the classes would be empty
                self.num_classes = check_inferred_classes(used_classes(labelled.numpy()))
            if top >= self.num_classes:
                raise InputError(
                    f"expected labels in [0, {self.num_classes}) (got a label {top})"
                )
        elif y.dim() == 2:
            if y.dtype != torch.float32:
                raise InputError(f"expected multi-label 'y' to be float32 0/1 (got {describe(y)})")
            if not bool(((y == 0) | (y == 1)).all()):
                raise InputError("expected multi-label 'y' to hold only 0 and 1 (got other values)")
            if self.num_classes is None:
                self.num_classes = y.shape[1]
            if y.shape[1] != self.num_classes:
                raise InputError(
                    f"expected multi-label 'y' with {self.num_classes} columns (got {y.shape[1]})"
                )
        else:
            raise InputError(f"expected 'y' to be [N] or [N, C] (got {describe(y)})")
        if self.num_classes < 2 and y.dim() == 1 and not self.numeric:
            raise InputError(f"expected at least 2 classes (got num_classes={self.num_classes})")

    def _check_masks(self) -> None:
        n = self.num_nodes
        masks = {m: getattr(self, m) for m in ("train_mask", "val_mask", "test_mask")}
        for name, m in masks.items():
            if m.dtype != torch.bool or m.shape != (n,):
                raise InputError(f"expected '{name}' to be a bool tensor of shape ({n},) (got {describe(m)})")
            if not bool(m.any()):
                raise InputError(f"expected '{name}' to select at least one node (got an empty mask)")
        names = list(masks)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                both = int((masks[a] & masks[b]).sum())
                if both:
                    raise InputError(f"expected disjoint splits (got {both} nodes in both '{a}' and '{b}')")
        if self.y.dim() == 1:
            any_split = masks["train_mask"] | masks["val_mask"] | masks["test_mask"]
            unlabelled = int((any_split & (~torch.isfinite(self.y) if self.numeric else self.y < 0)).sum())
            if unlabelled:
                raise InputError(f"expected every node in a split to have a label (got {unlabelled} with "
                                 f"{'NaN or an infinite number' if self.numeric else '-1'})")

    # ---------------------------------------------------------------- views
    @property
    def num_nodes(self) -> int:
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self.indices.numel()

    @property
    def num_features(self) -> int:
        return self.x.shape[1]

    @property
    def multilabel(self) -> bool:
        return self.y.dim() == 2

    @property
    def numeric(self) -> bool:
        """Whether ``y`` holds a number per node (float32 ``[N]``: node regression) rather than classes."""
        return self.y.dim() == 1 and self.y.is_floating_point()

    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(src, dst)`` of every edge, in CSR order."""
        return self.indices, row_ids(self.indptr)

    def in_degrees(self) -> torch.Tensor:
        return self.indptr.diff()

    @property
    def edge_kinds(self) -> tuple[str, ...]:
        """The data the edges carry: a subset of ``("weight", "attr", "type")``."""
        return tuple(k for k in EDGE_FIELDS if getattr(self, f"edge_{k}") is not None)

    def edge_data(self) -> EdgeData | None:
        """The edges' data with their global ids (``0..E-1``, the CSR order), or ``None``."""
        if not self.edge_kinds:
            return None
        return EdgeData(torch.arange(self.num_edges), self.edge_weight, self.edge_attr, self.edge_type,
                        self.num_relations)

    def edge_facts(self) -> EdgeFacts:
        """What the edges carry (kinds, feature width, relations), as models are checked against it."""
        data = self.edge_data()
        return EdgeFacts() if data is None else data.facts()

    def edge_fields(self) -> dict:
        """The edge-data keyword arguments of this graph (empty without), for a graph built from it."""
        return {k: v for k, v in (("edge_weight", self.edge_weight), ("edge_attr", self.edge_attr),
                                  ("edge_type", self.edge_type), ("num_relations", self.num_relations))
                if v is not None}

    def aggregation_degree(self) -> torch.Tensor:
        """Each node's in-degree as the normalizations read it: the count of its in-edges, or with
        weights their sum (``ops.adjacency.weighted_in_degree``, the one source of those bits)."""
        if self.edge_weight is None:
            return self.in_degrees()
        from fullgraph.ops.adjacency import weighted_in_degree

        return weighted_in_degree(self.indptr, self.edge_weight)

    def dense_x(self) -> torch.Tensor:
        return self.x.to_dense() if self.x.layout == torch.sparse_csr else self.x

    def fingerprint(self) -> str:
        """A sha256 over structure, features, labels and splits: the cache key of derived data."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            tensors = [self.indptr, self.indices, self.y, self.train_mask, self.val_mask, self.test_mask]
            for kind in self.edge_kinds:  # a graph without edge data keeps the fingerprint it had
                h.update(f"edge_{kind}".encode())
                tensors.append(getattr(self, f"edge_{kind}"))
            if self.num_relations is not None:
                h.update(f"relations={self.num_relations}".encode())
            if self.node_types is not None:  # a graph of one type keeps the fingerprint it had
                h.update(repr(self.node_types.record()).encode())
            if self.x.layout == torch.sparse_csr:
                tensors += [self.x.crow_indices(), self.x.col_indices(), self.x.values()]
            else:
                tensors.append(self.x)
            for t in tensors:
                h.update(str(tuple(t.shape)).encode())
                a = t.contiguous().numpy()  # no copy: the fields are contiguous
                h.update(a.reshape(-1).view(np.uint8))  # the same bytes as ``tobytes()``, read in place
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def with_structure(self, indptr: torch.Tensor, indices: torch.Tensor, **edge) -> "Graph":
        """The same nodes, features, labels and splits over another edge set, whose edge data
        ``edge`` (``edge_weight=``, ...) the caller gives: a graph with edge data cannot lose it
        here unnoticed."""
        if self.edge_kinds and not edge:
            raise RuntimeError("with_structure on a graph with edge data needs the new edges' data")
        return Graph(
            indptr=indptr, indices=indices, x=self.x, y=self.y, train_mask=self.train_mask,
            val_mask=self.val_mask, test_mask=self.test_mask, name=self.name, num_classes=self.num_classes,
            node_types=self.node_types, **edge,
        )

    def without_edge_data(self) -> "Graph":
        """The same graph with bare edges (``fullgraph convert --no-edge-data``): a pair that was an edge
        of several relations is one edge, as bare edges are stored (sorted rows, no repeats)."""
        if not self.edge_kinds:
            return self
        types = self.node_types  # without edge types, no relations: the node types stay
        types = None if types is None else NodeTypes(types.names, types.counts, types.widths, (), types.labelled)
        indptr, indices = canonical(self.indptr, self.indices, self.num_nodes)
        return Graph(indptr=indptr, indices=indices, x=self.x, y=self.y, train_mask=self.train_mask,
                     val_mask=self.val_mask, test_mask=self.test_mask, name=self.name, num_classes=self.num_classes,
                     node_types=types)

    def summary(self) -> dict:
        return {
            "name": self.name,
            "nodes": self.num_nodes,
            "edges": self.num_edges,
            "features": self.num_features,
            "classes": self.num_classes,
            "multilabel": self.multilabel,
            **({"numeric_labels": True} if self.numeric else {}),
            "sparse_features": self.x.layout == torch.sparse_csr,
            **({"edge_data": list(self.edge_kinds)} if self.edge_kinds else {}),
            **({"edge_features": self.edge_attr.shape[1]} if self.edge_attr is not None else {}),
            **({"relations": self.num_relations} if self.num_relations is not None else {}),
            **({"node_types": list(self.node_types.names)} if self.node_types is not None else {}),
            "train": int(self.train_mask.sum()),
            "val": int(self.val_mask.sum()),
            "test": int(self.test_mask.sum()),
        }

    def __repr__(self) -> str:
        s = self.summary()
        labels = "labels=numbers" if self.numeric else f"classes={s['classes']}"
        return (
            f"Graph(name={s['name']!r}, nodes={s['nodes']}, edges={s['edges']}, features={s['features']}, "
            f"{labels}, train/val/test={s['train']}/{s['val']}/{s['test']})"
        )
