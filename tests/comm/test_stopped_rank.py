"""A rank that stops answering is named, not the peer that timed out waiting for it; a rank that
fails for real is still named itself; either way the run ends within the timeout plus a few seconds
and leaves no process behind.

The ranks are this module itself (``python -m tests.comm.test_stopped_rank FOLDER MODE``, below):
a loop of one-element all-reduces on a group whose timeout is ``TIMEOUT_S``, so that a test takes
seconds, not a training run's start-up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TIMEOUT_S = 2.0
"""The ranks' communication timeout."""

REPO = Path(__file__).resolve().parents[2]


def _rank_main(folder: str, mode: str) -> int:
    """One rank: join, say it is ready (its pid in ``ready-RANK``), then all-reduce until stopped.
    ``mode`` ``raise``: rank 0 fails for real while rank 1 is busy elsewhere (a long sleep, so it
    is alive, silent and not in a collective: it is not to be blamed)."""
    import torch

    from fullgraph.comm.context import Comm, DistEnv
    from fullgraph.comm.launch import report_worker_error

    env = DistEnv.from_env()
    comm = Comm(env, timeout_s=TIMEOUT_S, device="cpu")
    try:
        comm.all_reduce_(torch.ones(1), "meta/metrics")
        Path(folder, f"ready-{env.rank}").write_text(str(os.getpid()))
        if mode == "raise":
            if env.rank == 0:
                time.sleep(0.5)
                raise RuntimeError("a real failure on rank 0")
            time.sleep(60)
        while True:
            comm.all_reduce_(torch.ones(1), "meta/metrics")
            time.sleep(0.01)
    except Exception as e:
        report_worker_error(e, input_error=False)
        raise


def _alive(pid: int) -> bool:
    """Whether the process is there and not a zombie (``/proc/PID/stat``)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class _Run:
    """The launcher in a process of its own, its ranks running this module; ``close`` kills whatever
    is left, stopped ranks included, whatever the test's outcome."""

    def __init__(self, tmp_path: Path, nprocs: int, mode: str):
        code = ("import sys; from fullgraph.comm.launch import launch_local; "
                f"sys.exit(launch_local([{str(tmp_path)!r}, {mode!r}], {nprocs}, threads=1, "
                f"log_dir={str(tmp_path / 'logs')!r}, module='tests.comm.test_stopped_rank', timeout_s=60))")
        env = os.environ | {"PYTHONWARNINGS": "ignore", "FULLGRAPH_DEVICE": "cpu"}
        self.launcher = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True)
        self.pids: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while len(self.pids) < nprocs:  # every rank in the loop
            assert time.monotonic() < deadline and self.launcher.poll() is None, self.launcher.stderr.read()
            for f in tmp_path.glob("ready-*"):
                if f.read_text():
                    self.pids[int(f.name.split("-")[1])] = int(f.read_text())
            time.sleep(0.05)

    def wait(self, timeout: float = 60) -> tuple[int, float, str]:
        """The launcher's exit status, the seconds it took from now, and its last stderr line."""
        t0 = time.monotonic()
        rc = self.launcher.wait(timeout=timeout)
        lines = self.launcher.stderr.read().strip().splitlines()
        return rc, time.monotonic() - t0, lines[-1] if lines else ""

    def close(self) -> None:
        if self.launcher.poll() is None:
            self.launcher.kill()
            self.launcher.wait()
        for pid in self.pids.values():
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass


@pytest.fixture
def run(tmp_path):
    runs = []

    def start(nprocs: int, mode: str = "loop") -> _Run:
        runs.append(_Run(tmp_path, nprocs, mode))
        return runs[-1]

    yield start
    for r in runs:
        r.close()


@pytest.mark.parametrize("nprocs,victim", [(2, 1), (2, 0), (3, 2)], ids=["rank 1 of 2", "rank 0 of 2", "rank 2 of 3"])
def test_the_stopped_rank_is_named_and_killed_within_the_timeout_and_a_few_seconds(run, nprocs, victim):
    """Its peers time out (gloo's message names no peer); the launcher names the rank that is still
    there having reported nothing, in the kernel's stopped state. SIGTERM alone would wait for a
    SIGCONT: the run used to end only after the launcher's 5-second grace and a SIGKILL."""
    r = run(nprocs)
    os.kill(r.pids[victim], signal.SIGSTOP)
    rc, elapsed, line = r.wait()
    assert rc == 1, line
    assert f"rank {victim} of {nprocs} stopped answering (state: stopped by a signal) — rank " in line, line
    assert "timed out waiting for it: RuntimeError: Timed out waiting 2000ms" in line, line
    assert elapsed < TIMEOUT_S + 5, elapsed
    assert not any(_alive(pid) for pid in r.pids.values())


def test_a_real_failure_is_named_though_a_peer_is_silent(run):
    """Rank 0 fails for real while rank 1 is alive and reports nothing (busy, not in a collective):
    only a communication timeout points away from the rank that raised it, so rank 0 is named."""
    r = run(2, "raise")
    rc, elapsed, line = r.wait()
    assert rc == 1 and "rank 0 of 2 failed: RuntimeError: a real failure on rank 0" in line, line
    assert "stopped answering" not in line and elapsed < 10, elapsed
    assert not any(_alive(pid) for pid in r.pids.values())


if __name__ == "__main__":
    sys.exit(_rank_main(*sys.argv[1:]))
