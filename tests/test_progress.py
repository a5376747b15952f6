"""Progress of a multi-process run (issue 36 §2): the launcher draws one bar on the terminal, at the
slowest rank's epoch, with rank 0's loss and validation metric; ``auto`` picks it on a terminal."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios

from fullgraph.progress import RankProgress


def on_a_terminal(*args, timeout=240) -> tuple[int, str]:
    """``fullgraph ARGS`` with a pseudo-terminal (120 columns) for its stdout and stderr."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "fullgraph", *args], stdin=slave, stdout=slave, stderr=slave,
                            close_fds=True)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 4096)
            except OSError:  # the terminal's other end is gone: everything was read
                break
            out += data
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=timeout), out.decode(errors="replace")


def test_the_launcher_draws_one_bar_of_every_rank(tmp_path):
    code, out = on_a_terminal("train", "--parallel", "graph", "--nprocs", "2", "--epochs", "6", "--eval-every", "2",
                              "--out", str(tmp_path / "run"))
    assert code == 0, out
    bars = [seg for seg in out.replace("\n", "\r").split("\r") if seg.startswith("train (2 processes)")]
    assert bars and "6/6" in bars[-1] and "loss=" in bars[-1] and "val=" in bars[-1], out
    assert "graph, 2 processes" in out and "gcn, 2 layers: test accuracy" in out  # both counts named


def test_the_bar_stands_at_the_slowest_ranks_epoch(tmp_path):
    watch = RankProgress(tmp_path, 3, total=10)
    try:
        for rank, epoch in ((0, 5), (1, 3)):
            (tmp_path / f"rank-{rank}.progress.json").write_text(json.dumps({"epoch": epoch, "loss": "0.5"}))
        watch.poll()
        assert watch.bar.n == 0  # rank 2 has written nothing yet
        (tmp_path / "rank-2.progress.json").write_text(json.dumps({"epoch": 4, "loss": "0.7"}))
        watch.poll()
        assert watch.bar.n == 3 and watch.bar.postfix == "loss=0.5"  # rank 1's epoch, rank 0's loss
        assert watch.env(2) == {"FULLGRAPH_PROGRESS_FILE": str(tmp_path / "rank-2.progress.json")}
    finally:
        watch.close()


SCRIPT = """
import json, logging, sys
import fullgraph
{setup}
seen = []
fullgraph.train_model("gcn", epochs=4, eval_every=2, progress="lines", callbacks=[lambda r: seen.append(r)])
print("CALLBACKS", json.dumps([[r["epoch"], "loss" in r, "val_metric" in r, r["lr"]] for r in seen]))
"""


def python(setup: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(setup=setup)], capture_output=True, text=True,
                          timeout=240)


def test_the_python_api_prints_like_the_cli_and_calls_back_each_epoch():
    run = python()
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert any(line.startswith("Graph(name='synthetic'") and "model gcn, 2 layers" in line for line in lines), run.stdout
    assert sum(line.startswith("epoch ") for line in lines) >= 2, run.stdout  # progress="lines", unconfigured
    assert lines[-1] == 'CALLBACKS [[1, true, false, 0.01], [2, true, true, 0.01], [3, true, false, 0.01], ' \
                        '[4, true, true, 0.01]]'
    # a caller that configured logging gets the records where it said, and nothing on stdout
    run = python('logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="MINE %(message)s")')
    assert run.returncode == 0 and "MINE epoch " in run.stderr, run.stderr
    assert not any(line.startswith("epoch ") for line in run.stdout.splitlines()), run.stdout
