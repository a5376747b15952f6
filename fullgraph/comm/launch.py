"""The local launcher: ``fullgraph train --nprocs P`` starts P ranks itself, the way torchrun would.

It hosts the rendezvous store on a free port (the OS picks it: no fixed port numbers, no race
between choosing a port and binding it), starts each rank as ``python -m fullgraph ...`` with the
torchrun environment, and watches them. When a rank fails (an exception, bad input, a kill), the
launcher stops every other rank at once, prints which rank failed and why, and exits with the
failure's own status (2 for bad input, 3 for a full disk: ``fullgraph.errors``; 1 otherwise). Each rank writes its error as JSON to a file the launcher
names, and its stderr to a log file kept for inspection.

A rank that stops answering (SIGSTOP, a hung machine) neither exits nor reports: its peers fail
after ``--comm-timeout``, and their error names only themselves. When the first failure is such a
communication timeout and a rank is still there having reported nothing, the launcher names that
rank instead, with the state the kernel gives it (``stopped by a signal``, ...).
"""

from __future__ import annotations

import json
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import fullgraph.environ as environ

__all__ = ["launch_local", "report_worker_error", "threads_per_process"]

ERROR_FILE_ENV = "FULLGRAPH_ERROR_FILE"


def threads_per_process(local_procs: int, requested: int = 0) -> int:
    """``--threads`` if given, else cores ÷ local processes (at least 1): ``machine_load.default_threads``."""
    from fullgraph.machine_load import default_threads

    return default_threads(local_procs, requested)


def report_worker_error(exc: BaseException, input_error: bool) -> None:
    """Called by a failing rank: leave the launcher a one-line reason. The first report stands (a rank
    reports where it fails, before it closes its process group, and again on its way out): its time
    is when the rank failed, which is how the launcher tells a cause from its consequences."""
    path = environ.get(ERROR_FILE_ENV)
    if not path:
        return
    try:
        with open(path, "x") as f:
            f.write(json.dumps({"type": type(exc).__name__, "message": str(exc), "input_error": input_error,
                                "exit_status": getattr(exc, "exit_status", None)}))
    except OSError:  # reported already (FileExistsError), or nowhere to write
        pass


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, ask for SIGTERM when the launcher dies, so that a
    killed launcher never leaves ranks behind."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class _Rank:
    rank: int
    proc: subprocess.Popen
    error_file: Path
    log_file: Path


def _reason(r: _Rank) -> tuple[str, int]:
    """Why rank ``r`` failed, and the exit status the run ends with: the one its error has (2 for bad
    input, 3 for a full disk, ...: ``fullgraph.errors``), else 1."""
    rc = r.proc.returncode
    try:
        err = json.loads(r.error_file.read_text())
        status = err.get("exit_status") or (2 if err.get("input_error") else 1)
        return f"{err['type']}: {err['message']}", int(status)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if rc is not None and rc < 0:
        return f"killed by signal {signal.Signals(-rc).name}", 1
    tail = ""
    try:
        lines = [x for x in r.log_file.read_text(errors="replace").splitlines() if x.strip()]
        tail = lines[-1] if lines else ""
    except OSError:
        pass
    return f"exit status {rc}" + (f": {tail}" if tail else ""), 1


def _first_failure(failed: list[_Rank]) -> _Rank:
    """The rank whose failure came first, among those that have failed.

    When one rank fails, its peers fail moments later on a closed connection; naming the lowest
    failed rank would often name such a consequence instead of the cause. A rank killed by a signal
    wrote nothing and is taken as the cause; otherwise the earliest error report wins, a report of a
    connection the peer closed coming after every other: the peer had a reason of its own, and the
    two reports may carry the same time (a file's time moves in the clock's ticks, milliseconds apart).
    """
    def when(r: _Rank) -> tuple[int, int, int]:
        if r.proc.returncode is not None and r.proc.returncode < 0:
            return (0, 0, 0)
        try:
            return (1, int(bool(_PEER_CLOSED.search(_reason(r)[0]))), r.error_file.stat().st_mtime_ns)
        except OSError:
            return (2, 0, 0)

    return min(failed, key=lambda r: (when(r), r.rank))


_PEER_CLOSED = re.compile(r"connection (?:closed|reset) by peer|broken pipe", re.IGNORECASE)
"""What a rank's error says when a peer's exit cut its connection: a consequence, never the cause."""

_COMM_TIMEOUT = re.compile(r"Timed out waiting \d+ ?ms|did not finish in [\d.]+ ?s|collective operation timeout"
                           r"|before timing out")
"""What a rank's error says when it gave up waiting for a peer: gloo's (``Timed out waiting 5000ms for
recv operation to complete``, which names no peer), ``Pending.wait``'s, NCCL's watchdog's."""

_STATES = {"R": "running", "S": "sleeping", "D": "in an uninterruptible wait (disk or kernel)",
           "T": "stopped by a signal", "t": "stopped by a debugger", "Z": "exited"}


def _state(pid: int) -> str | None:
    """The kernel's one-letter state of a process (``/proc/PID/stat``), or ``None`` where it cannot be
    read (not Linux, or gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _stopped(r: _Rank) -> bool:
    return r.proc.poll() is None and _state(r.proc.pid) in ("T", "t")


def _unanswering(cause: _Rank, reason: str, ranks: list[_Rank]) -> list[_Rank]:
    """The ranks ``cause`` timed out waiting for, as far as the launcher can tell.

    Only a communication timeout points away from the rank that raised it: any other error is its
    own, and a rank merely waiting on it is innocent. The suspects are the ranks still there that
    reported nothing (every peer of a failed collective fails or reports within moments of the
    cause; one that does neither is not taking part). Stopped ones (SIGSTOP) are certain and go
    first; else every silent rank is named, since gloo does not say which peer it waited for."""
    if not _COMM_TIMEOUT.search(reason):
        return []
    silent = [r for r in ranks if r is not cause and r.proc.poll() is None and not r.error_file.exists()]
    return [r for r in silent if _stopped(r)] or silent


def _failure_line(cause: _Rank, ranks: list[_Rank]) -> tuple[str, int]:
    """What the launcher says of a failed run (read before the ranks are stopped: a stopped rank's
    state is gone once it is killed), and the exit status it ends with."""
    reason, status = _reason(cause)
    silent = _unanswering(cause, reason, ranks)
    n = len(ranks)
    if not silent:
        return f"rank {cause.rank} of {n} failed: {reason}", status
    reason = re.sub(r"^(\w+: )\[[^\]]+\.(?:cc|cpp|h):\d+\] ", r"\1", reason)  # gloo's source line: noise here
    states = sorted({_STATES.get(_state(r.proc.pid) or "", "unknown") for r in silent})
    who = ("rank " if len(silent) == 1 else "ranks ") + ", ".join(str(r.rank) for r in silent)
    return (f"{who} of {n} stopped answering (state: {', '.join(states)}) — rank {cause.rank} timed out "
            f"waiting for {'it' if len(silent) == 1 else 'them'}: {reason}"), 1


def _stop(ranks: list[_Rank], grace_s: float = 5.0) -> None:
    """SIGTERM every rank still running, SIGKILL those still there after ``grace_s``. A stopped rank
    acts on no signal but SIGKILL until it is continued, so it is sent SIGCONT after the SIGTERM:
    it ends now, not after the grace."""
    for r in ranks:
        if r.proc.poll() is None:
            stopped = _stopped(r)
            r.proc.terminate()
            if stopped:
                r.proc.send_signal(signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    for r in ranks:
        left = max(0.0, deadline - time.monotonic())
        try:
            r.proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            r.proc.kill()
            r.proc.wait()


def _start_rank(rank: int, module: str, argv: list[str], env: dict, logs: Path) -> _Rank:
    (logs / f"rank-{rank}.error.json").unlink(missing_ok=True)  # an earlier run's report in a reused --log-dir
    env = env | {"RANK": str(rank), "LOCAL_RANK": str(rank), ERROR_FILE_ENV: str(logs / f"rank-{rank}.error.json")}
    # a rank killed by a signal (SIGABRT from C++, SIGSEGV) leaves no error file: Python's fault
    # handler writes every thread's stack into its log instead, which says where it died
    env.setdefault("PYTHONFAULTHANDLER", "1")
    log = logs / f"rank-{rank}.log"
    # rank 0 speaks to the user; every rank's stderr is also kept in its log file
    out = None if rank == 0 else open(log, "w")
    err = open(log, "a") if rank == 0 else out
    proc = subprocess.Popen([sys.executable, "-m", module, *argv], env=env, stdout=out, stderr=err,
                            preexec_fn=_die_with_parent)
    return _Rank(rank, proc, logs / f"rank-{rank}.error.json", log)


def launch_local(argv: list[str], nprocs: int, *, threads: int = 0, log_dir: str | None = None,
                 module: str = "fullgraph", timeout_s: float | None = None,
                 progress: tuple[int, int] | None = None) -> int:
    """Run ``python -m <module> <argv>`` as ``nprocs`` ranks on this machine; returns the exit status.

    ``timeout_s`` bounds the whole run (tests use it): past it every rank is stopped and the
    launcher reports a failure. The ranks' logs go to ``log_dir``, or to a temporary folder that is
    removed when every rank succeeds and kept (and named) when one fails. ``progress``: ``(epochs,
    done)`` to draw one bar of the ranks' epochs here (``fullgraph.progress``)."""
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, world_size=nprocs + 1, is_master=True, wait_for_workers=False)
    logs = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="fullgraph-ranks-"))
    logs.mkdir(parents=True, exist_ok=True)
    nthreads = threads_per_process(nprocs, threads)
    base = environ.snapshot()
    base.update({
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(store.port), "WORLD_SIZE": str(nprocs),
        "LOCAL_WORLD_SIZE": str(nprocs), "TORCHELASTIC_USE_AGENT_STORE": "True",
        "OMP_NUM_THREADS": str(nthreads), "FULLGRAPH_THREADS": str(nthreads),
    })
    watch = None
    if progress is not None:
        from fullgraph.progress import RankProgress

        watch = RankProgress(logs, nprocs, *progress)
    ranks = [_start_rank(rank, module, argv, base | (watch.env(rank) if watch else {}), logs) for rank in range(nprocs)]
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while True:
            if deadline is not None and time.monotonic() > deadline:
                _stop(ranks)
                print(f"fullgraph: error: the ranks did not finish within {timeout_s:.0f} s; stopped them "
                      f"(rank logs in {logs})", file=sys.stderr)
                return 1
            if any(r.proc.poll() not in (None, 0) for r in ranks):
                time.sleep(0.5)  # let the peers that fail because of it fail too, then name the first
                failed = _first_failure([r for r in ranks if r.proc.poll() not in (None, 0) or r.error_file.exists()])
                line, status = _failure_line(failed, ranks)
                _stop(ranks)
                watch and watch.close()  # the error on a line of its own
                print(f"fullgraph: error: {line} (rank logs in {logs})", file=sys.stderr)
                return status
            if watch is not None:
                watch.poll()
            if all(r.proc.poll() == 0 for r in ranks):
                watch and watch.close()  # the ranks' last epochs, before their files go
                if not log_dir:  # the logs of a run that succeeded are not worth a folder in /tmp
                    shutil.rmtree(logs, ignore_errors=True)
                return 0
            time.sleep(0.1)
    except KeyboardInterrupt:
        _stop(ranks)
        print("fullgraph: interrupted; stopped all ranks", file=sys.stderr)
        return 130
    finally:
        watch and watch.close()
        del store
