"""Where the checkout is, and the unit the headers print memory in."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"
GIB = 2**30
