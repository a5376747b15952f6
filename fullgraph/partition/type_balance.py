"""A typed graph's parts balanced per node type, after the cut.

METIS (through ``pymetis``) and fennel balance one weight per node; a typed graph's parts can then be
even in total and not per type (the reason is in ``partitioners``' docstring). :func:`balance_types` moves
the fewest nodes that bring every type within :data:`TYPE_TOLERANCE` of its mean in every part, choosing
those that lose the fewest local neighbours; :func:`type_counts` gives each type's nodes per part, which
the balancing logs. Below ``partitioners`` and ``balance``, which run it after every METIS or fennel cut.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import torch

__all__ = ["TYPE_TOLERANCE", "type_bounds", "type_counts", "balance_types"]

log = logging.getLogger("fullgraph")

TYPE_TOLERANCE = 1.03
"""A typed graph's parts hold each type's nodes within this factor of the type's mean ``count / P``,
above and below: METIS's default k-way tolerance (``ufactor`` 30), the one it keeps the total within."""


def type_bounds(count: int, parts: int, tolerance: float = TYPE_TOLERANCE) -> tuple[int, int]:
    """``(lo, hi)``: the fewest and the most nodes of a type of ``count`` nodes that a part may hold,
    ``mean / tolerance``-ish and ``tolerance · mean`` (``(2 - tolerance) · mean`` below), widened to
    the mean's floor and ceiling: an integer split can always meet them."""
    mean = count / parts
    lo = min(math.floor(mean), math.ceil((2.0 - tolerance) * mean - 1e-9))
    return lo, max(math.ceil(mean), math.floor(tolerance * mean + 1e-9))


def type_counts(node_part, types, parts: int) -> dict[str, dict]:
    """Per node type: its nodes in each part and the largest over the mean (``PartitionBook.stats``
    counts every type together, and a typed graph's parts can be even in total and not per type)."""
    part = node_part.numpy() if isinstance(node_part, torch.Tensor) else np.asarray(node_part)
    out = {}
    for name, a, b in zip(types.names, types.offsets[:-1], types.offsets[1:]):
        counts = np.bincount(part[a:b], minlength=parts)
        out[name] = {"counts": counts.tolist(), "imbalance": float(counts.max() * parts / (b - a))}
    return out


def _as_numpy(a) -> np.ndarray:
    return a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a)


def _move(part: np.ndarray, indptr: np.ndarray, indices: np.ndarray, ids: np.ndarray, src: int, dst: int,
          k: int) -> None:
    """Move the ``k`` nodes of ``ids`` (all in part ``src``) that lose the fewest local neighbours to
    ``dst``: most neighbours in ``dst`` less those in ``src`` (ties: the lower id), so that the cut
    grows the least this one step can tell."""
    starts = indptr[ids].astype(np.int64)
    degrees = indptr[ids + 1].astype(np.int64) - starts
    first = np.cumsum(degrees) - degrees
    pos = np.arange(int(degrees.sum()), dtype=np.int64) + np.repeat(starts - first, degrees)
    rows = np.repeat(np.arange(ids.size), degrees)
    nbr = part[indices[pos]]
    gain = (np.bincount(rows, weights=nbr == dst, minlength=ids.size)
            - np.bincount(rows, weights=nbr == src, minlength=ids.size))
    part[ids[np.argsort(-gain, kind="stable")[:k]]] = dst


def balance_types(node_part, indptr, indices, types, parts: int, tolerance: float = TYPE_TOLERANCE) -> np.ndarray:
    """``node_part`` (a copy, same dtype) with every node type of ``types`` within :func:`type_bounds`
    in every part, by the fewest moves: why ``pymetis`` cannot do it itself is in the docstring of
    ``partitioners``.

    Per type, the fullest part gives to the emptiest until none is over ``hi`` or under ``lo``: each
    step moves as many as brings one of the two to its bound and neither past it, so the moves add up
    to the larger of the total excess and the total shortfall. The nodes moved are those with the most
    neighbours in the part they go to less those in the part they leave (:func:`_move`), read from
    ``(indptr, indices)``, the graph's adjacency (METIS's symmetric one where METIS cut). A node's
    type follows from its id, so nothing per node is added but the moving type's neighbour counts.
    A graph whose every type has fewer nodes than parts is left as it is: no type then reaches every
    part, and the moves could empty one (with one type of ``P`` nodes or more, each part keeps some).
    """
    part = _as_numpy(node_part).copy()
    if max(types.counts) < parts:
        return part
    indptr, indices = _as_numpy(indptr), _as_numpy(indices)
    before, moved = type_counts(part, types, parts), 0
    for a, b in zip(types.offsets[:-1], types.offsets[1:]):
        lo, hi = type_bounds(b - a, parts, tolerance)
        counts = np.bincount(part[a:b], minlength=parts)
        while True:
            src, dst = int(np.argmax(counts)), int(np.argmin(counts))
            over, under = int(counts[src]) - hi, lo - int(counts[dst])
            if over <= 0 and under <= 0:
                break
            if over > 0 and under > 0:
                k = min(over, under)
            else:
                k = min(over, hi - int(counts[dst])) if over > 0 else min(under, int(counts[src]) - lo)
            _move(part, indptr, indices, a + np.flatnonzero(part[a:b] == src), src, dst, k)
            counts[src] -= k
            counts[dst] += k
            moved += k
    after = type_counts(part, types, parts)
    log.info("node types balanced across %d parts (%d nodes moved); largest part / mean per type: %s", parts, moved,
             ", ".join(f"{n} {before[n]['imbalance']:.3f} -> {after[n]['imbalance']:.3f}" for n in types.names))
    return part
