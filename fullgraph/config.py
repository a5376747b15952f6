"""``TrainConfig``: every option of a training run, typed, documented and validated in one place.

The command line, a TOML file (``--config``) and library callers all end up here, so a bad value is
reported the same way whichever way it came in: an ``InputError`` naming the field, what was
expected and what was found.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from fullgraph.errors import InputError

__all__ = ["TrainConfig", "load_toml"]

MODEL_NAMES = ("gcn", "sage", "gat", "gcnii", "resgcn+")
PARALLEL_NAMES = ("single", "graph", "pipeline", "hybrid", "spmm-1d", "spmm-1.5d", "spmm-2d", "spmm-3d")
CHUNK_EDGES = ("stale", "induced")
SPMM_MODELS = ("gcn", "sage", "gcnii", "resgcn+")  # their aggregation is one plain sparse product
NORM_MODELS = ("gcn", "sage", "gat")  # the models --norm applies to
METRICS = ("auto", "acc", "rocauc", "micro-f1")  # --metric (fullgraph.train.metrics computes them)
PARTITIONERS = ("metis", "metis-degree", "metis-memory", "random", "contiguous", "permuted")
FEATURE_NORMS = ("auto", "row", "none")


@dataclass
class TrainConfig:
    """Options of ``fullgraph train``. Field names are the flag names with ``_`` for ``-``."""

    dataset: str = "synthetic"
    """Dataset name (``fullgraph datasets`` lists them); ``synthetic`` is the built-in graph."""
    root: str | None = None
    """Data root; default: ``$FULLGRAPH_DATA``, then ``./data``."""
    split: int = 0
    """Which of a dataset's fixed splits (the heterophilous graphs have 10), or the seed of a made one."""
    model: str = "gcn"
    """One of gcn, sage, gat, gcnii, resgcn+."""
    layers: int = 2
    """Number of graph layers (2 to 128)."""
    hidden: int = 64
    """Hidden width (for GAT: all heads together)."""
    heads: int = 8
    """Attention heads of GAT's hidden layers."""
    lr: float = 0.01
    """Adam learning rate."""
    weight_decay: float = 5e-4
    """Adam weight decay (for GCNII: of its dense input and output layers)."""
    conv_weight_decay: float = 0.01
    """GCNII only: weight decay of the graph-layer weights."""
    dropout: float = 0.5
    """Dropout rate, in [0, 1)."""
    epochs: int = 200
    """Maximum number of epochs."""
    patience: int = 0
    """Stop after this many evaluations without a better validation metric (or loss, with ``select``
    ``loss``; 0: never)."""
    select: str = "acc"
    """Model selection on the validation set: highest value of the metric (``acc``, whatever ``metric``
    is) or lowest loss (``loss``, as the GCNII paper does); the reported test numbers are the
    selected epoch's."""
    metric: str = "auto"
    """What evaluation reports and selection maximizes: ``acc``, ``rocauc``, ``micro-f1``, or ``auto``
    (ROC-AUC for two classes, micro-F1 for multi-label, accuracy otherwise)."""
    norm: str = "none"
    """Normalization after every hidden graph layer of GCN, GraphSAGE and GAT: ``none``, ``layer``
    (LayerNorm) or ``batch`` (BatchNorm over all nodes of the graph, summed across ranks)."""
    seed: int = 0
    """Seed of weights, dropout and made splits; the same seed gives the same losses, bit for bit."""
    eval_every: int = 1
    """Evaluate validation and test accuracy every this many epochs (and after the last)."""
    threads: int = 0
    """CPU threads for this process (0: all cores)."""
    device: str = "auto"
    """Where each process computes: ``cpu``, ``cuda`` (refused without a GPU per local process), or
    ``auto`` (``$FULLGRAPH_DEVICE`` if set; else CUDA when every local process can have a GPU of its
    own, else the CPU; ``fullgraph.device``). Multi-process runs on GPUs talk over NCCL, on the CPU
    over gloo."""
    out: str | None = None
    """Folder of the run: config.json, metrics.jsonl, summary.json, model.pt and checkpoint/."""
    checkpoint_every: int = 0
    """Write a checkpoint to ``out/checkpoint/`` every this many epochs (0: never); the last two are
    kept, and ``fullgraph train --resume OUT`` carries on from the newest (``fullgraph.train.checkpoint``)."""
    gcnii_alpha: float = 0.1
    """GCNII initial-residual weight α."""
    gcnii_lambda: float = 0.5
    """GCNII identity-mapping strength λ (β_l = log(λ/l + 1))."""
    feature_norm: str = "auto"
    """Row-normalize features: ``row``, ``none``, or ``auto`` (row for the Planetoid graphs, as in
    Kipf & Welling and the GCNII paper; none otherwise)."""
    parallel: str = "single"
    """How the work is split: ``single`` (one process), ``graph`` (one part per process), ``pipeline``
    (one stage of consecutive layers per process, GNNPipe) or ``hybrid`` (``stages`` groups of
    ``graph_ways`` graph-parallel processes)."""
    nprocs: int = 1
    """Number of processes (started locally, or the torchrun world size)."""
    partitioner: str = "metis"
    """How nodes are split into parts: metis (communication volume, balanced by node count),
    metis-degree (balanced by degree), metis-memory (balanced by the estimated memory of each rank
    for this run's model: ``fullgraph.partition.balance``), random, contiguous, or permuted
    (contiguous after a seeded random permutation)."""
    metis_sample: float = 1.0
    """METIS partitions a uniform sample of the undirected edges, each kept with this probability
    (1: every edge). METIS's memory, ~150 bytes per edge it sees, is most of partitioning's; 0.25
    brings a 10^8-edge graph within ~60 bytes per edge at a small cost in halo size
    (``fullgraph.partition.partitioners``)."""
    partition_dir: str | None = None
    """A folder written by ``fullgraph partition``; each rank reads only its own part from it."""
    boundary_rate: float = 1.0
    """BNS-GCN: the probability that a part keeps each halo node in a training epoch (1: all, 0: none)."""
    comm_timeout: float = 60.0
    """Seconds any collective may wait before the run is declared failed."""
    stages: int = 0
    """Hybrid: pipeline stages S (0: --nprocs / --graph-ways). A pipeline has one stage per process."""
    graph_ways: int = 0
    """Hybrid: graph-parallel processes per stage W (0: --nprocs / --stages)."""
    stage_layers: str = ""
    """Layers per stage, e.g. ``8,8,8,8`` (default: balanced by layer count)."""
    chunks: int = 0
    """Pipeline / hybrid: chunks K per part (0: 4 × stages, GNNPipe's choice)."""
    chunker: str = "metis"
    """How parts are cut into chunks: ``metis`` (locality-aware) or ``random``."""
    shuffle: bool = True
    """Shuffle the chunk order every epoch (``--no-shuffle`` turns it off)."""
    history_refresh: int = 10
    """Epochs a history table is kept: epoch t reads the values of epoch a·floor((t-1)/a) (1: last epoch)."""
    chunk_edges: str = "stale"
    """``stale``: edges to unprocessed chunks read history (GNNPipe); ``induced``: they are cut (GPipe's
    naive micro-batching, a baseline)."""
    replication: int = 0
    """``spmm-1.5d``: replication factor c of the P/c × c grid (c divides P, c² <= P)."""
    overlap: bool = True
    """SpMM layouts: broadcast the next block row while multiplying the current one (``--no-overlap``)."""
    permute: bool = True
    """SpMM layouts: cut block rows from a seeded random node permutation, for balance (``--no-permute``)."""
    gcn_kernel: str = "fused"
    """GCN layers as one fused function keeping one activation per layer (``fused``, MG-GCN's buffer
    reuse) or as plain PyTorch ops (``autograd``: more memory; for comparison)."""
    recompute: bool = False
    """Keep only each layer's input in the forward pass and recompute the rest in backward (SAR's
    rematerialization): less activation memory for one more forward per layer; same losses."""
    memory_limit: float = 0.0
    """GiB one rank may use; the run is refused before launch when the estimated peak per rank exceeds
    it (0: the memory this machine has available, divided among its local ranks)."""
    release_memory: bool = False
    """Return freed tensors to the system at once (glibc's mmap threshold fixed at 1 MiB): the peak
    memory of a run is then what it needs, up to ~2x lower on deep models, but large allocations
    fault their pages in anew and epochs get up to ~2x slower (Coauthor-CS GCN 4x128: 0.50 -> 1.03 s)."""
    chunk_file: str | None = None
    """The node → chunk map the launcher wrote (set by the launcher; not a user option)."""
    progress: str = "auto"
    """``bar`` (a progress bar), ``lines`` (one line per evaluation), ``none``, or ``auto`` (a bar on
    a terminal, lines otherwise)."""

    def _need(self, ok, name: str, expected: str) -> None:
        if not ok:
            raise InputError(f"expected {name} {expected} (got {getattr(self, name)!r})")

    def _check_run(self) -> None:
        """The options of where and how the run executes: threads, device, timeouts, memory, checkpoints."""
        from fullgraph.device import DEVICES  # with what resolves them

        need = self._need
        need(self.threads >= 0, "threads", ">= 0")
        need(self.device in DEVICES, "device", f"to be one of {', '.join(DEVICES)}")
        need(self.comm_timeout > 0, "comm_timeout", "> 0")
        need(self.memory_limit >= 0, "memory_limit", ">= 0 (GiB; 0: what is available)")
        need(self.checkpoint_every >= 0, "checkpoint_every", ">= 0")
        need(not self.checkpoint_every or self.out, "checkpoint_every", "0 without --out (no folder for checkpoints)")

    def __post_init__(self) -> None:
        self._check_types()

        need = self._need
        self._check_run()
        need(self.model in MODEL_NAMES, "model", f"to be one of {', '.join(MODEL_NAMES)}")
        need(2 <= self.layers <= 128, "layers", "in [2, 128]")
        need(self.hidden >= 1, "hidden", ">= 1")
        need(self.heads >= 1, "heads", ">= 1")
        need(self.lr > 0, "lr", "> 0")
        need(self.weight_decay >= 0, "weight_decay", ">= 0")
        need(self.conv_weight_decay >= 0, "conv_weight_decay", ">= 0")
        need(0.0 <= self.dropout < 1.0, "dropout", "in [0, 1)")
        need(self.epochs >= 1, "epochs", ">= 1")
        need(self.patience >= 0, "patience", ">= 0")
        need(self.select in ("acc", "loss"), "select", "to be acc or loss")
        need(self.eval_every >= 1, "eval_every", ">= 1")
        need(self.split >= 0, "split", ">= 0")
        need(0.0 <= self.gcnii_alpha <= 1.0, "gcnii_alpha", "in [0, 1]")
        need(self.gcnii_lambda > 0, "gcnii_lambda", "> 0")
        need(self.feature_norm in FEATURE_NORMS, "feature_norm", f"to be one of {', '.join(FEATURE_NORMS)}")
        need(self.parallel in PARALLEL_NAMES, "parallel", f"to be one of {', '.join(PARALLEL_NAMES)}")
        need(self.partitioner in PARTITIONERS, "partitioner", f"to be one of {', '.join(PARTITIONERS)}")
        need(0.0 < self.metis_sample <= 1.0, "metis_sample", "in (0, 1]")
        need(0.0 <= self.boundary_rate <= 1.0, "boundary_rate", "in [0, 1]")
        layout = self.layout  # validates parallel × nprocs (× stages × graph ways)
        need(self.history_refresh >= 1, "history_refresh", ">= 1")
        need(self.chunker in ("metis", "random"), "chunker", "to be metis or random")
        need(self.chunk_edges in CHUNK_EDGES, "chunk_edges", f"to be one of {', '.join(CHUNK_EDGES)}")
        need(self.chunks >= 0, "chunks", ">= 0")
        need(self.gcn_kernel in ("fused", "autograd"), "gcn_kernel", "to be fused or autograd")
        if layout.parallel in ("pipeline", "hybrid"):
            self._check_stages(layout.stages)
            if self.boundary_rate < 1.0:
                raise InputError(f"expected --boundary-rate 1 with --parallel {self.parallel} (got "
                                 f"{self.boundary_rate}); boundary sampling runs with --parallel graph")
        elif self.stage_layers or self.chunks:
            raise InputError(f"expected --stage-layers and --chunks only with --parallel pipeline or hybrid (got "
                             f"--parallel {self.parallel})")
        if self.parallel == "spmm-1.5d":
            c = self.replication
            if c < 1 or self.nprocs % c or c * c > self.nprocs:
                raise InputError(f"expected --replication c with c dividing --nprocs {self.nprocs} and c² <= "
                                 f"{self.nprocs} for --parallel spmm-1.5d (got {c})")
        elif self.parallel == "spmm-2d" and int(self.nprocs ** 0.5 + 0.5) ** 2 != self.nprocs:
            raise InputError(f"expected a perfect square --nprocs for --parallel spmm-2d (a √P × √P grid; got "
                             f"{self.nprocs})")
        elif self.parallel == "spmm-3d" and round(self.nprocs ** (1 / 3)) ** 3 != self.nprocs:
            raise InputError(f"expected a perfect cube --nprocs for --parallel spmm-3d (a ∛P × ∛P × ∛P grid; got "
                             f"{self.nprocs})")
        elif self.replication not in (0, 1):
            raise InputError(f"expected --replication only with --parallel spmm-1.5d (got --parallel {self.parallel})")
        if self.parallel.startswith("spmm") and self.model not in SPMM_MODELS:
            raise InputError(f"expected a model whose aggregation is one sparse product ({', '.join(SPMM_MODELS)}) "
                             f"with --parallel {self.parallel} (got {self.model}); train {self.model} with --parallel "
                             f"graph, pipeline or hybrid")
        need(self.progress in ("auto", "bar", "lines", "none"), "progress", "to be auto, bar, lines or none")
        self._check_model_options()

    def _check_model_options(self) -> None:
        if self.model == "gat" and self.hidden % self.heads:
            raise InputError(
                f"expected hidden to be a multiple of heads for gat (got hidden={self.hidden}, heads={self.heads})"
            )
        from fullgraph.ops.norm import NORMS

        if self.metric not in METRICS:
            raise InputError(f"expected metric to be one of {', '.join(METRICS)} (got {self.metric!r})")
        if self.norm not in NORMS:
            raise InputError(f"expected norm to be one of {', '.join(NORMS)} (got {self.norm!r})")
        if self.norm == "none":
            return
        if self.model not in NORM_MODELS:
            raise InputError(f"expected --norm none with --model {self.model} (got --norm {self.norm}); "
                             f"--norm applies to {', '.join(NORM_MODELS)}"
                             + ("; ResGCN+ has its own LayerNorm" if self.model == "resgcn+" else ""))
        if self.norm != "batch":
            return
        if self.parallel.startswith("spmm"):
            raise InputError(f"expected --norm none or layer with --parallel {self.parallel} (got --norm batch); "
                             f"batch statistics run with --parallel single, graph, pipeline or hybrid")
        if self.parallel in ("pipeline", "hybrid") and self.chunks != 1:
            raise InputError(f"expected --chunks 1 with --norm batch and --parallel {self.parallel} (got --chunks "
                             f"{self.chunks or 'default'}): statistics over all nodes need a layer's whole part "
                             f"at once, and chunks run it piece by piece (a pipeline of S stages needs S chunks, so "
                             f"batch norm runs in hybrid layouts of one stage); or use --norm layer")

    def _check_types(self) -> None:
        """Values from TOML or Python callers must have the field's type (an int is a fine float)."""
        for f in fields(self):
            value, default = getattr(self, f.name), f.default
            expected = str if default is None else type(default)
            if value is None and default is None:
                continue
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                setattr(self, f.name, float(value))
            elif not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise InputError(
                    f"expected {f.name} to be a {expected.__name__} (got {type(value).__name__} {value!r})"
                )

    def _check_stages(self, stages: int) -> None:
        if stages > self.layers:
            raise InputError(f"expected at most one stage per layer (got {stages} stages for {self.layers} layers); "
                             f"use --parallel hybrid --stages S --graph-ways W to give each stage several processes")
        if self.stage_layers:
            try:
                sizes = [int(v) for v in self.stage_layers.split(",")]
            except ValueError:
                raise InputError(f"expected --stage-layers as comma-separated integers, e.g. 8,8,8,8 "
                                 f"(got {self.stage_layers!r})") from None
            if len(sizes) != stages or sum(sizes) != self.layers or min(sizes) < 1:
                raise InputError(f"expected --stage-layers to give {stages} stages of >= 1 layer summing to "
                                 f"{self.layers} (got {self.stage_layers!r})")
        if self.num_chunks < stages:
            raise InputError(f"expected --chunks >= the number of stages {stages}, or the pipeline never fills "
                             f"(got --chunks {self.chunks})")

    @property
    def num_chunks(self) -> int:
        """K: as given, or 4 × stages."""
        return self.chunks or 4 * self.layout.stages

    @property
    def stage_layer_list(self) -> list[int] | None:
        return [int(v) for v in self.stage_layers.split(",")] if self.stage_layers else None

    @property
    def layout(self):
        from fullgraph.comm.layout import Layout

        return Layout.for_mode(self.parallel, self.nprocs, self.stages, self.graph_ways)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def load_toml(path: str | Path) -> dict:
    """Options from a TOML file: a flat table, or a ``[train]`` table; keys may use ``-`` or ``_``."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise InputError(f"expected a TOML config file at {path} (got no such file)") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"expected valid TOML in {path} (got: {e})") from None
    if isinstance(data.get("train"), dict):
        data = data["train"]
    known = set(TrainConfig.field_names())
    out = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in known:
            raise InputError(f"unknown option {key!r} in {path} (expected one of {', '.join(sorted(known))})")
        out[name] = value
    return out
