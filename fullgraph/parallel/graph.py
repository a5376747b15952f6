"""Graph (partition) parallelism, with BNS-GCN's boundary node sampling.

Each rank owns one part: its inner rows, the rows of its halo nodes and its local block (rows =
inner nodes, columns = inner then halo nodes, normalized as in the full graph). A layer's dst rows
are the part's inner nodes; before every layer after the first, the halo rows of its input are
fetched from their owners in one ``all_to_all`` (``exchange_halo``), and its gradient travels back the
same way. The first layer reads features, which the part holds for its halo nodes too, so the first
layer needs no exchange at all (nor, therefore, a backward one); node-wise input transforms (GCNII's
and ResGCN+'s input layer) run on the halo rows locally, and the gradient they collect there is
exactly this part's share, so the all-reduce of weight gradients still sums to the global gradient.

The loss is divided by the global number of training nodes and the weight gradients are summed
over ranks in one flat all-reduce per epoch, after backward: P ranks compute exactly the
single-process gradient, and no gradient collective can interleave with halo exchanges.

Boundary sampling (``boundary_rate`` p < 1): at every training epoch each part keeps each halo node
with probability p (drawn from seed, epoch and part id), tells the owners which rows it needs
(``sample/index``), receives only those, and scales the kept halo columns of its block by 1/p.
Evaluation never samples.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.comm.context import Comm
from fullgraph.comm.halo import HaloPlan, exchange_halo
from fullgraph.comm.precision import check_precision
from fullgraph.comm.stats import sum_over
from fullgraph.errors import InputError
from fullgraph.ops.csr import indptr_from_counts
from fullgraph.parallel.engine import (ReplicatedEngine, all_reduce_grads, feature_rows, input_features, squared_norm,
                                       torchrun_env, world_comm)
from fullgraph.parallel.owned import consolidate_owned, owned_sq_norm, shared_params

__all__ = ["GraphEngine", "boundary_sample", "check_parts", "graph_engine"]


def boundary_sample(seed: int, epoch: int, part_id: int, num_halo: int, p: float) -> torch.Tensor:
    """Which halo nodes a part keeps this epoch: independent draws keyed by (seed, epoch, part)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, epoch, part_id, 0xB45]))
    return torch.from_numpy(rng.random(num_halo) < p)


class GraphEngine(ReplicatedEngine):
    """One part of a graph-parallel run."""

    def memory_stats(self) -> dict:
        from fullgraph.plan import part_memory_stats

        types = {} if self.node_types is None else {"node_types": self.node_types.record()["node_types"]}
        owned = {} if self.prune else {"owned_share": self.part.num_inner / self.part.global_num_nodes}
        return part_memory_stats(self.part) | types | owned  # node-owned rows stay with their owners

    prunable = True

    def __init__(self, part, comm: Comm, norm: str, *, boundary_rate: float = 1.0, seed: int = 0,
                 replication_factor: float | None = None, owns_comm: bool = True, precision: str = "fp32",
                 prune: bool = False):
        self.part, self.comm, self.norm, self.owns_comm, self.prune = part, comm, norm, owns_comm, prune
        self._prune_plans: dict[int, HaloPlan] = {}  # per layer >= 2, the halo rows it reads (set_up_pruning)
        self._pruned = None  # the pruned blocks, input rows and plans, once built (boundary rate 1)
        self.precision = check_precision(precision)
        self.p, self.seed = boundary_rate, seed
        self.rank, self.world_size = comm.rank, comm.world_size
        self.ledger = comm.ledger
        self.n_inner, self.n_halo = part.inner.numel(), part.halo.numel()
        self.device = dev = comm.device  # a GPU per rank under NCCL, else the CPU
        self.reduce = sum_over(comm)  # batch statistics span every part's inner rows
        self.block = self._own(part.block(norm))
        self.x = input_features(part.x).to(dev)
        self.plan = HaloPlan.of_part(part, dev)
        self.y, self.train_mask, self.val_mask, self.test_mask = (
            t.to(dev) for t in (part.y, part.train_mask, part.val_mask, part.test_mask))
        self.num_train = int(part.global_num_train)
        counts = torch.tensor([float(part.val_mask.sum()), float(part.test_mask.sum())], device=dev)
        self.num_val, self.num_test = (int(v) for v in comm.all_reduce_(counts, "eval/reduce").tolist())
        self.in_dim, self.num_classes = part.x.shape[1], int(part.num_classes)
        self.edges = part.edge_facts
        self.name = part.name
        self.replication_factor = replication_factor
        # offsets of each peer's group in my halo list and in my send list
        self._recv_off = indptr_from_counts(self.plan.recv_counts)
        self._send_off = indptr_from_counts(self.plan.send_counts)

    # ------------------------------------------------------------------ node-owned rows (parallel.owned)
    def adopt(self, model) -> None:
        """Keep the node-owned rows of this part's inner nodes (not with ``--prune``, whose first layer
        reads its halo's input rows locally: there they stay replicated, with the same numbers)."""
        if not self.prune and hasattr(model, "hold_rows"):  # a user's model that is no GNN has none
            model.hold_rows(self.part.inner.to(self.device))

    def sync_grads(self, model) -> None:
        all_reduce_grads(shared_params(model), self.comm)

    def grad_norm_share(self, model) -> float:
        return (squared_norm(shared_params(model)) if self.is_main else 0.0) + owned_sq_norm(model)

    def consolidate(self, model, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return consolidate_owned(self, model, state) if getattr(model, "fetches_input", False) else state

    def output_ids(self) -> torch.Tensor:
        return self.part.inner

    def describe(self) -> str:
        return (f"graph {super().describe()}: part {self.part.part_id} of {self.world_size}, {self.n_inner} inner and "
                f"{self.n_halo} halo nodes")

    def summary(self) -> dict:
        return {"name": self.name, "nodes": int(self.part.global_num_nodes), "parts": self.world_size}

    def _own(self, block):
        """A block of this part, on this rank's device, whose batch statistics sum over the parts."""
        block = block.to(self.device)
        block.reduce = self.reduce
        return block

    # ------------------------------------------------------------------ boundary sampling
    def _halo_plan(self, want: torch.Tensor, category: str, position: torch.Tensor | None = None) -> HaloPlan:
        """The exchange of the halo rows ``want`` (bool ``[n_halo]``) only: each owner is told which
        rows of its send list to me I want (one ``all_to_all`` of counts and one of positions, under
        ``category``), and I learn which of mine each peer wants. ``position`` maps my inner rows to
        the rows of the tensor I will send from (a pruned layer's output); default: the inner rows."""
        kept = torch.nonzero(want).flatten()
        P = self.world_size
        # positions, within each owner's send list for me, of the halo rows I keep
        want_idx, want_counts = [], []
        for q in range(P):
            lo, hi = self._recv_off[q], self._recv_off[q + 1]
            sel = kept[(kept >= lo) & (kept < hi)] - lo
            want_idx.append(sel)
            want_counts.append(sel.numel())
        dev = self.device
        counts = self.comm.all_to_all_rows(torch.tensor(want_counts, dtype=torch.int64, device=dev), [1] * P,
                                           [1] * P, category)
        asked_counts = [int(c) for c in counts]
        asked = self.comm.all_to_all_rows(torch.cat(want_idx).to(dev), want_counts, asked_counts, category)
        # turn the positions peers asked for into my local inner ids, peer by peer
        send, start = [], 0
        for q in range(P):
            pos = asked[start:start + asked_counts[q]]
            send.append(self.plan.send_idx[int(self._send_off[q]) + pos])
            start += asked_counts[q]
        send_idx = torch.cat(send)
        ids = self.part.inner.to(dev)[send_idx]
        if position is not None:
            send_idx = position.to(dev)[send_idx]
        return HaloPlan(send_idx, asked_counts, want_counts, ids, self.part.halo.to(dev)[kept.to(dev)])

    def _sampled(self, epoch: int):
        """This epoch's block, input rows and halo plan under boundary sampling."""
        keep = boundary_sample(self.seed, epoch, self.part.part_id, self.n_halo, self.p)
        plan = self._halo_plan(keep, "sample/index")
        scale = 1.0 / self.p if self.p > 0 else 1.0  # p = 0 keeps nothing, so nothing is scaled
        block = self._own(self.part.block(self.norm, halo_keep=keep, scale=scale))
        kept = torch.nonzero(keep).flatten()
        rows = torch.cat([torch.arange(self.n_inner), self.n_inner + kept]).to(self.device)
        return block, feature_rows(self.x, rows), plan

    # ------------------------------------------------------------------ pruning
    def _ask_owners(self):
        def ask(layer: int, read: torch.Tensor) -> torch.Tensor:
            plan = self._prune_plans[layer] = self._halo_plan(read, "sample/index")
            asked = torch.zeros(self.n_inner, dtype=torch.bool, device=self.device)
            asked[plan.send_idx] = True
            return asked

        return ask

    def _pruned_layers(self, epoch: int):
        """The pruned blocks, input rows and per-layer halo plans (``plans[l]`` for layers l >= 2) of
        a training step: built once, or anew each epoch under boundary sampling."""
        from fullgraph.parallel.prune import pruned_block

        pr, p = self.pruning, self.p
        if p == 1.0 and self._pruned is not None:
            return self._pruned
        keep = None if p == 1.0 else boundary_sample(self.seed, epoch, self.part.part_id, self.n_halo, p)
        halo = [h if keep is None else h & keep.to(h.device) for h in pr.halo]
        scale = 1.0 / p if p > 0 else 1.0
        blocks = [self._own(pruned_block(self.block, pr, layer + 1, halo[layer], scale)) for layer in range(pr.layers)]
        first = torch.cat([pr.order[: pr.rows[0]], self.n_inner + halo[0].nonzero().flatten()])
        if keep is None:
            plans = {layer: HaloPlan(pr.position[plan.send_idx], plan.send_counts, plan.recv_counts, plan.send_ids,
                                     plan.recv_ids) for layer, plan in self._prune_plans.items()}
            self._pruned = (blocks, feature_rows(self.x, first), plans)
            return self._pruned
        plans = {} if p == 0.0 else {layer: self._halo_plan(halo[layer - 1], "sample/index", pr.position)
                                     for layer in range(2, pr.layers + 1)}
        return blocks, feature_rows(self.x, first), plans

    def _isolated_block(self):
        if not hasattr(self, "_isolated"):
            keep_none = torch.zeros(self.n_halo, dtype=torch.bool)
            self._isolated = self._own(self.part.block(self.norm, halo_keep=keep_none))
        return self._isolated

    # ------------------------------------------------------------------ the layout
    def forward(self, model, epoch: int, training: bool) -> torch.Tensor:
        category, layers = ("halo" if training else "eval/halo"), model.num_layers
        if training and self.prune:
            if self.pruning is None:  # a caller that skipped the trainer's set-up
                self.set_up_pruning(model)
            blocks, x, plans = self._pruned_layers(epoch)
            if not plans:  # p = 0: no halo columns, nothing to ask or send
                return model(blocks, x, fetch=lambda h: h)
            layer = iter(range(2, layers + 1))

            def fetch_pruned(h: torch.Tensor) -> torch.Tensor:  # before each graph layer after the first
                at = next(layer)
                return torch.cat([h, exchange_halo(h, self.comm, plans[at], category, self.precision, at - 1)])

            return model(blocks, x, fetch=fetch_pruned)
        if training and self.p == 0.0:  # isolated parts: no halo columns, nothing to ask or send
            inner = torch.arange(self.n_inner, device=self.device)
            return model(self._isolated_block(), feature_rows(self.x, inner), fetch=lambda h: h)
        if training and self.p < 1.0:
            block, x, plan = self._sampled(epoch)
        else:
            block, x, plan = self.block, self.x, self.plan
        layer = iter(range(0 if getattr(model, "fetches_input", False) else 1, layers))

        def fetch(h: torch.Tensor) -> torch.Tensor:  # before each graph layer after the first (and pre's output)
            return torch.cat([h, exchange_halo(h, self.comm, plan, category, self.precision, next(layer))])

        return model(block, x, fetch=fetch)


def check_parts(meta: dict, nprocs: int, where) -> None:
    """One part per rank: a partition made for another process count is refused."""
    if int(meta["parts"]) != nprocs:
        raise InputError(f"expected a partition into {nprocs} parts, one per process (got {meta['parts']} parts "
                         f"in {where})")


def graph_engine(cfg, norm: str) -> GraphEngine:
    """The graph-parallel engine of this rank, from the torchrun environment and the partition (read and
    checked before the process group opens)."""
    from fullgraph.partition.store import load_meta, load_part

    env = torchrun_env("graph_engine")
    if cfg.parallel.partition_dir is None:
        raise RuntimeError("graph parallelism needs a partition folder (--partition-dir)")
    meta = load_meta(cfg.parallel.partition_dir)
    check_parts(meta, env.world_size, cfg.parallel.partition_dir)
    part = load_part(cfg.parallel.partition_dir, env.rank)
    return GraphEngine(part, world_comm(cfg, "graph_engine"), norm, boundary_rate=cfg.parallel.boundary_rate,
                       seed=cfg.optimization.seed, replication_factor=meta.get("replication_factor"),
                       precision=cfg.parallel.comm_precision, prune=cfg.parallel.prune)
