"""Communication: the layout, the process group, the ledger, halo exchange and the local launcher."""

from fullgraph.comm.layout import Layout
from fullgraph.comm.ledger import Ledger

__all__ = ["Layout", "Ledger"]
