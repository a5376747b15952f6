"""Parallel layouts, each applied to an unchanged model as an ``Engine`` the trainer drives;
``build_engine(cfg, norm)`` picks this rank's."""

from fullgraph.parallel.engine import Engine, SingleEngine
from fullgraph.parallel.registry import ENGINES, build_engine

__all__ = ["ENGINES", "Engine", "SingleEngine", "build_engine"]
