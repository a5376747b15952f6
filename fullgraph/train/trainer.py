"""``Trainer``: the training loop every layout shares. ``build()`` makes this rank's engine (its rows,
blocks and traffic), the model and the optimizer; ``train()`` runs the epochs and returns a
``RunResult``; ``close()`` releases files and the process group. An epoch is the engine's forward
and backward over its rows, its gradient sum and one optimizer step, whatever the layout.
"""

from __future__ import annotations

import copy
import logging
import statistics
import time
from dataclasses import asdict, dataclass, field

import torch

from fullgraph.config import TrainConfig
from fullgraph.data.graph import Graph
from fullgraph.data.load import load_graph, load_link_graph
from fullgraph.comm.ledger import CATEGORIES
from fullgraph.errors import InputError
from fullgraph.models import GNN
from fullgraph.models.contract import check_model
from fullgraph.ops.dropout import keyed_dropout
from fullgraph.parallel.engine import Engine
from fullgraph.parallel.registry import build_engine, check_edge_data, check_model_layout
from fullgraph.parallel.setup import input_widths
from fullgraph.device import environment, peak_device_bytes, reset_peak, synchronize
from fullgraph.memory import peak_rss_bytes
from fullgraph.tasks import output_width, task_for, with_task_head
from fullgraph.options import LOWEST_IS_BEST
from fullgraph.tasks.metrics import METRIC_NAMES, small_splits
from fullgraph.train.checkpoint import LoopState, load_checkpoint, save_checkpoint
from fullgraph.train.faults import check_loss, check_weights, fault
from fullgraph.train.runs import trained_options
from fullgraph.train.model_file import MODEL_FILE, save_model
from fullgraph.train.pruning import rows_per_layer
from fullgraph.train.run_model import RunModel
from fullgraph.optim.precision import Precision
from fullgraph.optim.update import WeightUpdate
from fullgraph.train.report import Progress, RunWriter

log = logging.getLogger("fullgraph")

__all__ = ["Trainer", "RunResult"]

SELECTED = ("val_acc", "test_acc", "train_acc", "val_metric", "test_metric", "train_metric", "metrics")
"""What the summary keeps of the selected epoch's evaluation (and its validation loss); links have no ``*_acc``."""

@dataclass
class RunResult:
    """What a run returns (and writes to ``summary.json``)."""

    dataset: str
    model: str
    layers: int
    hidden: int
    parallel: str
    nprocs: int
    epochs_run: int
    best_epoch: int
    val_acc: float | None  # accuracy (micro-F1 multi-label) of node labels; None for links (their ``metrics``)
    test_acc: float | None
    epoch_time_s: float
    peak_rss_bytes: int
    train_acc: float | None = 0.0
    metric: str = "acc"
    """The metric selection used (``--metric``, ``auto`` resolved), one of the task's."""
    val_metric: float = 0.0
    test_metric: float = 0.0
    train_metric: float = 0.0
    val_loss: float = float("nan")
    metrics: dict = field(default_factory=dict)
    """Every metric of the task at the selected epoch, by split and name: ``{"val": {"macro-f1": ...}}``."""
    final_loss: float = float("nan")
    losses: list[float] = field(default_factory=list, repr=False)
    config: dict = field(default_factory=dict, repr=False)
    graph: dict = field(default_factory=dict, repr=False)
    environment: dict = field(default_factory=dict, repr=False)
    peak_rss_bytes_per_rank: list[int] = field(default_factory=list)
    estimated_peak_bytes: int | None = None
    """The largest per-rank estimate of ``fullgraph.plan.estimate_peak_bytes`` made before training (None:
    no memory model for this layout or device)."""
    estimated_peak_bytes_per_rank: list[int | None] = field(default_factory=list)
    device: str = "cpu"
    """Where rank 0 computed (``cuda:0`` or ``cpu``)."""
    peak_cuda_bytes: int | None = None
    """On GPUs: the most bytes PyTorch's allocator held on any rank's GPU during the run (its tensors,
    not the allocator's cached blocks; None on the CPU)."""
    peak_cuda_bytes_per_rank: list[int] = field(default_factory=list)
    comm_bytes_per_epoch: dict = field(default_factory=dict)
    replication_factor: float | None = None
    bubble_fraction: float | None = None
    rows_per_layer: dict | None = None
    """Per graph layer, the rows a training step computes and those the loss needs (``train.pruning``)."""

    def to_dict(self, with_losses: bool = False) -> dict:
        d = asdict(self)
        if not with_losses:
            d.pop("losses")
        return d


class Trainer:
    """Trains ``cfg.model.name`` on ``cfg.data.dataset`` under ``cfg.parallel.mode``.

    ``graph`` (single process) or ``engine`` (any layout) may be passed in instead of being built
    from the configuration, which is how tests and benchmarks reuse one loaded graph.
    """

    def __init__(self, cfg: TrainConfig, graph: Graph | None = None, engine: Engine | None = None,
                 resume: bool = False, model=None, callbacks=(), split=None):
        self.cfg, self.graph, self.engine = cfg, graph, engine
        self.split = split  # a link task's LinkSplit, when the caller has one (else the task finds it)
        self.resume = resume  # carry on from the newest checkpoint in cfg.run.out
        self.model: GNN | None = None
        self.run_model = RunModel.of(cfg, model)  # what cfg names, or fullgraph.train_model's object
        self.writer: RunWriter | None = None
        self.callbacks = list(callbacks)  # called with each epoch's record, on rank 0 (fullgraph.train_model)
        self.stepped: dict = {}  # what the last weight update said (its learning rate, gradient norm)
        self.threads_before: int | None = None  # torch's thread count before build() set --threads

    # ------------------------------------------------------------------ build
    def build(self) -> "Trainer":
        cfg = self.cfg
        self.threads_before = torch.get_num_threads()  # put back by close(): a library call leaves no trace
        self._set_threads()
        if cfg.model.recompute and cfg.parallel.mesh.operator_layout:
            # their sparse products communicate inside the layer: recomputing would repeat them
            raise InputError(f"expected --recompute only with --parallel single, graph, pipeline or hybrid (got "
                             f"--parallel {cfg.parallel.mode}, whose layers communicate inside the sparse product, so "
                             f"recomputing them would repeat the communication)")
        if self.engine is None:
            if not cfg.parallel.mesh.distributed and self.graph is None:
                if cfg.task.name == "link":
                    self.graph, self.split = load_link_graph(cfg)
                else:
                    self.graph = load_graph(cfg)
            norm, layers = self.run_model.shape(lambda: input_widths(cfg, self.graph))
            self.engine = build_engine(cfg, norm, graph=self.graph, layers=layers)
        e = self.engine
        self.task = e.task = task_for(cfg, self.split)
        self.estimated_peak = self._check_memory()
        torch.manual_seed(cfg.optimization.seed)  # the same initial weights on every rank
        self.out_dim = output_width(cfg, e.num_classes)
        relations = len(self.task.split.relation_names) if getattr(self.task, "typed", False) else None
        self.model = with_task_head(self.run_model.build(e.in_dim, self.out_dim, e.edges.width, e.node_types), cfg,
                                    self.out_dim, relations, self.task)
        check_edge_data(cfg, self.model, e)  # edge data the model reads and its layers will not get
        check_model(self.model, distributed=e.world_size > 1)
        check_model_layout(cfg, self.model)  # what a user's model reveals once built (jumping knowledge)
        reset_peak(e.device)  # the peak reported is this run's, from the model on
        self.model.to(e.device)
        if self.run_model.obj is not None:  # built by the caller, in each rank: rank 0's initial weights for all
            e.broadcast_state(self.model)
        e.adopt(self.model)  # a rank's own rows of node-owned parameters, before the optimizer sees them
        self.task.bind(e, self.model)
        self.update = WeightUpdate(self.model, e, cfg.optimization)
        self.writer = RunWriter(cfg.run.out if e.is_main else None, resume=self.resume,
                                tensorboard=cfg.run.log_tensorboard if e.is_main else None)
        if e.is_main:
            p = cfg.parallel
            log.info("%s; model %s, %d layers, hidden %d, %s", self.task.describe(e), self.run_model.name,
                     self.model.num_layers, self.run_model.hidden(self.model),
                     p.mode if p.nprocs == 1 else f"{p.mode}, {p.nprocs} processes")
            if small := small_splits(*self.task.sizes(e)):
                log.warning(small)
        # after the header: it may say a word about --prune (which reads node labels' rows)
        self.rows = rows_per_layer(e, self.model) if not self.task.joins_rows else None
        return self

    def _set_threads(self) -> None:
        """``--threads``, or cores ÷ local processes for a rank (torchrun does not set it); one process keeps
        torch's default. A busy machine is told once what fits (``fullgraph.machine_load``)."""
        from fullgraph.comm.context import DistEnv
        from fullgraph.machine_load import process_threads, warn_if_busy

        cfg, distributed = self.cfg, self.cfg.parallel.mesh.distributed
        if not (cfg.run.threads or distributed):
            warn_if_busy(torch.get_num_threads())
            return
        env = DistEnv.from_env() if distributed else None
        local = env.local_world_size if env else (cfg.parallel.nprocs if distributed else 1)
        torch.set_num_threads(process_threads(cfg.run.threads, local, peers_running=distributed))

    def _check_memory(self) -> int | None:
        """This rank's estimated peak RSS, checked against ``--memory-limit`` (or what this machine has
        available, shared among its local ranks) before any activation exists: an ``InputError`` that
        says what would fit when it is over. ``None`` where there is no memory model: pipeline,
        hybrid and SpMM layouts, and devices other than the CPU (their activations are not host
        memory)."""
        from fullgraph.plan import check_memory
        from fullgraph.memory import available_memory_bytes, current_rss_bytes

        e, cfg = self.engine, self.cfg
        if torch.device(e.device).type != "cpu" or not self.run_model.has_memory_model:
            return None
        stats = e.memory_stats()
        if stats is None:
            return None
        local = 1
        if cfg.parallel.mesh.distributed:
            from fullgraph.comm.context import DistEnv

            env = DistEnv.from_env()
            local = env.local_world_size if env is not None else cfg.parallel.nprocs
        # what this process holds already (the graph it loaded) is part of its share
        available = available_memory_bytes() // local + current_rss_bytes()
        stats |= self.task.memory(cfg.parallel.mesh.pair_group[0])  # a link step's pairs (shared by its scoring ranks)
        return check_memory(cfg, [stats], available_bytes=available, edge_batch=getattr(self.task, "batch", None))[0]

    # ------------------------------------------------------------------ steps
    def train_step(self, epoch: int = 0) -> float:
        """One epoch: the task's steps, a weight update each; returns this rank's share of the loss (the
        global loss is the sum over ranks; of several steps, their mean)."""
        model, e, steps = self.model, self.engine, self.task.steps(epoch)
        model.train()
        total = 0.0
        for step in range(steps):
            self.update.zero_grad()
            key = self.task.dropout_epoch(epoch, step)
            with keyed_dropout(self.cfg.optimization.seed, key), self.update.precision.compute():  # masks by node id
                total += e.step(model, epoch, step)
            self.stepped = self.update.step()
        return total / steps

    @property
    def metric(self) -> str:
        """The metric this run reports and selects by (``--metric``, with ``auto`` resolved)."""
        return self.task.metric(self.engine)

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Exact full-graph forward through the layout's own path, judged by the task (``fullgraph.tasks``)."""
        model, e = self.model, self.engine
        model.eval()
        with Precision(self.cfg.optimization.precision, e.device).compute():  # as trained (evaluate --run too)
            logits = e.forward(model, 0, training=False).float()
        return self.task.evaluate(e, model, logits)

    def _better(self, record: dict, best: dict) -> bool:
        if best["epoch"] == 0:
            return True
        key = "val_loss" if self.cfg.optimization.select == "loss" else "val_metric"
        lower = key == "val_loss" or record["metric"] in LOWEST_IS_BEST  # (RMSE, MAE)
        return record[key] < best[key] if lower else record[key] > best[key]

    def _select(self, record: dict, s: LoopState) -> bool:
        """Update the selection with an evaluated epoch; whether it is the new best."""
        if self._better(record, s.best):
            s.best = {k: record.get(k) for k in SELECTED + ("val_loss",)} | {"epoch": record["epoch"]}
            s.bad_evals = 0
            return True
        s.bad_evals += 1
        return False

    def _epoch_totals(self, loss: float, dt: float) -> dict:
        """The global loss and, for a distributed layout, the ledger summed over ranks."""
        e = self.engine
        if e.ledger is None:
            return {"loss": loss}
        nbytes, secs = e.ledger.take()
        train_secs = sum(v for c, v in secs.items() if not c.startswith(("eval/", "meta/")))
        vec = [loss] + [float(nbytes.get(c, 0)) for c in CATEGORIES] + [train_secs, dt]
        vec[1 + CATEGORIES.index("meta/metrics")] += len(vec) * 8  # this all-reduce's float64s: this epoch's
        vec = e.reduce_sum(vec, "meta/metrics")
        e.ledger.take()  # that all-reduce, counted above (not in the next epoch's totals)
        comm = {c: int(v) for c, v in zip(CATEGORIES, vec[1:-2]) if v}
        comm_time = vec[-2] / e.world_size
        return {"loss": vec[0], "comm_bytes": comm, "comm_time_s": comm_time,
                "compute_time_s": vec[-1] / e.world_size - comm_time}

    # ------------------------------------------------------------------ loop
    def train(self) -> RunResult:
        if self.model is None:
            self.build()
        s, best_state = self._start()
        epoch, best_state = self._loop(s, best_state)
        if best_state is not None:
            self.model.load_state_dict(best_state)
        if self.cfg.run.out:  # the selected weights, whole, as one process would hold them
            self._save_model(self.engine.consolidate(self.model, self.model.state_dict()), s.best)
        result = self._result(s, epoch)
        self.writer.summary(result.to_dict())
        return result

    def _start(self) -> tuple[LoopState, dict | None]:
        """A fresh loop state, or the one of the checkpoint a resumed run carries on from."""
        e = self.engine
        if not self.resume:
            return LoopState(best={k: 0.0 for k in SELECTED} | {"val_loss": float("inf"), "epoch": 0}), None
        s, best_state, folder = load_checkpoint(self.cfg.run.out, model=self.model, optimizer=self.update.optimizer,
                                               engine=e)
        self.update.load_state(s.update)
        if e.is_main:
            log.info("resuming after epoch %d from %s", s.epoch, folder)
        self.writer.keep_epochs(s.epoch)
        return s, best_state

    def _loop(self, s: LoopState, best_state: dict | None) -> tuple[int, dict | None]:
        """Epochs ``s.epoch + 1 ..`` until ``--epochs`` or patience; the last epoch run and the best weights."""
        cfg, e = self.cfg, self.engine
        progress = Progress(cfg.optimization.epochs, cfg.run.progress if e.is_main else "none", done=s.epoch)
        epoch = s.epoch
        try:
            for epoch in range(s.epoch + 1, cfg.optimization.epochs + 1):
                fault(epoch, e.rank)
                record = self._epoch(epoch)
                check_loss(cfg, record, s.losses, e.is_main)
                s.record(record)
                if "eval_time_s" in record and self._select(record, s):
                    best_state = copy.deepcopy(self.model.state_dict())
                self.update.after_epoch(record)
                self.writer.epoch(record)
                progress.update(record)
                for callback in self.callbacks if e.is_main else ():
                    callback(dict(record))
                s.epoch, s.update = epoch, self.update.state()
                if cfg.run.checkpoint_every and cfg.run.out and epoch % cfg.run.checkpoint_every == 0:
                    check_weights(cfg, epoch, self.model, e)
                    save_checkpoint(cfg.run.out, epoch, model=self.model, optimizer=self.update.optimizer, engine=e, loop=s,
                                    best_state=best_state, options=trained_options(self.run_model.options()))
                if cfg.optimization.patience and s.bad_evals >= cfg.optimization.patience:
                    if e.is_main:
                        selected = "loss" if cfg.optimization.select == "loss" else METRIC_NAMES[self.metric]
                        log.info("stopping at epoch %d: no better validation %s in %d evaluations",
                                 epoch, selected, cfg.optimization.patience)
                    break
        finally:
            progress.close()
        return epoch, best_state

    def _epoch(self, epoch: int) -> dict:
        """One training step, and an evaluation when one is due: the epoch's record."""
        cfg, e = self.cfg, self.engine
        t0 = time.perf_counter()
        loss = self.train_step(epoch)
        synchronize(e.device)  # the optimizer's queued GPU work belongs to this epoch
        dt = time.perf_counter() - t0
        evaluated = {}
        if epoch % cfg.optimization.eval_every == 0 or epoch == cfg.optimization.epochs:
            t1 = time.perf_counter()
            evaluated = self.evaluate() | {"eval_time_s": time.perf_counter() - t1}
        return ({"epoch": epoch} | e.epoch_extras() | self._epoch_totals(loss, dt) | self.stepped | {"epoch_time_s": dt}
                | evaluated)

    def _result(self, s: LoopState, epoch: int) -> RunResult:
        """The run's summary: the selected epoch's metrics, times, peaks (measured and estimated), bytes."""
        cfg, e = self.cfg, self.engine
        best, times, losses = s.best, s.times, s.losses
        rss = e.gather(float(peak_rss_bytes()), "eval/reduce")
        gpu = e.gather(float(peak_device_bytes(e.device) or 0), "eval/reduce")
        result = RunResult(
            dataset=e.name, model=self.run_model.name, layers=self.model.num_layers,
            hidden=self.run_model.hidden(self.model),
            parallel=cfg.parallel.mode, nprocs=cfg.parallel.nprocs, epochs_run=epoch, best_epoch=best["epoch"],
            val_acc=best["val_acc"], test_acc=best["test_acc"], train_acc=best["train_acc"],
            val_loss=best["val_loss"], metric=self.metric, val_metric=best["val_metric"],
            test_metric=best["test_metric"], train_metric=best["train_metric"], metrics=best.get("metrics") or {},
            epoch_time_s=statistics.median(times[1:] if len(times) > 1 else times),
            peak_rss_bytes=int(max(rss)), final_loss=losses[-1], losses=losses, config=self.run_model.options(),
            graph=self.task.graph_summary(e.summary()), environment=environment(),
        )
        result.peak_rss_bytes_per_rank, result.rows_per_layer = [int(r) for r in rss], self.rows
        if torch.device(e.device).type == "cuda":
            result.device = str(e.device)
            result.peak_cuda_bytes_per_rank = [int(v) for v in gpu]
            result.peak_cuda_bytes = max(result.peak_cuda_bytes_per_rank)
        est = e.gather(float(self.estimated_peak if self.estimated_peak is not None else -1), "eval/reduce")
        result.estimated_peak_bytes_per_rank = [int(v) if v >= 0 else None for v in est]
        known = [v for v in result.estimated_peak_bytes_per_rank if v is not None]
        result.estimated_peak_bytes = max(known) if known else None
        if s.comm_per_epoch:
            keys = sorted({k for c in s.comm_per_epoch for k in c})
            result.comm_bytes_per_epoch = {k: int(statistics.median(c.get(k, 0) for c in s.comm_per_epoch))
                                           for k in keys}
            result.replication_factor = e.replication_factor
        if s.bubbles:
            result.bubble_fraction = statistics.median(s.bubbles[1:] if len(s.bubbles) > 1 else s.bubbles)
        return result

    def _save_model(self, state: dict, best: dict) -> None:
        e, cfg = self.engine, self.cfg
        if not e.is_main:
            return
        from pathlib import Path

        graph = {"name": e.name, "features": e.in_dim, "classes": e.num_classes} | getattr(self.task, "file_facts", dict)()
        args = self.run_model.file_args(e.in_dim, self.out_dim, e.edges.width, e.node_types)
        save_model(Path(cfg.run.out) / MODEL_FILE, state=state, args=args, graph=graph,
                   config=self.run_model.options(), metrics=dict(best))

    def close(self) -> None:
        if self.threads_before:
            torch.set_num_threads(self.threads_before)
        if self.writer is not None:
            self.writer.close()
        if self.engine is not None:
            self.engine.close()
