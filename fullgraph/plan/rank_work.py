"""Each rank's share of a layout's epoch (``RankWork``): the rows, sources and non-zeros of the layers
it runs, how many calls (chunks) they take, and what crosses its link.

What crosses a link is taken from the ledger's own volumes (``plan.volumes``), apportioned to the
rank by what it owns: the halo rows it receives and the rows others receive from it (``partition.json``'s
``halo`` and ``send``), its stage's boundaries (rows at ``--comm-precision``), its share of the
gradient all-reduce (a ring sends 2 (W - 1) / W of the gradients). A link is limited each way, so a
rank's wire bytes are those of its busier direction.

A chunk of a pipeline reads, besides its own rows, the rows of its neighbours outside it (their
history): ``chunk_sources`` counts them from the real chunk map, since they set both the rows a chunk
transforms and, summed over the chunks, how much more than one pass over the part an epoch computes.
"""

from __future__ import annotations

import math

import torch

from fullgraph.ops.csr import row_ids
from fullgraph.plan.epoch_time import LayerCalls, RankWork, Traffic
from fullgraph.plan.volumes import F32, boundary_row

__all__ = ["rank_works", "chunk_sources"]


def chunk_sources(indptr: torch.Tensor, indices: torch.Tensor, node_part: torch.Tensor, node_chunk: torch.Tensor,
                  parts: int, chunks: int) -> list[int]:
    """Per part: the source rows of all its chunks together (each chunk's rows plus the distinct
    neighbours of its rows that lie outside it)."""
    n = node_part.numel()
    group = node_part.long() * chunks + node_chunk.long()
    rows = row_ids(indptr)
    cols = indices.long()
    outside = group[rows] != group[cols]
    keys = torch.unique(group[rows[outside]] * n + cols[outside])
    others = torch.bincount(keys // n // chunks, minlength=parts)
    inner = torch.bincount(node_part.long(), minlength=parts)
    return (inner + others).tolist()


def rank_works(cfg, graph, model, shape, bounds: list[tuple[int, int]], parts: list[dict] | None,
               volume: dict[str, int], chunk_src: list[int] | None = None) -> list[RankWork]:
    """Every rank's ``RankWork`` (stage-major: ranks ``s·W .. s·W + W - 1`` are stage ``s``)."""
    mesh = cfg.parallel.mesh
    if mesh.spmm:
        return _spmm_works(cfg, graph, model, volume)
    S, W = mesh.stages, mesh.graph_ways
    K = cfg.parallel.num_chunks if S > 1 else 1
    halo_row = volume.get("halo/fwd", 0) / max(1, sum(p["halo"] for p in parts))  # bytes per halo row, all layers
    precision = cfg.parallel.comm_precision
    boundary = [boundary_row(shape, a, precision) for a, _ in bounds]  # bytes per node, into stage s
    L = len(model.layers)
    works = []
    for s, (a, b) in enumerate(bounds):
        params = sum(p.numel() for p in model.stage_parameters(a, b, with_pre=s == 0, with_post=s == S - 1))
        ring = 2 * (W - 1) / W * params * F32 if W > 1 else 0.0
        share = len(range(max(a, 1), b)) / max(1, L - 1)  # of the halo layers 1..L-1
        for p in parts:
            inner, halo, send = p["inner"], p["halo"], p.get("send", p["halo"])
            nnz = p["edges"] + (inner if model.norm == "gcn" else 0)
            src = chunk_src[p["part"]] if (chunk_src is not None and K > 1) else inner + halo
            fwd_in = boundary[s] * inner if s > 0 else 0.0  # rows in (and their gradients out)
            fwd_out = boundary[s + 1] * inner if s < S - 1 else 0.0
            exchanges = (W - 1) * (b - a) if W > 1 else 0  # one all-to-all per layer, W - 1 peers each
            train = Traffic(stream=fwd_in + fwd_out + ring, exchange=(send + halo) * halo_row * share,
                            messages=2 * exchanges * K + 2 * W + (2 * K if S > 1 else 0),
                            overlapped=fwd_in + fwd_out)
            evaluation = Traffic(stream=fwd_out, exchange=max(send, halo) * halo_row * share,
                                 messages=exchanges + (1 if s < S - 1 else 0))
            works.append(RankWork(s, (LayerCalls(tuple(range(a, b)), inner, src, nnz, K),),
                                  (LayerCalls(tuple(range(a, b)), inner, inner + halo, nnz, 1),),
                                  post_rows=inner if s == S - 1 else 0, stages=S, chunks=K, train_traffic=train,
                                  eval_traffic=evaluation, params=params))
    return works


def _spmm_works(cfg, graph, model, volume: dict[str, int]) -> list[RankWork]:
    """The SpMM layouts' ranks are alike: a block row of the products, the traffic shared evenly."""
    mesh, P = cfg.parallel.mesh, cfg.parallel.nprocs

    def per_rank(evaluation: bool, match: str = "") -> float:
        return sum(v for k, v in volume.items() if k.startswith("eval/") == evaluation and match in k
                   and not k.startswith("meta/")) / P

    rows = math.ceil(graph.num_nodes / mesh.block_rows)
    L = len(model.layers)
    calls = (LayerCalls(tuple(range(L)), rows, rows, math.ceil((graph.num_edges + graph.num_nodes) / P)),)
    messages = (L + 1) * (mesh.block_rows + 2 * P)
    train = Traffic(stream=per_rank(False), messages=2 * messages,
                    overlapped=per_rank(False, "spmm/bcast") if cfg.parallel.overlap else 0.0)
    evaluation = Traffic(stream=per_rank(True), messages=messages)
    params = sum(p.numel() for p in model.parameters())  # the weights are replicated: every rank steps them all
    return [RankWork(0, calls, calls, post_rows=rows, train_traffic=train, eval_traffic=evaluation,
                     params=params)] * P
