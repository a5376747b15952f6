"""Running ``fullgraph train`` as the real command and reading back the run folder it writes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from .paths import REPO


def read_summary(out: Path) -> dict | None:
    """``OUT/summary.json`` of a finished run, or None where the run wrote none."""
    path = Path(out) / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


def read_metrics(out: Path) -> list[dict]:
    """The per-epoch records of ``OUT/metrics.jsonl`` (none where the file is missing)."""
    path = Path(out) / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_and_read(cmd: list[str], out: Path, *, timeout: float | None = None, env: dict | None = None) -> dict:
    """Run ``cmd`` (from the repository root) and read the run folder ``out`` it writes.

    Returns ``{"summary", "metrics", "wall_s"}``, or, when the command failed or wrote no summary,
    ``{"error": "exit status N: <last lines>", "returncode", "output_tail", "wall_s"}``: a failed run
    is a row of the benchmark, not the end of it. A command past ``timeout`` raises
    ``subprocess.TimeoutExpired``, as ``subprocess.run`` does: the caller decides what that means."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)
    wall = time.perf_counter() - t0
    summary = read_summary(out)
    if proc.returncode != 0 or summary is None:
        text = (proc.stdout + proc.stderr).strip()
        return {"error": f"exit status {proc.returncode}: " + " | ".join(text.splitlines()[-5:]),
                "returncode": proc.returncode, "output_tail": text[-2000:], "wall_s": wall}
    return {"summary": summary, "metrics": read_metrics(out), "wall_s": wall}


def train(argv: list[str], out: Path, **kw) -> dict:
    """``python -m fullgraph train ARGV --out OUT``, the real command, read back by :func:`run_and_read`
    (``timeout`` and ``env`` pass through). It runs from the repository root, so a relative path in
    ARGV (a ``--root`` given on the caller's command line) must be made absolute first."""
    return run_and_read([sys.executable, "-m", "fullgraph", "train", *argv, "--out", str(out)], out, **kw)
