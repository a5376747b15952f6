"""fullgraph: full-graph GNN training across many processes.

The single-process path is the reference every parallel layout is checked against; see
``fullgraph.train.trainer`` for the loop and ``fullgraph.models`` for the layer stacks.
"""

from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

__version__ = "0.1.0"
__all__ = ["Graph", "InputError", "__version__"]
