"""Each rank's share of a layout's epoch (``RankWork``): the rows, sources and non-zeros of the layers
it runs, how many calls (chunks) they take, and what crosses its link.

What crosses a link is taken from the ledger's own volumes (``plan.volumes``), apportioned to the
rank by what it owns: the halo rows it receives and the rows others receive from it (``partition.json``'s
``halo`` and ``send``), its stage's boundaries (rows at ``--comm-precision``), its share of the
gradient all-reduce (a ring sends 2 (W - 1) / W of the gradients). A link is limited each way, so a
rank's wire bytes are those of its busier direction. Where ranks share machines (``plan.machines``),
each piece goes to the tier its peers are on: the rank's own machine (shared memory) or the network.

A chunk of a pipeline reads, besides its own rows, the rows of its neighbours outside it (their
history): ``chunk_sources`` counts them from the real chunk map, since they set both the rows a chunk
transforms and, summed over the chunks, how much more than one pass over the part an epoch computes.
"""

from __future__ import annotations

import math

import torch

from fullgraph.comm.precision import row_bytes
from fullgraph.ops.csr import row_ids
from fullgraph.plan.epoch_time import LayerCalls, RankWork, Traffic
from fullgraph.plan.machines import split
from fullgraph.plan.volumes import F32, boundary_row

__all__ = ["partition_works", "spmm_works", "tensor_works", "chunk_sources"]


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


def partition_works(cfg, graph, model, shape, bounds: list[tuple[int, int]], parts: list[dict] | None,
                    volume: dict[str, int], chunk_src: list[int] | None = None, machines=None,
                    pruned=None) -> list[RankWork]:
    """Every rank's ``RankWork`` under graph parallelism, the pipeline or the hybrid (stage-major: ranks
    ``s·W .. s·W + W - 1`` are stage ``s``). ``machines`` (``plan.machines.Machines``): where the ranks
    run, to tell the traffic between ranks of one machine from the network's (without it, each rank is
    on a machine of its own: all of it is the network's). ``pruned`` (``plan.pruned.PrunedCounts``,
    graph parallelism with ``--prune``): a training pass computes, layer by layer, only the rows
    counted there, and exchanges only their halo rows. Every layout's works take these arguments
    (``parallel.registry``), each using what it needs."""
    mesh = cfg.parallel.mesh
    S, W = mesh.stages, mesh.graph_ways
    K = cfg.parallel.num_chunks if S > 1 else 1
    precision = cfg.parallel.comm_precision
    halo_row = sum(row_bytes(w, precision) for w in shape.input_widths[1:])  # bytes per halo row, all layers
    boundary = [boundary_row(shape, a, precision) for a, _ in bounds]  # bytes per node, into stage s
    L = len(model.layers)
    works = []
    for s, (a, b) in enumerate(bounds):
        params = sum(p.numel() for p in model.stage_parameters(a, b, with_pre=s == 0, with_post=s == S - 1))
        ring = 2 * (W - 1) / W * params * F32 if W > 1 else 0.0
        ring_messages = 2 * W if W > 1 else 0  # a stage of one rank (one process, a pipeline) sums nothing
        share = len(range(max(a, 1), b)) / max(1, L - 1)  # of the halo layers 1..L-1
        for p in parts:
            inner, halo, send = p["inner"], p["halo"], p.get("send", p["halo"])
            nnz = p["edges"] + (inner if model.norm == "gcn" else 0)
            src = chunk_src[p["part"]] if (chunk_src is not None and K > 1) else inner + halo
            fwd_in = boundary[s] * inner if s > 0 else 0.0  # rows in (and their gradients out)
            fwd_out = boundary[s + 1] * inner if s < S - 1 else 0.0
            exchanges = (W - 1) * (b - a) if W > 1 else 0  # one all-to-all per layer, W - 1 peers each
            where = _Peers(machines, s, p["part"], S, W)
            hops = (s > 0) + (s < S - 1)  # a stage's 2K chunk messages (its busier direction), per neighbour
            train = split([(Traffic(stream=fwd_in, overlapped=fwd_in, messages=2 * K / hops if s > 0 else 0),
                            where.previous),
                           (Traffic(stream=fwd_out, overlapped=fwd_out, messages=2 * K / hops if s < S - 1 else 0),
                            where.next),
                           (Traffic(stream=ring, messages=ring_messages), where.ring),
                           (Traffic(exchange=(send + halo) * halo_row * share, messages=2 * exchanges * K),
                            where.group)])
            evaluation = split([(Traffic(stream=fwd_out, messages=1 if s < S - 1 else 0), where.next),
                                (Traffic(exchange=max(send, halo) * halo_row * share, messages=exchanges),
                                 where.group)])
            calls = (LayerCalls(tuple(range(a, b)), inner, src, nnz, K),)
            if pruned is not None:
                calls, train = _pruned_calls(pruned, p["part"]), split(
                    [(Traffic(stream=ring, messages=ring_messages), where.ring),
                     (Traffic(exchange=_pruned_exchange(pruned, p["part"], shape, precision),
                              messages=2 * exchanges), where.group)])
            works.append(RankWork(s, calls,
                                  (LayerCalls(tuple(range(a, b)), inner, inner + halo, nnz, 1),),
                                  post_rows=inner if s == S - 1 else 0, stages=S, chunks=K, train_traffic=train[0],
                                  eval_traffic=evaluation[0], params=params, train_local=train[1],
                                  eval_local=evaluation[1]))
    return works


def _pruned_calls(pruned, part: int) -> tuple[LayerCalls, ...]:
    """A pruned part's layers, each on its own rows (``plan.pruned``)."""
    return tuple(LayerCalls((i,), pruned.rows[i][part], pruned.src[i][part], pruned.nnz[i][part])
                 for i in range(pruned.layers))


def _pruned_exchange(pruned, part: int, shape, precision: str) -> float:
    """Bytes a pruned part sends and receives in its halo exchanges: each layer's own halo rows."""
    return float(sum((pruned.send[i][part] + pruned.halo[i][part]) * row_bytes(shape.input_widths[i], precision)
                     for i in range(1, pruned.layers)))


class _Peers:
    """The share of each kind of a rank's traffic that stays on its machine: to the previous and the
    next stage's rank of its part, around its stage's ring, and to its stage's other parts (all 0
    without ``machines``). The ring all-reduce goes at its slowest link's pace: the network's as soon as
    the stage's ranks span machines."""

    def __init__(self, machines, s: int, w: int, S: int, W: int):
        rank, group = s * W + w, range(s * W, (s + 1) * W)
        on = (lambda peers: machines.local_share(rank, peers)) if machines is not None else (lambda peers: 0.0)
        self.previous = on([rank - W]) if s > 0 else 0.0
        self.next = on([rank + W]) if s < S - 1 else 0.0
        self.group = on(group)
        self.ring = float(machines is not None and W > 1 and not machines.spans(group))


def spmm_works(cfg, graph, model, shape, bounds, parts, volume: dict[str, int], chunk_src=None, machines=None,
               pruned=None) -> list[RankWork]:
    """An SpMM layout's ranks: a block row of the products each, ``_product_steps`` messages per
    product, the block rows' broadcasts overlapped with the products under ``--overlap``."""
    mesh = cfg.parallel.mesh
    overlapped = _per_rank(volume, mesh.nprocs, False, "spmm/bcast") if cfg.parallel.overlap else 0.0
    return _operator_works(cfg, graph, model, volume, machines, rows=math.ceil(graph.num_nodes / mesh.block_rows),
                           steps=_product_steps(mesh), overlapped=overlapped)


def tensor_works(cfg, graph, model, shape, bounds, parts, volume: dict[str, int], chunk_src=None, machines=None,
                 pruned=None) -> list[RankWork]:
    """A tensor rank: the whole Â times w / P columns (the same multiply-adds as N / P rows of it at full
    width), an exchange with the P - 1 others each way per product; the chunked switch back
    (``--tensor-chunks``) overlaps half its bytes with the products."""
    P = cfg.parallel.nprocs
    overlapped = _per_rank(volume, P, False, "tp/") / 2 if cfg.parallel.tensor_chunks else 0.0
    return _operator_works(cfg, graph, model, volume, machines, rows=math.ceil(graph.num_nodes / P),
                           steps=2 * (P - 1), overlapped=overlapped)


def _per_rank(volume: dict[str, int], P: int, evaluation: bool, match: str = "") -> float:
    """One rank's even share of the training's (or the evaluation's) bytes whose category holds ``match``."""
    return sum(v for k, v in volume.items() if k.startswith("eval/") == evaluation and match in k
               and not k.startswith("meta/")) / P


def _operator_works(cfg, graph, model, volume: dict[str, int], machines, *, rows: int, steps: int,
                    overlapped: float) -> list[RankWork]:
    """The SpMM and tensor layouts' ranks are alike: ``rows`` rows of the products each, ``steps``
    messages per product, the traffic shared evenly, its peers taken as all the others (a broadcast, a
    reduction or an all-to-all reaches ranks on every machine the layout spans): the share on a rank's
    own machine is its machine's other ranks over P - 1."""
    P = cfg.parallel.nprocs
    L = len(model.layers)
    calls = (LayerCalls(tuple(range(L)), rows, rows, math.ceil((graph.num_edges + graph.num_nodes) / P)),)
    messages = L * steps  # a product per layer, forward; as many backward, and the gradients' ring
    train = Traffic(stream=_per_rank(volume, P, False), messages=2 * messages + 2 * (P - 1), overlapped=overlapped)
    evaluation = Traffic(stream=_per_rank(volume, P, True), messages=messages)
    params = sum(p.numel() for p in model.parameters())  # the weights are replicated: every rank steps them all
    works = []
    for r in range(P):
        local = machines.local_share(r, range(P)) if machines is not None else 0.0
        (t, t_local), (e, e_local) = split([(train, local)]), split([(evaluation, local)])
        works.append(RankWork(0, calls, calls, post_rows=rows, train_traffic=t, eval_traffic=e, params=params,
                              train_local=t_local, eval_local=e_local))
    return works


def _product_steps(mesh) -> int:
    """The messages one SpMM product puts on a rank's path, one per collective call (a broadcast
    reaches its ranks at once), a ring all-reduce over c ranks 2 (c - 1) and an exchange with q - 1
    peers q - 1: 1D and 1.5D broadcast the R / c block rows of the rank's share and sum over the c
    replicas; 2D and 3D trade column slices there and back, broadcast q dense blocks and q sparse ones
    (row pointers, columns and values: three calls each) and sum over the d layers (``parallel.spmm``)."""
    rows, cols, depth = mesh.grid
    if not mesh.summa:
        return math.ceil(rows / cols) + 2 * (cols - 1)
    return 2 * (rows - 1) + 4 * rows + 2 * (depth - 1)
