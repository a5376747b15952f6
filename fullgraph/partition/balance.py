"""Parts balanced by the memory their rank will need (``--partitioner metis-memory``).

METIS balances one number per node. Balanced by node count (``metis``), a power-law graph's part
that holds the hubs gets most of the edges; balanced by degree (``metis-degree``), the part of
low-degree nodes gets most of the rows. Either way one rank needs far more memory than the others,
and the largest rank is what must fit. A graph-parallel rank's memory is, to first order,

    bytes_per_row · (inner rows) + bytes_per_edge · (local edges) + bytes_per_halo_row · (halo rows),

with the three rates set by the model (features, hidden width, layers, what autograd keeps). The
caller gives them as ``cost``, a function of a rank's counts (``fullgraph.plan.variable_bytes`` for
a model). Each node is weighted ``degree + c`` with ``c = bytes_per_row / bytes_per_edge``, which
balances the first two terms at once. The halo term depends on the cut, known only afterwards; but
on the graphs measured a part's halo rows grow with its local edges (R-MAT, 22.7M edges, P = 4:
0.029-0.033 halo rows per local edge on every part that has edges). So each further round charges
an edge also the halo rows per local edge that the previous round's partition had, which lowers
``c`` and moves rows to the parts with few edges. :data:`ROUNDS` partitions are made (one METIS run
each; ``--metis-sample`` applies to each, and a pass over the edges counts the halos); the one whose
largest cost is smallest is kept. (Asking METIS for unequal shares of the weight instead, ``tpwgts``
towards the mean cost, was tried: METIS answers with a different cut each time, and the largest
part grew.)
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
"""METIS runs of :func:`metis_by_memory`: the first without halo costs, then two with the last cut's."""

Cost = Callable[[dict], float]
"""Bytes of a rank holding ``{"nodes", "halo", "edges", "features", "classes", "feature_nnz"}``."""


def graph_counts(graph: Graph) -> dict:
    """The counts a :data:`Cost` takes, for one rank holding all of ``graph``."""
    x = graph.x
    nnz = int(x.values().numel()) if x.layout == torch.sparse_csr else None
    return {"nodes": graph.num_nodes, "halo": 0, "edges": graph.num_edges, "features": graph.num_features,
            "classes": int(graph.num_classes), "feature_nnz": nnz}


def memory_node_weights(graph: Graph, cost: Cost, halo_per_edge: float = 0.0) -> tuple[np.ndarray, int]:
    """``(weights, c)``: METIS's vertex weights ``in-degree + c`` (int64), ``c`` the cost of one row
    over that of one edge, both measured as differences of ``cost`` on the whole graph. An edge also
    costs ``halo_per_edge`` halo rows: the cut a partition of this graph gave, per local edge."""
    st = graph_counts(graph)
    n, e = max(2, st["nodes"]), max(2, st["edges"])
    full = cost(st | {"nodes": n, "edges": e, "halo": n})
    per_row = (full - cost(st | {"nodes": n // 2, "edges": e, "halo": n})) / (n - n // 2)
    per_edge = (full - cost(st | {"nodes": n, "edges": e // 2, "halo": n})) / (e - e // 2)
    per_halo = (full - cost(st | {"nodes": n, "edges": e, "halo": n // 2})) / (n - n // 2)
    c = max(1, int(round(per_row / max(per_edge + halo_per_edge * per_halo, 1.0))))
    return graph.in_degrees().numpy().astype(np.int64) + c, c


def part_costs(graph: Graph, node_part: torch.Tensor, parts: int, cost: Cost) -> tuple[list[float], float]:
    """Each part's cost, its halo rows included (sparse features: the part's rows' share of them), and
    the partition's halo rows per local edge."""
    base = graph_counts(graph)
    density = None if base["feature_nnz"] is None else base["feature_nnz"] / max(1, graph.num_nodes)
    out, halo, edges = [], 0, 0
    for st in PartitionBook.build(graph, node_part, parts).stats():
        s = base | {"nodes": st["inner"], "halo": st["halo"], "edges": st["edges"]}
        if density is not None:
            s["feature_nnz"] = int(density * (st["inner"] + st["halo"]))
        out.append(cost(s))
        halo, edges = halo + st["halo"], edges + st["edges"]
    return out, halo / max(1, edges)


def metis_by_memory(graph: Graph, parts: int, seed: int, sample: float, cost: Cost,
                    rounds: int = ROUNDS) -> torch.Tensor:
    """The node → part map, of ``rounds`` METIS runs, whose largest part cost is smallest (see the
    module docstring)."""
    best, best_peak, halo_per_edge = None, float("inf"), 0.0
    for r in range(max(1, rounds)):
        weights, c = memory_node_weights(graph, cost, halo_per_edge)
        node_part = metis_csr(graph.indptr, graph.indices, parts, seed, vweights=weights, name=graph.name,
                              sample=sample)
        est, halo_per_edge = part_costs(graph, node_part, parts, cost)
        est = np.array(est)
        log.info("metis-memory round %d (a row weighs as %d edges): parts %s MiB, largest / mean %.3f; "
                 "%.4f halo rows per edge", r + 1, c, " ".join(f"{v / 2**20:.0f}" for v in est),
                 est.max() / est.mean(), halo_per_edge)
        if est.max() < best_peak:
            best, best_peak = node_part, float(est.max())
    return best
