"""Parameter rows owned by nodes (R-GCN's learned embeddings) under graph parallelism.

A featureless node type's embedding has a row per node. Replicated, every rank would hold the whole
table with its Adam moments and sum its gradient over the ranks in the weight all-reduce, though a
row's gradient comes only from the ranks that read the node. Owned instead (``GNN.hold_rows``), a
rank keeps the rows of its inner nodes only, and their optimizer state thereby too (Adam's moments
follow the parameter): the model's ``pre`` runs on the inner rows and the halo rows of its output are
fetched like a layer's input (one more halo exchange, ``GNN.fetches_input``), whose backward brings
each row's gradient from the ranks that read it to its owner. The table's gradient is then complete
where it lives and never enters the all-reduce; the rows differ per rank, so a checkpoint keeps them
under each rank's own name (``train.checkpoint``) and ``model.pt`` gets the whole table put back
together in node order (:func:`consolidate_owned`), the one single-process training would have.

Adam and weight decay act element by element, so a row's update is the same wherever it lives: the
owned run trains the same numbers as one process.
"""

from __future__ import annotations

import torch

__all__ = ["is_owned", "shared_params", "owned_sq_norm", "consolidate_owned"]


def is_owned(p: torch.Tensor) -> bool:
    """Whether ``p`` holds rows of this rank's nodes only (set by ``hold_rows``)."""
    return bool(getattr(p, "node_owned", False))


def shared_params(model) -> list[torch.nn.Parameter]:
    """The trainable parameters every rank holds alike: those the gradient all-reduce sums."""
    return [p for p in model.parameters() if p.requires_grad and not is_owned(p)]


def owned_sq_norm(model) -> float:
    """Σ‖grad‖² of this rank's owned rows: its share of the whole model's norm, whoever the main rank is."""
    return float(sum(p.grad.detach().double().square().sum() for p in model.parameters()
                     if is_owned(p) and p.grad is not None))


def consolidate_owned(engine, model, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` with every owned table whole, its rows in global id order (collective; rank 0's is whole)."""
    state = dict(state)
    for key, ids in model.owned_tables().items():
        all_ids = engine.gather_rows(ids, "eval/reduce")
        rows = engine.gather_rows(state[key], "eval/reduce")
        state[key] = rows[torch.argsort(all_ids)]
    return state
