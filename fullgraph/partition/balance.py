"""Parts balanced by the memory their rank will need (``--partitioner metis-memory``).

METIS balances one number per node. Balanced by node count (``metis``), a power-law graph's part
that holds the hubs gets most of the edges; balanced by degree (``metis-degree``), the part of
low-degree nodes gets most of the rows. Either way one rank needs far more memory than the others,
and the largest rank is what must fit. A graph-parallel rank's memory is, to first order,

    bytes_per_row · (inner rows) + bytes_per_edge · (local edges) + bytes_per_halo_row · (halo rows),

with the three rates set by the model (features, hidden width, layers, what autograd keeps) and
given by :mod:`fullgraph.plan`'s estimate. So each node is weighted ``degree + c`` with
``c = bytes_per_row / bytes_per_edge``, which balances the first two terms at once. The halo term
depends on the cut, which is only known afterwards: the parts are then estimated in full
(:func:`fullgraph.plan.estimate_peak_bytes` on each part's inner, halo and edge counts) and METIS
runs again with target shares (``tpwgts``) that ask the parts over the mean for less weight and
those under it for more. :data:`ROUNDS` partitions are made; the one whose largest estimate is
smallest is kept. Each round is one METIS run (the sample ``--metis-sample`` applies to each) and
one pass over the edges to count the halos.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from fullgraph.data.graph import Graph
from fullgraph.partition.book import PartitionBook
from fullgraph.partition.partitioners import metis_csr

__all__ = ["ROUNDS", "memory_node_weights", "part_estimates", "metis_by_memory"]

log = logging.getLogger("fullgraph")

ROUNDS = 3
"""METIS runs of :func:`metis_by_memory`: the first with equal shares, then two corrections."""


def _variable_bytes(stats: dict, model_opts: dict) -> float:
    """A rank's estimated bytes less what does not grow with its share (the process, the weights).
    The allocator's overhead is taken as for mmapped activations whatever their size, so that the
    estimate is linear in the counts (the heap's overhead applies to small ranks only)."""
    from fullgraph.plan import memory_breakdown

    b = memory_breakdown(**(model_opts | stats | {"distributed": True, "mmap_threshold": 1}))
    return float(b["graph"] + b["activations"])


def memory_node_weights(graph: Graph, model_opts: dict) -> tuple[np.ndarray, int]:
    """``(weights, c)``: METIS's vertex weights ``in-degree + c`` (int64) for ``graph``, where ``c`` is
    the estimated bytes of one row over those of one edge for the model ``model_opts``
    (:func:`fullgraph.plan.model_memory_options`), both measured as differences of the estimate."""
    from fullgraph.plan import graph_memory_stats

    st = graph_memory_stats(graph)
    n, e = max(2, st["nodes"]), max(2, st["edges"])
    full = _variable_bytes(st | {"nodes": n, "edges": e}, model_opts)
    per_row = (full - _variable_bytes(st | {"nodes": n // 2, "edges": e}, model_opts)) / (n - n // 2)
    per_edge = (full - _variable_bytes(st | {"nodes": n, "edges": e // 2}, model_opts)) / (e - e // 2)
    c = max(1, int(round(per_row / max(per_edge, 1.0))))
    return graph.in_degrees().numpy().astype(np.int64) + c, c


def part_estimates(graph: Graph, node_part: torch.Tensor, parts: int, model_opts: dict) -> list[float]:
    """Each part's estimated variable bytes (see :func:`_variable_bytes`), halo rows included."""
    from fullgraph.plan import graph_memory_stats

    base = graph_memory_stats(graph)
    density = None if base["feature_nnz"] is None else base["feature_nnz"] / max(1, graph.num_nodes)
    out = []
    for st in PartitionBook.build(graph, node_part, parts).stats():
        s = base | {"nodes": st["inner"], "halo": st["halo"], "edges": st["edges"]}
        if density is not None:  # sparse features: the part's rows' share of them
            s["feature_nnz"] = int(density * (st["inner"] + st["halo"]))
        out.append(_variable_bytes(s, model_opts))
    return out


def metis_by_memory(graph: Graph, parts: int, seed: int, sample: float, model_opts: dict,
                    rounds: int = ROUNDS) -> torch.Tensor:
    """The node → part map of :data:`ROUNDS` METIS runs whose largest part estimate is smallest (see
    the module docstring)."""
    weights, c = memory_node_weights(graph, model_opts)
    targets = np.full(parts, 1.0 / parts)
    best, best_peak = None, float("inf")
    for r in range(max(1, rounds)):
        node_part = metis_csr(graph.indptr, graph.indices, parts, seed, vweights=weights, name=graph.name,
                              sample=sample, targets=None if r == 0 else targets.tolist())
        est = np.array(part_estimates(graph, node_part, parts, model_opts))
        log.info("metis-memory round %d (row = %d edges): estimates %s MiB, largest / mean %.3f", r + 1, c,
                 " ".join(f"{v / 2**20:.0f}" for v in est), est.max() / est.mean())
        if est.max() < best_peak:
            best, best_peak = node_part, float(est.max())
        # the share of weight each part now holds, scaled towards the mean estimate
        held = np.bincount(node_part.numpy(), weights=weights, minlength=parts) / weights.sum()
        targets = held * est.mean() / est
        targets /= targets.sum()
    return best
