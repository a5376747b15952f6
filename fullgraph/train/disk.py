"""Writing a run's files when the disk may fill: one clear error, no partial file left behind.

A full file system shows itself in many disguises: ``OSError: [Errno 28]`` from a plain write,
``unexpected pos 704 vs 598`` from torch's zip writer inside torch.distributed.checkpoint, or
``basic_ios::clear: iostream error`` from ``torch.save``, the errno lost on the way. So a failed write
is judged by the file system as well as by the exception: ENOSPC (or EDQUOT) anywhere in the chain
of causes, or less than :data:`NEARLY_FULL` bytes left where the file was going. Either way the
partial files are removed and :class:`~fullgraph.errors.NoSpaceError` says which path, how much
is free and which checkpoint the run can resume from.
"""

from __future__ import annotations

import errno
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from fullgraph.errors import CannotWriteError, NoSpaceError

__all__ = ["NEARLY_FULL", "out_of_space", "writing", "no_space_error", "check_writable", "CHECKPOINT_DIR",
           "complete_checkpoints", "checkpoint_epoch"]

CHECKPOINT_DIR = "checkpoint"
"""A run's checkpoints live in ``RUN/checkpoint/epoch-NNNNNN/`` (``train.checkpoint`` writes them; here, below
it, so that a full disk's message can name the last one without importing the writer)."""
_PREFIX = "epoch-"

NEARLY_FULL = 1 << 20
"""Free bytes below which a failed write is taken for a full disk. A write that runs out of space
fills the file system to its last block before it fails, so what is left is far below this."""

_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def _chain(err: BaseException):
    """``err`` and every exception it was raised from or during, and those torch.distributed.checkpoint
    keeps per rank (``CheckpointException.failures``)."""
    seen, todo = set(), [err]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]
        for failed in (getattr(e, "failures", None) or {}).values():  # (exception, traceback) per rank
            todo += [x for x in (failed if isinstance(failed, tuple) else (failed,)) if isinstance(x, BaseException)]


def _free_bytes(path: Path) -> int | None:
    for where in (path, *path.parents):
        try:
            return shutil.disk_usage(where).free
        except OSError:
            continue
    return None


def out_of_space(err: BaseException, path: str | Path) -> bool:
    """Whether ``err``, raised while writing ``path``, was the file system filling up."""
    for e in _chain(err):
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
            return True
        if "No space left on device" in str(e):
            return True
    free = _free_bytes(Path(path))
    return free is not None and free < NEARLY_FULL


def complete_checkpoints(run: str | Path) -> list[Path]:
    """Renamed (complete-looking) checkpoint folders of a run, newest first."""
    root = Path(run) / CHECKPOINT_DIR
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.is_dir() and p.name.startswith(_PREFIX)), reverse=True)


def checkpoint_epoch(folder: Path) -> int:
    """The epoch a checkpoint folder's name says (``epoch-000190``: 190; 0 for a name that holds none)."""
    digits = folder.name[len(_PREFIX):]
    return int(digits) if digits.isdigit() else 0


def no_space_error(path: str | Path, run: str | Path | None) -> NoSpaceError:
    """The one line a full disk gets: the path, what is free, and where the run can carry on from."""
    text = f"no space left on the device while writing {path} (the partial files are removed); "
    last = complete_checkpoints(run) if run else []
    if last:
        text += f"the last good checkpoint is {last[0]}: free some space, then carry on with fullgraph train --resume {run}"
    elif run:
        text += f"the run in {run} has no checkpoint to resume from: free some space and start it again"
    else:
        text += "free some space and run again"
    return NoSpaceError(text)


def _remove(paths) -> None:
    for p in paths:
        p = Path(p)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                p.unlink()
            except OSError:
                pass


@contextmanager
def writing(path: str | Path, *, run: str | Path | None = None, partial=()):
    """Write ``path`` (a file or folder of the run in ``run``) inside this block. If the block raises,
    the ``partial`` files or folders are removed; if the cause was a full disk, a ``NoSpaceError``
    replaces the exception (the space is judged before the partial files are removed)."""
    try:
        yield
    except BaseException as err:
        # torch.distributed.checkpoint's CheckpointException is a BaseException: only an interrupt is not a failure
        full = not isinstance(err, (KeyboardInterrupt, SystemExit, GeneratorExit)) and out_of_space(err, path)
        _remove(partial)
        if full:
            raise no_space_error(path, run) from err
        raise


def check_writable(folder: str | Path, what: str = "the folder") -> None:
    """Raise :class:`~fullgraph.errors.CannotWriteError` unless ``folder`` can be written, or made: judged at
    its nearest existing ancestor (a read-only mount, or no permission to write there), creating nothing."""
    folder = Path(folder).expanduser()
    existing = next((p for p in (folder, *folder.absolute().parents) if p.exists()), None)
    if existing is None or os.access(existing, os.W_OK | os.X_OK):
        return
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = "is on a read-only file system" if read_only else "cannot be written by this process"
    where = "it" if existing == folder else f"{existing}, where it would be made,"
    raise CannotWriteError(f"could not write {what} {folder}: {where} {why}; choose a folder this process can write")
