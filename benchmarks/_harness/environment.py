"""The machine and the versions a result was taken on, and the two header lines every benchmark
prints first.

torch, numpy and fullgraph are imported inside the functions: scale.py's driver must not hold
torch (it leaves the machine's memory to the runs it measures), so it asks for
``environment(isolated=True)``, which runs this module in a child interpreter
(``python -m _harness.environment`` prints :func:`environment` as JSON).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

from .paths import BENCHMARKS, GIB


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
    probe = subprocess.run([sys.executable, "-m", "_harness.environment"], cwd=BENCHMARKS,
                           capture_output=True, text=True)
    try:
        return json.loads(probe.stdout)
    except ValueError:
        return {"machine": _machine_without_torch() | {"torch_threads_default": "?"},
                "versions": {"python": platform.python_version(), "torch": "?", "numpy": "?"}}


def print_header(env: dict | None = None, *, threads: int | None = None, machine_extra=(), versions_extra=(),
                 prefix: str = "") -> list[str]:
    """Print the two header lines every benchmark starts with, and return them (scale.py keeps
    them in its JSON and its Markdown blocks).

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


def start_report(title: str, threads: int) -> tuple[float, str, dict, list[str]]:
    """Open a comparison's output: ``# TITLE (date)``, then the header with ``threads`` and the load as it
    starts; returns the start (``time.perf_counter``), the date, the environment and the header lines."""
    started, env = time.perf_counter(), environment()
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {title} ({now})")
    header = print_header(env, threads=threads, machine_extra=[f"1-min load {os.getloadavg()[0]:.2f} at start"])
    return started, now, env, header


if __name__ == "__main__":
    print(json.dumps(environment()))
