"""``NodeTypes``: the types of a heterogeneous graph's nodes and relations, as a typed homogeneous graph.

A heterogeneous graph (papers, authors, venues; users, items) is stored as one homogeneous graph, the
form SAR and PyG's ``RGCNConv`` use: every node has one global id, and **ids are contiguous per
type** (type ``t`` holds ids ``offsets[t]..offsets[t+1]-1``, in the order of ``names``); every edge
has a relation (``Graph.edge_type``), and relation ``r`` joins ``relations[r] = (source type, name,
destination type)``. So a node's type follows from its global id alone (:meth:`NodeTypes.type_of`):
every block, part, chunk and halo already carries global ids, and none needs a type array of its own.

Features have a width per type: type ``t``'s occupy the columns ``column_offsets[t]..`` of the one
feature matrix ``x`` (zero elsewhere on its rows, stored sparse where several types have features),
so that a first layer whose weight has one block of rows per type is a projection per type, and every
layout that moves feature rows moves typed ones unchanged. A type of width 0 has no features (the
model gives it learned embeddings, ``models.rgcn``).

``labelled`` names the types whose nodes carry labels and splits (the loss and the metrics read
those only: every other node is out of every split).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fullgraph.errors import InputError

__all__ = ["NodeTypes", "REVERSE_PREFIX"]

REVERSE_PREFIX = "rev_"
"""The name of a reverse relation: ``rev_<name>`` (PyG's ``ToUndirected`` names them so)."""


@dataclass(frozen=True)
class NodeTypes:
    """The node types, their sizes and feature widths, and the relations of a typed graph.

    Attributes:
        names: one name per node type, in id order.
        counts: the number of nodes of each type (ids contiguous per type, in ``names`` order).
        widths: the feature columns of each type (0: the type has no features).
        relations: per relation id, ``(source type, relation name, destination type)``.
        labelled: the types whose nodes have labels and splits.
    """

    names: tuple[str, ...]
    counts: tuple[int, ...]
    widths: tuple[int, ...]
    relations: tuple[tuple[str, str, str], ...] = ()
    labelled: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = tuple(str(n) for n in self.names)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "counts", tuple(int(c) for c in self.counts))
        object.__setattr__(self, "widths", tuple(int(w) for w in self.widths))
        object.__setattr__(self, "relations", tuple(tuple(str(p) for p in r) for r in self.relations))
        object.__setattr__(self, "labelled", tuple(str(n) for n in self.labelled))
        if not names or len(set(names)) != len(names) or not all(names):
            raise InputError(f"expected distinct, non-empty node type names (got {list(names)})")
        if len(self.counts) != len(names) or len(self.widths) != len(names):
            raise InputError(f"expected a count and a feature width per node type, {len(names)} each (got "
                             f"{len(self.counts)} counts and {len(self.widths)} widths)")
        for name, c, w in zip(names, self.counts, self.widths):
            if c < 1 or w < 0:
                raise InputError(f"expected node type {name!r} to have at least one node and a width >= 0 (got "
                                 f"{c} nodes, width {w})")
        for r in self.relations:
            if len(r) != 3:
                raise InputError(f"expected each relation as (source type, name, destination type) (got {r})")
            for end in (r[0], r[2]):
                if end not in names:
                    raise InputError(f"expected relation {'__'.join(r)!r} to join known node types ({', '.join(names)}) "
                                     f"(got an unknown type {end!r})")
        if len(set(self.relations)) != len(self.relations):
            raise InputError(f"expected each relation once (got {['__'.join(r) for r in self.relations]})")
        for name in self.labelled:
            if name not in names:
                raise InputError(f"expected labels on a known node type ({', '.join(names)}) (got {name!r})")

    # ------------------------------------------------------------------ sizes
    @property
    def num_types(self) -> int:
        return len(self.names)

    @property
    def num_nodes(self) -> int:
        return sum(self.counts)

    @property
    def num_features(self) -> int:
        return sum(self.widths)

    @property
    def num_relations(self) -> int:
        return len(self.relations)

    @property
    def offsets(self) -> tuple[int, ...]:
        """``T+1`` node-id offsets: type ``t`` holds ids ``offsets[t]..offsets[t+1]-1``."""
        out = [0]
        for c in self.counts:
            out.append(out[-1] + c)
        return tuple(out)

    @property
    def column_offsets(self) -> tuple[int, ...]:
        """``T+1`` feature-column offsets: type ``t``'s features are columns ``column_offsets[t]..[t+1]-1``."""
        out = [0]
        for w in self.widths:
            out.append(out[-1] + w)
        return tuple(out)

    @property
    def featureless(self) -> tuple[int, ...]:
        """The types with no features (width 0)."""
        return tuple(t for t, w in enumerate(self.widths) if w == 0)

    def index(self, name: str) -> int:
        if name not in self.names:
            raise InputError(f"expected a node type among {', '.join(self.names)} (got {name!r})")
        return self.names.index(name)

    def type_of(self, ids: torch.Tensor) -> torch.Tensor:
        """int64: the type of each global node id (ids are contiguous per type)."""
        bounds = torch.tensor(self.offsets[1:-1], dtype=ids.dtype, device=ids.device)
        return torch.bucketize(ids, bounds, right=True)

    def relation_name(self, r: int) -> str:
        return "__".join(self.relations[r])

    # ------------------------------------------------------------------ derived graphs
    def with_reverse(self) -> "NodeTypes":
        """The types with every relation followed by its reverse (``rev_<name>``, ends swapped), in the order
        ``Graph`` numbers them: the reverse of relation ``r`` is relation ``r + R`` (``data.typed``)."""
        rev = tuple((d, REVERSE_PREFIX + name, s) for s, name, d in self.relations)
        return NodeTypes(self.names, self.counts, self.widths, self.relations + rev, self.labelled)

    # ------------------------------------------------------------------ files
    def record(self) -> dict:
        """As the native folder, ``partition.json`` and ``model.pt`` keep it (JSON)."""
        return {"node_types": {"names": list(self.names), "counts": list(self.counts), "widths": list(self.widths),
                               "relations": [list(r) for r in self.relations], "labelled": list(self.labelled)}}

    @classmethod
    def of_record(cls, doc: dict | None) -> "NodeTypes | None":
        """The types a record holds (``None``: a graph of one type). A damaged record is an ``InputError``."""
        rec = (doc or {}).get("node_types")
        if rec is None:
            return None
        try:
            return cls(tuple(rec["names"]), tuple(rec["counts"]), tuple(rec["widths"]),
                       tuple(tuple(r) for r in rec.get("relations", ())), tuple(rec.get("labelled", ())))
        except InputError:
            raise
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(f"expected a node_types record with names, counts and widths (got {rec!r}: "
                             f"{type(err).__name__})") from None

    def describe(self) -> str:
        return ", ".join(f"{n} {c}" + (f" ({w} features)" if w else " (no features)")
                         for n, c, w in zip(self.names, self.counts, self.widths))
