"""The chunked-stale engine: pipeline (GNNPipe), hybrid graph × pipeline, and their one-process
simulation, all one class. A rank is stage ``s`` of ``S`` (graph layers ``a..b-1``) and part ``w``
of ``W`` (the whole graph when ``W = 1``), its part cut into ``K`` chunks. One training epoch:

**Forward**, chunks in the epoch's order π (a seeded shuffle, the same on every rank). For chunk k,
stage s receives the chunk's input rows from stage s-1 (stage 0 computes ``pre`` of all its rows
once per epoch: it depends only on features, so ``H[0]`` is never stale), runs its layers on the
chunk's block and sends the output rows on, so that stages work on different chunks at once.
Before layer i the group exchanges, for chunk k only, the rows of ``H[i]`` its peers read as halo.
A layer's source rows are the chunk's own rows (current) and its *others*, read from a per-layer
**table** of every local node: a row in the table was overwritten with its current value when its
chunk was processed (or its halo rows received) earlier in this epoch, and still holds the
history otherwise. That is exactly the chunked-stale rule. GCNII's ``H[0]`` rows travel along.

**History** (``history.py``): the tables start from one exact forward pass with the initial weights;
with a refresh period a > 1, epoch t reads epoch a·⌊(t-1)/a⌋. ``transport.py`` moves the rows.

**Backward**, chunks in reverse order, layer by layer. A layer's backward gives gradients for its
own input rows (passed down), for GCNII's ``H[0]`` rows (carried back with the chunk) and for its
others: those read as *current* are added into a per-layer gradient buffer, to be collected when
their own chunk's backward comes (it comes later: reverse order); those read from history are
dropped — no historical gradients. History is a constant of the epoch, so the result is the exact
gradient of the stale forward (GNNPipe found gradients through stale values to do more harm than
good, and they would need a second history of gradients). Halo gradients of chunk k go back to
their owners in the group when chunk k's layer is done. Stage weights are summed over the group
and updated once per epoch; the loss is divided by the global number of training nodes.

``induced`` chunks (GPipe's naive micro-batching) cut every edge between chunks instead of reading
history. Evaluation is an exact full-graph forward passed stage to stage, halo exchange per layer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from fullgraph.comm.context import Comm
from fullgraph.comm.halo import HaloPlan
from fullgraph.comm.stats import sum_over
from fullgraph.parallel.engine import (Engine, all_reduce_grads, feature_rows, input_features, squared_norm, sum_flat,
                                       torchrun_env, world_comm)
from fullgraph.parallel.history import History
from fullgraph.parallel.schedule import ChunkSchedule, bubble_summary
from fullgraph.parallel.stage_pairs import StagePairs, joined_loss
from fullgraph.parallel.transport import StageLinks, StageTransport
from fullgraph.partition.chunks import ChunkSet

__all__ = ["ChunkedEngine", "chunked_engine"]


@dataclass
class ChunkPass:
    """What a chunk's forward through this stage leaves for its backward: per layer its own input
    rows, the other chunks' rows it read and the output; GCNII's ``H[0]`` rows; which other rows were
    read current (only those get gradients); on the last stage, the chunk's share of the loss."""

    layers: list
    h0: torch.Tensor | None
    current: torch.Tensor
    loss: torch.Tensor | None = None


class ChunkedEngine(StagePairs, Engine):
    """One rank of a pipeline / hybrid run, or (``comm=None``) the whole run in one process.

    Args:
        part: this rank's part (for ``W = 1`` the one part that is the whole graph).
        local_chunk: chunk id of each local node of the part (inner, then halo).
        norm: the model's block normalization.
        schedule: the chunks, the stages' layers, this rank's stage and the epoch's order.
        history: the tables of the chunked-stale rule and their refresh period.
        links: whom this rank talks to (default: nobody, the one-process simulation).
        replication_factor: the partition's, for the summary.
    """

    def __init__(self, part, local_chunk: torch.Tensor, norm: str, schedule: ChunkSchedule, history: History,
                 links: StageLinks = StageLinks(), replication_factor: float | None = None):
        # what it reports of its part; the part itself (features and all) stays the caller's
        self.part_id, self.num_parts, self.global_num_nodes = part.part_id, part.num_parts, int(part.global_num_nodes)
        comm, group = links.comm, links.group
        self.comm, self.group, self.owns_comm = comm, group, links.owns_comm
        self.schedule, stage, bounds = schedule, schedule.stage, schedule.bounds
        self.stage, self.num_stages = stage, len(bounds)
        self.first, self.last = bounds[stage]
        self.first_stage, self.last_stage = stage == 0, stage == len(bounds) - 1
        self.induced, self.K = schedule.induced, schedule.chunks
        self.rank = comm.rank if comm else 0
        self.world_size = comm.world_size if comm else 1
        self.ledger = comm.ledger if comm else None
        self.device = dev = comm.device if comm else torch.device("cpu")
        self.n_inner = part.num_inner
        self.chunks = ChunkSet(part, local_chunk, self.K, norm, induced=self.induced).to(dev)
        self.block = part.block(norm).to(dev)  # the exact (evaluation) block
        for blk in [self.block] + [ch.block for ch in self.chunks]:  # batch statistics span the group
            blk.reduce = sum_over(group)
        self.local_ids = self.block.src_ids  # global ids of the local rows (they key dropout masks)
        self.x = input_features(part.x).to(dev) if self.first_stage else None  # only the first stage reads them
        self.in_dim = part.x.shape[1]
        self.edges = part.edge_facts
        plan = HaloPlan.of_part(part, dev) if group is not None else None  # the exact pass's halo exchange
        self.link = StageTransport(links, dev, plan, ids=self.local_ids.to(dev))
        rows = slice(None) if self.last_stage else slice(0, 0)  # only the last stage has logits
        self.y, self.train_mask, self.val_mask, self.test_mask = (
            t[rows].to(dev) for t in (part.y, part.train_mask, part.val_mask, part.test_mask))
        self.num_train = int(part.global_num_train)
        counts = [float(self.val_mask.sum()), float(self.test_mask.sum())]
        if comm is not None:
            counts = comm.all_reduce_(torch.tensor(counts, dtype=torch.float64, device=dev), "eval/reduce").tolist()
        self.num_val, self.num_test = (int(v) for v in counts)
        self.num_classes = int(part.num_classes)
        self.name = part.name
        self.replication_factor = replication_factor
        self.history = history
        self.stats: dict[str, float] = {}

    def describe(self) -> str:
        sizes = [c.size for c in self.chunks]
        where = f"stage {self.stage + 1} of {self.num_stages} (layers {self.first + 1}-{self.last})"
        if self.group is not None:
            where += f", part {self.part_id + 1} of {self.num_parts}"
        return (f"{super().describe()}: {where}; {self.K} chunks of {min(sizes)}-{max(sizes)} nodes"
                f"{', induced' if self.induced else ''}")

    def summary(self) -> dict:
        return {"name": self.name, "nodes": self.global_num_nodes, "stages": self.num_stages,
                "chunks": self.K}

    # ------------------------------------------------------------------ model pieces
    def _owned(self, model) -> list[torch.nn.Parameter]:
        return model.stage_parameters(self.first, self.last, with_pre=self.first_stage, with_post=self.last_stage)

    def _timed_wait(self, pending, key: str = "wait_s") -> None:
        self.stats[key] = self.stats.get(key, 0.0) + pending.wait()

    def _arrived(self, recv: tuple, key: str = "wait_s") -> tuple:
        """A posted receive ``(bufs, pending, shapes)``, waited for: the rows, and H0's or ``None``."""
        bufs, pending, shapes = recv
        self._timed_wait(pending, key)
        return tuple((self.link.opened(bufs, shapes) + [None])[:2])

    # ------------------------------------------------------------------ exact forward
    @torch.no_grad()
    def _exact(self, model, fill: bool) -> torch.Tensor:
        """Full-graph forward, stage to stage; ``fill`` stores every layer input as history."""
        uses_h0 = model.uses_h0
        if self.first_stage:
            h = model.pre(self.x, self.local_ids)  # global ids: a typed input reads the type from them
            h0 = h[: self.n_inner] if uses_h0 else None
        else:
            d_in = self._dims[self.first]
            shapes = [(self.n_inner, d_in)] + ([(self.n_inner, self._dims[0])] if uses_h0 else [])
            h, h0 = self._arrived((*self.link.recv(shapes, "prev", "eval/pipe/fwd", 0), shapes), "eval_wait_s")
        for i in range(self.first, self.last):
            if i > 0:
                if self.group is not None:
                    h = torch.cat([h, self.link.part_halo(h, "eval/halo", i)])
                if fill:
                    self.tables[i] = h.clone()
            h = model.layers[i](self.block, h, h0)
        if self.last_stage:
            return model.post(h)
        rows = torch.arange(self.n_inner, device=h.device)
        self._timed_wait(self.link.send([h] + ([h0] if uses_h0 else []), "next", "eval/pipe/fwd", 0, rows=rows,
                                        layer=self.last), "eval_wait_s")
        return h.new_zeros((0, self.num_classes))

    def forward(self, model, epoch: int, training: bool) -> torch.Tensor:
        assert not training, "the chunked engine trains through step(); forward() is the exact evaluation pass"
        return self._exact(model, fill=False)

    @property
    def tables(self) -> dict[int, torch.Tensor] | None:
        return self.history.tables

    def _begin_epoch(self, model, epoch: int) -> None:
        if self.tables is None:  # history starts from one exact pass with the initial weights
            self._dims = dict(enumerate(model.layer_input_widths()))
            self.history.tables = {}
            was = model.training
            model.eval()
            self._exact(model, fill=True)
            model.train(was)
            self.history.keep()
        else:
            self.history.restore()

    replicates_weights = False  # each stage trains its own layers

    def consolidate(self, model, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Each weight from the stage that trains it (the first graph way of that stage): one sum
        over the world of a buffer in which every other rank holds zeros."""
        if self.comm is None:
            return state
        owned = {id(p) for p in self._owned(model)}
        params = dict(model.named_parameters())
        mine = {name for name, p in params.items() if id(p) in owned}
        mine |= {k for k in state if k not in params and self.comm.rank == 0}  # buffers: from rank 0
        lead = self.group is None or self.group.rank == 0
        mine_or_zeros = [v if lead and k in mine else torch.zeros_like(v) for k, v in state.items()]
        summed = sum_flat(mine_or_zeros, lambda flat: self.comm.all_reduce_(flat, "meta/checkpoint"))
        return dict(zip(state, summed))

    def grad_norm_share(self, model) -> float:
        """Each stage's own layers, from its first graph way (its other ways hold the same gradient)."""
        return squared_norm(self._owned(model)) if self.group is None or self.group.rank == 0 else 0.0

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return self.history.state_tensors()

    def load_state_tensors(self, state: dict[str, torch.Tensor], model) -> None:
        if state:
            self._dims = dict(enumerate(model.layer_input_widths()))
            self.history.load_state_tensors(state)

    # ------------------------------------------------------------------ one training epoch
    def step(self, model, epoch: int, step: int = 0) -> float:
        self.stats = {"wait_s": 0.0}
        t_start = time.perf_counter()
        comm_start = self.ledger.total_seconds if self.ledger is not None else 0.0
        self._begin_epoch(model, epoch)
        order = self.schedule.order(epoch)
        pos = torch.empty(self.K, dtype=torch.int64, device=self.device)
        pos[torch.tensor(order, device=self.device)] = torch.arange(self.K, device=self.device)
        H0 = H0_leaf = None
        if self.first_stage:
            H0 = model.pre(self.x, self.local_ids)
            H0_leaf = H0.detach().requires_grad_() if isinstance(H0, torch.Tensor) and H0.requires_grad else H0
        passes, loss_total = self._forward(model, order, pos, H0_leaf, (epoch, step))
        if step == self.task.steps(epoch) - 1:  # (each step of a link epoch reads the last refresh's history)
            self.history.end_epoch(epoch)
        self._backward(model, order, passes, H0_leaf)
        if H0_leaf is not None and H0 is not H0_leaf:
            H0.backward(H0_leaf.grad)
        if self.group is not None:  # the stage's weights, summed over its graph ways
            all_reduce_grads(self._owned(model), self.group)
        self.stats["step_s"] = time.perf_counter() - t_start
        self.stats["comm_s"] = (self.ledger.total_seconds if self.ledger is not None else 0.0) - comm_start
        return loss_total

    def _forward(self, model, order: list[int], pos, H0_leaf, when: tuple) -> tuple[dict[int, ChunkPass], float]:
        """Every chunk through this stage's layers in ``order``, receiving from the previous stage and
        sending to the next; per chunk what its backward needs, and the sum of the last stage's losses
        (a task whose loss joins the chunks' rows scores them once all are in: ``parallel.stage_pairs``)."""
        uses_h0, dims = model.uses_h0, self._dims
        recvs = {}
        if not self.first_stage:  # post every receive now: chunks arrive while we compute
            for k in order:
                ch = self.chunks[k]
                shapes = [(ch.size, dims[self.first])] + ([(ch.size, dims[0])] if uses_h0 else [])
                recvs[k] = (*self.link.recv(shapes, "prev", "pipe/fwd", k), shapes)
        sends, passes, loss_total = [], {}, 0.0
        for k in order:
            ch = self.chunks[k]
            if self.first_stage:
                h, h0 = None, None
                if uses_h0:
                    h0 = H0_leaf[ch.dst].detach().requires_grad_() if H0_leaf.requires_grad else H0_leaf[ch.dst]
            else:
                h, h0 = (t if t is None else t.requires_grad_() for t in self._arrived(recvs.pop(k)))
            layers, h = self._forward_chunk(model, ch, h, h0, H0_leaf)
            passes[k] = ChunkPass(layers, h0, current=pos[ch.others_chunk] <= pos[k])
            if self.last_stage:
                logits = model.post(h, ch.block.dst_ids)
                if self.task.joins_rows:
                    passes[k].loss = logits  # (until joined_loss makes it the chunk's share)
                    continue
                mask = self.train_mask[ch.dst]
                passes[k].loss = self.task.rows_loss(logits[mask], self.y[ch.dst][mask], self.num_train)
                loss_total += float(passes[k].loss.detach())
            else:
                sends.append(self.link.send([h] + ([h0] if uses_h0 else []), "next", "pipe/fwd", k, rows=ch.dst,
                                            layer=self.last))
        for s in sends:
            self._timed_wait(s)
        if self.last_stage and self.task.joins_rows:
            loss_total = joined_loss(self, model, passes, self.chunks, self.n_inner, *when)
        return passes, loss_total

    def _forward_chunk(self, model, ch, h, h0, H0_leaf) -> tuple[list, torch.Tensor]:
        """Chunk ``ch`` through this stage's layers; per layer (own rows, other chunks' rows, output).
        A layer reads its own chunk's rows as they are now and the other chunks' rows from the
        table (this epoch's where that chunk came first, else the history)."""
        layers = []
        for i in range(self.first, self.last):
            if i == 0:
                src = feature_rows(H0_leaf, torch.cat([ch.dst, ch.others]))
                own = others = None
            else:
                own = h if i == self.first else h.detach().requires_grad_()
                table = self.tables[i]
                table[ch.dst] = own.detach()
                if self.group is not None:
                    table[ch.recv_idx] = self.link.chunk_halo(own.detach(), ch, "halo/fwd", i)
                others = table[ch.others].requires_grad_()
                src = torch.cat([own, others])
            out = model.layers[i](ch.block, src, h0)
            layers.append((own, others, out))
            h = out
        return layers, h

    def _backward(self, model, order: list[int], passes: dict[int, ChunkPass], H0_leaf) -> None:
        """The chunks back through this stage in reverse order; the gradients of the other chunks'
        rows are gathered per layer (``grads``) and added to their chunk's when its turn comes."""
        uses_h0, dims = model.uses_h0, self._dims
        grads = {i: torch.zeros_like(t) for i, t in self.tables.items() if self.first <= i < self.last}
        recvs, sends = {}, []
        if not self.last_stage:
            for k in order:
                ch = self.chunks[k]
                shapes = [(ch.size, dims[self.last])] + ([(ch.size, dims[0])] if uses_h0 else [])
                recvs[k] = (*self.link.recv(shapes, "next", "pipe/bwd", k), shapes)
        if H0_leaf is not None and isinstance(H0_leaf, torch.Tensor) and H0_leaf.requires_grad:
            H0_leaf.grad = torch.zeros_like(H0_leaf)
        for k in reversed(order):
            ch = self.chunks[k]
            done = passes.pop(k)
            h0 = done.h0
            g = g_h0 = None
            if not self.last_stage:
                g, g_h0 = self._arrived(recvs.pop(k))
            g = self._backward_chunk(ch, done.layers, done.current, g, done.loss, grads)
            if uses_h0 and h0 is not None and h0.requires_grad:
                gh = h0.grad if h0.grad is not None else torch.zeros_like(h0)
                if g_h0 is not None:
                    gh = gh + g_h0
                if self.first_stage:
                    H0_leaf.grad.index_add_(0, ch.dst, gh)
            if not self.first_stage:
                sends.append(self.link.send([g] + ([gh] if uses_h0 else []), "prev", "pipe/bwd", k, rows=ch.dst,
                                            layer=self.first, backward=True))
        for s in sends:
            self._timed_wait(s)

    def _backward_chunk(self, ch, layers: list, current, g, loss, grads: dict):
        """Chunk ``ch`` back through this stage's layers from ``g`` (the next stage's gradient) or its
        ``loss`` (last stage); the gradient of the chunk's input rows."""
        for i in reversed(range(self.first, self.last)):
            own, others, out = layers[i - self.first]
            if g is None:
                loss.backward()
            else:
                torch.autograd.backward(out, g)
            if i == 0:
                break
            if others.grad is not None:
                grads[i].index_add_(0, ch.others[current], others.grad[current])
            g = own.grad if own.grad is not None else torch.zeros_like(own)
            if self.group is not None:
                back = self.link.chunk_halo_grads(grads[i][ch.recv_idx], ch, "halo/bwd", i)
                g = g.index_add(0, ch.send_pos, back)
            g = g + grads[i][ch.dst]
        return g

    # ------------------------------------------------------------------ statistics
    def epoch_extras(self) -> dict:
        """Per-stage compute, neighbour-wait and bubble seconds of the last step (each stage's first
        rank speaks for its stage) and the bubble fraction: idle time over busy-plus-idle time."""
        step = self.stats.get("step_s", 0.0)
        wait = self.stats.get("wait_s", 0.0)
        compute = max(step - self.stats.get("comm_s", 0.0), 0.0)
        row = [step, wait, compute]
        rows = [row]
        if self.comm is not None:
            flat = self.comm.all_gather(torch.tensor(row, dtype=torch.float64, device=self.device), "meta/metrics")
            rows = [r.tolist() for r in flat]
        return bubble_summary(rows, self.num_stages)

    def close(self) -> None:
        if self.comm is not None and self.owns_comm:
            self.comm.close()


def chunked_engine(cfg, norm: str, comm: Comm | None = None, layers: int | None = None) -> ChunkedEngine:
    """This rank's engine of a pipeline / hybrid run, from the torchrun environment, the partition
    folder and the chunk file; ``layers``: the model's depth (default ``cfg.model.layers``). Ranks
    ``s·W .. s·W+W-1`` form stage s's group (consecutive ranks, so a group shares a machine); rank
    ``s·W + w`` holds part w. Its inputs are read and checked before any process group opens."""
    from fullgraph.parallel.graph import check_parts
    from fullgraph.partition.chunks import load_chunks
    from fullgraph.partition.store import load_meta, load_part

    env = torchrun_env("chunked_engine")
    p = cfg.parallel
    if p.partition_dir is None or p.chunk_file is None:
        raise RuntimeError("a pipeline / hybrid rank needs --partition-dir and --chunk-file (the launcher sets them)")
    layout, owns_comm = p.mesh, comm is None
    S, W = layout.stages, layout.graph_ways
    meta, (stage, w) = load_meta(p.partition_dir), divmod(env.rank, W)
    check_parts(meta, W, p.partition_dir)
    schedule = ChunkSchedule.of(cfg, layers or cfg.model.layers, stage)
    part = load_part(p.partition_dir, w, features=stage == 0)  # later stages never read features
    node_chunk = load_chunks(p.chunk_file, int(part.global_num_nodes), p.num_chunks, meta.get("fingerprint"))
    comm = world_comm(cfg, "chunked_engine") if comm is None else comm  # once its inputs are read and checked
    links = StageLinks(comm, layout.communicators(comm).get("graph"),  # the stage's W processes (none if W = 1)
                       env.rank - W if stage > 0 else None, env.rank + W if stage < S - 1 else None,
                       p.comm_precision, owns_comm)
    return ChunkedEngine(part, node_chunk[part.local_nodes], norm, schedule, History(p.history_refresh), links,
                         replication_factor=meta.get("replication_factor") if W > 1 else None)
