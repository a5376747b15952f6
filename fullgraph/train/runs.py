"""A run's folder as a unit: the options it was started with (``config.json``), and what ``--resume``
may change of them.

``config.json`` is written once, when a run starts afresh, with the options as the user gave them
(not the folders the launcher adds for its ranks). ``--resume RUN`` rebuilds the run from it; only
the number of epochs may be raised, since any other change would make the resumed run a different
run from the one checkpointed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.train.model_file import MODEL_FILE
from fullgraph.train.report import write_json_atomic

__all__ = ["CONFIG_FILE", "RUN_FILES", "write_run_config", "read_run_config", "resume_config"]

CONFIG_FILE = "config.json"
MAY_CHANGE = ("epochs", "log_tensorboard")
"""Options a resumed run may give anew."""
SET_BY_LAUNCHER = ("partition_dir", "chunk_file", "progress", "overwrite")
"""Options the launcher passes its ranks (and how progress is shown, and whether an earlier run may be
replaced): not part of what was trained."""


RUN_FILES = (CONFIG_FILE, "metrics.jsonl", "summary.json", MODEL_FILE)
"""What a run writes in its folder besides ``checkpoint/``: an earlier run is recognized by them."""


def write_run_config(cfg: TrainConfig, *, replace: bool = False, model: str | None = None) -> None:
    """A run starts afresh in ``cfg.run.out``: its options are saved.

    A folder holding an earlier run is refused, so that a rerun never silently replaces results: its
    checkpoints always (they are hours of someone's training: resume it, or remove them), its other
    files unless ``cfg.run.overwrite`` (or ``replace``: ``--resume auto`` restarting a run that never
    reached its first checkpoint). What is replaced is removed first, so the new run's files are never
    mixed with the old run's; other files in the folder are left alone. The leftovers of a checkpoint
    never completed are removed (a resume must never pick up another run's state). ``model``: what
    the run trains where the options do not say it (a model object's ``<ClassName>``)."""
    if not cfg.run.out:
        return
    from fullgraph.train.checkpoint import CHECKPOINT_DIR, complete_checkpoints

    out = Path(cfg.run.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"expected --out to be a folder (got the file {cfg.run.out})")
    if complete_checkpoints(cfg.run.out):
        raise InputError(f"expected --out to be a new run folder (got {cfg.run.out}, which holds checkpoints of an "
                         f"earlier run: carry it on with --resume {cfg.run.out}, or remove "
                         f"{out / CHECKPOINT_DIR} to start afresh)")
    earlier = [name for name in RUN_FILES if (out / name).exists()]
    if earlier and not (cfg.run.overwrite or replace):
        raise InputError(f"expected --out to be a new run folder (got {cfg.run.out}, which holds an earlier run: "
                         f"{', '.join(earlier)}); pass --overwrite to replace it, or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    for name in earlier:
        (out / name).unlink()
    shutil.rmtree(out / CHECKPOINT_DIR, ignore_errors=True)
    write_json_atomic(out / CONFIG_FILE, cfg.options() | ({"model": model} if model else {}))


def read_run_config(run: str | Path) -> dict:
    path = Path(run) / CONFIG_FILE
    try:
        saved = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"expected a run folder holding {CONFIG_FILE} (got {run}, which has none)") from None
    except ValueError as err:
        raise InputError(f"expected {path} to be JSON ({err})") from None
    known = set(TrainConfig.field_names())
    if not isinstance(saved, dict) or not set(saved) <= known:
        raise InputError(f"expected {path} to hold fullgraph train options (got unknown keys "
                         f"{sorted(set(saved) - known) if isinstance(saved, dict) else type(saved).__name__})")
    return saved


def resume_config(given: dict, resume: str) -> tuple[TrainConfig, bool]:
    """The configuration of ``fullgraph train --resume RESUME`` with the options ``given`` on the command
    line, and whether to resume (``auto`` starts afresh where the run has no checkpoint yet)."""
    from fullgraph.train.checkpoint import complete_checkpoints

    if resume == "auto":
        cfg = TrainConfig.of(**given)
        if not cfg.run.out:
            raise InputError("expected --out with --resume auto (the run folder to resume, or to start)")
        if not complete_checkpoints(cfg.run.out):
            return cfg, False
        saved = read_run_config(cfg.run.out)
        differ = sorted(k for k, v in cfg.options().items()
                        if k not in MAY_CHANGE + SET_BY_LAUNCHER and saved.get(k) != v)
        if differ:
            raise InputError(f"expected the options of the run in {cfg.run.out} with --resume auto (these differ: "
                             + ", ".join(f"--{k.replace('_', '-')} {saved.get(k)!r} -> {cfg.options()[k]!r}"
                                         for k in differ) + ")")
        return cfg, True
    saved = read_run_config(resume)
    extra = sorted(set(given) - set(MAY_CHANGE) - set(SET_BY_LAUNCHER))
    if extra:
        raise InputError(f"expected only --epochs (and --log-tensorboard) with --resume {resume}, whose options "
                         f"are saved (got " + ", ".join("--" + k.replace("_", "-") for k in extra) + ")")
    if given.get("epochs", saved["epochs"]) < saved["epochs"]:
        raise InputError(f"expected --epochs >= {saved['epochs']} with --resume (the run's own; got {given['epochs']})")
    if not complete_checkpoints(resume):
        raise InputError(f"expected a checkpoint in {Path(resume) / 'checkpoint'} to resume from (the run was "
                         f"started without --checkpoint-every, or stopped before its first)")
    cfg = TrainConfig.of(**(saved | given | {"out": str(resume)}))
    if cfg.optimization.epochs != saved["epochs"]:  # the run now aims further: a later --resume must know it
        write_json_atomic(Path(resume) / CONFIG_FILE, saved | {"epochs": cfg.optimization.epochs})
    return cfg, True
