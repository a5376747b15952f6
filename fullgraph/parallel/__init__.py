"""Parallel layouts, each applied to an unchanged model as an ``Engine`` the trainer drives."""

from fullgraph.parallel.engine import Engine, SingleEngine

__all__ = ["Engine", "SingleEngine"]
