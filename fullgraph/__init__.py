"""fullgraph: full-graph GNN training across many processes.

The single-process path is the reference every parallel layout is checked against; see
``fullgraph.train.trainer`` for the loop and ``fullgraph.models`` for the layer stacks.
``fullgraph.train_model(model, **options)`` runs ``fullgraph train`` from a script (``fullgraph.api``).
"""

from fullgraph.api import train_model
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

__version__ = "0.1.0"
__all__ = ["Graph", "InputError", "train_model", "__version__"]
