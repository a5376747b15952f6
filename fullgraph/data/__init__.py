"""Graphs: the container, the loaders, the named datasets, synthetic generators, preprocessing.

Data flows one way: files → ``Graph`` (validated once) → preprocessing → blocks for the layers.
"""

from fullgraph.data.graph import Graph

__all__ = ["Graph"]
