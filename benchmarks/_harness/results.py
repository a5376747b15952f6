"""Writing a benchmark's JSON result, and, for the scripts with acceptance checks, printing the
verdicts and turning them into the exit status."""

from __future__ import annotations

import json
import time
from pathlib import Path


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
