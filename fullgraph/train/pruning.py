"""What pruning would save, measured at set-up: the rows per layer a run computes, and a word to
the user when ``--prune`` would cut the work at least in half (``fullgraph.parallel.prune``).

Pruning is not the default: it is exact, but on a dense training split (most nodes labelled, or a
receptive field that covers the graph within L hops) it computes the same rows as full training plus
the cost of cutting the blocks, and under boundary sampling it rebuilds them every epoch.
"""

from __future__ import annotations

import logging

__all__ = ["WORTH_IT", "rows_per_layer"]

log = logging.getLogger("fullgraph")

WORTH_IT = 2.0
"""``train`` suggests ``--prune`` when full training computes at least this many times the rows."""


def rows_per_layer(engine, model) -> dict | None:
    """The rows each graph layer computes in a training step, summed over the ranks, and those the
    loss needs (collective; ``None`` where the layout cannot prune). Says, on rank 0, when
    ``--prune`` would compute at least :data:`WORTH_IT` times fewer."""
    if not engine.prunable:
        return None
    engine.set_up_pruning(model)
    needed, nodes = engine.rows_needed()
    computed = needed if engine.prune else (engine.rows_computed(model) or [nodes] * len(needed))
    full = sum(computed)
    if engine.is_main and not engine.prune and full >= WORTH_IT * sum(needed):
        log.info("the loss reads %d of %d rows per layer on average: --prune computes only those, "
                 "%.1fx less work for the same loss and gradients", round(sum(needed) / len(needed)),
                 round(full / len(needed)), full / max(sum(needed), 1))
    return {"computed": list(computed), "needed": needed}
