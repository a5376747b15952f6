"""``EdgeData``: what an edge carries besides its two ends, aligned with the entries that hold it.

A graph's edges may carry a weight (float ``[E]``), features (float ``[E, d]``) and a relation type
(int ``[E]`` in ``0..num_relations-1``). They sit beside the CSR entries, one row per entry, and move
with the entries wherever those go: a part's local CSR, a pipeline chunk, a sampled or pruned block,
an SpMM block row. Every such path cuts entries by positions (``csr_rows``), masks and sorts; it
does the same to the edge data with :meth:`EdgeData.take`, so the data cannot fall out of step.

``eid`` is each entry's **global edge id**: its position in the whole graph's CSR, the same in every
layout (the tests check each block's data against the graph's by it). Attention dropout is keyed by
the edge's global ends instead (``ops.dropout.keyed_edge_keep``): that key exists in every block,
with or without edge data, and covers the self loops a PyG conv appends itself. The self loops a
normalization adds (``gcn``, ``self-loops``) are no edge of the graph: their ``eid`` is ``-1 - v``
for the loop at node ``v`` (unique, and never a real edge id), their weight 1 (PyG's
``add_remaining_self_loops`` fill), their features the mean of the node's in-edges' features (PyG's
``add_self_loops(fill_value="mean")``) and their type ``num_relations`` (a relation of their own,
past the graph's).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import torch

__all__ = ["EdgeData", "EdgeFacts", "EDGE_FIELDS", "loop_eid", "random_edge_data"]

EDGE_FIELDS = ("weight", "attr", "type")
"""The kinds of data an edge may carry, by the names a block gives them (``Graph`` calls them
``edge_weight``, ``edge_attr`` and ``edge_type``, as PyG does)."""


class EdgeFacts(NamedTuple):
    """What a graph's edges carry, as a model is checked against it: the kinds (a subset of
    :data:`EDGE_FIELDS`), the width of the features and the number of relations (``None`` without)."""

    kinds: tuple[str, ...] = ()
    width: int | None = None
    relations: int | None = None

    @property
    def entry_bytes(self) -> int:
        """Bytes of data per stored entry (as ``EdgeData`` holds it: the global edge id, the weight,
        the features and the type); 0 where the edges carry none. ``fullgraph plan`` counts it."""
        if not self.kinds:
            return 0
        return 8 + 4 * ("weight" in self.kinds) + 4 * (self.width or 0) + 8 * ("type" in self.kinds)

    def only(self, kinds) -> "EdgeFacts":
        """The facts of the kinds among ``kinds`` (what a layout hands its layers)."""
        kept = tuple(k for k in self.kinds if k in kinds)
        return EdgeFacts(kept, self.width if "attr" in kept else None, self.relations if "type" in kept else None)

    def record(self) -> dict:
        """As ``partition.json`` and ``blockrows.json`` keep them (empty without edge data)."""
        return {"edge_data": list(self.kinds), "edge_features": self.width, "num_relations": self.relations} \
            if self.kinds else {}

    @classmethod
    def of_record(cls, doc: dict) -> "EdgeFacts":
        return cls(tuple(doc.get("edge_data") or ()), doc.get("edge_features"), doc.get("num_relations"))


def loop_eid(nodes: torch.Tensor) -> torch.Tensor:
    """The key of the self loop a normalization adds at each of ``nodes`` (global ids)."""
    return -1 - nodes


@dataclass(eq=False)
class EdgeData:
    """Per-entry edge data, in the order of the entries that hold it (see the module docstring).

    Attributes:
        eid: int64 ``[E]``, the global edge id of each entry (``-1 - v`` for an added loop at ``v``).
        weight: float32 ``[E]`` or ``None``.
        attr: float32 ``[E, d]`` or ``None``.
        type: int64 ``[E]`` or ``None``; ``num_relations`` says how many types the graph has.
    """

    eid: torch.Tensor
    weight: torch.Tensor | None = None
    attr: torch.Tensor | None = None
    type: torch.Tensor | None = None
    num_relations: int | None = None

    @property
    def num_entries(self) -> int:
        return self.eid.numel()

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds present (a subset of :data:`EDGE_FIELDS`, in its order)."""
        return tuple(k for k in EDGE_FIELDS if getattr(self, k) is not None)

    def facts(self) -> EdgeFacts:
        return EdgeFacts(self.kinds, self.attr.shape[1] if self.attr is not None else None,
                         self.num_relations if self.type is not None else None)

    def take(self, pos: torch.Tensor) -> "EdgeData":
        """The entries at ``pos`` (positions or a bool mask), in that order."""
        pick = lambda t: None if t is None else t[pos]  # noqa: E731
        return replace(self, eid=self.eid[pos], weight=pick(self.weight), attr=pick(self.attr), type=pick(self.type))

    def to(self, device) -> "EdgeData":
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return replace(self, eid=self.eid.to(device), weight=move(self.weight), attr=move(self.attr),
                       type=move(self.type))

    def with_loops(self, is_loop: torch.Tensor, rows: torch.Tensor, loop_nodes: torch.Tensor,
                   loop_weight: torch.Tensor | None = None) -> "EdgeData":
        """The data of a CSR into which one self loop per row was inserted (built on the CPU): these
        entries in their order, the loops between them.

        Args:
            is_loop: bool ``[E']``, which entries of the new CSR are the added loops (one per row).
            rows: int64 ``[E']``, the row of every entry of the new CSR.
            loop_nodes: global node id of each row's node, in row order (the loops' keys).
            loop_weight: each loop's weight, in row order (default 1).
        """
        e, old = is_loop.numel(), self
        real = ~is_loop

        def fill(values: torch.Tensor | None, loops) -> torch.Tensor | None:
            if values is None:
                return None
            out = torch.empty((e, *values.shape[1:]), dtype=values.dtype)
            out[real] = values
            out[is_loop] = loops
            return out

        attr_fill = None
        if old.attr is not None:  # the mean of each row's in-edges (zeros for a row with none, as PyG's)
            n = loop_nodes.numel()
            sums = torch.zeros(n, old.attr.shape[1], dtype=torch.float64).index_add_(0, rows[real], old.attr.double())
            count = torch.bincount(rows[real], minlength=n).clamp(min=1).unsqueeze(1)
            attr_fill = (sums / count).to(old.attr.dtype)
        return replace(self, eid=fill(old.eid, loop_eid(loop_nodes)), weight=fill(old.weight, 1.0 if loop_weight is None else loop_weight),
                       attr=fill(old.attr, attr_fill),
                       type=fill(old.type, int(self.num_relations or 0)))


def random_edge_data(facts: EdgeFacts, entries: int, generator: torch.Generator) -> EdgeData | None:
    """Random data of the kinds ``facts`` names for ``entries`` entries (``None`` for none): what a probe
    block (the layer contract, the planner's timings) carries for a model that cannot run without it."""
    if not facts.kinds:
        return None
    relations = facts.relations or 2
    return EdgeData(torch.arange(entries),
                    weight=torch.rand(entries, generator=generator) + 0.5 if "weight" in facts.kinds else None,
                    attr=torch.randn(entries, facts.width or 4, generator=generator) if "attr" in facts.kinds else None,
                    type=torch.randint(0, relations, (entries,), generator=generator) if "type" in facts.kinds else None,
                    num_relations=relations if "type" in facts.kinds else None)
