"""Graph partitioning: who owns which node, and what each part needs to train its share.

* :func:`partition_nodes` — ``metis`` / ``random`` / ``contiguous`` / ``permuted`` / ``fennel`` node → part
  maps (``fennel``: a streaming partitioner, :mod:`fullgraph.partition.fennel`).
* :class:`PartitionBook` / :class:`Part` — inner and halo nodes, per-peer send/recv lists, local
  blocks normalized as the full graph would be.
* :func:`save_partition` / :func:`load_part` / :func:`load_meta` — the on-disk layout, one folder
  per part; :func:`cached_partition` — a node → part cache so METIS runs once per graph.
"""

from fullgraph.partition.book import NORMS, Part, PartitionBook
from fullgraph.partition.partitioners import (
    METHODS, WEIGHTS, check_node_part, partition_nodes, random_permutation,
)
from fullgraph.partition.store import (
    FORMAT_VERSION, cache_root, cached_partition, load_meta, load_part, save_partition,
)

PARTITIONERS = ("metis", *(f"metis-{w}" for w in WEIGHTS if w != "nodes"), "metis-memory", *METHODS[1:])
"""``--partitioner``: a method; or METIS with nodes weighted by degree, or by the memory each rank will
need (``balance.py``). ``fennel`` is always weighted by that memory there (``parallel/setup.py``)."""

__all__ = [
    "PARTITIONERS", "METHODS", "WEIGHTS", "NORMS", "FORMAT_VERSION", "partition_nodes", "random_permutation",
    "check_node_part",
    "Part", "PartitionBook", "save_partition", "load_part", "load_meta", "cached_partition", "cache_root",
]
