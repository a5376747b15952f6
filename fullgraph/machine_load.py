"""How busy this machine's cores are right now, and how many threads a process should take from them.

Why this exists: torch's CPU kernels run in OpenMP parallel regions, and every region ends at a
barrier that waits for its slowest thread. A thread whose core another process is using runs only in
the scheduler's time slices, so every region of the step waits for it: on the 2-core VM with its cores
busy, one process took 2.4-5.7 times longer per epoch on 2 threads than on 1, and with one core busy
the second thread bought nothing (``benchmarks/threads_under_load.py``; benchmarks/README.md, "Threads
under load"). A thread per core pays only on the cores no other process is using.

The default thread count is nevertheless not taken from the load: it stays the machine's cores over
its ranks. A count that followed the load would make the same command compute different bits from
one run to the next (the dense products split their sums by thread), breaking the promise that the
same seed gives the same losses, and a bit-for-bit resume could pick another count than the run it
resumes. Instead, where this run's threads and the other processes' work ask for more cores than there
are, :func:`busy_note` says so once, naming the ``--threads`` that fits.
Only the standard library is used, so that the launcher, the trainer and the planner can all call it
(it sits below every package that imports it).
"""

from __future__ import annotations

import logging
import os
import time

__all__ = ["cpu_jiffies", "busy_cores", "default_threads", "busy_note", "warn_if_busy", "process_threads", "SAMPLE_S"]

SAMPLE_S = 0.1
"""How long the cores are watched: long enough for ~10 scheduler ticks per core (``/proc/stat`` counts
in 10 ms jiffies), short enough to cost nothing next to loading a graph."""

_log = logging.getLogger("fullgraph")


def cpu_jiffies(stat: str | None = None) -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores since boot, from ``/proc/stat``'s ``cpu`` line (``stat``: its
    text, for tests); ``None`` where there is no ``/proc/stat`` (not Linux). Idle and I/O wait are not busy."""
    if stat is None:
        try:
            with open("/proc/stat") as f:
                stat = f.readline()
        except OSError:
            return None
    fields = stat.split()
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def busy_cores(sample_s: float = SAMPLE_S, cores: int | None = None) -> float | None:
    """How many cores other processes kept busy over the next ``sample_s`` seconds: the cores' busy share
    over the sample, less this process's own CPU time in it. ``None`` where ``/proc/stat`` is missing."""
    cores = cores or os.cpu_count() or 1
    before, own_before, t0 = cpu_jiffies(), _own_cpu_s(), time.monotonic()
    if before is None:
        return None
    time.sleep(sample_s)
    after, own_after, elapsed = cpu_jiffies(), _own_cpu_s(), time.monotonic() - t0
    if after is None or after[1] <= before[1]:
        return None
    share = (after[0] - before[0]) / (after[1] - before[1])
    return max(0.0, share * cores - (own_after - own_before) / max(elapsed, 1e-9))


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def default_threads(local_procs: int = 1, requested: int = 0, *, cores: int | None = None) -> int:
    """The threads of each of ``local_procs`` processes of one run on this machine: ``requested`` where
    given (``--threads``), else its cores over its processes, at least 1. Not the free cores: see the
    module docstring."""
    if requested:
        return requested
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, local_procs))


def busy_note(threads: int, local_procs: int = 1, *, cores: int | None = None, busy: float | None = None,
              load: float | None = None) -> str | None:
    """One line when this run's threads and the other processes' work together ask for more cores than
    there are (each thread then waits for its core at every parallel region's barrier), naming the thread
    count that fits; ``None`` when they fit. ``busy``: as :func:`default_threads`; ``load``: the 1-minute
    load average, for the line (default: the machine's)."""
    cores = cores or os.cpu_count() or 1
    if busy is None:
        busy = busy_cores(cores=cores) or 0.0
    others = int(busy + 0.5)
    if others + local_procs * threads <= cores:
        return None
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    fits = max(1, (cores - others) // max(1, local_procs))
    procs = f"{local_procs} processes ask" if local_procs > 1 else "this process asks"
    advice = (f"--threads {fits} may be faster" if fits < threads else
              "fewer processes, or a quieter machine, may be faster")
    return (f"the machine is busy: other processes keep {busy:.1f} of its {cores} cores busy (load average "
            f"{load:.1f}), and {procs} for {local_procs * threads} more threads; {advice}")


def warn_if_busy(threads: int, local_procs: int = 1, **kw) -> str | None:
    """Log :func:`busy_note`'s line as a warning, once per process (a rank builds one trainer; a script
    that builds many is told once), and return it."""
    global _WARNED
    if _WARNED:
        return None
    note = busy_note(threads, local_procs, **kw)
    if note is not None:
        _WARNED = True
        _log.warning("%s", note)
    return note


def process_threads(requested: int = 0, local_procs: int = 1, *, peers_running: bool = False,
                    cores: int | None = None, busy: float | None = None) -> int:
    """What a training process sets its threads to (``torch.set_num_threads``): :func:`default_threads`,
    with :func:`warn_if_busy` where they and the other processes' work ask for more cores than there
    are. ``peers_running``: this is one of ``local_procs`` ranks whose peers have started (the trainer
    of a distributed run): up to ``local_procs - 1`` busy cores are theirs, not another program's."""
    cores = cores or os.cpu_count() or 1
    threads = default_threads(local_procs, requested, cores=cores)
    if busy is None:
        busy = busy_cores(cores=cores) or 0.0
    if peers_running:
        busy = max(0.0, busy - (local_procs - 1))
    warn_if_busy(threads, local_procs, cores=cores, busy=busy)
    return threads


_WARNED = False
"""Whether :func:`warn_if_busy` has spoken in this process."""
