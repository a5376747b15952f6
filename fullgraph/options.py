"""What describes the options of ``fullgraph train``, apart from their values: the section each belongs
to, the values each may take (taken from the registry that owns them), each field's documentation
(its docstring in ``TrainConfig``), and a TOML file of options.

``TrainConfig`` validates through this module and ``fullgraph.cli`` builds its parser from it, so an
option is declared once — a typed field with its docstring — and its flag, help, type, choices and
``--help`` group follow from that declaration.
"""

from __future__ import annotations

import ast
import inspect
import tomllib
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import get_type_hints

from fullgraph.errors import InputError

__all__ = ["SECTIONS", "METRICS", "FEATURE_NORMS", "CHUNK_EDGES", "Option", "choices", "options_of", "load_toml"]

METRICS = ("auto", "acc", "rocauc", "micro-f1")  # --metric (fullgraph.train.metrics computes them)
FEATURE_NORMS = ("auto", "row", "none")
CHUNK_EDGES = ("stale", "induced")

SECTIONS = {  # section: its options, in the order --help lists them
    "data": ("dataset", "root", "split", "feature_norm"),
    "model": ("model", "layers", "hidden", "heads", "norm", "dropout", "gcnii_alpha", "gcnii_lambda", "gcn_kernel",
              "recompute"),
    "optimization": ("lr", "weight_decay", "conv_weight_decay", "epochs", "patience", "select", "metric",
                     "eval_every", "seed"),
    "parallel": ("parallel", "nprocs", "partitioner", "metis_sample", "partition_dir", "boundary_rate", "stages",
                 "graph_ways", "stage_layers", "chunks", "chunker", "shuffle", "history_refresh", "chunk_edges",
                 "replication", "overlap", "permute", "chunk_file"),
    "run": ("out", "overwrite", "checkpoint_every", "threads", "device", "comm_timeout", "memory_limit",
            "release_memory", "progress"),
}
HIDDEN = ("chunk_file",)  # set by the launcher for its ranks: no user option


def choices() -> dict[str, tuple[str, ...]]:
    """The options with a fixed set of values, each list from the module that implements the values."""
    from fullgraph.comm.mesh import PARALLEL_MODES
    from fullgraph.device import DEVICES
    from fullgraph.models import MODELS
    from fullgraph.ops.norm import NORMS
    from fullgraph.partition import PARTITIONERS

    return {"model": tuple(MODELS), "parallel": PARALLEL_MODES, "partitioner": PARTITIONERS, "norm": NORMS,
            "device": DEVICES, "metric": METRICS, "feature_norm": FEATURE_NORMS, "chunk_edges": CHUNK_EDGES,
            "chunker": ("metis", "random"), "gcn_kernel": ("fused", "autograd"), "select": ("acc", "loss"),
            "progress": ("auto", "bar", "lines", "none")}


@dataclass(frozen=True)
class Option:
    """One field of a configuration class, as a command line shows it."""

    name: str
    type: type
    default: object
    doc: str
    section: str
    choices: tuple[str, ...] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def hidden(self) -> bool:
        return self.name in HIDDEN


def field_docs(cls) -> dict[str, str]:
    """The docstring under each field of a dataclass (the string statement that follows its
    annotated assignment in the class body), with reStructuredText's double backquotes dropped and
    whitespace joined."""
    tree = ast.parse(inspect.getsource(cls))
    body = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)).body
    docs = {}
    for stmt, after in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[stmt.target.id] = " ".join(after.value.value.replace("``", "").split())
    return docs


def options_of(cls) -> list[Option]:
    """Every field of ``cls`` as an ``Option``, section by section; refuses a field with no section or
    no docstring (a new option must say where it belongs and what it does)."""
    hints, docs, listed = get_type_hints(cls), field_docs(cls), choices()
    by_name = {f.name: f for f in fields(cls)}
    placed = [name for names in SECTIONS.values() for name in names]
    if sorted(placed) != sorted(by_name) or any(name not in docs for name in by_name):
        raise RuntimeError(f"every field of {cls.__name__} needs one section and a docstring (unplaced: "
                           f"{sorted(set(by_name) ^ set(placed))}, undocumented: {sorted(set(by_name) - set(docs))})")
    out = []
    for section, names in SECTIONS.items():
        for name in names:
            kind = hints[name]
            kind = next((a for a in getattr(kind, "__args__", ()) if a is not type(None)), kind)  # X | None -> X
            default = by_name[name].default
            out.append(Option(name, kind, None if default is MISSING else default, docs[name], section,
                              listed.get(name)))
    return out


def load_toml(path: str | Path, known: list[str]) -> dict:
    """Options from a TOML file: tables named after the sections (``[model]``, ``[run]``, ...), a
    ``[train]`` table or top-level keys, in any mix; keys may use ``-`` or ``_``. ``known``: the
    option names, for the error that names an unknown key."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise InputError(f"expected a TOML config file at {path} (got no such file)") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"expected valid TOML in {path} (got: {e})") from None
    flat = {}
    for key, value in data.items():
        if (key in SECTIONS or key == "train") and isinstance(value, dict):  # a table (`model = "gcn"` is a key)
            flat.update(value)
        else:
            flat[key] = value
    out = {}
    for key, value in flat.items():
        name = key.replace("-", "_")
        if name not in known:
            raise InputError(f"unknown option {key!r} in {path} (expected one of {', '.join(sorted(known))})")
        out[name] = value
    return out
