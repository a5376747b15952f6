"""Every process's CPU ticks and resident pages from ``/proc``, the tree a benchmark counts as its
own, and a sampling thread: what the contention and memory watches are built from."""

from __future__ import annotations

import os
import threading

CLK_TCK = os.sysconf("SC_CLK_TCK")


class Sampler:
    """A thread that samples while a measured run goes (the contention and memory watches): it
    starts on entering the ``with`` block and is stopped and joined on leaving it. Subclasses
    define ``_run``, which loops until ``self._stop`` is set."""

    def __init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        raise NotImplementedError

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def process_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, CPU ticks used (user + system), resident pages) of every process: what
    the contention watches compare between two moments."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rfind(")") + 2:].split()  # after the command name, which may hold spaces
        out[int(d)] = (int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[21]))
    return out


def process_tree(table: dict, root: int) -> set[int]:
    """``root`` and all its descendants in ``table``: the processes a benchmark counts as its own."""
    kids: dict[int, list[int]] = {}
    for pid, row in table.items():
        kids.setdefault(row[0], []).append(pid)
    mine, todo = set(), [root]
    while todo:
        pid = todo.pop()
        mine.add(pid)
        todo += kids.get(pid, [])
    return mine
