"""One run folder, one writer: an OS file lock on ``RUN/.fullgraph.lock`` for as long as a run uses it.

Two runs writing one folder (an ``--overwrite`` started while another run trains there, two
``--resume`` of one run) would interleave their ``metrics.jsonl``, checkpoints and ``model.pt`` and
both report success. ``flock`` is the lock because the kernel releases it when its holder dies, by
a signal or a lost machine's reboot, so a crashed run never leaves the folder locked; the file's
text (pid, host, command, start) is only what the refusal tells the user about the holder.

The process that owns the folder takes the lock: ``fullgraph train`` itself (the launcher, for the
ranks it starts: they do not inherit it), rank 0 under torchrun, or ``fullgraph.train_model``'s caller.
The lock file is removed on release; a waiter that opened it just before finds, after locking, that
the path names another file now, and tries again.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

from fullgraph.errors import InputError

__all__ = ["LOCK_FILE", "RunLock"]

LOCK_FILE = ".fullgraph.lock"


class RunLock:
    """The exclusive lock of run folder ``out`` (created if missing); ``created`` says whether the
    folder was made for it, so that a refused run can leave no empty folder behind.

    ``beside``: the lock file sits next to ``out`` (``.NAME.fullgraph.lock`` in its parent) rather than in
    it, for a writer that replaces the whole folder by a rename (``fullgraph convert``'s native folder)."""

    def __init__(self, out: str | Path, *, beside: bool = False):
        self.out = Path(out)
        whole = self.out.expanduser().resolve()
        self.home = whole.parent if beside else self.out  # the folder the lock file lives in
        self.path = self.home / (f".{whole.name}{LOCK_FILE}" if beside else LOCK_FILE)
        self.fd: int | None = None
        self.created: list[Path] = []

    def acquire(self) -> "RunLock":
        from fullgraph.train.disk import check_writable

        if self.out.exists() and not self.out.is_dir():
            raise InputError(f"expected --out to be a folder (got the file {self.out})")
        check_writable(self.out)
        if self.home != self.out:
            check_writable(self.home)
        missing = [p for p in (self.home, *self.home.parents) if not p.exists()]
        self.home.mkdir(parents=True, exist_ok=True)
        self.created = missing  # deepest first
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                self._remove_created()
                raise InputError(f"expected {self.out} to be free for this command (got a folder another fullgraph run "
                                 f"is using: {holder}); wait for it to end, or choose another folder") from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # released and removed by its holder between our open and our lock
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv),
                                 "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode())
        self.fd = fd
        return self

    def release(self, remove_created: bool = False) -> None:
        """Let the folder go; with ``remove_created``, also remove the folders made for it if empty."""
        if self.fd is None:
            return
        try:
            self.path.unlink()
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None
        if remove_created:
            self._remove_created()

    def _remove_created(self) -> None:
        for p in self.created:
            try:
                p.rmdir()
            except OSError:  # not empty: something else lives there now
                break
        self.created = []

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _holder(fd: int) -> str:
    """Who holds the lock, as its file says (it may be being rewritten: then say so)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode())
        return f"pid {info['pid']} on {info['host']} since {info['since']}, {info['command']!r}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that is just starting"
