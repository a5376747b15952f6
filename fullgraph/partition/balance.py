"""Parts balanced by the memory their rank will need (``--partitioner metis-memory``).

METIS balances one number per node. Balanced by node count (``metis``), a power-law graph's part
that holds the hubs gets most of the edges; balanced by degree (``metis-degree``), the part of
low-degree nodes gets most of the rows. Either way one rank needs far more memory than the others,
and the largest rank is what must fit. A graph-parallel rank's memory is, to first order,

    bytes_per_row · (inner rows) + bytes_per_edge · (local edges) + bytes_per_halo_row · (halo rows),

with the three rates set by the model (features, hidden width, layers, what autograd keeps). The
caller gives them as ``cost``, a function of a rank's counts (``fullgraph.plan.variable_bytes`` for
a model). Each node is weighted ``degree + c`` with ``c = bytes_per_row / bytes_per_edge``, which
balances the first two terms at once. The halo term depends on the cut, known only afterwards: the
parts are then costed in full (each part's inner, halo and edge counts) and METIS runs again with
target shares (``tpwgts``) that ask the parts over the mean for less weight and those under it for
more (half the step, geometrically: METIS answers new shares with a new cut whose halos move too). :data:`ROUNDS` partitions are made; the one whose largest cost is smallest is kept. Each
round is one METIS run (``--metis-sample`` applies to each) and one pass over the edges to count
the halos.
"""

from __future__ import annotations

import logging
from typing import Callable

import numpy as np
import torch

from fullgraph.data.graph import Graph
from fullgraph.partition.book import PartitionBook
from fullgraph.partition.partitioners import metis_csr

__all__ = ["ROUNDS", "graph_counts", "memory_node_weights", "part_costs", "metis_by_memory"]

log = logging.getLogger("fullgraph")

ROUNDS = 3
"""METIS runs of :func:`metis_by_memory`: the first with equal shares, then two corrections."""

Cost = Callable[[dict], float]
"""Bytes of a rank holding ``{"nodes", "halo", "edges", "features", "classes", "feature_nnz"}``."""


def graph_counts(graph: Graph) -> dict:
    """The counts a :data:`Cost` takes, for one rank holding all of ``graph``."""
    x = graph.x
    nnz = int(x.values().numel()) if x.layout == torch.sparse_csr else None
    return {"nodes": graph.num_nodes, "halo": 0, "edges": graph.num_edges, "features": graph.num_features,
            "classes": int(graph.num_classes), "feature_nnz": nnz}


def memory_node_weights(graph: Graph, cost: Cost) -> tuple[np.ndarray, int]:
    """``(weights, c)``: METIS's vertex weights ``in-degree + c`` (int64), ``c`` the cost of one row
    over that of one edge, both measured as differences of ``cost`` on the whole graph."""
    st = graph_counts(graph)
    n, e = max(2, st["nodes"]), max(2, st["edges"])
    full = cost(st | {"nodes": n, "edges": e})
    per_row = (full - cost(st | {"nodes": n // 2, "edges": e})) / (n - n // 2)
    per_edge = (full - cost(st | {"nodes": n, "edges": e // 2})) / (e - e // 2)
    c = max(1, int(round(per_row / max(per_edge, 1.0))))
    return graph.in_degrees().numpy().astype(np.int64) + c, c


def part_costs(graph: Graph, node_part: torch.Tensor, parts: int, cost: Cost) -> list[float]:
    """Each part's cost, its halo rows included (sparse features: the part's rows' share of them)."""
    base = graph_counts(graph)
    density = None if base["feature_nnz"] is None else base["feature_nnz"] / max(1, graph.num_nodes)
    out = []
    for st in PartitionBook.build(graph, node_part, parts).stats():
        s = base | {"nodes": st["inner"], "halo": st["halo"], "edges": st["edges"]}
        if density is not None:
            s["feature_nnz"] = int(density * (st["inner"] + st["halo"]))
        out.append(cost(s))
    return out


def metis_by_memory(graph: Graph, parts: int, seed: int, sample: float, cost: Cost,
                    rounds: int = ROUNDS) -> torch.Tensor:
    """The node → part map, of ``rounds`` METIS runs, whose largest part cost is smallest (see the
    module docstring)."""
    weights, c = memory_node_weights(graph, cost)
    targets = np.full(parts, 1.0 / parts)
    best, best_peak = None, float("inf")
    for r in range(max(1, rounds)):
        node_part = metis_csr(graph.indptr, graph.indices, parts, seed, vweights=weights, name=graph.name,
                              sample=sample, targets=None if r == 0 else targets.tolist())
        est = np.array(part_costs(graph, node_part, parts, cost))
        log.info("metis-memory round %d (a row weighs as %d edges): parts %s MiB, largest / mean %.3f", r + 1, c,
                 " ".join(f"{v / 2**20:.0f}" for v in est), est.max() / est.mean())
        if est.max() < best_peak:
            best, best_peak = node_part, float(est.max())
        # the share of weight each part now holds, moved halfway (geometrically) towards the mean cost:
        # METIS answers new shares with a new cut, whose halos move too, so a full step overshoots
        held = np.bincount(node_part.numpy(), weights=weights, minlength=parts) / weights.sum()
        targets = held * np.sqrt(est.mean() / est)
        targets /= targets.sum()
    return best
