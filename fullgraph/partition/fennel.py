"""FENNEL, a streaming partitioner for graphs METIS cannot hold (``--partitioner fennel``).

METIS keeps the whole graph and every level of its coarsening: ~150 bytes per edge. A streaming
partitioner reads each row once per pass and keeps only the node → part map, so its memory grows
with the nodes and not with the edges. FENNEL (Tsourakakis, Gkantsidis, Radunovic, Vojnovic,
WSDM 2014) places each node ``v`` as it arrives in the part ``i`` that maximizes

    |N(v) ∩ S_i|  −  w_v · α γ L_i^(γ−1),     γ = 1.5,   α = sqrt(P) · m / n^1.5,

the neighbours already in part ``i`` minus the marginal cost of growing it (``α L^γ`` is the
paper's cost of a part of size ``L``; its derivative times the node's weight is what one more
node adds). Loads ``L_i`` are counted in node units (a part's weight times ``n / total weight``),
so the same α fits unit, degree and memory weights; ``m`` is the number of undirected edges, half
the entries of the symmetric CSR the loaders store. A part whose load would pass the capacity
``ν · total / P`` is never chosen (a node heavier than every part's room, which only happens when
one node weighs more than the slack, goes to the lightest part). LDG (Stanton & Kliot, KDD 2012)
is the older relative: it multiplies the neighbour count by ``1 − L_i / C`` instead of
subtracting a cost, and needs the same data.

Restreaming (Nishimura & Ugander, KDD 2013): each later pass streams the graph again with the
loads started from zero, and a node's neighbours count in the part they hold now: the part
this pass gave them if they came earlier, else the previous pass's. FENNEL's own first pass
(``start="empty"``) sees only the earlier nodes; the later ones see every neighbour, which is
where most of the cut goes. But restreams only repair their start locally: where the node ids
hide the communities (a planted partition with shuffled ids), restreaming from the first pass, or
from any arbitrary assignment, stalls at 1.5x METIS's replication factor. So by default
(``start="clusters"``) the first assignment is whole clusters of size-constrained label
propagation (:mod:`fullgraph.partition.label_prop`), packed into parts, and every pass is a
restream: on that planted graph 1.11x METIS, on R-MAT within a few percent of METIS or below it
(``benchmarks/fennel_quality.py``). The passes stop when they stop paying: each pass
counts the entries whose other end sat in the part the row chose (its local entries, known at
no extra cost), and after :data:`MIN_PASSES` a pass that raised their share by under
:data:`CONVERGED` ends the run (at most :data:`PASSES`; from a complete start, the clusters'
or ``initial``, which ``balance.fennel_by_memory``'s later rounds take from the round before,
the first restream's share is left out of the comparison: see :data:`MIN_PASSES`).

Choices, and why:

* **Order**: node order by default. Node ids usually carry locality (generators' recursive ids,
  crawl and BFS orders of real datasets), streaming heuristics do best on such orders (Stanton
  & Kliot: BFS/DFS orders beat random ones), and the file is then read front to back.
  ``order="blocks"`` streams a seeded shuffle of row blocks instead (each block read whole, so
  the reads stay large): for graphs whose ids are adversarial (sorted by degree, by part).
  The seed also orders the parts for ties, so different seeds give different partitions.
* **Batches, not a Python loop per node**: the nodes are placed ``batch`` rows at a time. Their
  neighbour part counts are one ``bincount`` into a ``[B, P]`` table and the choice one
  ``argmax``. The batch's nodes see the loads as they were when it started (the "herd": they
  may all choose the same light part), so batches are kept small next to a part (``n / (64 P)``
  nodes, at most 4096), where the loads change by under 2% of a part within one batch; and a
  part's intake within a batch is capped by its remaining room: the nodes that chose it are
  taken in order while they fit, the rest choose again among the parts that still have room.
  Each such round places at least one node per chosen part, so the batch ends.
* **Slack** ν = :data:`SLACK`: see there.

Memory: the assignment (int8 up to 128 parts, then int16, int32), the row pointer
(``CSRStream``'s, 8 bytes per node), the ``P`` loads, and one row block's temporaries (its
entries, as ``CSRStream`` reads them). Nothing the size of the edge list: about 9 bytes per
node whatever ``E`` during the restreams, and 8 more (label propagation's labels and cluster
sizes, freed before the restreams) while the clusters are found.
"""

from __future__ import annotations

import logging
import math
import os

import numpy as np

from fullgraph.data.formats.native_stream import CSRStream, RowBlock
from fullgraph.errors import InputError
from fullgraph.partition.label_prop import initial_parts
from fullgraph.ops.csr import BLOCK_ENTRIES, row_spans

__all__ = ["PASSES", "MIN_PASSES", "CONVERGED", "SLACK", "GAMMA", "ORDERS", "STARTS", "fennel_stream", "fennel_folder",
           "stream_part_stats", "part_dtype"]

log = logging.getLogger("fullgraph")

PASSES = 24
"""The most streaming passes (the first, then restreams; each reads the CSR once more)."""

MIN_PASSES = 4
"""Passes always made from FENNEL's own first pass (``start="empty"``, that pass included), which places
nodes seeing only earlier ones: the next few are where most of the cut goes on every graph measured.
From a complete start three are made: the first restream's share is not comparable with the later
ones' (it counts the later neighbours in the start's parts, which are not balanced), so the stop
compares the second and third passes on."""

CONVERGED = 1e-3
"""A pass that raises the share of local entries (of all entries) by less than this, over the best
pass before it, ends the run: about a thousandth of the edges that would still leave the cut."""

SLACK = 1.05
"""ν: a part may weigh up to 5% over the mean. Fennel's paper takes 10%; a rank's memory is what has
to fit, so the largest part matters more than the cut's last percent (METIS's default tolerance is
3%, and metis-memory's halo rows add a few percent on top of it)."""

GAMMA = 1.5
ORDERS = ("natural", "blocks")
STARTS = ("clusters", "empty")
MAX_BATCH = 4096


def part_dtype(parts: int) -> np.dtype:
    """The smallest signed integer type that holds ``0..parts-1`` and ``-1`` (not yet placed)."""
    for dt in (np.int8, np.int16, np.int32):
        if parts - 1 <= np.iinfo(dt).max:
            return np.dtype(dt)
    raise InputError(f"expected at most {np.iinfo(np.int32).max + 1} parts (got {parts})")


def _rng(seed: int, *more: int) -> np.random.Generator:
    """A generator for ``seed`` (any integer, negative ones included, as the other partitioners take)."""
    return np.random.default_rng([int(seed) % 2**64, *more])


def _check(parts, num_nodes: int, passes, slack, order: str, row_cost, batch) -> int:
    if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)) or not 1 <= parts <= num_nodes:
        raise InputError(f"expected between 1 and {num_nodes} parts, one node each at least (got {parts!r})")
    if isinstance(passes, bool) or not isinstance(passes, (int, np.integer)) or passes < 1:
        raise InputError(f"expected at least one fennel pass (got {passes!r})")
    if not slack >= 1.0:
        raise InputError(f"expected a capacity slack >= 1 (got {slack!r})")
    if order not in ORDERS:
        raise InputError(f"unknown fennel order {order!r} (expected one of: {', '.join(ORDERS)})")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1):
        raise InputError(f"expected at least one row per fennel batch (got {batch!r})")
    if row_cost is not None and not row_cost >= 0:
        raise InputError(f"expected a row cost >= 0 edges (got {row_cost!r})")
    return int(parts)


class _State:
    """What a pass reads and updates: the assignment, the loads (node units) and the constants."""

    def __init__(self, n: int, e: int, parts: int, row_cost, slack: float, seed: int):
        self.n, self.parts = n, parts
        self.row_cost = None if row_cost is None else float(row_cost)
        total = float(n) if row_cost is None else e + self.row_cost * n
        self.unit = n / max(total, 1e-300)  # node units per unit of weight
        self.cap = slack * n / parts
        self.alpha = math.sqrt(parts) * (e / 2) / n**1.5
        self.assign = np.full(n, -1, dtype=part_dtype(parts))
        self.loads = np.zeros(parts, dtype=np.float64)
        self.tie_order = _rng(seed).permutation(parts)  # the seeded tie-break
        self.moved = 0
        self.forced = 0
        self.local = 0  # entries whose other end was in the part the row chose, this pass

    def weights(self, degrees: np.ndarray) -> np.ndarray:
        """Node weights in node units: 1, or ``(in-degree + row cost) · n / total``."""
        if self.row_cost is None:
            return np.ones(degrees.shape[0], dtype=np.float64)
        return (degrees + self.row_cost) * self.unit


def _neighbour_counts(st: _State, rows: np.ndarray, cols: np.ndarray, r0: int, b: int) -> np.ndarray:
    """``[b, P]``: how many in-neighbours of each row (``rows`` local to the batch, ``r0`` its first
    global id) each part holds now; unplaced neighbours and self loops do not count."""
    nbr = st.assign[cols]
    keep = (nbr >= 0) & (cols != rows + r0)
    key = rows[keep] * st.parts + nbr[keep]
    return np.bincount(key, minlength=b * st.parts).reshape(b, st.parts)


def _choose(st: _State, counts: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every row's best part at the current loads (parts without room for it excluded), and whether
    no part had room."""
    penalty = st.alpha * GAMMA * np.power(st.loads, GAMMA - 1.0)
    score = counts - w[:, None] * penalty[None, :]
    no_room = st.loads[None, :] + w[:, None] > st.cap
    score[no_room] = -np.inf
    nowhere = no_room.all(axis=1)
    best = st.tie_order[np.argmax(score[:, st.tie_order], axis=1)]
    best[nowhere] = int(np.argmin(st.loads))
    return best, nowhere


def _place(st: _State, counts: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The parts of one batch's rows, in rounds: every pending row chooses at the loads of the round's
    start; each part takes the rows that chose it, in row order, while they fit (the first one
    always: it fit on its own), and the others choose again with the loads updated. Rows that no
    part has room for all go to the lightest part at once."""
    b = w.shape[0]
    out = np.empty(b, dtype=np.int64)
    pending = np.arange(b)
    while pending.size:
        best, nowhere = _choose(st, counts[pending], w[pending])
        order = np.argsort(best, kind="stable")
        ws = w[pending][order]
        cum = np.cumsum(ws)
        first = np.r_[True, best[order][1:] != best[order][:-1]]
        start = np.maximum.accumulate(np.where(first, np.arange(order.size), 0))
        before = cum - ws - (cum[start] - ws[start])  # the weight of the earlier rows of its part
        ok_sorted = first | (st.loads[best[order]] + before + ws <= st.cap)
        ok = np.empty_like(ok_sorted)
        ok[order] = ok_sorted
        ok |= nowhere  # no part has room for these: all to the lightest, at once
        taken = pending[ok]
        out[taken] = best[ok]
        st.local += int(counts[taken, best[ok]].sum())
        st.loads += np.bincount(best[ok], weights=w[pending][ok], minlength=st.parts)
        st.forced += int((nowhere & ok).sum())
        pending = pending[~ok]
    return out


def _block_pass(st: _State, block: RowBlock, batch: int) -> None:
    """Place the rows of one block, ``batch`` at a time."""
    ip, cols = block.indptr, block.indices
    degrees = np.diff(ip)
    for b0 in range(0, block.r1 - block.r0, batch):
        b1 = min(b0 + batch, block.r1 - block.r0)
        e0, e1 = int(ip[b0]), int(ip[b1])
        rows = np.repeat(np.arange(b1 - b0, dtype=np.int64), degrees[b0:b1])
        counts = _neighbour_counts(st, rows, cols[e0:e1], block.r0 + b0, b1 - b0)
        parts = _place(st, counts, st.weights(degrees[b0:b1]))
        old = st.assign[block.r0 + b0 : block.r0 + b1]
        st.moved += int((old != parts).sum())
        old[:] = parts


def _blocks(stream: CSRStream, indptr: np.ndarray, order: str, seed: int, p: int, block_edges: int):
    """The row blocks of one pass: in row order, or (``blocks``) in a shuffle seeded by the seed and
    the pass. A block of the shuffle is read through ``CSRStream.blocks`` given its own slice of the
    row pointer (whose values are still the file positions of its entries)."""
    if order == "natural":
        yield from stream.blocks(block_edges, indptr=indptr)
        return
    spans = list(row_spans(indptr, block_edges))
    for k in _rng(seed, p).permutation(len(spans)):
        r0, r1 = spans[k]
        for blk in stream.blocks(block_edges, indptr=indptr[r0 : r1 + 1]):
            yield RowBlock(blk.r0 + r0, blk.r1 + r0, blk.indptr, blk.indices)


def fennel_stream(stream: CSRStream, parts: int, *, row_cost: float | None = None, seed: int = 0,
                  passes: int = PASSES, slack: float = SLACK, order: str = "natural", batch: int | None = None,
                  block_edges: int = BLOCK_ENTRIES, start: str = "clusters", initial=None) -> np.ndarray:
    """FENNEL with restreaming over ``stream`` (see the module docstring): the node → part map.

    Args:
        stream: the graph's in-edge CSR as row blocks (``CSRStream.of_folder`` / ``of_arrays``).
        parts: number of parts, ``1 <= parts <= N``.
        row_cost: ``None`` balances node counts; a number ``c`` weighs each node ``in-degree + c``
            (``1``: degree + 1, METIS's ``degree`` weight; ``balance.row_cost``: the memory a rank
            needs, as ``metis-memory``).
        seed: the tie-break order of the parts and, with ``order="blocks"``, the block shuffle.
        passes: the most streaming passes (the first one, then restreams); they stop earlier when
            they stop paying (:data:`CONVERGED`, after :data:`MIN_PASSES`).
        slack: ν, the capacity of a part over the mean weight.
        order: ``natural`` (node order) or ``blocks`` (a seeded shuffle of row blocks).
        batch: rows placed at once (default ``n / (64 P)``, 1 to 4096).
        block_edges: entries per row block read from the stream.
        start: ``clusters`` (restream from whole clusters of size-constrained label propagation,
            :mod:`fullgraph.partition.label_prop`) or ``empty`` (FENNEL's own first pass).
        initial: an assignment to restream from (``[N]`` part ids), instead of ``start``'s.

    Returns:
        ``node_part`` as the smallest integer dtype that holds the parts (:func:`part_dtype`),
        every part non-empty. Deterministic for a given graph, parts and options.
    """
    n = stream.num_nodes
    parts = _check(parts, n, passes, slack, order, row_cost, batch)
    if start not in STARTS:
        raise InputError(f"unknown fennel start {start!r} (expected one of: {', '.join(STARTS)})")
    st = _State(n, stream.num_edges, parts, row_cost, slack, seed)
    if parts == 1:
        st.assign[:] = 0
        return st.assign
    batch = int(batch) if batch is not None else max(1, min(MAX_BATCH, n // (64 * parts)))
    if initial is None and start == "clusters":
        initial = initial_parts(stream, parts, st.assign.dtype, batch=MAX_BATCH, block_edges=block_edges)
    started = initial is not None
    if started:
        st.assign[:] = _checked_initial(initial, n, parts)
        del initial  # the caller's, or the clusters' (freed here)
    _passes(st, stream, passes, batch, started, order=order, seed=seed, block_edges=block_edges)
    _fill_empty(st.assign, parts)
    return st.assign


def _passes(st: _State, stream: CSRStream, passes: int, batch: int, started: bool, *, order: str, seed: int,
            block_edges: int) -> None:
    """Stream ``stream`` until the passes stop paying (see :data:`MIN_PASSES` and :data:`CONVERGED`)."""
    indptr = stream.indptr()
    best = -1.0
    for p in range(passes):
        st.loads[:] = 0.0
        st.moved = st.forced = st.local = 0
        for block in _blocks(stream, indptr, order, seed, p, block_edges):
            _block_pass(st, block, batch)
        share = st.local / max(1, stream.num_edges)
        log.debug("fennel pass %d of at most %d on %s: %d nodes moved, %.4f of the entries local, largest part "
                  "%.3f of the mean, %d placed over capacity", p + 1, passes, stream.where, st.moved, share,
                  st.loads.max() * st.parts / st.n, st.forced)
        if st.moved == 0:
            break
        if started and p == 0:  # its share counts later neighbours in the start's parts: not comparable
            continue
        if p + 1 >= (3 if started else MIN_PASSES) and share < best + CONVERGED:
            break
        best = max(best, share)


def _checked_initial(initial, n: int, parts: int) -> np.ndarray:
    a = np.asarray(initial)
    if a.shape != (n,) or a.dtype.kind not in "iu" or (n and (a.min() < 0 or a.max() >= parts)):
        raise InputError(f"expected an initial assignment of {n} part ids in [0, {parts}) (got shape {a.shape}, "
                         f"dtype {a.dtype})")
    return a


def _fill_empty(assign: np.ndarray, parts: int, chunk: int = 1 << 22) -> None:
    """Give every empty part one node, the last node of the part with the most nodes (which then still
    has at least one): only very small graphs with many parts can end with an empty part."""
    sizes = np.zeros(parts, dtype=np.int64)
    for a in range(0, assign.shape[0], chunk):
        sizes += np.bincount(assign[a : a + chunk], minlength=parts)
    for empty in np.flatnonzero(sizes == 0):
        donor = int(np.argmax(sizes))
        for a in range(assign.shape[0], 0, -chunk):  # the last node of the donor, searched from the end
            hit = np.flatnonzero(assign[max(0, a - chunk) : a] == donor)
            if hit.size:
                assign[max(0, a - chunk) + int(hit[-1])] = empty
                break
        sizes[donor] -= 1
        sizes[empty] += 1


def stream_part_stats(stream: CSRStream, node_part: np.ndarray, parts: int,
                      block_edges: int = BLOCK_ENTRIES) -> dict[str, np.ndarray]:
    """Per part, in one pass over ``stream``: ``inner`` nodes, local ``edges`` (its rows' entries) and
    ``halo`` nodes, as ``PartitionBook.stats`` counts them, without the book's edge-sized arrays.

    The halo is counted from the rows' side: a node is in the halo of every other part its row
    touches, which is exact when the structure is symmetric (the loaders' standard one: a node's
    in-neighbours are its out-neighbours). On a directed graph this counts the parts each node
    reads from instead, an estimate of the parts that read it.
    """
    inner, edges, halo = (np.zeros(parts, dtype=np.int64) for _ in range(3))
    rows_at_once = max(1, (1 << 22) // parts)  # the [rows, P] table stays at a few MiB
    for block in stream.blocks(block_edges):
        for a in range(0, block.r1 - block.r0, rows_at_once):
            b = min(a + rows_at_once, block.r1 - block.r0)
            e0, e1 = int(block.indptr[a]), int(block.indptr[b])
            degrees = np.diff(block.indptr[a : b + 1])
            own = node_part[block.r0 + a : block.r0 + b].astype(np.int64)
            rows = np.repeat(np.arange(b - a, dtype=np.int64), degrees)
            key = rows * parts + node_part[block.indices[e0:e1]]
            touched = np.bincount(key, minlength=(b - a) * parts).reshape(b - a, parts) > 0
            touched[np.arange(b - a), own] = False
            halo += touched.sum(axis=0)
            inner += np.bincount(own, minlength=parts)
            edges += np.bincount(own, weights=degrees, minlength=parts).astype(np.int64)
    return {"inner": inner, "edges": edges, "halo": halo}


def fennel_folder(folder: str | os.PathLike, parts: int, *, row_cost: float | None = None, seed: int = 0,
                  **options) -> np.ndarray:
    """FENNEL straight from a native dataset folder, for writers that never load the graph.

    Reads ``indptr.npy`` (kept: 8 bytes per node; read again by the clusters' and the counts'
    passes) and ``indices.npy`` block by block, once per pass, by plain file reads (:meth:`CSRStream.of_folder`); returns ``node_part`` as
    :func:`fennel_stream` does (int8 up to 128 parts), the only other ``[N]`` array it holds.

    ``row_cost``: ``None`` balances node counts; for parts balanced by a model's memory, as
    ``--partitioner fennel`` makes them, pass ``balance.row_cost(balance.folder_counts(folder),
    cost)`` with ``cost = functools.partial(plan.variable_bytes, model_opts=plan.model_memory_options(cfg))``.
    ``seed`` and ``options`` (``passes``, ``slack``, ``order``, ``batch``, ``block_edges``): as
    :func:`fennel_stream`. The result equals ``fennel_stream`` on the same graph loaded in memory.
    """
    return fennel_stream(CSRStream.of_folder(folder), parts, row_cost=row_cost, seed=seed, **options)
