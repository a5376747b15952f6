"""Where a run's numbers go: a progress display, ``metrics.jsonl`` and ``summary.json``.

A terminal gets a tqdm bar; anything else (a log file, CI) gets plain lines, one per evaluation.
Files are written to a temporary name and renamed, so an interrupted run never leaves a
half-written summary over a good one.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from tqdm import tqdm

import fullgraph.environ as environ
from fullgraph.train.disk import writing
from fullgraph.progress import PROGRESS_FILE_ENV, postfix, resolve_mode, write_rank_progress
from fullgraph.tasks.metrics import METRIC_NAMES

log = logging.getLogger("fullgraph")

__all__ = ["Progress", "RunWriter", "write_json_atomic"]


def write_json_atomic(path: Path, obj) -> None:
    """Write ``path`` whole or not at all (a temporary name, then a rename); a full disk is a
    ``NoSpaceError`` and leaves no temporary behind."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with writing(path, run=path.parent, partial=[tmp]):
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")
        os.replace(tmp, path)


class Progress:
    """This process's progress: a bar, a line per evaluation, or nothing. Under the launcher each
    rank also writes its epoch where the launcher's bar reads it (``fullgraph.progress``)."""

    def __init__(self, total: int, mode: str = "auto", desc: str = "train", done: int = 0):
        self.mode = resolve_mode(mode)
        self.bar = (tqdm(total=total, initial=done, desc=desc, unit="epoch", dynamic_ncols=True)
                    if self.mode == "bar" else None)
        self.line_every = max(1, total // 20)  # plain lines: about twenty per run, whatever its length
        self.total = total
        self.report = environ.get(PROGRESS_FILE_ENV)

    def update(self, record: dict) -> None:
        if self.report:
            write_rank_progress(self.report, record)
        if self.bar is not None:
            self.bar.set_postfix(postfix(record), refresh=False)
            self.bar.update(1)
        elif self.mode == "lines" and "val_metric" in record and (
            record["epoch"] % self.line_every == 0 or record["epoch"] == self.total
        ):
            log.info(
                "epoch %4d  loss %.4f  %s train %.4f  val %.4f  test %.4f  (%.3f s/epoch)",
                record["epoch"], record["loss"], METRIC_NAMES[record["metric"]], record["train_metric"],
                record["val_metric"], record["test_metric"], record["epoch_time_s"],
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class RunWriter:
    """Appends one JSON object per epoch to ``metrics.jsonl`` and writes ``summary.json`` at the end;
    with ``tensorboard`` (a folder), the same numbers as TensorBoard scalars (``train.tensorboard``)."""

    def __init__(self, out: str | None, resume: bool = False, tensorboard: str | None = None):
        self.dir = Path(out) if out else None
        self._f = None
        self.tb = None
        if tensorboard:
            from fullgraph.train.tensorboard import TensorBoardLog

            self.tb = TensorBoardLog(tensorboard)
        if self.dir is not None:
            if self.dir.exists() and not self.dir.is_dir():
                from fullgraph.errors import InputError

                raise InputError(f"expected --out to be a folder (got the file {self.dir})")
            self.dir.mkdir(parents=True, exist_ok=True)
            self._f = (self.dir / "metrics.jsonl").open("a" if resume else "w")

    def keep_epochs(self, last: int) -> None:
        """Resuming after epoch ``last``: keep the lines of epochs up to it (a run killed later wrote
        some past it, which the resumed run writes again) and append from there. A line that is not
        a whole record (a write cut short by a kill or a full disk) is dropped with a warning: the
        checkpoint, not the log, says which epochs count. The old file is replaced atomically."""
        if self.dir is None:
            return
        self._f.close()
        path = self.dir / "metrics.jsonl"
        kept, torn = {}, 0  # epoch -> its line
        for line in path.read_text(errors="replace").splitlines():
            epoch = _epoch_of(line)
            if epoch is None:
                torn += bool(line.strip())
            elif epoch <= last:
                kept[epoch] = line
        if torn:
            lost = sorted(set(range(1, last + 1)) - kept.keys())
            log.warning("dropped %d damaged line%s of %s (a write cut short); the checkpoint of epoch %d says which "
                        "epochs count%s", torn, "s" * (torn > 1), path, last,
                        f" (no record left of epoch {', '.join(map(str, lost))})" if lost else "")
        tmp = path.with_suffix(".jsonl.tmp")
        with writing(path, run=self.dir, partial=[tmp]):
            tmp.write_text("".join(line + "\n" for line in kept.values()))
            tmp.rename(path)
        self._f = path.open("a")

    def epoch(self, record: dict) -> None:
        if self.tb is not None:
            self.tb.epoch(record)
        if self._f is not None:
            line = json.dumps(record) + "\n"
            at = self._f.tell()
            try:
                with writing(self.dir / "metrics.jsonl", run=self.dir):
                    self._f.write(line)
                    self._f.flush()
            except BaseException:  # no half line left for a resume to trip on: cut the file back
                self._f = _cut_back(self._f, at)
                raise

    def summary(self, summary: dict) -> None:
        if self.tb is not None:
            self.tb.summary(summary)
        if self.dir is not None:
            write_json_atomic(self.dir / "summary.json", summary)

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        if self.tb is not None:
            self.tb.close()
            self.tb = None


def _epoch_of(line: str) -> int | None:
    """The epoch of a whole ``metrics.jsonl`` record, or ``None`` for a torn or foreign line."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    epoch = record.get("epoch") if isinstance(record, dict) else None
    return epoch if isinstance(epoch, int) else None


def _cut_back(f, size: int):
    """``f`` truncated to ``size`` bytes (what it held before a failed append), reopened for appending.
    Truncating needs no space, so this works on a full disk; what was buffered is dropped unwritten."""
    path = f.name
    try:
        f.close()
    except OSError:  # flushing the rest of the failed line fails again: it is dropped below
        pass
    os.truncate(path, size)
    return open(path, "a")
