"""``fullgraph convert`` of an OGB folder: its layout streamed into a native folder in bounded memory.

The edges go through :func:`~fullgraph.data.formats.native_edges.write_native_edges`'s on-disk
sort (symmetrized, deduplicated, self loops dropped: what loading would make of them), features
and labels row block by row block, and the splits as three bool arrays of N. Memory: the writer's
two int64 arrays of N (row counts, then row pointers), the three masks, and a few blocks of
``block_bytes``, so about ``19 N`` bytes plus a constant, whatever E and F
(``benchmarks/convert_memory.py`` measures it). Disk: the spill of the edges in both directions
(``8`` or ``16`` bytes per stored edge) beside the folder being written.

Edge data (ogbn-proteins' ``edge-feat.csv.gz``, an ``edge_weight.csv.gz``: :mod:`.ogb`) goes
through the same sort with its edges, read block by block beside the edge list, and is stored as
``edge_attr.npy`` / ``edge_weight.npy``: the spill grows by a byte and the data's own bytes per
stored direction of an edge (33 for proteins' 8 features), the memory by none per edge.
``open_ogb(folder, edge_data=False)`` converts without it, as earlier versions did.
"""

from __future__ import annotations

import os

from fullgraph.data.formats.native import BLOCK_BYTES
from fullgraph.data.formats.native_edges import Rows, write_native_edges
from fullgraph.data.formats.ogb_source import OgbSource

__all__ = ["convert_ogb"]


def convert_ogb(src: OgbSource, out: str | os.PathLike, *, source: str | None = None,
                block_bytes: int = BLOCK_BYTES) -> dict:
    """Write the OGB dataset ``src`` (:func:`~fullgraph.data.formats.ogb.open_ogb`) as a native folder
    at ``out``; returns what :func:`~fullgraph.data.formats.native.write_native` returns."""
    masks = src.masks()
    num_classes = src.label_summary(masks)  # one pass: the class count, and no unlabelled node in a split
    n = src.num_nodes
    y_shape = (n, src.label_columns) if src.multilabel else (n,)
    extra = {"symmetrized": True, "ogb_layout": src.layout, "split_scheme": src.scheme, **src.notes}
    if src.metric is not None:
        extra["metric"] = src.metric
    return write_native_edges(
        out, n, src.edges(), x=Rows((n, src.num_features), src.features, "node features", finite=True),
        y=Rows(y_shape, src.labels, "node labels"), name=src.name, num_classes=num_classes,
        source=source or f"OGB {src.layout} layout in {src.folder}", block_bytes=block_bytes, extra=extra, **masks)
