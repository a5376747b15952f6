"""``fullgraph.train_model``: what ``fullgraph train`` does, from a user's own script.

The options are the command line's, by name (``TrainConfig.of``), and the same checks apply. The
model is whatever ``--model`` takes, or the builder function itself, or a model object:

* one process: the run happens here;
* ``torchrun script.py`` (the script calls ``train`` in every rank): each rank runs its share here,
  rank 0 having prepared the partition (``fullgraph.cli.shared_inputs``);
* ``nprocs > 1`` from a plain ``python script.py``: the ranks are started as the command line starts
  them, each importing the builder by its reference; rank 0's result is read back from the run folder.

A model object cannot be sent to ranks that start afresh: it trains in one process, or under torchrun,
where every rank builds its own (they are then made equal: rank 0's initial weights are broadcast).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from fullgraph.errors import InputError

if TYPE_CHECKING:
    from fullgraph.train.trainer import RunResult

__all__ = ["train_model"]


def train_model(model: str | Callable | object = "gcn", *, callbacks: Sequence[Callable[[dict], None]] = (),
                **options: object) -> RunResult:
    """Train ``model`` with ``fullgraph train``'s options; returns the run's ``RunResult``.

    Args:
        model: a built-in name (``"gcn"``), a builder reference (``"path/to/file.py:build"``,
            ``"package.module:build"``), a builder function defined at module level (its reference is
            taken), or a model object: a fullgraph ``GNN``, PyG convolutions or a PyG ``BasicGNN``
            (one process, or every ``torchrun`` rank).
        callbacks: functions called with each epoch's record (the line ``metrics.jsonl`` gets: epoch,
            loss, learning rate, bytes moved, and the evaluation where one ran), in the process that
            trains rank 0: one process, or rank 0 under torchrun.
        **options: ``fullgraph train``'s options by name: ``dataset="cora"``, ``parallel="graph"``,
            ``nprocs=4``, ``model_args={"hidden": 64}``, ``epochs=100``, ``out="runs/x"``, ...

    It prints as the command line does (the run's header, progress lines or bar, the summary) unless
    the caller has configured logging: then the ``fullgraph`` logger's records go where the caller said.

    >>> result = fullgraph.train_model(build, dataset="cora", model_args={"hidden": 64}, epochs=50)  # doctest: +SKIP
    """
    from fullgraph.comm.context import DistEnv
    from fullgraph.config import TrainConfig

    obj = None
    if callable(model) and not isinstance(model, str) and not _is_module(model):
        model = _reference(model)
    elif not isinstance(model, str):
        obj, model = model, "gcn"  # the object trains; the options' model is never built nor recorded
    cfg = TrainConfig.of(model=model, **options)
    env = DistEnv.from_env()
    with _printing():
        if cfg.parallel.mesh.distributed and env is None:
            if obj is not None or callbacks:
                raise InputError(f"expected a builder (a function, or FILE.py:FUNCTION) and no callbacks to start "
                                 f"several processes (got {'callbacks' if obj is None else 'a model object'}, which "
                                 f"cannot reach processes that start afresh); or run the script under torchrun, "
                                 f"where every rank runs it")
            return _launch(cfg)
        return _run_here(cfg, env, obj, callbacks)


@contextlib.contextmanager
def _printing():
    """The command line's output (``logging.basicConfig`` to stdout, messages only) for the call,
    where the caller has configured no logging of its own."""
    logger, root = logging.getLogger("fullgraph"), logging.getLogger()
    if logger.handlers or root.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _is_module(obj) -> bool:
    import torch

    return isinstance(obj, torch.nn.Module)


def _reference(fn) -> str:
    """``module:function`` (or ``file.py:function`` for a script's own) for a module-level function."""
    if "<locals>" in fn.__qualname__ or "." in fn.__qualname__ or fn.__name__ == "<lambda>":
        raise InputError(f"expected a builder defined at a module's top level, which every process can import "
                         f"(got {fn.__qualname__})")
    if fn.__module__ == "__main__":
        return f"{Path(inspect.getfile(fn)).resolve()}:{fn.__name__}"
    return f"{fn.__module__}:{fn.__name__}"


def _run_here(cfg, env, obj, callbacks=()):
    from fullgraph.cli import shared_inputs
    from fullgraph.comm.launch import report_worker_error
    from fullgraph.train.runs import RunFolder
    from fullgraph.train.trainer import Trainer

    owner = env is None or env.rank == 0
    model = None if obj is None else f"<{type(obj).__name__}>"
    with RunFolder(cfg, start=True, model=model) if owner else contextlib.nullcontext():
        distributed = cfg.parallel.mesh.distributed
        missing = cfg.parallel.partition_dir is None or (cfg.parallel.mesh.chunked and cfg.parallel.chunk_file is None)
        if env is not None and distributed and missing:
            shared_inputs(cfg, env)
        trainer = Trainer(cfg, model=obj, callbacks=callbacks)
        try:
            return trainer.build().train()
        except Exception as e:
            if env is not None:
                report_worker_error(e, input_error=isinstance(e, InputError))
            raise
        finally:
            trainer.close()


def _launch(cfg):
    """Start the ranks as ``fullgraph train`` does, with the options as flags; rank 0's result."""
    from fullgraph.cli import launch
    from fullgraph.train.trainer import RunResult

    from fullgraph.train.runs import RunFolder

    out = cfg.run.out or tempfile.mkdtemp(prefix="fullgraph-run-")
    cfg = cfg.with_options(out=out)
    with RunFolder(cfg, start=True) as folder:
        rc = launch(cfg, ["train", *_flags(cfg)])
        if rc == InputError.exit_status:
            folder.undo()
    if rc != 0:
        raise RuntimeError(f"fullgraph: the ranks failed with status {rc} (their logs say why)")
    data = json.loads((Path(out) / "summary.json").read_text())
    data["losses"] = [json.loads(line)["loss"] for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    known = set(RunResult.__dataclass_fields__)
    return RunResult(**{k: v for k, v in data.items() if k in known})


def _flags(cfg) -> list[str]:
    """The command line that gives ``cfg``'s options (those that differ from the defaults)."""
    from fullgraph.config import TrainConfig
    from fullgraph.options import options_of

    default, given, flags = TrainConfig().options(), cfg.options(), []
    for opt in options_of(TrainConfig):
        value = given[opt.name]
        if value == default[opt.name] or opt.hidden:
            continue
        if opt.type is dict:
            flags += [x for k, v in value.items() for x in (opt.flag, f"{k}={json.dumps(v)}")]
        elif opt.type is bool:
            flags.append(opt.flag if value else "--no-" + opt.flag[2:])
        else:
            flags += [opt.flag, str(value)]
    return flags

