"""``TrainConfig``: every option of a training run, typed, documented and validated in one place.

The options come in six sections, each a dataclass of its own: ``data`` (which graph), ``model``
(what is trained), ``optimization`` (how), ``parallel`` (how the work is split across processes),
``run`` (where and how the processes execute) and ``task`` (what the output is trained for). ``cfg.model.layers``, ``cfg.parallel.mesh``.

A field's name is its option's name (``--layers``, ``layers = 4`` in TOML), except where the section
already says it: ``model.name`` is ``--model`` and ``parallel.mode`` is ``--parallel`` (the ``flag``
in the field's metadata). Flat dictionaries of options — the command line, TOML files, a run's
``config.json``, ``TrainConfig.of(model="gat", layers=4)`` — use the option names.

The command line, a TOML file (``--config``) and library callers all end up here, so a bad value is
reported the same way whichever way it came in: an ``InputError`` naming the option, what was
expected and what was found. Each section checks its own options; ``TrainConfig`` checks the rules
that join sections (a layout against the model's depth, batch statistics against a layout).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from fullgraph.comm.mesh import PARALLEL_MODES
from fullgraph.data.datasets import ROOT_HELP
from fullgraph.errors import InputError
from fullgraph.models import MODELS, NORM_MODELS, SPMM_MODELS, check_options
from fullgraph.options import CHUNK_EDGES, FEATURE_NORMS, METRICS, opt, option_name
from fullgraph.options import Section as _Section, load_toml as _load_toml, need as _need
from fullgraph.tasks.options import TaskOptions

__all__ = ["TrainConfig", "GraphSource", "DataOptions", "ModelOptions", "OptimizationOptions", "ParallelOptions",
           "RunOptions", "TaskOptions", "load_toml"]

MAX_THREADS = 1024
"""The most ``--threads`` taken."""
FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32: the optimizer's hyperparameters meet the weights in float32, and torch refuses
(with a traceback) a value past it."""

# the registries' lists, under the names callers know
MODEL_NAMES = tuple(MODELS)
__all__ += ["MODEL_NAMES", "NORM_MODELS", "SPMM_MODELS", "PARALLEL_MODES", "METRICS", "FEATURE_NORMS", "CHUNK_EDGES"]


@dataclass
class GraphSource(_Section):
    """Which graph, from where, with which split: what every command that reads a graph takes."""

    dataset: str = opt("synthetic",
        "A dataset name (``fullgraph datasets`` lists them), or the path of a dataset folder or ``.npz`` file in "
        "any format fullgraph reads (recognized from its files); ``synthetic`` is the built-in graph.")
    root: str | None = opt(None, ROOT_HELP)
    split: int = opt(0,
        "Which of a dataset's fixed splits (the heterophilous graphs have 10), or the seed of a made one.")

    def _check(self) -> None:
        _need(self.split >= 0, "split", self.split, ">= 0")


@dataclass
class DataOptions(GraphSource):
    """Which graph, from where, with which split and feature normalization."""

    feature_norm: str = opt("auto",
        "Row-normalize features: ``row``, ``none``, or ``auto`` (row for the Planetoid graphs, as in Kipf & Welling "
        "and the GCNII paper; none otherwise).")


@dataclass
class ModelOptions(_Section):
    """The model: its kind, depth, widths, normalization, dropout and how its layers compute."""

    name: str = opt("gcn",
        "The model: a built-in one (``fullgraph.models``; --help lists their names), or your own by its builder, "
        "path/to/file.py:build or package.module:build, where build(in_dim, out_dim, **model_args) returns a "
        "fullgraph GNN, PyG convolutions or a PyG BasicGNN, or on a typed graph a list of PyG's heterogeneous layers "
        "(HeteroConv, HGTConv; the builder may take metadata and in_dims) (docs/your-model.md).", flag="model")
    args: dict = opt({},
        "A builder's keyword arguments, one key=value per --model-arg (the value read as JSON where it parses), or "
        "a [model.args] table in TOML. The builder decides depth, widths and dropout, so --layers, --hidden, "
        "--heads and the built-in models' own options are refused with it (but --hidden with a builder that takes "
        "in_dims: a featureless node type's table width).", flag="model_args", each="model_arg")
    layers: int = opt(2,
        "Number of graph layers (2 or more): how deep a model fits is the memory's to say (``fullgraph plan``, and "
        "the check before training; --recompute-segment makes depth cheap).")
    hidden: int = opt(64, "Hidden width (for GAT: all heads together).")
    heads: int = opt(8, "Attention heads of GAT's hidden layers.")
    norm: str = opt("none",
        "Normalization after every hidden graph layer of GCN, GraphSAGE and GAT: ``none``, ``layer`` (LayerNorm) or "
        "``batch`` (BatchNorm over all nodes of the graph, summed across ranks).")
    dropout: float = opt(0.5, "Dropout rate, in [0, 1).")
    gcnii_alpha: float = opt(0.1, "GCNII initial-residual weight α.")
    gcnii_lambda: float = opt(0.5, "GCNII identity-mapping strength λ (β_l = log(λ/l + 1)).")
    appnp_alpha: float = opt(0.1, "APPNP teleport (restart) probability α of each propagation step.")
    gcn_kernel: str = opt("fused",
        "GCN layers as one fused function keeping one activation per layer (``fused``, MG-GCN's buffer reuse) or as "
        "plain PyTorch ops (``autograd``: more memory; for comparison).")
    rgcn_decomposition: str = opt("none",
        "R-GCN's relation weights: ``none`` (one free weight per relation), ``bases`` (``W_r = sum_b a_rb V_b`` over "
        "--rgcn-bases shared bases) or ``blocks`` (block-diagonal, --rgcn-bases blocks).")
    rgcn_bases: int = opt(0, "R-GCN: the number of bases or blocks of --rgcn-decomposition (0 with ``none``).")
    featureless: str = opt("embedding",
        "What a node type without features starts from (typed graphs, R-GCN): ``embedding`` (a learned row per node, "
        "each type's table drawn by Glorot over its own shape), ``one-hot`` (the same, drawn as torch.nn.Linear "
        "draws a map of one-hot inputs) or ``zeros`` (its type's bias only).")
    recompute: bool = opt(False,
        "Keep only each layer's input in the forward pass and recompute the rest in backward (SAR's "
        "rematerialization): less activation memory for one more forward per layer; same losses.")
    recompute_segment: int = opt(0,
        "Run the layers in segments of this many and keep only each segment's input for backward, which recomputes "
        "the segment (0: off; one process only). ``L`` layers then keep about ``L/k + k`` activations instead of "
        "``L`` (fewest near ``k = √L``) for one more forward of every layer; same losses.")

    def _check(self) -> None:
        _need(self.layers >= 2, "layers", self.layers, ">= 2")
        _need(self.recompute_segment >= 0, "recompute_segment", self.recompute_segment, ">= 0 (0: off)")
        _need(self.hidden >= 1, "hidden", self.hidden, ">= 1")
        _need(self.heads >= 1, "heads", self.heads, ">= 1")
        _need(0.0 <= self.dropout < 1.0, "dropout", self.dropout, "in [0, 1)")
        _need(0.0 <= self.gcnii_alpha <= 1.0, "gcnii_alpha", self.gcnii_alpha, "in [0, 1]")
        _need(self.gcnii_lambda > 0, "gcnii_lambda", self.gcnii_lambda, "> 0")
        _need(0.0 <= self.appnp_alpha <= 1.0, "appnp_alpha", self.appnp_alpha, "in [0, 1]")
        _need(self.rgcn_bases >= 0, "rgcn_bases", self.rgcn_bases, ">= 0")
        _need((self.rgcn_bases >= 1) == (self.rgcn_decomposition != "none"), "rgcn_bases", self.rgcn_bases,
              ">= 1 with --rgcn-decomposition bases or blocks, and 0 with none")
        check_options(self)  # against the model's spec (a user's builder: imported, and its keywords)


@dataclass
class OptimizationOptions(_Section):
    """How the model is trained and selected: Adam's settings, the schedule, clipping, the precision,
    epochs, the metric, the seed."""

    lr: float = opt(0.01, "Adam learning rate (the schedule's peak).")
    weight_decay: float = opt(5e-4, "Adam weight decay (for GCNII: of its dense input and output layers).")
    conv_weight_decay: float = opt(0.01, "GCNII only: weight decay of the graph-layer weights.")
    lr_schedule: str = opt("constant",
        "How the learning rate moves after the warm-up: ``constant``; ``cosine`` (down to ``lr_min`` at the last "
        "epoch); ``step`` (times ``lr_gamma`` every ``lr_step`` epochs); ``plateau`` (times ``lr_gamma`` after "
        "``lr_step`` evaluations without a lower validation loss) (``fullgraph.optim.schedule``).")
    warmup_epochs: int = opt(0,
        "Epochs over which the learning rate rises linearly to ``lr`` before the schedule starts.")
    lr_min: float = opt(0.0, "The cosine schedule's last learning rate.")
    lr_step: int = opt(50, "The step schedule's period in epochs; the plateau schedule's patience in evaluations.")
    lr_gamma: float = opt(0.5, "The factor of each step (``step``) or reduction (``plateau``).")
    clip_grad_norm: float = opt(0.0,
        "Scale the gradient down to this 2-norm when it is larger (0: never). The norm is the whole model's, summed "
        "over the ranks that hold different parameters, so every layout clips alike.")
    precision: str = opt("fp32",
        "Compute precision: ``fp32``; ``bf16`` or ``fp16`` (autocast of the dense products with fp32 master "
        "weights; fp16 with a dynamic loss scale). Sparse products and reductions stay fp32 "
        "(``fullgraph.optim.precision`` says which op runs in which).")
    epochs: int = opt(200, "Maximum number of epochs.")
    patience: int = opt(0,
        "Stop after this many evaluations without a better validation metric (or loss, with ``select`` ``loss``; 0: "
        "never).")
    select: str = opt("acc",
        "Model selection on the validation set: highest value of the metric (``acc``, whatever ``metric`` is) or "
        "lowest loss (``loss``, as the GCNII paper does); the reported test numbers are the selected epoch's.")
    metric: str = opt("auto",
        "The metric selection maximizes, and the one progress lines show (every metric of the task is reported): "
        "``acc``, ``macro-f1``, ``micro-f1``, ``rocauc``, or ``auto`` (ROC-AUC for two classes, micro-F1 for "
        "multi-label, accuracy otherwise); with ``--task link``: ``rocauc``, ``hits@20``, ``hits@50``, ``hits@100`` "
        "or ``mrr`` (``auto``: what the dataset's publishers report, else ROC-AUC).")
    eval_every: int = opt(1, "Evaluate validation and test accuracy every this many epochs (and after the last).")
    seed: int = opt(0, "Seed of weights, dropout and made splits; the same seed gives the same losses, bit for bit.")
    stop_on_nonfinite: bool = opt(True,
        "Stop the run (exit status 4, the last good checkpoint kept) when the loss becomes NaN or infinite, or the "
        "weights about to be checkpointed do; ``--no-stop-on-nonfinite`` trains on regardless.")

    def _check(self) -> None:
        _need(0 < self.lr <= FLOAT32_MAX, "lr", self.lr, "> 0 and within float32")
        _need(0 <= self.weight_decay <= FLOAT32_MAX, "weight_decay", self.weight_decay, ">= 0 and within float32")
        _need(0 <= self.conv_weight_decay <= FLOAT32_MAX, "conv_weight_decay", self.conv_weight_decay,
              ">= 0 and within float32")
        _need(self.warmup_epochs >= 0, "warmup_epochs", self.warmup_epochs, ">= 0")
        _need(0 <= self.lr_min <= self.lr, "lr_min", self.lr_min, f"in [0, lr = {self.lr}]")
        _need(self.lr_step >= 1, "lr_step", self.lr_step, ">= 1")
        _need(0 < self.lr_gamma <= 1, "lr_gamma", self.lr_gamma, "in (0, 1]")
        _need(self.clip_grad_norm >= 0, "clip_grad_norm", self.clip_grad_norm, ">= 0 (0: no clipping)")
        _need(self.epochs >= 1, "epochs", self.epochs, ">= 1")
        _need(self.patience >= 0, "patience", self.patience, ">= 0")
        _need(self.eval_every >= 1, "eval_every", self.eval_every, ">= 1")
        _need(0 <= self.seed < 2**63, "seed", self.seed, "in [0, 2**63)")  # what torch.manual_seed takes


@dataclass
class ParallelOptions(_Section):
    """How the work is split: the layout and its axes, the partition, boundary sampling, the
    pipeline's chunks and history, the SpMM grids."""

    mode: str = opt("single",
        "How the work is split: ``single`` (one process), ``graph`` (one part per process), ``pipeline`` (one stage "
        "of consecutive layers per process, GNNPipe), ``hybrid`` (``stages`` groups of ``graph_ways`` "
        "graph-parallel processes), ``spmm-1d``, ``spmm-1.5d``, ``spmm-2d``, ``spmm-3d`` (the sparse product over "
        "a process grid, CAGNET) or ``tensor`` (the feature columns while aggregating, NeutronTP); "
        "docs/layouts.md says when to use each.", flag="parallel")
    nprocs: int = opt(1, "Number of processes (started locally, or the torchrun world size).")
    partitioner: str = opt("metis",
        "How nodes are split into parts: metis (communication volume, balanced by node count), metis-degree (by "
        "degree), metis-memory (by each rank's estimated memory for this run's model: ``partition.balance``), "
        "fennel (streaming: bytes per node, not per edge, for graphs METIS cannot hold; balanced as metis-memory), "
        "random, contiguous, or permuted (contiguous after a seeded random permutation).")
    metis_sample: float = opt(1.0,
        "METIS partitions a uniform sample of the undirected edges, each kept with this probability (1: every "
        "edge). METIS's memory, ~150 bytes per edge it sees, is most of partitioning's; 0.25 brings a 10^8-edge "
        "graph within ~60 bytes per edge at a small cost in halo size (``fullgraph.partition.partitioners``).")
    partition_dir: str | None = opt(None,
        "A folder written by ``fullgraph partition``; each rank reads only its own part from it.")
    boundary_rate: float = opt(1.0,
        "BNS-GCN: the probability that a part keeps each halo node in a training epoch (1: all, 0: none).")
    stages: int = opt(0,
        "Hybrid: pipeline stages S (0: --nprocs / --graph-ways). A pipeline has one stage per process.")
    graph_ways: int = opt(0, "Hybrid: graph-parallel processes per stage W (0: --nprocs / --stages).")
    stage_layers: str = opt("", "Layers per stage, e.g. ``8,8,8,8`` (default: balanced by layer count).")
    chunks: int = opt(0, "Pipeline / hybrid: chunks K per part (0: 4 × stages, GNNPipe's choice).")
    chunker: str = opt("metis", "How parts are cut into chunks: ``metis`` (locality-aware) or ``random``.")
    shuffle: bool = opt(True, "Shuffle the chunk order every epoch (``--no-shuffle`` turns it off).")
    history_refresh: int = opt(10,
        "Epochs a history table is kept: epoch t reads the values of epoch a·floor((t-1)/a) (1: last epoch).")
    chunk_edges: str = opt("stale",
        "``stale``: edges to unprocessed chunks read history (GNNPipe); ``induced``: they are cut (GPipe's naive "
        "micro-batching, a baseline).")
    replication: int = opt(0, "``spmm-1.5d``: replication factor c of the P/c × c grid (c divides P, c² <= P).")
    overlap: bool = opt(True,
        "SpMM layouts: broadcast the next block row while multiplying the current one (``--no-overlap``).")
    permute: bool = opt(True,
        "SpMM layouts: cut block rows from a seeded random node permutation, for balance (``--no-permute``).")
    prune: bool = opt(False,
        "Compute each layer of a training step only on the rows that reach the loss: the same loss and gradients, "
        "less work on a sparse training split (--parallel single or graph; ``parallel.prune``).")
    comm_precision: str = opt("fp32",
        "Precision of the activations and activation gradients that cross processes (the halo exchange, the "
        "pipeline's chunk stream, the hybrid's chunk halos, the SpMM layouts' broadcasts, reductions and "
        "redistributions): fp32, bf16, fp16, or int8 (per-row scale, stochastic rounding keyed like dropout). "
        "Weight-gradient sums stay fp32 (``fullgraph.comm.precision``).")
    tensor_chunks: int = opt(0,
        "``tensor``: aggregate in this many row chunks per process and send each chunk's rows back to their owner "
        "while the next is aggregated (0: one all-to-all after the whole product); for graphs whose ``[N, hidden / "
        "P]`` output slice should not be held at once (``parallel.tensor``).")
    tensor_decoupled: bool = opt(False,
        "``tensor``: switch to column slices once, run every propagation step on them, and switch back once "
        "(NeutronTP's decoupled mode): two all-to-alls per pass instead of two per layer, for models whose "
        "propagation keeps the columns apart (APPNP).")
    chunk_file: str | None = opt(None,
        "The node → chunk map the launcher wrote (set by the launcher; not a user option).", hidden=True)

    def _check(self) -> None:
        _need(0.0 < self.metis_sample <= 1.0, "metis_sample", self.metis_sample, "in (0, 1]")
        _need(0.0 <= self.boundary_rate <= 1.0, "boundary_rate", self.boundary_rate, "in [0, 1]")
        layout = self.mesh  # validates every axis of the layout against nprocs
        _need(self.history_refresh >= 1, "history_refresh", self.history_refresh, ">= 1")
        _need(self.chunks >= 0, "chunks", self.chunks, ">= 0")
        _need(not self.prune or layout.prunable, "prune", self.prune,
              f"off with --parallel {self.mode}, whose chunks or block rows compute every row (--prune runs with "
              f"--parallel single or graph)")
        _need(self.tensor_chunks >= 0, "tensor_chunks", self.tensor_chunks, ">= 0")
        from fullgraph.parallel.registry import refuse_foreign_options

        refuse_foreign_options(self)  # a layout's own options (Layout.options) under another layout

    @property
    def mesh(self):
        """The process layout (``fullgraph.comm.mesh.Mesh``): stages, graph ways and the SpMM grid."""
        from fullgraph.comm.mesh import Mesh

        return Mesh.for_mode(self.mode, self.nprocs, self.stages, self.graph_ways, self.replication)

    @property
    def num_chunks(self) -> int:
        """K: as given, or 4 × stages."""
        return self.chunks or 4 * self.mesh.stages

    @property
    def stage_layer_list(self) -> list[int] | None:
        return [int(v) for v in self.stage_layers.split(",")] if self.stage_layers else None


@dataclass
class RunOptions(_Section):
    """Where and how the processes execute: the run folder, checkpoints, threads, device, timeouts,
    memory and progress output."""

    out: str | None = opt(None,
        "Folder of the run: config.json, metrics.jsonl, summary.json, model.pt and checkpoint/.")
    overwrite: bool = opt(False,
        "Replace an earlier run in ``out`` (its config.json, metrics.jsonl, summary.json and model.pt); without it "
        "such a folder is refused. Checkpoints are never replaced: resume them or remove them.")
    checkpoint_every: int = opt(0,
        "Write a checkpoint to ``out/checkpoint/`` every this many epochs (0: never); the last two are kept, and "
        "``fullgraph train --resume OUT`` carries on from the newest (``fullgraph.train.checkpoint``).")
    threads: int = opt(0, "CPU threads for this process (0: all cores).")
    device: str = opt("auto",
        "Where each process computes: ``cpu``, ``cuda`` (refused without a GPU per local process), or ``auto`` "
        "(``$FULLGRAPH_DEVICE`` if set; else CUDA when every local process can have a GPU of its own, else the CPU; "
        "``fullgraph.device``). Multi-process runs on GPUs talk over NCCL, on the CPU over gloo.")
    comm_timeout: float = opt(60.0, "Seconds any collective may wait before the run is declared failed.")
    memory_limit: float = opt(0.0,
        "GiB one rank may use; the run is refused before launch when the estimated peak per rank exceeds it (0: the "
        "memory this machine has available, divided among its local ranks).")
    release_memory: bool = opt(False,
        "Return freed tensors to the system at once (glibc's mmap threshold fixed at 1 MiB): the peak memory of a "
        "run is then what it needs, lower on deep models, but large allocations fault their pages in anew and "
        "epochs get slower (benchmarks/README.md, \"Recompute, SAGE's initialization and the allocator\", gives the "
        "measured cost).")
    progress: str = opt("auto",
        "``bar`` (a progress bar), ``lines`` (one line per evaluation), ``none``, or ``auto`` (a bar on a terminal, "
        "lines otherwise).")
    log_tensorboard: str | None = opt(None,
        "Folder for TensorBoard event files, written by rank 0: per epoch the loss, learning rate, gradient norm, "
        "times, metrics and bytes per ledger category; each rank's peak memory at the end (needs the tensorboard "
        "package: ``fullgraph[tensorboard]``).")

    def _check(self) -> None:
        # torch aborts or crashes past a few thousand threads; more than the cores only slows a run anyway
        _need(0 <= self.threads <= MAX_THREADS, "threads", self.threads,
              f"in [0, {MAX_THREADS}] (0: all cores; this machine has {os.cpu_count()})")
        _need(self.comm_timeout > 0, "comm_timeout", self.comm_timeout, "> 0")
        _need(self.memory_limit >= 0, "memory_limit", self.memory_limit, ">= 0 (GiB; 0: what is available)")
        _need(self.checkpoint_every >= 0, "checkpoint_every", self.checkpoint_every, ">= 0")
        _need(not self.checkpoint_every or self.out, "checkpoint_every", self.checkpoint_every,
              "0 without --out (no folder for checkpoints)")


@dataclass
class TrainConfig:
    """Options of ``fullgraph train``, in six sections (the ``--help`` groups and the TOML tables)."""

    data: DataOptions = field(default_factory=DataOptions)
    """Which graph: ``fullgraph.data``."""
    model: ModelOptions = field(default_factory=ModelOptions)
    """What is trained: ``fullgraph.models``."""
    optimization: OptimizationOptions = field(default_factory=OptimizationOptions)
    """How it is trained: ``fullgraph.train``."""
    parallel: ParallelOptions = field(default_factory=ParallelOptions)
    """How the work is split: ``fullgraph.parallel``, ``fullgraph.comm.mesh``."""
    run: RunOptions = field(default_factory=RunOptions)
    """Where and how the processes execute."""
    task: TaskOptions = field(default_factory=TaskOptions)
    """What the model's output is trained for: ``fullgraph.tasks``."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if not isinstance(getattr(self, f.name), SECTIONS[f.name]):
                raise InputError(f"expected the {f.name} section to be a {SECTIONS[f.name].__name__} "
                                 f"(got {type(getattr(self, f.name)).__name__})")
        from fullgraph.parallel.registry import check_layout

        check_layout(self)  # the layout's own rules (Layout.check), against the model and the options
        from fullgraph.tasks import check_task

        check_task(self)  # the task's rules: the layouts it runs under, the options only node labels take

    def check_depth(self, layers: int | None) -> None:
        """The pipeline's stages against a model of ``layers`` graph layers (``None``: a user's model,
        whose builder decides its depth: checked again once it is built)."""
        from fullgraph.parallel.rules import check_depth

        check_depth(self.parallel, layers)

    # ------------------------------------------------------------ flat dictionaries of options
    @classmethod
    def of(cls, **options) -> TrainConfig:
        """A configuration from options by name (``TrainConfig.of(model="gat", layers=4)``): each goes
        to its section; an unknown name is refused."""
        by_section: dict[str, dict] = {name: {} for name in SECTIONS}
        where = _PLACES
        for name, value in options.items():
            if name not in where:
                raise InputError(f"unknown option {name!r} (expected one of {', '.join(sorted(where))})")
            section, attr = where[name]
            by_section[section][attr] = value
        return cls(**{s: SECTIONS[s](**kw) for s, kw in by_section.items()})

    def options(self) -> dict:
        """Every option by name, with its value: what ``config.json`` holds and ``of`` takes back."""
        return {name: getattr(getattr(self, s), attr) for name, (s, attr) in _PLACES.items()}

    def with_options(self, **changes) -> TrainConfig:
        """A copy with some options changed, validated anew."""
        return TrainConfig.of(**(self.options() | changes))

    @classmethod
    def field_names(cls) -> list[str]:
        """The option names, section by section (the flags' names with ``_`` for ``-``)."""
        return list(_PLACES)


SECTIONS = {"data": DataOptions, "model": ModelOptions, "optimization": OptimizationOptions,
            "parallel": ParallelOptions, "run": RunOptions, "task": TaskOptions}  # the order of --help and of TOML's tables
_PLACES = {option_name(f): (s, f.name) for s, cls in SECTIONS.items() for f in fields(cls)}  # option: (section, field)


def load_toml(path: str | Path) -> dict:
    """Options from a TOML file (``fullgraph.options.load_toml``: section tables, a ``[train]`` table
    or top-level keys)."""
    return _load_toml(path, TrainConfig.field_names(), tuple(SECTIONS))
