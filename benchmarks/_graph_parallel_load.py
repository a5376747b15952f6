"""graph_parallel.py's contention watch: how many cores processes outside this benchmark's tree
use, a wait for them to stop (one time budget for the whole benchmark), and a sampler that records
their load while a timed run goes, so that a timing taken on a busy machine says so."""

from __future__ import annotations

import os
import statistics
import time

from _harness import CLK_TCK, Sampler, process_table, process_tree

FOREIGN_BUSY_CORES = 0.2


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:110]
    except OSError:
        return "?"


def foreign_load(window_s: float = 2.0) -> tuple[float, list[tuple[int, float, str]]]:
    """Cores used by processes outside this process tree over ``window_s``, and the busy ones."""
    t1 = process_table()
    time.sleep(window_s)
    t2 = process_table()
    mine = process_tree(t2, os.getpid()) | process_tree(t1, os.getpid())
    total, busy = 0.0, []
    for pid, (_, ticks, _) in t2.items():
        if pid in mine or pid not in t1:
            continue
        cores = (ticks - t1[pid][1]) / CLK_TCK / window_s
        total += cores
        if cores > 0.1:
            busy.append((pid, cores, _cmdline(pid)))
    return total, sorted(busy, key=lambda b: -b[1])


class IdleWaiter:
    """Waits for foreign CPU use to stop, with one time budget for the whole benchmark."""

    def __init__(self, budget_s: float):
        self.left = budget_s

    def wait(self) -> float:
        """Returns the foreign load (cores) when it gave up or found the machine idle."""
        while True:
            load, busy = foreign_load(3.0)
            if load < FOREIGN_BUSY_CORES or self.left <= 0:
                if load >= FOREIGN_BUSY_CORES:
                    print(f"    (machine still busy, {load:.2f} foreign cores; wait budget spent: timing anyway)",
                          flush=True)
                return load
            step = min(30.0, self.left)
            who = "; ".join(f"pid {p} {c:.2f} cores: {cmd}" for p, c, cmd in busy[:2])
            print(f"    waiting {step:.0f} s for an idle machine ({load:.2f} foreign cores: {who})", flush=True)
            time.sleep(step)
            self.left -= step + 3.0


class LoadMonitor(Sampler):
    """Samples foreign CPU use in the background while a timed run goes."""

    def __init__(self):
        self.samples: list[float] = []
        super().__init__()

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(foreign_load(2.0)[0])

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else 0.0
