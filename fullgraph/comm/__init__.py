"""Communication: the mesh of processes, the process group and its ledger, halo exchange and the local
launcher. Every byte a layout moves goes through ``Comm`` (``context.py``), so the ledger is complete."""

from fullgraph.comm.ledger import Ledger
from fullgraph.comm.mesh import Mesh

__all__ = ["Ledger", "Mesh"]
