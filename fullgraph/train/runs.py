"""A run's folder as a unit: the options it was started with (``config.json``), what ``--resume``
may change of them, and the folder held for one run at a time (:class:`RunFolder`).

``config.json`` is written once, when a run starts afresh, with the options as the user gave them
(not the folders the launcher adds for its ranks). ``--resume RUN`` rebuilds the run from it; only
the options that change where and how fast the run computes (``MAY_CHANGE``) may be given anew, and
are recorded, since any other change would make the resumed run a different run from the one
checkpointed. Each checkpoint records the options its weights were trained with, and a
``config.json`` edited since is refused naming the field.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.train.model_file import MODEL_FILE
from fullgraph.train.report import write_json_atomic
from fullgraph.train.run_model import recorded_options

__all__ = ["CONFIG_FILE", "RUN_FILES", "write_run_config", "read_run_config", "resume_config"]

CONFIG_FILE = "config.json"
MAY_CHANGE = ("epochs", "log_tensorboard", "comm_timeout", "threads", "memory_limit", "device", "release_memory",
              "checkpoint_every")
"""Options a resumed run may give anew: how long it runs, where and how fast it computes, what it logs;
never what it computes."""
SET_BY_LAUNCHER = ("partition_dir", "chunk_file", "link_file", "progress", "overwrite")
"""Options the launcher passes its ranks (and how progress is shown, and whether an earlier run may be
replaced): not part of what was trained."""


RUN_FILES = (CONFIG_FILE, "metrics.jsonl", "summary.json", MODEL_FILE)
"""What a run writes in its folder besides ``checkpoint/``: an earlier run is recognized by them."""
REPLACED = ".fullgraph-replaced"
"""Where ``--overwrite`` moves the earlier run's files until the new run has started (a refused run
puts them back)."""


def trained_options(options: dict) -> dict:
    """The options that decide what a run computes: those a checkpoint records and a resume keeps."""
    return {k: v for k, v in options.items() if k not in MAY_CHANGE + SET_BY_LAUNCHER + ("out",)}


def write_run_config(cfg: TrainConfig, *, replace: bool = False, model: str | None = None) -> None:
    """A run starts afresh in ``cfg.run.out``: its options are saved.

    A folder holding an earlier run is refused, so that a rerun never silently replaces results: its
    checkpoints always (they are hours of someone's training: resume it, or remove them), its other
    files unless ``cfg.run.overwrite`` (or ``replace``: ``--resume auto`` restarting a run that never
    reached its first checkpoint). What is replaced is moved aside first (``REPLACED``, until
    :class:`RunFolder` knows the new run started), so the new run's files are never mixed with the old
    run's; other files in the folder are left alone. The leftovers of a checkpoint
    never completed are removed (a resume must never pick up another run's state). ``model``: the
    name of the model object the run trains (``<ClassName>``), where the options do not name the model."""
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
    aside = out / REPLACED
    shutil.rmtree(aside, ignore_errors=True)  # a run killed before it let go of the one it replaced
    for name in earlier:
        aside.mkdir(exist_ok=True)
        (out / name).rename(aside / name)
    shutil.rmtree(out / CHECKPOINT_DIR, ignore_errors=True)
    write_json_atomic(out / CONFIG_FILE, recorded_options(cfg, model.strip("<>") if model else None))


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
    if not str(saved.get("model", "")).startswith("<"):  # a model object's name is no option to check
        try:
            TrainConfig.of(**saved)
        except InputError as err:
            raise InputError(f"{err} in {path}") from None
    return saved


def check_trained(saved: dict, run: str | Path) -> None:
    """Refuse a ``config.json`` whose options differ from those the newest checkpoint was trained with
    (edited by hand since): resuming would silently train another run on these weights, or fail deep
    inside with a traceback."""
    from fullgraph.train.checkpoint import complete_checkpoints

    for folder in complete_checkpoints(run):
        try:
            trained = json.loads((folder / "manifest.json").read_text()).get("options")
        except (OSError, ValueError):
            continue  # damaged: the resume falls back past it and says so
        if not isinstance(trained, dict):
            return  # written before checkpoints recorded their options
        now = trained_options(saved)
        differ = sorted(k for k in trained.keys() & now.keys() if trained[k] != now[k])
        if differ:
            raise InputError(f"expected {Path(run) / CONFIG_FILE} to hold the options {folder.name} was trained with "
                             f"(these differ: " + ", ".join(f"{k} {trained[k]!r} in the checkpoint, {now[k]!r} in "
                                                            f"{CONFIG_FILE}" for k in differ)
                             + "): restore them, or start a new run")
        return


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
        differ = sorted(k for k, v in recorded_options(cfg).items()
                        if k not in MAY_CHANGE + SET_BY_LAUNCHER and saved.get(k) != v)
        if differ:
            raise InputError(f"expected the options of the run in {cfg.run.out} with --resume auto (these differ: "
                             + ", ".join(f"--{k.replace('_', '-')} {saved.get(k)!r} -> {cfg.options()[k]!r}"
                                         for k in differ) + ")")
        check_trained(saved, cfg.run.out)
        check_epochs_reached(cfg.run.out, cfg.optimization.epochs, "--epochs")
        return cfg, True
    saved = read_run_config(resume)
    extra = sorted(set(given) - set(MAY_CHANGE) - set(SET_BY_LAUNCHER))
    if extra:
        raise InputError(f"expected only options that do not change what the run computes with --resume {resume} ("
                         + ", ".join("--" + k.replace("_", "-") for k in MAY_CHANGE) + "; got "
                         + ", ".join("--" + k.replace("_", "-") for k in extra) + ", which the run saved)")
    if given.get("epochs", saved["epochs"]) < saved["epochs"]:
        raise InputError(f"expected --epochs >= {saved['epochs']} with --resume (the run's own; got {given['epochs']})")
    if not complete_checkpoints(resume):
        raise InputError(f"expected a checkpoint in {Path(resume) / 'checkpoint'} to resume from (the run was "
                         f"started without --checkpoint-every, or stopped before its first)")
    check_trained(saved, resume)
    check_epochs_reached(resume, given.get("epochs", saved["epochs"]), "--epochs" if "epochs" in given else
                         f"{Path(resume) / CONFIG_FILE}")
    return TrainConfig.of(**(saved | given | {"out": str(resume)})), True


def check_epochs_reached(run, epochs: int, source: str) -> None:
    """A resume asks for at least the epochs its newest checkpoint has run: fewer would end at once and
    write a summary whose epoch count is not what ran (a ``config.json`` edited by hand says so too)."""
    from fullgraph.train.checkpoint import checkpoint_epoch, complete_checkpoints

    newest = complete_checkpoints(run)
    reached = checkpoint_epoch(newest[0]) if newest else 0
    if epochs < reached:
        raise InputError(f"expected epochs >= {reached} to resume {run} (its newest checkpoint, {newest[0].name}, has "
                         f"run {reached}) (got {epochs} from {source})")


def record_resumed(cfg: TrainConfig) -> None:
    """Write the options a resume gave anew (``MAY_CHANGE``) into the run's ``config.json``: a later
    ``--resume`` carries on with them, and the folder says how it was last run."""
    saved = read_run_config(cfg.run.out)
    now = {k: v for k, v in cfg.options().items() if k in MAY_CHANGE}
    if any(saved.get(k) != v for k, v in now.items()):
        write_json_atomic(Path(cfg.run.out) / CONFIG_FILE, saved | now)


class RunFolder:
    """The run folder held for one run, from before anything is written in it to the end.

    Entering takes the folder's lock (:class:`~fullgraph.train.run_lock.RunLock`; a second writer is
    refused naming the holder), then either starts a run afresh (``start``: ``write_run_config``,
    the earlier run's files moved aside) or records a resume's new options. A run refused for bad
    input before its first epoch (an ``InputError`` out of the block, or :meth:`undo` for ranks that
    reported one) leaves the folder as it found it: its own files removed, the earlier run's put
    back, a folder made for it removed. Otherwise the earlier run's files are deleted on exit.
    """

    def __init__(self, cfg: TrainConfig, *, start: bool, replace: bool = False, model: str | None = None):
        self.cfg, self.start, self.replace, self.model = cfg, start, replace, model
        self.out = Path(cfg.run.out) if cfg.run.out else None
        self.lock = None
        self.wrote = False  # this run's config.json is in the folder: undo has something to undo
        self.undone = False

    def __enter__(self) -> "RunFolder":
        from fullgraph.train.run_lock import RunLock

        if self.out is None:
            return self
        self.lock = RunLock(self.out).acquire()
        try:
            if self.start:
                write_run_config(self.cfg, replace=self.replace, model=self.model)
                self.wrote = True
            else:
                record_resumed(self.cfg)
        except BaseException:
            self.lock.release(remove_created=True)
            raise
        return self

    def _started(self) -> bool:
        from fullgraph.train.checkpoint import complete_checkpoints

        metrics = self.out / "metrics.jsonl"
        return bool(complete_checkpoints(self.out)) or (metrics.exists() and metrics.stat().st_size > 0)

    def undo(self) -> None:
        """Put the folder back as this run found it, unless the run trained an epoch (then it is a
        run of its own, to resume or to look at)."""
        from fullgraph.train.checkpoint import CHECKPOINT_DIR

        if not self.wrote or self.undone or self._started():
            return
        self.undone = True
        for name in RUN_FILES:
            (self.out / name).unlink(missing_ok=True)
        shutil.rmtree(self.out / CHECKPOINT_DIR, ignore_errors=True)
        aside = self.out / REPLACED
        if aside.is_dir():
            for p in aside.iterdir():
                p.rename(self.out / p.name)
            aside.rmdir()

    def ranks_ended(self, status: int) -> int:
        """The exit status of the ranks this run launched, passed on; a rank that refused its input
        (status 2) is a refused run: :meth:`undo`."""
        if status == InputError.exit_status:
            self.undo()
        return status

    def __exit__(self, kind, err, tb) -> None:
        if self.out is None:
            return
        if isinstance(err, InputError):
            self.undo()
        if not self.undone:
            shutil.rmtree(self.out / REPLACED, ignore_errors=True)
        self.lock.release(remove_created=self.undone)
