"""One loader per on-disk format; each returns a ``Graph`` exactly as the files describe it.

No loader symmetrizes, deduplicates or drops self loops: that is one policy, applied in one place
(:func:`fullgraph.data.datasets.preprocess`), so a loader can be checked against the raw files.
:mod:`.native` is fullgraph's own memory-mapped folder, the one format here that is also written.
"""

from fullgraph.data.formats.edgelist import load_edgelist
from fullgraph.data.formats.graphsaint import load_graphsaint
from fullgraph.data.formats.heco import load_heco
from fullgraph.data.formats.native import write_native
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.formats.npz_hetero import load_npz_hetero
from fullgraph.data.formats.npz_shchur import load_npz_shchur
from fullgraph.data.formats.ogb import load_ogb
from fullgraph.data.formats.planetoid import load_planetoid

__all__ = [
    "load_edgelist", "load_graphsaint", "load_heco", "load_native", "load_npz_hetero", "load_npz_shchur", "load_ogb",
    "load_planetoid", "write_native",
]
