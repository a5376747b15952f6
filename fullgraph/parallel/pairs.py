"""The rows of a scored pair's two nodes where each rank holds the output rows of some nodes (link
prediction): the inner nodes of its part (graph parallelism), its block row (``spmm-1d``), its run of
rows (tensor parallelism).

A pair is scored by the owner of its source node, which holds that row; the row of the other end, when
another rank owns it, is asked for once per step: the distinct ids wanted from each owner cross in one
``all_to_all`` (``<category>/index``: the counts, then the ids), and the rows come back in one more, as a
halo exchange does (``<category>/fwd``, the gradient ``<category>/bwd``: ``comm.halo.exchange_halo``).
The bytes follow from the pairs and the owners alone (``plan.link.link_step_volume`` counts them the
same way).

The exchange runs within the group of ranks that together hold every output row once
(``Mesh.pair_group``): the world where each rank holds rows of its own (graph parallelism, ``spmm-1d``,
2D and 3D's pieces, tensor parallelism's runs); each grid column of ``spmm-1.5d``, whose ``c`` columns
are replicas of one another and each score every pair (their gradients are summed within the column,
as node labels' are); the last stage's graph ways in the pipeline and the hybrid.
"""

from __future__ import annotations

import torch

from fullgraph.comm.halo import HaloPlan, exchange_halo

__all__ = ["PairOwners", "planned_owners", "gather_rows", "take_ends"]


def planned_owners(mesh, num_nodes: int, permute: bool, seed: int) -> torch.Tensor | None:
    """The rank (of the pair exchange's group, ``Mesh.pair_group``) owning each node's output row in a
    layout whose rows follow from the node count alone (the SpMM layouts' block rows and pieces, tensor
    parallelism's runs, the pipeline's one last stage), as its engines hold them; ``None`` for the others
    (graph parallelism's and the hybrid's follow from the partition)."""
    from fullgraph.partition.blockrows import node_counts, row_blocks

    if mesh.chunked and mesh.graph_ways == 1:  # the pipeline: its last stage holds every row
        return torch.zeros(num_nodes, dtype=torch.int64)
    if mesh.tensor:
        runs = torch.arange(num_nodes).split(node_counts(num_nodes, mesh.nprocs))
    elif mesh.summa:  # process (i, j, l) holds piece j of sub-block (i, l) (parallel.spmm._summa)
        q, _, d = mesh.grid
        blocks = row_blocks(num_nodes, q, permute, seed)
        runs = [torch.tensor_split(torch.tensor_split(blocks[i], d)[l], q)[j]
                for i, j, l in (mesh.coords(r) for r in range(mesh.nprocs))]
    elif mesh.reads_block_rows:  # 1D and 1.5D: block row i, owned within each grid column by its rank i
        runs = row_blocks(num_nodes, mesh.block_rows, permute, seed)
    else:
        return None
    owner = torch.empty(num_nodes, dtype=torch.int64)
    for r, ids in enumerate(runs):
        owner[ids] = r
    return owner


def gather_rows(comm, t: torch.Tensor, category: str) -> torch.Tensor:
    """Every rank's rows of ``t`` over ``comm`` (any count per rank, same trailing shape), concatenated in
    rank order: two all-gathers, of the counts and of the rows padded to the largest count."""
    n = torch.tensor([t.shape[0]], dtype=torch.int64, device=t.device)
    sizes = [int(c) for c in comm.all_gather(n, category)]
    padded = t.new_zeros((max(sizes),) + tuple(t.shape[1:]))
    padded[: t.shape[0]] = t
    return torch.cat([p[:k] for p, k in zip(comm.all_gather(padded, category), sizes)])


def take_ends(table: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, halves: bool = False):
    """``(table[src], table[dst])``; with ``halves``, the ends not gathered: ``(the first half of the columns,
    src, the second half, dst)``, each half a contiguous table of its own (an edge decoder's projections,
    ``tasks.decoders.EdgeMLPDecoder.project``, which ``ops.edge_hidden`` gathers and sums in one pass)."""
    if not halves:
        return table[src], table[dst]
    w = table.shape[1] // 2
    return table[:, :w].contiguous(), src, table[:, w:].contiguous(), dst


class PairOwners:
    """Who owns each node's output row (``owner``: a rank of ``comm``) and where in its rows (``local``),
    on every rank of ``comm`` (default: the engine's world; ``None`` where one rank holds every row, which
    then exchanges nothing); ``ids``: the global ids of this rank's output rows."""

    def __init__(self, engine, ids: torch.Tensor, comm="world"):
        self.engine = e = engine
        self.comm = comm = e.comm if comm == "world" else comm
        self.rank, self.world_size = (comm.rank, comm.world_size) if comm is not None else (0, 1)
        counts = [ids.numel()]
        if comm is not None:
            n = torch.tensor([ids.numel()], dtype=torch.int64, device=e.device)
            counts = [int(c) for c in comm.all_gather(n, "meta/metrics")]
            ids = gather_rows(comm, ids.to(e.device)[:, None], "meta/metrics")[:, 0]
        ids = ids.cpu()
        self.num_nodes = n = ids.numel()
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
        return self.owner[pairs[:, 0]] == self.rank

    def wanted(self, dst: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        """The distinct ids of ``dst`` another rank owns, grouped by owner (ids ascending within), and
        how many go to each owner."""
        far = dst[self.owner[dst] != self.rank].unique()
        far = far[torch.argsort(self.owner[far], stable=True)]
        counts = torch.bincount(self.owner[far], minlength=self.world_size)
        return far, [int(c) for c in counts]

    def rows(self, out: torch.Tensor, pairs: torch.Tensor, category: str, precision: str = "fp32",
             halves: bool = False):
        """``(src rows, dst rows)`` of ``pairs``, all of whose sources this rank owns (``halves``: the ends not
        gathered, as :func:`take_ends` gives them, and only the second half of a far row travels: half the
        bytes)."""
        dev, comm, P = out.device, self.comm, self.world_size
        if comm is None:
            src, dst = (self.local[pairs[:, k]].to(dev) for k in (0, 1))
            return take_ends(out, src, dst, halves)
        far, want_counts = self.wanted(pairs[:, 1])
        counts = comm.all_to_all_rows(torch.tensor(want_counts, dtype=torch.int64, device=dev), [1] * P, [1] * P,
                                      f"{category}/index")
        asked_counts = [int(c) for c in counts]
        asked = comm.all_to_all_rows(far.to(dev), want_counts, asked_counts, f"{category}/index").cpu()
        plan = HaloPlan(self.local[asked].to(dev), asked_counts, want_counts, asked.to(dev), far.to(dev))
        position = self.local.clone()
        position[far] = out.shape[0] + torch.arange(far.numel())
        src, dst = (position[pairs[:, k]].to(dev) for k in (0, 1))
        if halves:  # the far ends are destinations: only their second half travels
            w = out.shape[1] // 2
            second = out[:, w:].contiguous()
            return out[:, :w].contiguous(), src, torch.cat([second, exchange_halo(second, comm, plan, category,
                                                                                  precision)]), dst
        return take_ends(torch.cat([out, exchange_halo(out, comm, plan, category, precision)]), src, dst)
