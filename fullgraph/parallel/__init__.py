"""Parallel layouts, each applied to an unchanged model as an ``Engine`` the trainer drives;
``build_engine(cfg, norm)`` picks this rank's."""

from fullgraph.parallel.engine import Engine, SingleEngine
from fullgraph.parallel.registry import LAYOUTS, Layout, build_engine, layout_of

__all__ = ["LAYOUTS", "Layout", "Engine", "SingleEngine", "build_engine", "layout_of"]
