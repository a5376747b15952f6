"""Link prediction in the pipeline and the hybrid (GNNPipe's layouts): a loss that joins rows of two chunks.

A chunk's backward starts from its share of the loss, but a link's loss reads the output rows of both
ends of a pair, which the pipeline computes in different chunks. The last stage therefore keeps every
chunk's output rows of the step (with their graphs), and once all chunks' forwards are in (GPipe's flush)
puts them together in node order, scores the step's pairs on them and takes the loss's gradient ``G``
with respect to those rows (the decoder's weights get theirs here). Each chunk's backward then starts
from ``sum(out_k * G[rows of k])``, whose gradient with respect to ``out_k`` is ``G``'s rows: the chunk-wise
backward carries on unchanged, chunks in reverse order, with the exact gradient of the step's loss.

The last stage's graph ways hold the output rows of their parts' inner nodes: a pair's rows are
exchanged among them (``parallel.pairs``; the pipeline's one way holds every row and exchanges none).
The other stages hold no output rows: they score no pair, and send no scores to an evaluation's
gather but an empty share.
"""

from __future__ import annotations

import torch

from fullgraph.parallel.pairs import PairOwners, take_ends

__all__ = ["StagePairs", "joined_loss"]


class StagePairs:
    """The pair methods of ``Engine`` for a chunked engine (``parallel.pipeline.ChunkedEngine``)."""

    def graph_nodes(self) -> int:
        return self.global_num_nodes

    def bind_pairs(self) -> None:
        """The last stage's ways learn who owns which output row (collective within the stage)."""
        if self.last_stage:
            self.pairs = PairOwners(self, self.local_ids[: self.n_inner], self.group)

    def pair_share(self, pairs: torch.Tensor) -> torch.Tensor:
        if not self.last_stage:
            return torch.zeros(pairs.shape[0], dtype=torch.bool)
        return self.pairs.share(pairs)

    def pair_rows(self, out: torch.Tensor, pairs: torch.Tensor, category: str, halves: bool = False):
        if not self.last_stage:
            return take_ends(out[:0], pairs[:0, 0], pairs[:0, 1], halves)
        return self.pairs.rows(out, pairs, category, self.link.precision, halves)


def joined_loss(engine, model, passes: dict, chunks, rows: int, epoch: int, step: int) -> float:
    """The task's loss of the step on every chunk's output rows, put together (``passes[k].loss`` holds
    chunk k's output rows until then); each ``passes[k].loss`` becomes the chunk's surrogate loss (module
    doc). Returns this rank's share of the loss."""
    outs = {k: p.loss for k, p in passes.items()}
    first = next(iter(outs.values()))
    whole = first.new_zeros((rows, first.shape[1]))
    for k, out in outs.items():
        whole[chunks[k].dst] = out.detach()
    whole.requires_grad_()
    loss = engine.task.loss(engine, model, whole, epoch, step)
    loss.backward()
    grad = whole.grad if whole.grad is not None else torch.zeros_like(whole)
    for k, out in outs.items():
        passes[k].loss = (out * grad[chunks[k].dst]).sum()
    return float(loss.detach())
