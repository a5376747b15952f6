"""The bytes the pair exchange of links and labelled edges moves (``parallel.pairs``), from the pairs and
the partition.

A step's pairs are scored by the owners of their sources; each owner asks for the distinct far ends it
lacks, once: ``link/index`` carries every rank's count to every other (P·(P−1) int64s) and the asked ids
(one int64 each), ``link/fwd`` the rows (``width`` values each at the wire's precision: an embedding, or an
edge decoder's destination half of the projections, as wide) and ``link/bwd`` their gradients. The pairs of
a step are the task's own draw (``LinkTask.step_pairs``, ``EdgeTask.step_pairs``), so the count is exact, not
expected: the ledger of a run equals it byte for byte.
"""

from __future__ import annotations

import torch

__all__ = ["link_step_volume", "link_epoch_volume", "link_eval_volume", "link_epoch_row", "link_exchange_seconds", "link_task"]


def link_step_volume(pairs: torch.Tensor, node_part: torch.Tensor, width: int, nprocs: int,
                     row_bytes: int | None = None, prefix: str = "", groups: int = 1,
                     world: int | None = None, scored_bytes: int = 16) -> dict[str, int]:
    """Bytes by ledger category of one step that scores ``pairs`` (``[n, 2]`` global ids) over parts
    ``node_part`` (ranks ``0..nprocs-1`` of the exchange's group, ``Mesh.pair_group``), in each
    of ``groups`` groups (replicas that score every pair); ``row_bytes``: one row on the wire (default:
    ``width`` float32s). ``prefix`` ``eval/``: the same exchange in evaluation, in one group, which sends
    no gradient back, and the gather of every rank's ``(index, scores)`` float64 rows (``scored_bytes`` each:
    the task's ``gathered_row_bytes``) over the ``world`` (default ``nprocs``; ``Engine.gather_rows``: a count,
    then as many rows as the rank with the most, from each rank to every other; ranks outside the group
    send none)."""
    owner = torch.as_tensor(node_part, dtype=torch.int64)
    pairs = torch.as_tensor(pairs, dtype=torch.int64)
    src_owner = owner[pairs[:, 0]]
    rows, most = 0, 0
    for r in range(nprocs):
        dst = pairs[src_owner == r, 1]
        rows += int(dst[owner[dst] != r].unique().numel())
        most = max(most, dst.numel())
    row_bytes = 4 * width if row_bytes is None else row_bytes
    out = {f"{prefix}link/index": 8 * (nprocs * (nprocs - 1) + rows), f"{prefix}link/fwd": rows * row_bytes}
    if prefix:
        world = nprocs if world is None else world
        return out | {"eval/reduce": world * (world - 1) * (8 + scored_bytes * most)}
    return {k: v * groups for k, v in (out | {"link/bwd": rows * row_bytes}).items()}


def link_eval_volume(task, node_part, width: int, nprocs: int, row_bytes: int | None = None,
                     world: int | None = None) -> dict[str, int]:
    """The bytes of one evaluation of a pair task (its ``evaluation_pairs``, a chunk at a time)."""
    total: dict[str, int] = {}
    for pairs in task.evaluation_pairs():
        for k, v in link_step_volume(pairs, node_part, width, nprocs, row_bytes, prefix="eval/", world=world,
                                     scored_bytes=task.gathered_row_bytes).items():
            total[k] = total.get(k, 0) + v
    return total


def link_epoch_volume(task, epoch: int, node_part, width: int, nprocs: int,
                      row_bytes: int | None = None, groups: int = 1) -> dict[str, int]:
    """The sum of :func:`link_step_volume` over the steps of ``epoch`` of a pair task (links, labelled edges)."""
    total: dict[str, int] = {}
    for step in range(task.steps(epoch)):
        pairs = task.step_pairs(epoch, step)[0]
        for k, v in link_step_volume(pairs, node_part, width, nprocs, row_bytes, groups=groups).items():
            total[k] = total.get(k, 0) + v
    return total


TRAIN_EXCHANGES, EVAL_EXCHANGES = 4, 5
"""All-to-alls of the pair exchange: a training step's counts, ids, rows and the rows' gradients back
(``parallel.pairs``); an evaluation chunk's counts, ids and rows, then the scores' gather (a count and
the rows, ``Engine.gather_rows``)."""


def link_exchange_seconds(volume: dict[str, int], rounds: int, nprocs: int, network, prefix: str = "",
                          groups: int = 1) -> float:
    """The time of ``rounds`` steps (``prefix`` ``eval/``: evaluation chunks) of the pair exchange whose
    bytes by category are ``volume`` over ``network`` (``plan.epoch_time.Network``), run by ``groups``
    groups of ``nprocs`` ranks at once: each rank sends its share of the bytes (their total over the
    ranks) as all-to-alls, each a message to every other rank of its group."""
    if nprocs < 2 or network is None:
        return 0.0
    nbytes = sum(v for k, v in volume.items() if k.startswith(f"{prefix}link/") or (prefix and k == "eval/reduce"))
    messages = rounds * (EVAL_EXCHANGES if prefix else TRAIN_EXCHANGES) * (nprocs - 1)
    return network.seconds(0.0, messages, nbytes / (nprocs * groups))


def link_task(cfg):
    """The pair task (links, or labelled edges) ``train`` would run with ``cfg``: its split drawn (or read) as
    ``train`` does."""
    from fullgraph.tasks import task_for

    return task_for(cfg)


def link_epoch_row(row: dict, cfg, node_part, width: int, network=None, task=None) -> dict:
    """A plan row of one training step (``cli.plan.plan_layout``) made the row of a link epoch of ``cfg``:
    each step recomputes the encoder, so the training bytes and times count once per step (evaluation
    once an epoch), and over the owners ``node_part`` (``None``: one process) the pair exchange of epoch 1
    is added (the epochs differ only in which pairs are drawn), at the wire precision of graph
    parallelism, fp32 in the others, with an evaluation's (in place of node labels' sums), its time on
    ``network`` (:func:`link_exchange_seconds`) too. The decoder's work is not in the time estimate.
    ``task``: the run's pair task where the caller has it (else drawn here)."""
    from fullgraph.comm.precision import row_bytes

    task = link_task(cfg) if task is None else task
    steps = task.steps(1)
    once = ("eval/", "meta/")
    volume = {k: v if k.startswith(once) else v * steps for k, v in row["by_category"].items()}
    train_s = eval_s = 0.0
    if node_part is not None:
        mesh = cfg.parallel.mesh
        ranks, groups = mesh.pair_group
        wire = "fp32" if mesh.reads_block_rows else cfg.parallel.comm_precision
        volume.pop("eval/reduce", None)  # node labels' sums: a link evaluation gathers scores instead
        volume |= link_epoch_volume(task, 1, node_part, width, ranks, row_bytes(width, wire), groups)
        volume |= link_eval_volume(task, node_part, width, ranks, row_bytes(width, wire), mesh.nprocs)
        train_s = link_exchange_seconds(volume, steps, ranks, network, groups=groups)
        eval_s = link_exchange_seconds(volume, sum(1 for _ in task.evaluation_pairs()), ranks, network, "eval/")
    per_epoch = lambda t: steps * (t - row["eval_s"]) + row["eval_s"] + train_s + eval_s  # noqa: E731
    return row | {"by_category": volume, "bytes_per_epoch": sum(volume.values()), "steps_per_epoch": steps,
                  "epoch_s": per_epoch(row["epoch_s"]), "epoch_s_rounds": [per_epoch(t) for t in row["epoch_s_rounds"]],
                  "compute_s": steps * row["compute_s"], "comm_s": steps * row["comm_s"] + train_s,
                  "bubble_s": steps * row["bubble_s"], "eval_s": row["eval_s"] + eval_s}
