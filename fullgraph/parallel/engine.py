"""``Engine``: a parallel layout as the trainer sees it.

The trainer's loop is the same for every layout: forward over the rows this process owns, a loss
summed over its training rows and divided by the **global** number of training nodes, backward,
``sync_grads``, optimizer step. An engine supplies the rows, the forward path (which blocks, which
communication between layers) and the reductions. ``SingleEngine`` is the reference: the whole
graph as one block, no communication.
"""

from __future__ import annotations

import math

import torch

from fullgraph.comm.ledger import Ledger
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError
from fullgraph.ops import Block, SparseOp
from fullgraph.ops.edge_data import EdgeFacts
from fullgraph.parallel.pairs import gather_rows, take_ends
from fullgraph.parallel.prune import feature_rows, labelled_field, pruned_blocks
from fullgraph.tasks import NodeTask

__all__ = ["Engine", "ReplicatedEngine", "SingleEngine", "feature_rows", "input_features", "sum_grads",
           "all_reduce_grads", "torchrun_env", "world_comm"]


def torchrun_env(who: str):
    """This rank's place in the run (``DistEnv``), from the torchrun environment; ``who``: the builder
    that asks, named in the error when the process was not started as a rank. Builders read and
    check their inputs knowing only this, and open the process group last (``world_comm``)."""
    from fullgraph.comm.context import DistEnv

    env = DistEnv.from_env()
    if env is None:
        raise RuntimeError(f"{who} needs the torchrun environment (RANK, WORLD_SIZE, ...)")
    return env


def world_comm(cfg, who: str):
    """This rank's world communicator (``who``: as for ``torchrun_env``)."""
    from fullgraph.comm.context import Comm

    return Comm(torchrun_env(who), timeout_s=cfg.run.comm_timeout, device=cfg.run.device)


def input_features(x: torch.Tensor) -> torch.Tensor | SparseOp:
    """Features as the first layer reads them: a constant ``SparseOp`` when they are sparse enough
    that multiplying them as such is cheaper (under 10% non-zero), else a dense tensor."""
    if x.layout == torch.sparse_csr:
        if x.values().numel() < 0.1 * x.shape[0] * x.shape[1]:
            return SparseOp.from_tensor(x)
        return x.to_dense()
    return x


def sum_flat(tensors: list[torch.Tensor], reduce_) -> list[torch.Tensor]:
    """The sums of ``tensors`` over processes with one collective: ``reduce_(flat)`` sums a flat
    float32 buffer in place; each sum comes back in its tensor's shape and dtype."""
    flat = torch.cat([t.reshape(-1).float() for t in tensors])
    reduce_(flat)
    out, at = [], 0
    for t in tensors:
        out.append(flat[at:at + t.numel()].view_as(t).to(t.dtype))
        at += t.numel()
    return out


def sum_grads(params: list[torch.nn.Parameter], reduce_) -> None:
    """Sum the gradients of ``params`` over processes (:func:`sum_flat`). A missing gradient counts
    as zeros, so every rank contributes the same buffer layout."""
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    for p, total in zip(params, sum_flat([p.grad for p in params], reduce_)):
        p.grad.copy_(total)


def all_reduce_grads(params, comm) -> None:
    """Sum the gradients of ``params`` (default: every trainable one of a model) over ``comm``'s ranks,
    in one flat ``grad/allreduce``: what each layout whose ranks hold replicated weights does after
    backward."""
    if isinstance(params, torch.nn.Module):
        params = [p for p in params.parameters() if p.requires_grad]
    sum_grads(list(params), lambda flat: comm.all_reduce_(flat, "grad/allreduce"))


def squared_norm(params) -> float:
    """Σ‖grad‖² of ``params`` (those with a gradient), summed in float64."""
    return float(sum(p.grad.detach().double().square().sum() for p in params if p.grad is not None))


class Engine:
    """Local rows (``y`` and the split masks), global split sizes, and the layout's forward path."""

    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    num_train: int
    num_val: int
    num_test: int
    in_dim: int
    num_classes: int
    name: str = "graph"
    ledger: Ledger | None = None
    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    replication_factor: float | None = None
    replicates_weights: bool = True
    """Whether every rank holds the same weights, bit for bit (a checkpoint then saves them once)."""
    fingerprint: str | None = None
    """``Graph.fingerprint()`` of the graph trained (read from the partition or block-row folder a
    rank reads): a checkpoint records it, and a resume refuses a graph that has changed since."""

    edges: EdgeFacts = EdgeFacts()
    """What the graph's edges carry (kinds, feature width, relations): the model is checked against
    what of it reaches a layer (``registry.check_edge_data``) before the first epoch."""

    node_types = None
    """The graph's ``NodeTypes`` (``None``: one type): a model that maps each type's input itself is built
    for them (``ModelSpec.reads_node_types``), read from the graph or the rank's folder."""

    prunable: bool = False
    """Whether the layout can compute only the rows the loss reads (``--prune``, ``parallel.prune``)."""
    prune: bool = False
    """Whether training steps compute only those rows (evaluation computes them all)."""
    pruning = None
    """The rows each layer needs for the loss (``parallel.prune.Pruning``), from ``set_up_pruning``."""
    task = NodeTask()
    """What the output rows are trained for (``fullgraph.tasks``): the trainer sets the run's; the loss of a
    step is the task's."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def forward(self, model, epoch: int, training: bool) -> torch.Tensor:
        """Logits of this rank's rows: all of them, or under ``prune`` in training, the training rows
        in node order (those of ``train_mask``; :meth:`training_rows` picks them from either)."""
        raise NotImplementedError

    def training_rows(self, out: torch.Tensor) -> torch.Tensor:
        """The training rows, in node order, of what ``forward`` returned in training."""
        return out if self.prune else out.index_select(0, self.train_index())

    def train_index(self) -> torch.Tensor:
        """``train_mask``'s positions, found once: a mask's ``nonzero`` syncs a GPU, and boolean indexing's
        backward (``index_put_`` accumulating) sorts the positions there every step; ``index_select``'s does not."""
        if getattr(self, "_train_index", (None,))[0] is not self.train_mask:
            self._train_index = (self.train_mask, self.train_mask.nonzero().squeeze(1))
        return self._train_index[1]

    def rows_computed(self, model) -> list[int] | None:
        """Per graph layer, the rows a training step computes (``None``: every row, or ``--prune``'s)."""
        return None

    def set_up_pruning(self, model) -> None:
        """Find the rows each layer of ``model`` needs for the loss (collective in a distributed
        layout): what ``--prune`` computes, and what ``train`` tells a user who has not asked for it.
        Set-up, not an epoch's traffic: left out of the ledger's epochs."""
        from fullgraph.parallel.prune import receptive_field, whole_statistics

        if self.prune and whole_statistics(model):
            raise InputError("expected a model without statistics over all nodes (batch normalization, PyG's "
                             "LayerNorm(mode='graph')) with --prune (its statistics are over the rows computed, which "
                             "pruning changes); use --norm layer or none, or leave out --prune")
        self.pruning = receptive_field(self.block.adj, self.train_mask, model.num_layers, self._ask_owners())
        if self.ledger is not None:
            self.ledger.take()

    def _ask_owners(self):
        """How this layout tells the owners of its halo rows which of them a layer reads (``None``: one
        process, no halo)."""
        return None

    def rows_needed(self) -> tuple[list[int], int]:
        """Per graph layer, the rows the loss needs, summed over the ranks, and the graph's node count
        (collective): ``--prune`` computes the former, full training the latter in every layer."""
        pr = self.pruning
        got = self.reduce_sum([float(r) for r in pr.rows[1:]] + [float(self.block.num_dst)], "meta/metrics")
        if self.ledger is not None:
            self.ledger.take()
        return [int(r) for r in got[:-1]], int(got[-1])

    def step(self, model, epoch: int, step: int = 0) -> float:
        """Gradients of one training step (``step`` of ``epoch``; the optimizer steps after); returns
        this rank's share of the task's loss. Layouts that interleave forward and backward (the
        pipeline) override it."""
        out = self.forward(model, epoch, training=True)
        loss = self.task.loss(self, model, out, epoch, step)
        loss.backward()
        self.sync_grads(model)
        return loss.item()

    # ------------------------------------------------------------------ pairs of nodes (link prediction)
    def graph_nodes(self) -> int:
        """The node count of the whole graph (not of this rank's share)."""
        return self.block.num_dst

    def bind_pairs(self) -> None:
        """Learn who owns which node's output row (collective in a distributed layout): one process owns all."""

    def pair_share(self, pairs: torch.Tensor) -> torch.Tensor:
        """Which of ``pairs`` (global ids ``[n, 2]``) this rank scores: those whose source it owns."""
        return torch.ones(pairs.shape[0], dtype=torch.bool)

    def pair_rows(self, out: torch.Tensor, pairs: torch.Tensor, category: str, halves: bool = False):
        """The output rows of both ends of ``pairs`` (this rank's share): in one process, ``out``'s rows
        are the nodes in id order; ``halves``: ``parallel.pairs.take_ends``."""
        pairs = pairs.to(out.device)
        return take_ends(out, pairs[:, 0], pairs[:, 1], halves)

    def eval_masks(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The train / val / test rows this rank reports in evaluation (a layout that replicates rows
        reports each row from one replica only)."""
        return self.train_mask, self.val_mask, self.test_mask

    def epoch_extras(self) -> dict:
        """Layout-specific numbers of the last epoch for metrics.jsonl (collective: every rank calls it)."""
        return {}

    def sync_grads(self, model) -> None:
        """Make every rank's gradient the global one (nothing to do in one process)."""

    def grad_norm_share(self, model) -> float:
        """This rank's share of the whole model's squared gradient norm: the shares sum over the ranks
        to the norm one process would compute. Where every rank holds the same gradient (after
        ``sync_grads``), rank 0 holds it all."""
        return squared_norm(model.parameters()) if self.is_main else 0.0

    def grad_norm(self, model) -> float:
        """The whole model's gradient 2-norm (``--clip-grad-norm``, fp16's overflow check): one sum
        over the ranks, the same value on each."""
        return math.sqrt(self.reduce_sum([self.grad_norm_share(model)], "grad/norm")[0])

    def memory_stats(self) -> dict | None:
        """The sizes the memory estimate takes for this rank (``fullgraph.plan.estimate_peak_bytes``),
        or ``None`` where the layout has no memory model."""
        return None

    def broadcast_state(self, model) -> None:
        """Give every rank rank 0's parameters and buffers (a model each rank built on its own, whose
        initial weights may differ); set-up, not an epoch's traffic: left out of the ledger's epochs."""
        if self.comm is None:
            return
        with torch.no_grad():
            for t in model.state_dict().values():
                self.comm.broadcast(t, 0, "meta/metrics")
        self.ledger.take()

    comm = None  # the world communicator of a distributed layout

    def reduce_sum(self, values: list[float], category: str) -> list[float]:
        """Sums of per-rank values over all ranks."""
        if self.comm is None:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        return self.comm.all_reduce_(t, category).tolist()

    def gather(self, value: float, category: str) -> list[float]:
        """One value from every rank, in rank order."""
        if self.comm is None:
            return [value]
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        return [float(v) for v in self.comm.all_gather(t, category)]

    def gather_rows(self, t: torch.Tensor, category: str) -> torch.Tensor:
        """Every rank's rows of ``t``, concatenated in rank order (``parallel.pairs.gather_rows``)."""
        return t if self.comm is None else gather_rows(self.comm, t.to(self.device), category)

    def adopt(self, model) -> None:
        """Fit the built model to this rank's share before its optimizer exists (graph parallelism keeps
        node-owned rows of its inner nodes only: ``parallel.owned``); most layouts leave it as it is."""

    def consolidate(self, model, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The whole model's ``state`` as rank 0 must save it (collective). Layouts that replicate the
        weights on every rank have it already; the pipeline gathers each stage's layers."""
        return state

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """What of this layout the next epoch reads and a checkpoint must keep, as named tensors
        (none: every layout but the pipeline recomputes its state from the weights and the epoch)."""
        return {}

    def load_state_tensors(self, state: dict[str, torch.Tensor], model) -> None:
        """Restore what ``state_tensors`` returned (on resume, before the first epoch)."""
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state, but the checkpoint holds {sorted(state)[:3]}")

    def describe(self) -> str:
        """The graph as the run's header names it: features in, classes (or numbers) out, before the first epoch."""
        y = getattr(self, "y", None)  # node regression's numbers, else classes
        numbers = y is not None and y.dim() == 1 and y.is_floating_point()
        return f"{self.name} ({self.in_dim} features, {'a number per node' if numbers else f'{self.num_classes} classes'})"

    def summary(self) -> dict:
        """Statistics of the graph being trained (for ``summary.json``)."""
        return {"name": self.name}

    def close(self) -> None:
        pass


class ReplicatedEngine(Engine):
    """A layout whose every rank holds the whole model (graph parallelism, the SpMM layouts, tensor
    parallelism): the gradients are summed over ``grad_comm`` (default: the world) in one all-reduce
    after backward, and the world communicator is closed at the end when the engine opened it."""

    comm = None
    grad_comm = None
    owns_comm = True

    def sync_grads(self, model) -> None:
        all_reduce_grads(model, self.comm if self.grad_comm is None else self.grad_comm)

    # ------------------------------------------------------------------ pairs of nodes (parallel.pairs)
    precision = "fp32"  # the wire's (a layout that sends rows at another sets its own)

    def output_ids(self) -> torch.Tensor:
        """The global ids of the rows ``forward`` returns, in their order."""
        return self.block.dst_ids

    def graph_nodes(self) -> int:
        return self.pairs.num_nodes

    def bind_pairs(self) -> None:
        from fullgraph.parallel.pairs import PairOwners

        self.pairs = PairOwners(self, self.output_ids())

    def pair_share(self, pairs: torch.Tensor) -> torch.Tensor:
        return self.pairs.share(pairs)

    def pair_rows(self, out: torch.Tensor, pairs: torch.Tensor, category: str, halves: bool = False):
        return self.pairs.rows(out, pairs, category, self.precision, halves)

    def close(self) -> None:
        if self.comm is not None and self.owns_comm:
            self.comm.close()


class SingleEngine(Engine):
    """The whole graph in one process: the reference every layout is checked against."""

    def memory_stats(self) -> dict:
        from fullgraph.plan import graph_memory_stats

        return graph_memory_stats(self.graph)

    prunable = True

    def __init__(self, graph: Graph, norm: str, device: torch.device | str = "cpu", prune: bool = False):
        self.graph, self.prune = graph, prune
        self._pruned: tuple[list[Block], torch.Tensor | SparseOp] | None = None  # blocks, input rows (() none)
        self._labelled = None  # what training computes without --prune (training_field; False: every row)
        self.device = dev = torch.device(device)
        self.block = Block.from_graph(graph, norm).to(dev)
        self.x = input_features(graph.x).to(dev)
        self.y, self.train_mask, self.val_mask, self.test_mask = (
            t.to(dev) for t in (graph.y, graph.train_mask, graph.val_mask, graph.test_mask))
        self.num_train, self.num_val, self.num_test = (int(m.sum()) for m in (self.train_mask, self.val_mask,
                                                                              self.test_mask))
        self.in_dim, self.num_classes = graph.num_features, graph.num_classes
        self.edges = graph.edge_facts()
        self.node_types = graph.node_types
        self.name = graph.name

    def describe(self) -> str:
        return repr(self.graph)

    def summary(self) -> dict:
        return self.graph.summary()

    def forward(self, model, epoch: int, training: bool) -> torch.Tensor:
        if training and self._pruned is None:
            pr = self.training_field(model)
            self._pruned = () if pr is None else pruned_blocks(self.block, self.x, pr)
        return model(*self._pruned) if training and self._pruned else model(self.block, self.x)

    def training_field(self, model):
        """The rows a training step computes (``parallel.prune.Pruning``; ``None``: all): under ``--prune`` the
        training rows' field, else on a typed graph's node task all but the last layer's unlabelled types'
        rows (``parallel.prune.labelled_field``)."""
        if self.prune and self.pruning is None:  # a caller that skipped the trainer's set-up
            self.set_up_pruning(model)
        if self._labelled is None:
            self._labelled = not self.task.joins_rows and labelled_field(self.block, self.node_types, model) or False
        return self.pruning if self.prune else self._labelled or None

    def rows_computed(self, model) -> list[int] | None:
        return None if (pr := self.training_field(model)) is None else pr.rows[1:]

    def training_rows(self, out: torch.Tensor) -> torch.Tensor:
        pr = self._labelled
        if self.prune or not pr or out.shape[0] == self.block.num_dst:  # (a forward of every row: a test's own)
            return super().training_rows(out)
        return out[self.train_mask[pr.order[: pr.rows[-1]]]]
