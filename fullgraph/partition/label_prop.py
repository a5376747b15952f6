"""Size-constrained label propagation: the clusters a streaming partitioner starts from.

Why. FENNEL's first pass places a node seeing only the neighbours placed before it. When the node
ids say nothing of the structure (a crawl's ids shuffled, a planted partition drawn at random), the
early nodes have no placed neighbours and land wherever the loads are lowest, and the restreams
that follow only repair that start locally: on a planted partition of 10^5 nodes (5 classes,
homophily 0.7) the replication factor stalls at 1.5x METIS's however many passes are made. Label
propagation (Raghavan, Albert & Kumara, 2007) finds the communities from every neighbour at once;
with each cluster capped (Meyerhenke, Sanders & Schulz's size-constrained variant, used by KaHIP
to coarsen) it yields clusters no larger than a part. Packing whole clusters into parts, then
restreaming with FENNEL, starts the stream from communities instead of from noise: on that planted
graph α fell from 2.50 to 1.84 (METIS: 1.65), on R-MAT at P = 16 from 1.25 to 1.11 (METIS: 1.13).

How. :data:`PASSES` streaming passes over the rows, ``batch`` rows at a time: each node takes the
label most of its neighbours hold, among clusters below the cap (its own always allowed; a tie
keeps its own label, else the smallest), sizes updated after each batch (a batch may overfill a
cluster by its own rows; the cap is a guide, the restreams enforce the parts' capacity). Then the
labels are renumbered ``0..K-1`` and the clusters packed into parts largest first, each into the
lightest part (LPT), the many small ones by filling the room left in order.

Memory: the labels and the cluster sizes, 4 bytes per node each (8 past 2^31 nodes), and one batch
of neighbour labels; packing adds about 24 bytes per cluster (about a fifth of the nodes on R-MAT,
every node on a graph without edges); all freed once the parts are packed (the packed assignment is the caller's, one
byte per node up to 128 parts).
"""

from __future__ import annotations

import numpy as np

from fullgraph.data.formats.native_stream import CSRStream

__all__ = ["PASSES", "cluster", "pack_clusters", "initial_parts"]

PASSES = 3
"""Label propagation passes: most labels settle in two; a third is cheap next to the restreams."""

LPT_CLUSTERS = 1 << 16
"""Clusters packed one by one (largest first); the rest, small, fill the room left in order."""


def _label_dtype(n: int) -> np.dtype:
    return np.dtype(np.int32) if n <= np.iinfo(np.int32).max else np.dtype(np.int64)


def _batch_labels(labels, sizes, cap, rows, cols, r0: int, b: int):
    """The new labels of rows ``r0..r0+b``: the most frequent label among their neighbours of the
    clusters below ``cap`` (own label allowed, and preferred on a tie)."""
    n = labels.shape[0]
    own = labels[r0 : r0 + b].astype(np.int64)
    key, cnt = np.unique(rows * n + labels[cols], return_counts=True)
    if not key.size:  # rows without neighbours keep their labels
        return own, own
    r, lab = key // n, key % n
    stay = lab == own[r]
    score = np.where(stay | (sizes[lab] < cap), 2 * cnt + stay, -1)
    order = np.lexsort((-score, r))
    pick = order[np.r_[True, r[order][1:] != r[order][:-1]]]
    new = own.copy()
    ok = score[pick] >= 0
    new[r[pick][ok]] = lab[pick][ok]
    return own, new


def cluster(stream: CSRStream, cap: int, *, passes: int = PASSES, batch: int = 4096,
            block_edges: int | None = None) -> np.ndarray:
    """Cluster labels (node ids of a cluster's first member, then renumbered ``0..K-1``) of
    size-constrained label propagation over ``stream`` (see the module docstring)."""
    n = stream.num_nodes
    dt = _label_dtype(n)
    labels, sizes = np.arange(n, dtype=dt), np.ones(n, dtype=dt)
    indptr = stream.indptr()
    kw = {} if block_edges is None else {"max_edges": block_edges}
    for _ in range(passes):
        for block in stream.blocks(indptr=indptr, **kw):
            ip, cols = block.indptr, block.indices
            for b0 in range(0, block.r1 - block.r0, batch):
                b1 = min(b0 + batch, block.r1 - block.r0)
                rows = np.repeat(np.arange(b1 - b0, dtype=np.int64), np.diff(ip[b0 : b1 + 1]))
                old, new = _batch_labels(labels, sizes, cap, rows, cols[int(ip[b0]) : int(ip[b1])],
                                         block.r0 + b0, b1 - b0)
                moved = old != new
                np.subtract.at(sizes, old[moved], 1)
                np.add.at(sizes, new[moved], 1)
                labels[block.r0 + b0 : block.r0 + b1] = new
    present = sizes > 0
    np.cumsum(present, out=sizes)  # sizes becomes the renumbering: label -> its rank among the live ones
    sizes -= 1
    del present
    for a in range(0, n, 1 << 22):
        labels[a : a + (1 << 22)] = sizes[labels[a : a + (1 << 22)]]
    return labels


def pack_clusters(labels: np.ndarray, parts: int, out_dtype) -> np.ndarray:
    """Each cluster's part: the :data:`LPT_CLUSTERS` largest one by one into the lightest part, the
    rest in order into the room each part has left below the mean."""
    sizes = np.bincount(labels)
    order = np.argsort(-sizes, kind="stable")
    part_of = np.empty(sizes.shape[0], dtype=out_dtype)
    loads = np.zeros(parts, dtype=np.int64)
    for c in order[:LPT_CLUSTERS]:
        i = int(np.argmin(loads))
        part_of[c] = i
        loads[i] += sizes[c]
    rest = order[LPT_CLUSTERS:]
    if rest.size:
        room = np.maximum(0, -(-labels.shape[0] // parts) - loads)
        ends = np.cumsum(room)
        mid = np.cumsum(sizes[rest]) - sizes[rest] / 2
        part_of[rest] = np.minimum(np.searchsorted(ends, mid, side="right"), parts - 1)
    return part_of


def initial_parts(stream: CSRStream, parts: int, out_dtype, *, batch: int = 4096,
                  block_edges: int | None = None) -> np.ndarray:
    """A node -> part map of whole clusters, each cluster at most a part's size: FENNEL's start."""
    labels = cluster(stream, max(1, stream.num_nodes // parts), batch=batch, block_edges=block_edges)
    part_of = pack_clusters(labels, parts, out_dtype)
    out = np.empty(labels.shape[0], dtype=out_dtype)
    for a in range(0, labels.shape[0], 1 << 22):
        out[a : a + (1 << 22)] = part_of[labels[a : a + (1 << 22)]]
    return out
