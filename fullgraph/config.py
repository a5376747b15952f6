"""``TrainConfig``: every option of a training run, typed, documented and validated in one place.

The command line, a TOML file (``--config``) and library callers all end up here, so a bad value is
reported the same way whichever way it came in: an ``InputError`` naming the field, what was
expected and what was found.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path

from fullgraph.comm.mesh import PARALLEL_MODES
from fullgraph.errors import InputError
from fullgraph.models import MODELS, NORM_MODELS, SPMM_MODELS
from fullgraph.options import CHUNK_EDGES, FEATURE_NORMS, METRICS, choices
from fullgraph.options import load_toml as _load_toml

__all__ = ["TrainConfig", "load_toml"]

# the registries' lists, under the names callers know
MODEL_NAMES = tuple(MODELS)
__all__ += ["MODEL_NAMES", "NORM_MODELS", "SPMM_MODELS", "PARALLEL_MODES", "METRICS", "FEATURE_NORMS", "CHUNK_EDGES"]


@dataclass
class TrainConfig:
    """Options of ``fullgraph train``. Field names are the flag names with ``_`` for ``-``."""

    dataset: str = "synthetic"
    """A dataset name (``fullgraph datasets`` lists them), or the path of a dataset folder or ``.npz``
    file in any format fullgraph reads (recognized from its files); ``synthetic`` is the built-in graph."""
    root: str | None = None
    """Data root of named datasets; default: ``$FULLGRAPH_DATA``, else the first of ``./data`` and
    ``../shared/data`` that exists, else ``./data`` (``fullgraph.data.datasets.resolve_root``)."""
    split: int = 0
    """Which of a dataset's fixed splits (the heterophilous graphs have 10), or the seed of a made one."""
    model: str = "gcn"
    """The model (``fullgraph.models``: GCN, GraphSAGE, GAT, GCNII or ResGCN+)."""
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
    overwrite: bool = False
    """Replace an earlier run in ``out`` (its config.json, metrics.jsonl, summary.json and model.pt);
    without it such a folder is refused. Checkpoints are never replaced: resume them or remove them."""
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
        need = self._need
        need(self.threads >= 0, "threads", ">= 0")
        need(self.comm_timeout > 0, "comm_timeout", "> 0")
        need(self.memory_limit >= 0, "memory_limit", ">= 0 (GiB; 0: what is available)")
        need(self.checkpoint_every >= 0, "checkpoint_every", ">= 0")
        need(not self.checkpoint_every or self.out, "checkpoint_every", "0 without --out (no folder for checkpoints)")

    def __post_init__(self) -> None:
        self._check_types()
        for name, allowed in choices().items():  # the registries' lists (fullgraph.options)
            self._need(getattr(self, name) in allowed, name, f"to be one of {', '.join(allowed)}")

        need = self._need
        self._check_run()
        need(2 <= self.layers <= 128, "layers", "in [2, 128]")
        need(self.hidden >= 1, "hidden", ">= 1")
        need(self.heads >= 1, "heads", ">= 1")
        need(self.lr > 0, "lr", "> 0")
        need(self.weight_decay >= 0, "weight_decay", ">= 0")
        need(self.conv_weight_decay >= 0, "conv_weight_decay", ">= 0")
        need(0.0 <= self.dropout < 1.0, "dropout", "in [0, 1)")
        need(self.epochs >= 1, "epochs", ">= 1")
        need(self.patience >= 0, "patience", ">= 0")
        need(self.eval_every >= 1, "eval_every", ">= 1")
        need(self.split >= 0, "split", ">= 0")
        need(0.0 <= self.gcnii_alpha <= 1.0, "gcnii_alpha", "in [0, 1]")
        need(self.gcnii_lambda > 0, "gcnii_lambda", "> 0")
        need(0.0 < self.metis_sample <= 1.0, "metis_sample", "in (0, 1]")
        need(0.0 <= self.boundary_rate <= 1.0, "boundary_rate", "in [0, 1]")
        layout = self.mesh  # validates every axis of the layout against nprocs
        need(self.history_refresh >= 1, "history_refresh", ">= 1")
        need(self.chunks >= 0, "chunks", ">= 0")
        if layout.parallel in ("pipeline", "hybrid"):
            self._check_stages(layout.stages)
            if self.boundary_rate < 1.0:
                raise InputError(f"expected --boundary-rate 1 with --parallel {self.parallel} (got "
                                 f"{self.boundary_rate}); boundary sampling runs with --parallel graph")
        elif self.stage_layers or self.chunks:
            raise InputError(f"expected --stage-layers and --chunks only with --parallel pipeline or hybrid (got "
                             f"--parallel {self.parallel})")
        if self.parallel.startswith("spmm") and self.model not in SPMM_MODELS:
            raise InputError(f"expected a model whose aggregation is one sparse product ({', '.join(SPMM_MODELS)}) "
                             f"with --parallel {self.parallel} (got {self.model}); train {self.model} with --parallel "
                             f"graph, pipeline or hybrid")
        self._check_model_options()

    def _check_model_options(self) -> None:
        if self.model == "gat" and self.hidden % self.heads:
            raise InputError(
                f"expected hidden to be a multiple of heads for gat (got hidden={self.hidden}, heads={self.heads})"
            )
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
        return self.chunks or 4 * self.mesh.stages

    @property
    def stage_layer_list(self) -> list[int] | None:
        return [int(v) for v in self.stage_layers.split(",")] if self.stage_layers else None

    @property
    def mesh(self):
        """The process layout (``fullgraph.comm.mesh.Mesh``): stages, graph ways and the SpMM grid."""
        from fullgraph.comm.mesh import Mesh

        return Mesh.for_mode(self.parallel, self.nprocs, self.stages, self.graph_ways, self.replication)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def load_toml(path: str | Path) -> dict:
    """Options from a TOML file (``fullgraph.options.load_toml``: section tables, a ``[train]`` table
    or top-level keys)."""
    return _load_toml(path, TrainConfig.field_names())
