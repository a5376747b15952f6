"""What describes an option apart from its value: the section it belongs to, the values it may take
(taken from the registry that owns them), its help (``opt``: kept on the field as data), and a TOML
file of options.

``TrainConfig`` validates through this module and ``fullgraph.cli.commands`` builds every command's parser
from it, so an option is declared once — a typed field with its help — and its flag, help, type,
choices and ``--help`` group follow from that declaration.
"""

from __future__ import annotations

import json
import math
import tomllib
import types
import typing
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import get_type_hints

from fullgraph.errors import InputError

__all__ = ["METRICS", "NODE_METRICS", "REGRESSION_METRICS", "LOWEST_IS_BEST", "TASK_NAMES", "FEATURE_NORMS", "CHUNK_EDGES", "Option", "Section", "need", "opt",
           "field_doc", "option_name", "choices", "options_of", "load_toml", "key_value"]

NODE_METRICS = ("acc", "rocauc", "micro-f1", "macro-f1")
"""The metrics of node labels (``fullgraph.tasks.metrics``), each reported under its own name."""
REGRESSION_METRICS = ("rmse", "mae", "r2")
"""The metrics of node regression (``fullgraph.tasks.regression``), in the targets' own units."""
LOWEST_IS_BEST = ("rmse", "mae")
"""The metrics selection minimizes (every other one it maximizes)."""
METRICS = ("auto", *NODE_METRICS[:3], "hits@20", "hits@50", "hits@100", "mrr", NODE_METRICS[3], *REGRESSION_METRICS)
"""``--metric``: node labels', links' (``fullgraph.tasks.link_metrics``) and node regression's, in the order
the choices were added."""
TASK_NAMES = ("node", "link", "node-regression", "edge", "edge-regression")
"""``--task``: node labels, links, a number per node, a class or a number per edge (``fullgraph.tasks.TASKS``
registers each)."""
PAIR_TASKS = ("link", "edge", "edge-regression")
"""The tasks that score pairs of nodes (a link, a labelled edge): their loss joins two nodes' output rows, which
the layouts fetch (``parallel.pairs``), and none reads node labels."""
FEATURE_NORMS = ("auto", "row", "none")
CHUNK_EDGES = ("stale", "induced")


def option_name(f: Field) -> str:
    """The option a section's field is: its name, unless its metadata gives the flag (``model.name``
    is ``--model``)."""
    return f.metadata.get("flag", f.name)


def choices() -> dict[str, tuple[str, ...]]:
    """The options with a fixed set of values, each list from the module that implements the values."""
    from fullgraph.comm.mesh import PARALLEL_MODES
    from fullgraph.comm.precision import PRECISIONS
    from fullgraph.data.typed.link_split import CORRUPT
    from fullgraph.device import DEVICES
    from fullgraph.models.rgcn import DECOMPOSITIONS, FEATURELESS
    from fullgraph.ops.norm import NORMS
    from fullgraph.partition import PARTITIONERS
    from fullgraph.optim.precision import COMPUTE_PRECISIONS
    from fullgraph.optim.schedule import SCHEDULES

    # --model is checked by ModelOptions: a built-in name, or a user's builder by reference
    return {"parallel": PARALLEL_MODES, "partitioner": PARTITIONERS, "norm": NORMS,
            "device": DEVICES, "metric": METRICS, "feature_norm": FEATURE_NORMS, "chunk_edges": CHUNK_EDGES,
            "chunker": ("metis", "random"), "gcn_kernel": ("fused", "autograd"), "select": ("acc", "loss"),
            "progress": ("auto", "bar", "lines", "none"), "comm_precision": PRECISIONS,
            "lr_schedule": SCHEDULES, "precision": COMPUTE_PRECISIONS, "featureless": FEATURELESS,
            "rgcn_decomposition": DECOMPOSITIONS, "task": TASK_NAMES, "corrupt": CORRUPT}


class Section:
    """What every section of options does on construction: each value has its field's type (an int
    is a fine float), each option with a fixed set of values holds one of them (``choices``, the
    registries' lists), then the section's own ``_check``."""

    def __post_init__(self) -> None:
        listed = choices()
        for f in fields(self):
            name = option_name(f)
            value, default = getattr(self, f.name), f.default
            made = f.default_factory is not MISSING
            expected = str if default is None else type(f.default_factory()) if made else type(default)
            if value is None and default is None:
                continue
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                setattr(self, f.name, float(value))
            elif not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise InputError(f"expected {name} to be a {expected.__name__} (got {type(value).__name__} {value!r})")
            value = getattr(self, f.name)
            # TOML and JSON reach here unchecked: inf, nan and integers past 64 bits would crash or train garbage
            if expected is float:
                need(math.isfinite(value), name, value, "to be a finite number")
            elif expected is int:
                need(-(2**63) <= value < 2**63, name, value, "to fit in 64 bits")
            if name in listed:
                need(value in listed[name], name, value, f"to be one of {', '.join(listed[name])}")
        self._check()

    def _check(self) -> None:
        pass


def need(ok, name: str, value, expected: str) -> None:
    """The one form of a refused option value: ``expected NAME EXPECTED (got VALUE)``."""
    if not ok:
        raise InputError(f"expected {name} {expected} (got {value!r})")


@dataclass(frozen=True)
class Option:
    """One field of a configuration class, as a command line shows it."""

    name: str
    """The option's name: the flag without ``--``, with ``_`` for ``-`` (``metis_sample``)."""
    attr: str
    """The field that holds it in its section (``name`` for ``--model``, in ``model``)."""
    type: type
    default: object
    doc: str
    section: str
    choices: tuple[str, ...] | None = None
    hidden: bool = False
    """Set by the launcher for its ranks: no user option."""
    each: str | None = None
    """For a table of values (``model_args``): the repeatable flag that gives one ``key=value``."""
    required: bool = False
    """The field has no default: the command needs the flag."""
    positional: bool = False
    """Given without a flag, one or more values (``fullgraph report RUN [RUN ...]``)."""
    metavar: str | None = None
    """The value's name in ``--help`` (default: its choices, or the option's name in capitals)."""

    @property
    def flag(self) -> str:
        return "--" + (self.each or self.name).replace("_", "-")


def opt(default, doc: str, **meta) -> Field:
    """A field of an options class: its default and its help, kept together as data.

    The help lives in the field's metadata (``doc``), not in the source: ``--help``, the API and the
    docs read it from the class, so it works from a wheel, a zip or a frozen build alike. ``meta``
    holds the rest of the field's description (``flag``, ``hidden``, ``each``, ``positional``). A
    ``{}`` default becomes a factory of fresh dictionaries (a dataclass refuses a shared one)."""
    meta = {"doc": " ".join(doc.split()), **meta}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    if default is MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


def field_doc(f: Field) -> str:
    """A field's help as ``--help`` prints it: reStructuredText's double backquotes dropped."""
    return f.metadata.get("doc", "").replace("``", "")


def fields_as_options(kind, section: str = "") -> list[Option]:
    """The options of one options class (a section of ``TrainConfig``, or a command's own class);
    refuses a field without help (a new option must say what it does)."""
    listed, hints = choices(), get_type_hints(kind)
    undocumented = [f.name for f in fields(kind) if not field_doc(f)]
    if undocumented:
        raise RuntimeError(f"every option of {kind.__name__} needs its help (opt's doc; undocumented: {undocumented})")
    out = []
    for f in fields(kind):
        kind_of = hints[f.name]
        if typing.get_origin(kind_of) in (typing.Union, types.UnionType):  # X | None -> X
            kind_of = next(a for a in kind_of.__args__ if a is not type(None))
        kind_of = typing.get_origin(kind_of) or kind_of  # dict[str, object] -> dict
        name, meta = option_name(f), f.metadata
        out.append(Option(name, f.name, kind_of, None if f.default is MISSING else f.default, field_doc(f), section,
                          meta.get("choices", listed.get(name)), meta.get("hidden", False), meta.get("each"),
                          required=f.default is MISSING and f.default_factory is MISSING,
                          positional=meta.get("positional", False), metavar=meta.get("metavar")))
    return out


def options_of(cls) -> list[Option]:
    """Every option of ``TrainConfig`` (a dataclass of section dataclasses), section by section."""
    return [o for section in fields(cls) for o in fields_as_options(section.default_factory, section.name)]


def doc_of(kind, name: str) -> str:
    """The help of option ``name`` of options class ``kind``, as written: for a command whose flag
    means what another's does (one source for its words)."""
    return next(f.metadata["doc"] for f in fields(kind) if option_name(f) == name)


def load_toml(path: str | Path, known: list[str], sections: tuple[str, ...]) -> dict:
    """Options from a TOML file: tables named after the ``sections`` (``[model]``, ``[run]``, ...), a
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
        if (key in sections or key == "train") and isinstance(value, dict):  # a table (`model = "gcn"` is a key)
            for inner, v in value.items():  # a table in a table: [model.args] is the option model_args
                flat[f"{key}_{inner}" if isinstance(v, dict) and key in sections else inner] = v
        else:
            flat[key] = value
    out = {}
    for key, value in flat.items():
        name = key.replace("-", "_")
        if name not in known:
            raise InputError(f"unknown option {key!r} in {path} (expected one of {', '.join(sorted(known))})")
        out[name] = value
    return out


def key_value(text: str) -> tuple[str, object]:
    """One ``--model-arg``: ``key=value``, the value parsed as JSON where it parses (``3``, ``0.5``,
    ``true``, ``[64, 32]``, ``null``), else kept as a string."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise InputError(f"expected --model-arg as key=value with a Python name for key (got {text!r})")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value
