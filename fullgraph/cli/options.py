"""The options of every ``fullgraph`` command but ``train`` (whose are ``TrainConfig``'s sections), declared
the way ``train``'s are: a typed field per flag, its help as data (``fullgraph.options.opt``).

A flag that means what a ``train`` option means takes that option's words (``doc_of``), and the data
options (``--dataset``, ``--root``, ``--split``, ``--feature-norm``) are ``train``'s own section,
``DataOptions``, shared by every command that reads a graph. ``fullgraph.cli`` lists the commands
and builds their parsers from these classes.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass

from fullgraph.config import DataOptions, ModelOptions, ParallelOptions, RunOptions
from fullgraph.data.datasets import ROOT_DEFAULT
from fullgraph.options import doc_of, opt

__all__ = ["TrainFiles", "PartitionOptions", "PartitionModel", "PlanModel", "PLAN_MODEL_OPTIONS", "PlanOptions", "RmatOptions",
           "PlantedOptions", "TypedOptions", "GeneratedOutput", "ConvertOptions", "DatasetsOptions", "ReportOptions",
           "EvaluateOptions", "PredictOptions"]

REQUIRED = MISSING  # a field without a default: its command needs the flag


@dataclass(kw_only=True)
class TrainFiles:
    """``fullgraph train``'s options that are no part of the run's configuration."""

    config: str | None = opt(None, "TOML file of options, in tables named after the groups below, e.g. [model] "
                                   "hidden = 128 (flags override it).")
    resume: str | None = opt(None, "RUN: carry on from RUN's newest checkpoint with its saved options (only --epochs "
                                   "may be raised); auto: the same with --out, or start afresh when it has no "
                                   "checkpoint yet (for torchrun --max-restarts).")


@dataclass(kw_only=True)
class PartitionOptions:
    """How ``fullgraph partition`` cuts the graph, and where it writes the parts."""

    parts: int = opt(REQUIRED, "Number of parts: one per process of the run (its --nprocs).")
    partitioner: str = opt("metis", doc_of(ParallelOptions, "partitioner"))
    metis_sample: float = opt(1.0, doc_of(ParallelOptions, "metis_sample"))
    seed: int = opt(0, "Seed of the partitioner (METIS's own, random's and permuted's draws, fennel's ties).")
    out: str = opt(REQUIRED, "A new folder, or one holding an earlier partition.")


@dataclass(kw_only=True)
class PartitionModel:
    """The model whose per-rank memory ``metis-memory`` and ``fennel`` balance."""

    model: str = opt("gcn", "metis-memory and fennel only: the model whose per-rank memory the parts balance.")
    layers: int = opt(2, "metis-memory and fennel only: its graph layers.")
    hidden: int = opt(64, "metis-memory and fennel only: its hidden width.")
    heads: int = opt(8, "metis-memory and fennel only: its attention heads (GAT).")


@dataclass(kw_only=True)
class PlanModel:
    """The model ``fullgraph plan`` plans for: a built-in one and its sizes, or a user's builder."""

    model: str = opt("gcn", doc_of(ModelOptions, "model"))
    model_args: dict = opt({}, doc_of(ModelOptions, "model_args"), each="model_arg")
    layers: int = opt(2, "Graph layers of a built-in model.")
    hidden: int = opt(64, "Hidden width of a built-in model.")
    heads: int = opt(8, doc_of(ModelOptions, "heads"))
    rgcn_decomposition: str = opt("none", doc_of(ModelOptions, "rgcn_decomposition"))
    rgcn_bases: int = opt(0, doc_of(ModelOptions, "rgcn_bases"))
    featureless: str = opt("embedding", doc_of(ModelOptions, "featureless"))


PLAN_MODEL_OPTIONS = ("layers", "hidden", "heads", "rgcn_decomposition", "rgcn_bases", "featureless")
"""The built-in models' options ``fullgraph plan`` takes: those that change what a rank holds or computes."""


@dataclass(kw_only=True)
class PlanOptions:
    """The layouts ``fullgraph plan`` compares, and the machines and network it plans them on."""

    nprocs: int = opt(REQUIRED, "The most processes (ranks) P to plan for: one process (single), the powers of "
                                "two below P, and P are planned, and the fastest recommended.")
    layout: str | None = opt(None, "Plan only this --parallel mode, at --nprocs processes only (refused with the "
                                   "reason when it does not fit --nprocs).", metavar="PARALLEL")
    chunks: int = opt(0, doc_of(ParallelOptions, "chunks"))
    partitioner: str = opt("metis", doc_of(ParallelOptions, "partitioner"))
    partition_dir: str | None = opt(None, "A partition of the graph into --nprocs parts to plan graph parallelism "
                                          "with (default: cut, and cache, one).")
    machines: int | None = opt(None, "Machines M the ranks are spread over, --nprocs / M on each: ranks of one "
                                     "machine share its cores and talk over shared memory, the others over the "
                                     "network (default: 1 without --bandwidth-gbps or --latency-us, else one "
                                     "machine per rank).")
    bandwidth_gbps: float | None = opt(None, "Network link rate between machines, Gbit/s (default 10).")
    latency_us: float | None = opt(None, "Network latency per message between machines, microseconds (default 50).")
    threads: int = opt(0, "CPU threads of one rank, for timing the kernels (0: as train takes them: on one "
                          "machine its cores not busy with other work over its ranks; on a cluster, each machine's "
                          "cores over its ranks; at least 1).")
    release_memory: bool = opt(False, "Plan runs that will use train's --release-memory: time the kernels and "
                                      "estimate the peak memory as they will run (slower, leaner).")
    prune: bool = opt(False, "Plan graph parallelism as train's --prune runs it: each layer only on the rows the "
                             "loss needs (the other layouts compute every row).")
    json: bool = opt(False, "Print JSON instead of a table.")


@dataclass(kw_only=True)
class GeneratedOutput:
    """What every ``fullgraph generate`` kind takes after its sizes: its seed and its folder."""

    seed: int = opt(0, "Seed of the generator.")
    out: str = opt(REQUIRED, "A new or empty folder, or an earlier dataset folder.")


@dataclass(kw_only=True)
class RmatOptions:
    """An R-MAT graph's size."""

    scale: int = opt(REQUIRED, "2**scale nodes, 1..31.")
    edges: int = opt(REQUIRED, "Edges drawn before symmetrizing.")
    features: int = opt(128, "Feature columns.")
    classes: int = opt(16, "Classes.")
    name: str | None = opt(None, "The graph's name (default rmat-SCALE).")


@dataclass(kw_only=True)
class PlantedOptions:
    """A planted-partition graph's size and structure."""

    nodes: int = opt(REQUIRED, "Nodes.")
    classes: int = opt(5, "Classes.")
    features: int = opt(64, "Feature columns.")
    avg_degree: float = opt(10.0, "Average degree.")
    homophily: float = opt(0.7, "Fraction of edges inside a class.")
    name: str | None = opt(None, "The graph's name (default planted-NODES).")


@dataclass(kw_only=True)
class TypedOptions:
    """A typed (heterogeneous) graph's size: its node types and relations (``data.synthetic.typed``)."""

    nodes: int = opt(REQUIRED, "Nodes of all types together.")
    edges: int = opt(REQUIRED, "Edges drawn, spread over the relations, before the reverse relations are added.")
    node_types: int = opt(3, "Node types; type 0 has the labels and splits, the even types features.")
    relations: int = opt(4, "Relations, each joining a pair of types no other joins (at most T (T + 1) / 2).")
    features: int = opt(32, "Feature columns of each featured type.")
    classes: int = opt(8, "Classes.")
    name: str | None = opt(None, "The graph's name (default typed-TxR).")


@dataclass(kw_only=True)
class ConvertOptions:
    """Where ``fullgraph convert`` writes, and whether the edges keep their data."""

    out: str = opt(REQUIRED, "A new or empty folder, or an earlier dataset folder.")
    edge_data: bool = opt(True, "Keep the edges' data (weights, features, types) in the folder; "
                                "--no-edge-data leaves it out (an OGB edge-feat graph keeps its node "
                                "features, the mean of each node's edges' features, either way).")


@dataclass(kw_only=True)
class DatasetsOptions:
    """Where ``fullgraph datasets`` looks, and how it prints."""

    root: str | None = opt(None, doc_of(DataOptions, "root"))
    json: bool = opt(False, "Print JSON instead of a table.")


@dataclass(kw_only=True)
class ReportOptions:
    """The runs ``fullgraph report`` compares and where it draws them."""

    runs: list[str] = opt(REQUIRED, "Run folders holding metrics.jsonl and summary.json.", positional=True,
                          metavar="RUN")
    out: str = opt(REQUIRED, "Folder for the figures and summary.md (made if missing).")


@dataclass(kw_only=True)
class _Applied:
    """A trained run's model, and the graph to apply it to, where."""

    run: str = opt(REQUIRED, "A run folder (fullgraph train --out) holding model.pt.")
    dataset: str | None = opt(None, "Another graph like the run's (default: the run's own).")
    root: str | None = opt(None, f"Data root of --dataset (default: the run's; where it gave none, {ROOT_DEFAULT}).")
    device: str = opt("auto", doc_of(RunOptions, "device"))
    threads: int = opt(0, doc_of(RunOptions, "threads"))


@dataclass(kw_only=True)
class EvaluateOptions(_Applied):
    """How ``fullgraph evaluate`` prints."""

    json: bool = opt(False, "Print JSON instead of a table.")
    metric: str | None = opt(None,
        "The metric to report first (default: the run's own): any its task reports, e.g. macro-f1 or rocauc of node "
        "labels, mrr or hits@50 of links. Every metric of the task is printed, and in --json under 'metrics'.")


@dataclass(kw_only=True)
class PredictOptions(_Applied):
    """Where the predictions go, and how many processes make them."""

    out: str = opt(REQUIRED, "Folder for predictions.npy, probabilities.npy (and embeddings.npy); of a link-prediction "
                   "run, scores.npy and probabilities.npy of --pairs (and embeddings.npy).")
    embeddings: bool = opt(False, "Also write the last hidden layer (of a link-prediction run: the encoder's output).")
    pairs: str | None = opt(None,
        "A link-prediction run: the node pairs to score, a .npy of int [n, 2] or a text file of one 'src dst' pair "
        "per line (commas or spaces).")
    overwrite: bool = opt(False, "Replace an earlier prediction in --out (its whole set of files).")
    parallel: str = opt("single", "single: one process; graph: one part per process, for graphs too big for one.",
                        choices=("single", "graph"))
    nprocs: int = opt(1, "Processes with --parallel graph.")
    partition_dir: str | None = opt(None, "The partition the launcher made for the ranks (not a user option).",
                                    hidden=True)
    link_file: str | None = opt(None, "A link-prediction run's split, written by the launcher (not a user option).",
                                hidden=True)
