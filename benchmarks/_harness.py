"""What the benchmark scripts share: the machine header, running ``fullgraph train`` and reading
back what it wrote, writing the JSON result (and, for the scripts with acceptance checks, the
verdicts and exit status with it), and the /proc readings several of them take.

Every script imports this module by name (``from _harness import ...``): a script run as
``python benchmarks/NAME.py`` has its own folder on ``sys.path``, and so do the worker processes
the scripts start with ``sys.executable __file__``. Only the standard library is imported at the
top, because some scripts measure their own process's memory (single_process.py, prep_memory.py)
and one must not hold torch at all (scale.py's driver: it leaves the machine's memory to the runs
it measures); torch and the others are imported inside the functions that report on them.

Run as a script, it prints :func:`environment` as JSON: that is how ``environment(isolated=True)``
reads torch's numbers without importing torch into the caller.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GIB = 2**30


# ----------------------------------------------------------------------------- machine and versions
def _cpu_model() -> str:
    """The CPU's marketing name where Linux tells it, else the architecture (``x86_64``)."""
    fallback = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), fallback)
    except OSError:
        return fallback


def _memory_total() -> int | None:
    """Physical memory in bytes: ``MemTotal``, else the page count, else unknown."""
    try:
        with open("/proc/meminfo") as f:
            return int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1]) * 1024
    except (OSError, StopIteration):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return None


def _machine_without_torch() -> dict:
    return {"host": platform.node(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpu": _cpu_model(),
            "cores": os.cpu_count(), "memory_bytes": _memory_total()}


def machine() -> dict:
    """Where the numbers were taken. ``torch_threads_default`` is what torch uses in this process
    now (a script that sets its threads before calling gets its own setting)."""
    import torch

    return _machine_without_torch() | {"torch_threads_default": torch.get_num_threads()}


def versions() -> dict:
    """The versions a result depends on; ``torch_geometric`` only where it is installed (the PyG
    comparisons need it, the other benchmarks do not)."""
    import numpy
    import scipy
    import torch

    import fullgraph

    out = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import torch_geometric

        out["torch_geometric"] = torch_geometric.__version__
    except ImportError:
        pass
    return out | {"fullgraph": fullgraph.__version__, "numpy": numpy.__version__, "scipy": scipy.__version__}


def environment(isolated: bool = False) -> dict:
    """``{"machine": machine(), "versions": versions()}``. With ``isolated`` they are taken in a
    child interpreter, so that the caller never imports torch; should that child fail, the values
    it would have given read ``"?"`` rather than stopping the benchmark."""
    if not isolated:
        return {"machine": machine(), "versions": versions()}
    probe = subprocess.run([sys.executable, __file__], cwd=REPO, capture_output=True, text=True)
    try:
        return json.loads(probe.stdout)
    except ValueError:
        return {"machine": _machine_without_torch() | {"torch_threads_default": "?"},
                "versions": {"python": platform.python_version(), "torch": "?", "numpy": "?"}}


def print_header(env: dict | None = None, *, threads: int | None = None, machine_extra=(), versions_extra=(),
                 prefix: str = "") -> list[str]:
    """Print the two header lines every benchmark starts with, and return them (scale.py keeps
    them in its JSON and README blocks).

    ``threads`` replaces the torch threads of this process where the runs use another number;
    ``machine_extra`` / ``versions_extra`` append what only one script knows (the load, the data
    root, the git commit, pymetis); ``prefix`` starts each line (``"* "`` in a Markdown report)."""
    env = env or environment()
    m, v = env["machine"], env["versions"]
    mem = f", {m['memory_bytes'] / GIB:.1f} GiB RAM" if m.get("memory_bytes") else ""
    fields = [m["platform"], m["cpu"], f"{m['cores']} cores{mem}", f"host {m['host']}",
              f"torch threads {threads if threads is not None else m['torch_threads_default']}", *machine_extra]
    lines = [f"{prefix}machine:  " + "; ".join(fields),
             f"{prefix}versions: " + ", ".join([*(f"{k} {val}" for k, val in v.items()), *versions_extra])]
    for line in lines:
        print(line, flush=True)
    return lines


# ----------------------------------------------------------------------------- running fullgraph train
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


# ----------------------------------------------------------------------------- JSON out
def write_json(path, data, *, indent: int = 1) -> Path:
    """Write ``data`` to ``path`` (folders made as needed; values JSON lacks, such as paths, as
    strings), so that a result is never lost to a missing ``runs/`` folder or one odd value."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent, default=str) + "\n")
    return path


def finish(result: dict, path, failed: int, started: float, *, indent: int = 1) -> int:
    """The end of a benchmark with acceptance checks: print each check's verdict, record the failed
    runs and the total time, write the JSON, and return the exit status (1 when a run failed or a
    check did not pass), so that a script's result and its exit status always agree."""
    print("\n=== checks ===")
    for c in result["checks"]:
        value = f"{c['value']:.3f}" if isinstance(c["value"], (int, float)) else c["value"]
        extra = " (timed under contention)" if c.get("contended") else ""
        print(f"  {'PASS' if c['pass'] else 'FAIL'}  {c['check']}: {value}{extra}")
    result["failed_runs"] = failed
    result["total_s"] = time.perf_counter() - started
    out = write_json(path, result, indent=indent)
    print(f"\n{failed} failed runs; total {result['total_s'] / 60:.1f} min; wrote {out}")
    return 1 if failed or not all(c["pass"] for c in result["checks"]) else 0


# ----------------------------------------------------------------------------- /proc readings
def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"expected a {field} line in /proc/self/status")


def rss_bytes() -> int:
    """This process's resident set now (``VmRSS``)."""
    return _status_kib("VmRSS") * 1024


def hwm_bytes() -> int:
    """The kernel's RSS high-water mark (``VmHWM``) of this process."""
    return _status_kib("VmHWM") * 1024


def reset_hwm() -> bool:
    """Set the high-water mark to the current RSS (``clear_refs`` 5, Linux >= 4.0), so that a peak
    read later is the work's own; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


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


if __name__ == "__main__":
    print(json.dumps(environment()))
