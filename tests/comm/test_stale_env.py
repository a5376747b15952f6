"""RANK and WORLD_SIZE left in a shell (from a torchrun) make any ``fullgraph train`` a rank of a run
nobody started. It used to wait in silence for up to the set-up timeout (30 minutes); now it says
within seconds what it waits for, and gives up after the connect timeout with one line that says
how to fix it (exit status 2)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

FIX = "if this process was not started by torchrun, unset them ('unset RANK WORLD_SIZE')"


def _closed_port() -> int:
    """A port nothing listens on (the OS's free one, let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(tmp_path, stale: dict, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """``fullgraph train`` with the stale variables (nothing else of torchrun's), as the user's
    shell would start it; killed by ``timeout`` if it hangs (the test then fails)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "TORCHELASTIC_", "LOCAL_"))}
    env.pop("FULLGRAPH_ERROR_FILE", None)
    env |= {"FULLGRAPH_CACHE": str(tmp_path / "cache"), "PYTHONWARNINGS": "ignore",
            "FULLGRAPH_CONNECT_TIMEOUT": "4", **stale}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "fullgraph", "train", *args, "--epochs", "2", "--progress", "none"],
                          capture_output=True, text=True, timeout=30, env=env)
    return proc, time.monotonic() - t0


@pytest.mark.parametrize("rank,waiting", [("1", "waiting for rank 0 at 127.0.0.1:"),
                                          ("0", "waiting for rank 1 to connect to 127.0.0.1:")],
                         ids=["rank 1", "rank 0"])
def test_a_stale_rank_says_what_it_waits_for_and_gives_up(tmp_path, rank, waiting):
    """Rank 1 finds no rank 0 at MASTER_ADDR:MASTER_PORT; rank 0 (which hosts the store) finds no
    rank 1 connecting. Each says so after half the connect timeout, then fails with one line."""
    port = _closed_port()
    proc, elapsed = _train(tmp_path, {"RANK": rank, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                                      "MASTER_PORT": str(port)}, "--parallel", "graph", "--nprocs", "2")
    assert proc.returncode == 2, proc.stderr
    notices = [x for x in proc.stderr.splitlines() if x.startswith(f"fullgraph: rank {rank} of 2: {waiting}{port}")]
    assert notices and "giving up after 4 s" in notices[0] and FIX in notices[0], proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("fullgraph: error:")]
    assert len(errors) == 1 and f"127.0.0.1:{port}" in errors[0] and FIX in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and "frame #" not in proc.stderr, proc.stderr  # no torch C++ trace
    assert elapsed < 20, elapsed


@pytest.mark.parametrize("stale,words", [
    ({"RANK": "1", "WORLD_SIZE": "2"}, "expected MASTER_ADDR and MASTER_PORT"),
    ({"RANK": "one", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}, "expected whole numbers"),
    ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
     "expected 0 <= RANK < WORLD_SIZE"),
], ids=["no MASTER_ADDR", "not a number", "rank out of range"])
def test_an_incomplete_torchrun_environment_is_one_line_at_once(tmp_path, stale, words):
    proc, elapsed = _train(tmp_path, stale, "--parallel", "graph", "--nprocs", "2")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert words in lines[0] and FIX in lines[0], proc.stderr
    assert elapsed < 15, elapsed


def test_a_single_process_run_with_a_stale_environment_says_how_to_fix_it(tmp_path):
    """``fullgraph train`` (one process) refuses the world size at once; the line says why it is one."""
    proc, _ = _train(tmp_path, {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                                "MASTER_PORT": str(_closed_port())})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "WORLD_SIZE 2" in lines[0] and FIX in lines[0], proc.stderr


def test_a_wait_for_other_ranks_is_never_silent(capsys):
    """The notice of a wait: first after the given seconds, then after twice as long each time."""
    from fullgraph.comm.context import _notice

    with _notice(lambda s: f"waiting ({s:.1f} s)", 0.2):
        time.sleep(0.7)
    time.sleep(0.3)  # none after the wait ended
    err = capsys.readouterr().err.splitlines()
    assert [x[:20] for x in err] == ["fullgraph: waiting ("] * 2, err  # at 0.2 s and 0.6 s
