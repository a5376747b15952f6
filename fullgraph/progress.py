"""Progress of a multi-process run on the terminal (``--progress``; one process draws its own:
``fullgraph.train.report.Progress``).

 A multi-process run started by the launcher draws one bar in the
launcher, the process on the user's terminal: every rank writes its last epoch to a small file the
launcher names (``PROGRESS_FILE_ENV``), and the launcher's bar stands at the slowest rank's epoch,
with rank 0's loss and validation metric. Ranks' own output goes to their log files, where a bar
would be lost. Under torchrun (no launcher) rank 0 draws its own bar.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tqdm import tqdm

__all__ = ["PROGRESS_FILE_ENV", "RankProgress", "postfix", "resolve_mode", "write_rank_progress"]

PROGRESS_FILE_ENV = "FULLGRAPH_PROGRESS_FILE"


def resolve_mode(mode: str) -> str:
    """``auto``: a bar on a terminal, lines otherwise."""
    return ("bar" if sys.stderr.isatty() else "lines") if mode == "auto" else mode


def postfix(record: dict) -> dict:
    post = {"loss": f"{record['loss']:.4f}"}
    if "val_metric" in record:
        post["val"] = f"{record['val_metric']:.4f}"
    return post


def write_rank_progress(path: str, record: dict) -> None:
    """A rank's last epoch, where the launcher reads it (replaced whole: never read half written)."""
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps({"epoch": record["epoch"]} | postfix(record)))
    os.replace(tmp, path)


class RankProgress:
    """The launcher's bar over ``nprocs`` ranks writing their epochs into ``folder``."""

    def __init__(self, folder: Path, nprocs: int, total: int, done: int = 0):
        self.files = [Path(folder) / f"rank-{r}.progress.json" for r in range(nprocs)]
        for f in self.files:
            f.unlink(missing_ok=True)
        self.bar = tqdm(total=total, initial=done, desc=f"train ({nprocs} processes)", unit="epoch",
                        dynamic_ncols=True)
        self.done = done

    def env(self, rank: int) -> dict:
        return {PROGRESS_FILE_ENV: str(self.files[rank])}

    def poll(self) -> None:
        """Move the bar to the slowest rank's epoch (a rank that wrote nothing yet is at the start)."""
        states = []
        for f in self.files:
            try:
                states.append(json.loads(f.read_text()))
            except (OSError, ValueError):  # not written yet, or being replaced
                states.append(None)
        slowest = min((s["epoch"] if s else self.done) for s in states)
        if slowest > self.bar.n:
            if states[0]:
                self.bar.set_postfix({k: v for k, v in states[0].items() if k != "epoch"}, refresh=False)
            self.bar.update(slowest - self.bar.n)

    def close(self) -> None:
        """The bar at the ranks' last epochs, closed (again: a no-op)."""
        if not self.bar.disable:
            self.poll()
            self.bar.close()
