"""The rows of a scored pair's two nodes where each rank holds the output rows of some nodes (link
prediction): the inner nodes of its part (graph parallelism), its block row (``spmm-1d``), its run of
rows (tensor parallelism).

A pair is scored by the owner of its source node, which holds that row; the row of the other end, when
another rank owns it, is asked for once per step: the distinct ids wanted from each owner cross in one
``all_to_all`` (``<category>/index``: the counts, then the ids), and the rows come back in one more, as a
halo exchange does (``<category>/fwd``, the gradient ``<category>/bwd``: ``comm.halo.exchange_halo``).
The bytes follow from the pairs and the owners alone (``plan.link.link_step_volume`` counts them the
same way).
"""

from __future__ import annotations

import torch

from fullgraph.comm.halo import HaloPlan, exchange_halo

__all__ = ["PairOwners", "planned_owners"]


def planned_owners(mesh, num_nodes: int, permute: bool, seed: int) -> torch.Tensor | None:
    """The rank owning each node's output row in a layout whose rows follow from the node count alone
    (``spmm-1d``'s block rows, tensor parallelism's runs), as its engines hold them; ``None`` for the
    others (graph parallelism's follow from its partition)."""
    from fullgraph.partition.blockrows import node_counts, row_blocks

    if mesh.tensor:
        runs = torch.arange(num_nodes).split(node_counts(num_nodes, mesh.nprocs))
    elif mesh.reads_block_rows:
        runs = row_blocks(num_nodes, mesh.block_rows, permute, seed)
    else:
        return None
    owner = torch.empty(num_nodes, dtype=torch.int64)
    for r, ids in enumerate(runs):
        owner[ids] = r
    return owner


class PairOwners:
    """Who owns each node's output row (``owner``) and where in its rows (``local``), on every rank;
    ``ids``: the global ids of this rank's output rows."""

    def __init__(self, engine, ids: torch.Tensor):
        self.engine = e = engine
        ids = ids.to(e.device)
        counts = [int(c) for c in e.gather(float(ids.numel()), "meta/metrics")]
        ids = e.gather_rows(ids[:, None], "meta/metrics")[:, 0].cpu()
        self.num_nodes = n = sum(counts)
        self.owner = torch.full((n,), -1, dtype=torch.int64)
        self.local = torch.full((n,), -1, dtype=torch.int64)
        at = 0
        for r, c in enumerate(counts):
            self.owner[ids[at:at + c]] = r
            self.local[ids[at:at + c]] = torch.arange(c)
            at += c
        if e.ledger is not None:
            e.ledger.take()  # set-up, not an epoch's traffic

    def share(self, pairs: torch.Tensor) -> torch.Tensor:
        return self.owner[pairs[:, 0]] == self.engine.rank

    def wanted(self, dst: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        """The distinct ids of ``dst`` another rank owns, grouped by owner (ids ascending within), and
        how many go to each owner."""
        e = self.engine
        far = dst[self.owner[dst] != e.rank].unique()
        far = far[torch.argsort(self.owner[far], stable=True)]
        counts = torch.bincount(self.owner[far], minlength=e.world_size)
        return far, [int(c) for c in counts]

    def rows(self, out: torch.Tensor, pairs: torch.Tensor, category: str, precision: str = "fp32"):
        """``(src rows, dst rows)`` of ``pairs``, all of whose sources this rank owns."""
        e, dev = self.engine, out.device
        far, want_counts = self.wanted(pairs[:, 1])
        P = e.world_size
        counts = e.comm.all_to_all_rows(torch.tensor(want_counts, dtype=torch.int64, device=dev), [1] * P, [1] * P,
                                        f"{category}/index")
        asked_counts = [int(c) for c in counts]
        asked = e.comm.all_to_all_rows(far.to(dev), want_counts, asked_counts, f"{category}/index").cpu()
        plan = HaloPlan(self.local[asked].to(dev), asked_counts, want_counts, asked.to(dev), far.to(dev))
        got = exchange_halo(out, e.comm, plan, category, precision)
        table = torch.cat([out, got])
        position = self.local.clone()
        position[far] = out.shape[0] + torch.arange(far.numel())
        src, dst = (position[pairs[:, k]].to(dev) for k in (0, 1))
        return table[src], table[dst]
