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
PARALLEL_NAMES = ("single", "graph")
PARTITIONERS = ("metis", "metis-degree", "random", "contiguous", "permuted")
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
    """Stop after this many evaluations without a better validation accuracy (0: never)."""
    select: str = "acc"
    """Model selection on the validation set: highest accuracy (``acc``) or lowest loss (``loss``, as
    the GCNII paper does); the reported test accuracy is the selected epoch's."""
    seed: int = 0
    """Seed of weights, dropout and made splits; the same seed gives the same losses, bit for bit."""
    eval_every: int = 1
    """Evaluate validation and test accuracy every this many epochs (and after the last)."""
    threads: int = 0
    """CPU threads for this process (0: all cores)."""
    out: str | None = None
    """Folder for metrics.jsonl and summary.json."""
    gcnii_alpha: float = 0.1
    """GCNII initial-residual weight α."""
    gcnii_lambda: float = 0.5
    """GCNII identity-mapping strength λ (β_l = log(λ/l + 1))."""
    feature_norm: str = "auto"
    """Row-normalize features: ``row``, ``none``, or ``auto`` (row for the Planetoid graphs, as in
    Kipf & Welling and the GCNII paper; none otherwise)."""
    parallel: str = "single"
    """How the work is split: ``single`` (one process) or ``graph`` (one part per process)."""
    nprocs: int = 1
    """Number of processes (started locally, or the torchrun world size)."""
    partitioner: str = "metis"
    """How nodes are split into parts: metis (communication volume, balanced by node count),
    metis-degree (balanced by degree), random, contiguous, or permuted (contiguous after a seeded
    random permutation)."""
    partition_dir: str | None = None
    """A folder written by ``fullgraph partition``; each rank reads only its own part from it."""
    boundary_rate: float = 1.0
    """BNS-GCN: the probability that a part keeps each halo node in a training epoch (1: all, 0: none)."""
    comm_timeout: float = 60.0
    """Seconds any collective may wait before the run is declared failed."""
    progress: str = "auto"
    """``bar`` (a progress bar), ``lines`` (one line per evaluation), ``none``, or ``auto`` (a bar on
    a terminal, lines otherwise)."""

    def __post_init__(self) -> None:
        self._check_types()

        def need(ok: bool, name: str, expected: str) -> None:
            if not ok:
                raise InputError(f"expected {name} {expected} (got {getattr(self, name)!r})")

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
        need(self.threads >= 0, "threads", ">= 0")
        need(self.split >= 0, "split", ">= 0")
        need(0.0 <= self.gcnii_alpha <= 1.0, "gcnii_alpha", "in [0, 1]")
        need(self.gcnii_lambda > 0, "gcnii_lambda", "> 0")
        need(self.feature_norm in FEATURE_NORMS, "feature_norm", f"to be one of {', '.join(FEATURE_NORMS)}")
        need(self.parallel in PARALLEL_NAMES, "parallel", f"to be one of {', '.join(PARALLEL_NAMES)}")
        need(self.partitioner in PARTITIONERS, "partitioner", f"to be one of {', '.join(PARTITIONERS)}")
        need(0.0 <= self.boundary_rate <= 1.0, "boundary_rate", "in [0, 1]")
        need(self.comm_timeout > 0, "comm_timeout", "> 0")
        self.layout  # validates parallel × nprocs
        need(self.progress in ("auto", "bar", "lines", "none"), "progress", "to be auto, bar, lines or none")
        if self.model == "gat" and self.hidden % self.heads:
            raise InputError(
                f"expected hidden to be a multiple of heads for gat (got hidden={self.hidden}, heads={self.heads})"
            )

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

    @property
    def layout(self):
        from fullgraph.comm.layout import Layout

        return Layout.for_mode(self.parallel, self.nprocs)

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
