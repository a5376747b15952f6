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

The graph is ``dataset=`` (a name or a folder, as ``--dataset``), or ``data=``, a PyG ``Data``: it is
written once into the cache as a native folder (ranks that start afresh cannot receive the object,
and the run folder must name a graph that ``evaluate`` and ``--resume`` can read again).

A builder defined in the script itself is found by importing the script, in each rank: its
``train_model`` call must sit under ``if __name__ == "__main__":``, or the import would run it again.
Such a nested call is refused in one line saying so (``fullgraph.models.user.check_not_importing``).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from fullgraph.errors import InputError

if TYPE_CHECKING:
    from fullgraph.train.trainer import RunResult

__all__ = ["train_model"]

log = logging.getLogger("fullgraph")


def train_model(model: str | Callable | object = "gcn", *, data: object = None,
                callbacks: Sequence[Callable[[dict], None]] = (), **options: object) -> RunResult:
    """Train ``model`` with ``fullgraph train``'s options; returns the run's ``RunResult``.

    Args:
        model: a built-in name (``"gcn"``), a builder reference (``"path/to/file.py:build"``,
            ``"package.module:build"``), a builder function defined at module level (its reference is
            taken), or a model object: a fullgraph ``GNN``, PyG convolutions or a PyG ``BasicGNN``
            (one process, or every ``torchrun`` rank).
        data: a PyTorch Geometric ``Data`` to train on, instead of ``dataset=``: read as
            ``fullgraph.data.pyg.write_pyg`` reads it (``split=`` picks a column of 2-D masks, or
            seeds a per-class split where it has none) and cached once as a native folder, which
            ``config.json`` names as the run's dataset (see :func:`_with_data`).
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
    from fullgraph.models.user import ReimportedCall, check_not_importing

    check_not_importing()  # the script's own call, run again by the ranks' import of its builder
    if data is not None and "dataset" in options:
        raise InputError(f"expected data= or dataset=, not both (got a {type(data).__name__} and dataset="
                         f"{options['dataset']!r}): data= is the graph itself, dataset= names one")
    obj = None
    if callable(model) and not isinstance(model, str) and not _is_module(model):
        model = _reference(model)
    elif not isinstance(model, str):
        obj, model = model, "gcn"  # the object trains; the options' model is never built nor recorded
    try:
        cfg = TrainConfig.of(model=model, **options)
    except ReimportedCall as e:  # raised anew here: the traceback ends at the user's call, not in the import
        raise InputError(str(e)) from None
    env = DistEnv.from_env()
    if env is not None and env.world_size != cfg.parallel.nprocs:  # as fullgraph train refuses it
        raise InputError(f"expected nprocs to match the torchrun world size (got nprocs={cfg.parallel.nprocs}, "
                         f"WORLD_SIZE {env.world_size})")
    with _printing():
        launched = cfg.parallel.mesh.distributed and env is None
        if launched and (obj is not None or callbacks):
            raise InputError(f"expected a builder (a function, or FILE.py:FUNCTION) and no callbacks to start "
                             f"several processes (got {'callbacks' if obj is None else 'a model object'}, which "
                             f"cannot reach processes that start afresh); or run the script under torchrun, "
                             f"where every rank runs it")
        cfg, graph = _with_data(cfg, data, env) if data is not None else (cfg, None)
        return _launch(cfg) if launched else _run_here(cfg, env, obj, callbacks, graph)


def _with_data(cfg, data, env):
    """``cfg`` naming the native folder a PyG ``data`` is cached as, and the graph to train on here
    (``None`` where the ranks read partitions made from the folder).

    Every process that has ``data`` converts it (``pyg_graph``: the checks and preprocessing of
    ``write_pyg``), so bad data is refused alike everywhere. The folder is keyed by the graph's
    content fingerprint (a changed ``Data`` is a new folder), written atomically by ``write_native``
    and only once: by this process, or rank 0 under torchrun while the others wait. It is written in
    one process too, because ``config.json`` names it as the run's ``dataset``: ``evaluate``,
    ``predict`` and ``--resume`` find the graph there. Across machines, FULLGRAPH_CACHE must be
    storage they all see, as for the partitions rank 0 makes."""
    from fullgraph.data.load import feature_norm_of
    from fullgraph.data.preprocess import row_normalize_features
    from fullgraph.data.pyg import pyg_graph

    graph = pyg_graph(data, split=cfg.data.split, seed=cfg.data.split)
    folder = _data_folder(graph)
    if env is None or env.rank == 0:
        _write_once(graph, folder)
    if env is not None and cfg.parallel.mesh.distributed:
        from fullgraph.comm.context import broadcast_object, init_world

        init_world(env, cfg.run.device, setup_timeout_s=1800.0)  # the group shared_inputs then uses
        broadcast_object(None, src=0)  # the others go on once rank 0 has written the folder
    cfg = cfg.with_options(dataset=str(folder), split=0)  # the folder holds the chosen split as its only one
    if cfg.parallel.mesh.distributed:
        return cfg, None
    return cfg, row_normalize_features(graph) if feature_norm_of(cfg) == "row" else graph


def _data_folder(graph) -> Path:
    """``$FULLGRAPH_CACHE/data/NAME-FINGERPRINT``: the folder of a graph given as a PyG ``Data``."""
    from fullgraph.partition import cache_root

    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", graph.name)[:40].strip("._") or "pyg"
    return cache_root() / "data" / f"{name}-{graph.fingerprint()[:24]}"


def _write_once(graph, folder: Path) -> None:
    """Write ``graph`` as a native folder at ``folder`` unless a complete one is there (its name is
    its content's fingerprint, as a partition's cache folder is; a damaged one is written anew)."""
    from fullgraph.data.formats.native import write_native
    from fullgraph.data.formats.native_read import read_native_meta

    try:
        read_native_meta(folder)
        log.info("data: the PyG Data as %s (cached)", folder)
        return
    except InputError:
        pass
    folder.parent.mkdir(parents=True, exist_ok=True)
    write_native(graph, folder, preprocessed=True, feature_norm="none", source="fullgraph.train_model(data=...)")
    log.info("data: wrote the PyG Data as %s", folder)


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


def _run_here(cfg, env, obj, callbacks=(), graph=None):
    from fullgraph.cli.train import shared_inputs
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
        trainer = Trainer(cfg, graph=graph, model=obj, callbacks=callbacks)
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
    from fullgraph.cli.train import launch
    from fullgraph.train.trainer import RunResult

    from fullgraph.train.runs import RunFolder

    out = cfg.run.out or tempfile.mkdtemp(prefix="fullgraph-run-")
    cfg = cfg.with_options(out=out)
    with RunFolder(cfg, start=True) as folder:
        rc = folder.ranks_ended(launch(cfg, ["train", *_flags(cfg)]))
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

