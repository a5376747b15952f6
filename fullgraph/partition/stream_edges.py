"""Edge data of a version-3 folder (``edge_weight.npy``, ``edge_attr.npy``, ``edge_type.npy``) as the
streaming partition writer (:mod:`.stream_store`) puts it into the parts.

The parts get it as the in-memory writer puts it (``Part.edata``: each local entry's global edge id,
its position in ``indices.npy``, and its data, in the local CSR's order): :class:`_PartEdges` reads
a part's rows' data from the edge files by position in the same pass that reads the rows, and
follows the entries through the sort of each row by local column id. With weights the parts'
``degree`` is the float32 weighted in-degree, summed once for every node in the checking pass
(:mod:`.stream_check`) by :func:`_row_weight_sums`: each row's weights in float64, in entry order,
the bits of ``ops.adjacency.weighted_in_degree`` on the loaded graph.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.ops.edge_data import EdgeData
from fullgraph.partition.stream_folder import _Folder


def _row_weight_sums(src: _Folder, a: int, rows: np.ndarray, r0: int, r1: int) -> np.ndarray:
    """The weighted in-degrees (float64) of the whole rows ``r0..r1-1``, whose entries (row ids
    ``rows``) start at position ``a``: each row's weights summed in entry order."""
    w = src.read(src.edge_file("weight"), a, a + rows.size).astype(np.float64)
    return np.bincount(rows - r0, weights=w, minlength=r1 - r0)


class _PartEdges:
    """The edge data of one part's rows, read from the folder's edge files by the entries' global
    positions while its structure is (:func:`_part_rows`): in row order, then put in the local CSR's
    order (:meth:`edata`), with the entries' global ids, as ``Graph.edge_data().take(eid)`` gives them."""

    def __init__(self, src: _Folder):
        self.src = src

    def start(self, count: int) -> None:
        src = self.src
        self.pos = np.empty(count, dtype=np.int64)
        self.data = {k: np.empty((count, *src.shape(src.edge_file(k))[1:]), dtype=src.dtype(src.edge_file(k)))
                     for k in src.kinds}

    def read(self, a: int, take: np.ndarray, e0: int, e1: int) -> None:
        """Entries ``a + take`` (a block's selected rows, ``a`` its first entry's position) into ``e0..e1``."""
        self.pos[e0:e1] = take
        self.pos[e0:e1] += a
        if not take.size:
            return
        lo, hi = int(take[0]), int(take[-1]) + 1  # ascending: the selected rows' span of the block
        for kind, out in self.data.items():
            out[e0:e1] = self.src.read(self.src.edge_file(kind), a + lo, a + hi)[take - lo]

    def edata(self, perm: np.ndarray) -> EdgeData:
        pick = lambda a: torch.from_numpy(a[perm]) if perm.size else torch.empty(  # noqa: E731
            (0, *a.shape[1:]), dtype=torch.from_numpy(a).dtype)
        edata = EdgeData(pick(self.pos), **{k: pick(v) for k, v in self.data.items()},
                         num_relations=self.src.relations)
        del self.pos, self.data
        return edata
