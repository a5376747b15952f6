"""Running one command of scale.py (and scale_ogb.py) the way it is measured: in its own session,
with its wall time, the kernel's peak RSS of its tree, a sampled peak of the tree's summed RSS and
the CPU other processes used meanwhile; killed past its timeout or when the machine's available
memory falls below a floor (better a failed row than the kernel's OOM killer choosing a victim).

Only the standard library: the driver must not hold torch, its memory belongs to the runs.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _harness import CLK_TCK, REPO, Sampler, process_table, process_tree


class Watch(Sampler):
    """While a command runs: the peak of the summed RSS of its process tree (sampled), and the CPU
    used by processes outside this benchmark's tree (foreign load, in cores)."""

    def __init__(self, child: int, period_s: float = 0.5, min_free: float = 0.0):
        self.child, self.period, self.min_free = child, period_s, min_free
        self.low_memory: float | None = None  # MemAvailable when it fell below min_free
        self.tree_peak = 0
        self.foreign: list[float] = []
        self._page = os.sysconf("SC_PAGE_SIZE")
        super().__init__()

    def _run(self):
        prev, t_prev = process_table(), time.monotonic()
        while not self._stop.wait(self.period):
            now, t_now = process_table(), time.monotonic()
            kid = process_tree(now, self.child) if self.child in now else set()
            self.tree_peak = max(self.tree_peak, sum(now[p][2] for p in kid) * self._page)
            mine = process_tree(now, os.getpid()) | process_tree(prev, os.getpid())
            ticks = sum(row[1] - prev[p][1] for p, row in now.items() if p not in mine and p in prev)
            self.foreign.append(ticks / CLK_TCK / max(t_now - t_prev, 1e-3))
            prev, t_prev = now, t_now
            avail = mem_available()
            if avail < self.min_free and self.low_memory is None:
                self.low_memory = avail
                _kill_session(self.child)

    @property
    def foreign_mean(self) -> float:
        return statistics.fmean(self.foreign) if self.foreign else 0.0


def mem_available() -> float:
    """The kernel's estimate of memory available for new work, bytes."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable")) * 1024.0
    except (OSError, StopIteration):
        return float("inf")


def _kill_session(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait(proc: subprocess.Popen, t0: float, timeout: float):
    """Wait for ``proc`` (polling, so the watch keeps sampling); past ``timeout`` kill its session.
    Returns ``(timed out?, wait status, resource usage)``."""
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return False, status, usage
        if time.perf_counter() - t0 > timeout:
            _kill_session(proc.pid)
            _, status, usage = os.wait4(proc.pid, 0)
            return True, status, usage
        time.sleep(0.2)


def run_command(cmd: list[str], timeout: float, log: Path, env: dict | None = None, min_free: float = 0.0) -> dict:
    """Run ``cmd`` in its own session with stdout/stderr to ``log``; kill the whole session after
    ``timeout`` s, or when available memory falls below ``min_free`` bytes. Returns exit status, wall
    time, kernel peak RSS (``ru_maxrss`` of the process and its waited-for descendants), sampled peak
    of the tree's summed RSS, foreign load and output."""
    log.parent.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    with open(log, "w") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        with Watch(proc.pid, min_free=min_free) as watch:
            timed_out, status, usage = _wait(proc, t0, timeout)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
    text = log.read_text(errors="replace")
    return {"cmd": cmd, "rc": proc.returncode, "timed_out": timed_out, "wall_s": wall,
            "peak_rss": usage.ru_maxrss * 1024, "tree_rss_peak": watch.tree_peak,
            "foreign_cores": watch.foreign_mean, "low_memory": watch.low_memory, "load1_start": load0,
            "load1_end": os.getloadavg()[0],
            "output": text}


def first_error(r: dict) -> str:
    """The line that says what went wrong (the first error line, else the last line of output)."""
    if r["timed_out"]:
        return f"TIMEOUT after {r['wall_s']:.0f} s"
    if r.get("low_memory") is not None:
        return (f"killed by the benchmark after {r['wall_s']:.0f} s: the machine had {r['low_memory'] / 2**30:.2f} GiB "
                f"available (tree RSS {r['tree_rss_peak'] / 2**30:.1f} GiB)")
    lines = [ln.strip() for ln in r["output"].splitlines() if ln.strip()]
    pick = next((ln for ln in lines if re.search(r"error|Error|Killed|killed|refus|MemoryError|failed", ln)
                 and not ln.startswith("File ")), None)
    pick = pick or (lines[-1] if lines else "no output")
    sig = f" (signal {-r['rc']})" if r["rc"] < 0 else ""
    return f"exit status {r['rc']}{sig}: {pick[:200]}"


def import_baseline(timeout: float, log: Path, min_free: float = 0.0) -> int:
    """Peak RSS of a process that only imports what ``fullgraph train`` imports."""
    code = ("import torch, numpy, fullgraph.cli, fullgraph.train.trainer, fullgraph.parallel.setup, "
            "fullgraph.partition")
    r = run_command([sys.executable, "-c", code], timeout, log, min_free=min_free)
    return r["peak_rss"] if r["rc"] == 0 else 0


def fg(*args: str) -> list[str]:
    """The ``fullgraph`` command line of this interpreter."""
    return [sys.executable, "-m", "fullgraph", *args]
