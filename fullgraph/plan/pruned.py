"""What ``--prune`` computes and moves, counted on the whole graph before anything runs.

The rows layer l needs (``need[l]``) are the training nodes for the last layer and grow by one hop of
in-neighbours per layer below it (``fullgraph.parallel.prune``). Per part of a partition, per layer,
this counts the rows the part computes, the non-zeros of Â those rows hold, the halo rows it reads
(nodes of other parts in those rows' columns) and the rows the other parts read from it: what the
volumes (``plan.volumes``, ``halo/fwd`` and ``halo/bwd``) and each rank's work (``plan.rank_work``)
take for a pruned run. The counts come from products with the aggregation matrix, one per part and
layer, independently of how a rank finds its rows (an exchange of ids with its peers).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fullgraph.ops import Block
from fullgraph.ops.sparse import columns_read

__all__ = ["MANY_STEPS", "MINIBATCH", "PrunedCounts", "minibatch_outlook", "pruned_counts"]


@dataclass
class PrunedCounts:
    """Per layer 1..L (index l - 1), lists over the parts."""

    rows: list[list[int]]
    """Rows each part computes."""
    src: list[list[int]]
    """Rows each part reads: its own rows of the layer below, and the halo rows."""
    nnz: list[list[int]]
    """Non-zeros of Â in the rows each part computes."""
    halo: list[list[int]]
    """Halo rows each part receives (0 for layer 1: features are at hand)."""
    send: list[list[int]]
    """Rows each part sends to the others (0 for layer 1)."""

    @property
    def layers(self) -> int:
        return len(self.rows)

    def total_rows(self) -> list[int]:
        """Rows computed per layer, all parts together."""
        return [sum(r) for r in self.rows]

    def halo_rows(self) -> list[int]:
        """Halo rows received per layer 2..L, all parts together (what ``plan.volumes.partition_volume`` takes)."""
        return [sum(h) for h in self.halo[1:]]


def pruned_counts(graph, norm: str, layers: int, node_part: torch.Tensor | None = None,
                  parts: int = 1) -> PrunedCounts:
    """The counts of a pruned run of ``layers`` graph layers aggregating with ``norm``, on ``graph``
    cut by ``node_part`` into ``parts`` (default: one part, the whole graph)."""
    adj = Block.from_graph(graph, norm).adj
    node_part = torch.zeros(graph.num_nodes, dtype=torch.int64) if node_part is None else node_part.long()
    degree = adj.indptr.diff()
    need = [None] * (layers + 1)
    need[layers] = graph.train_mask.clone()
    for layer in range(layers, 0, -1):
        need[layer - 1] = need[layer] | columns_read(adj, need[layer])
    out = PrunedCounts([], [], [], [], [])
    for layer in range(1, layers + 1):
        rows, src, nnz, halo, read_from = [], [], [], [], torch.zeros(parts, parts, dtype=torch.int64)
        for r in range(parts):
            mine = need[layer] & (node_part == r)
            read = columns_read(adj, mine) & (node_part != r)
            read_from[r] = torch.bincount(node_part[read], minlength=parts)
            rows.append(int(mine.sum()))
            nnz.append(int(degree[mine].sum()))
            halo.append(int(read.sum()))
            src.append(int((need[layer - 1] & (node_part == r)).sum()) + halo[-1])
        out.rows.append(rows)
        out.src.append(src)
        out.nnz.append(nnz)
        out.halo.append(halo if layer > 1 else [0] * parts)
        out.send.append(read_from.sum(0).tolist() if layer > 1 else [0] * parts)
    return out


MINIBATCH = 1024
"""The mini-batch size the outlook compares with (PyG's ``NeighborLoader`` examples, and what
``benchmarks/time_to_accuracy.py`` ran)."""
MANY_STEPS = 4
"""Mini-batch updates per epoch from which mini-batch training is expected to reach the target accuracy
sooner than full-graph training's one update per epoch. Set from ``benchmarks/README.md``, "Time to
accuracy" (SAGE 3 x 256; read in full in benchmarks/history/2026-11-25-time-to-accuracy.md): with one or
two batches of training nodes (Coauthor-Physics's and Amazon-Computers's standard splits) full-graph
training with ``--prune`` was as fast or faster, or within a hair; with 6 to 10 (Tolokers,
Amazon-Computers 60 %, the 10^7-edge planted graph at 1 %) ClusterGCN reached the target first, on the
many weight updates each epoch makes (Coauthor-Physics 60 %, 21 batches, was a tie: a sentence of
"likely", not a promise)."""


def minibatch_outlook(num_train: int, nodes: int, needed_rows: list[int]) -> str:
    """One sentence: whether mini-batch training would likely reach accuracy sooner on this split, and
    why (the number of weight updates an epoch makes, and the share of rows a pruned step computes)."""
    batches = -(-num_train // MINIBATCH)
    share = sum(needed_rows) / max(1, nodes * len(needed_rows))
    if batches >= MANY_STEPS:
        return (f"mini-batch training would likely reach accuracy sooner: its {num_train} training nodes make "
                f"{batches} batches of {MINIBATCH}, {batches} weight updates per epoch where full-graph training "
                f"makes one, and even pruned a step computes {share:.0%} of the rows")
    return (f"full-graph training with --prune would likely reach accuracy as soon as mini-batch training: the "
            f"{num_train} training nodes fill {batches} batch{'es' if batches > 1 else ''} of {MINIBATCH}, so "
            f"sampling saves few updates, and --prune computes only the {share:.0%} of the rows the loss needs")
