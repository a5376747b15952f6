"""Node partitioners: which part owns each node.

Every method returns ``node_part``, an int64 tensor ``[N]`` with values in ``0..parts-1`` in which
every part is non-empty. Results are deterministic for a given graph, ``parts`` and ``seed``.

* ``metis``: METIS k-way partitioning (``pymetis``) with the **communication-volume** objective
  (``objtype=VOL``), as BNS-GCN §3.2 prescribes: the total volume METIS minimizes is the number of
  (node, foreign part) adjacencies, i.e. Σ|halo| — exactly what graph-parallel training sends per
  layer. Parts are balanced by node count (``weight="nodes"``) or by degree + 1, the number of
  entries in a node's row of Â (``weight="degree"``), with METIS's default 3% imbalance tolerance.
  METIS reads an undirected graph, so it is given ``A ∪ Aᵀ`` without self loops: the graph's own
  arrays, with no copy, when it already is that (the loaders' standard structure, checked
  exactly), else a symmetrized copy. The seed goes to METIS's own ``seed`` option. METIS's own
  memory is the bulk of partitioning's: it keeps every level of its coarsening, and on power-law
  graphs coarsening removes few edges per level (R-MAT: about 110-150 bytes per directed edge with
  METIS's 64-bit ``idx_t``, measured by ``benchmarks/prep_memory.py``).

  ``sample`` < 1 bounds that memory: METIS then sees a uniform sample of the undirected edges, each
  kept with probability ``sample`` (:func:`sample_edges`), and its memory shrinks in proportion.
  Uniform sampling keeps every cut's size in expectation, scaled by ``sample`` (Karger's sampling
  theorem bounds the deviation for all cuts at once when every cut is large), so the partition that
  minimizes the sampled graph's volume is close to one that minimizes the full graph's; the parts
  are built, and their halos counted, on the full graph. Measured on R-MAT (scale 20, 10^7 edges,
  P = 4): α = Σ halo / N is 0.384 with every edge (METIS 33 s), 0.390 at q = 0.5 (10 s), 0.483 at
  0.25 (4.6 s) and 0.589 at 0.1, against 0.830 for ``random``; balanced by degree the cut suffers
  more (0.565 with every edge, 0.777 at 0.2). The balance (node count or full degree) is kept: it
  is counted on the nodes, not the edges.
* ``random``: a balanced uniform random assignment: the labels ``0..P-1`` repeated in nearly equal
  runs, shuffled by a seeded permutation.
* ``contiguous``: node ids cut into ``P`` contiguous, nearly equal ranges.
* ``permuted`` (MG-GCN §5.2): contiguous ranges of a seeded random permutation of the node ids. The
  partition book lists inner nodes by global id, so this is distributed exactly like ``random``
  (a different draw for the same seed); it exists because the paper's algebraic layouts describe
  their split this way, and :func:`random_permutation` gives them the permutation itself.
* ``fennel``: the streaming partitioner of :mod:`fullgraph.partition.fennel` (FENNEL restreamed
  from label propagation's clusters), for graphs METIS cannot hold: its memory is a few bytes per
  node, whatever the edges. Balanced by node count or by degree + 1 within its slack (5%), not to
  one node.

A typed graph (``graph.node_types``: ids contiguous per type) is balanced per node type as well, as
DGL's ``balance_ntypes`` does, so that every rank holds its share of the labelled type (and of each
type's features). METIS's multi-constraint form (one weight per type) would do it in one run, but
``pymetis`` passes a single constraint (its ``part_graph`` sets ``ncon = 1`` and reads only the first
``N`` vertex weights), so ``metis`` and ``fennel`` cut as above and then move, per type, the fewest
nodes from the parts over :data:`~fullgraph.partition.type_balance.TYPE_TOLERANCE` of the type's mean to
the parts under it, those with the most neighbours in the new part first
(:func:`~fullgraph.partition.type_balance.balance_types`). ``contiguous`` gives part ``p`` the ``p``-th
range of every type (not whole types); ``random`` and ``permuted`` balance every type in expectation.
A graph of one type is partitioned exactly as before.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import torch

from fullgraph.data.graph import Graph
from fullgraph.data.preprocess import is_standard_structure
from fullgraph.data.formats.native_stream import CSRStream
from fullgraph.errors import InputError
from fullgraph.ops.csr import indptr_from_counts, row_ids, row_spans
from fullgraph.partition.fennel import fennel_stream
from fullgraph.partition.type_balance import balance_types

__all__ = ["METHODS", "WEIGHTS", "partition_nodes", "metis_csr", "sample_edges", "random_permutation",
           "check_node_part"]

METHODS = ("metis", "random", "contiguous", "permuted", "fennel")
WEIGHTS = ("nodes", "degree")
_METIS_OBJTYPE_VOL = 1  # METIS_OBJTYPE_VOL in metis.h


def random_permutation(num_nodes: int, seed: int) -> torch.Tensor:
    """A seeded permutation of ``0..num_nodes-1`` (int64), the same on every machine."""
    gen = torch.Generator().manual_seed(int(seed))
    return torch.randperm(num_nodes, generator=gen)


def _contiguous_labels(num_nodes: int, parts: int) -> torch.Tensor:
    """``[0,0,..,1,1,..,P-1]``: ``P`` runs whose lengths differ by at most one, none empty (P <= N)."""
    return torch.arange(num_nodes, dtype=torch.int64) * parts // num_nodes


def check_node_part(node_part, num_nodes: int, parts: int | None = None) -> torch.Tensor:
    """Validate a node → part assignment and return it as an int64 tensor.

    Raises ``InputError`` unless it is a 1-D integer tensor of length ``num_nodes`` with values in
    ``0..parts-1`` (``parts`` defaults to ``max + 1``) and every part owns at least one node.
    """
    if isinstance(node_part, np.ndarray):
        node_part = torch.from_numpy(np.ascontiguousarray(node_part))
    if not isinstance(node_part, torch.Tensor):
        raise InputError(f"expected node_part to be a tensor (got {type(node_part).__name__})")
    if node_part.dim() != 1 or node_part.numel() != num_nodes:
        raise InputError(
            f"expected node_part of shape ({num_nodes},), one part id per node (got {tuple(node_part.shape)})")
    if node_part.dtype.is_floating_point or node_part.dtype == torch.bool or node_part.is_complex():
        raise InputError(f"expected integer part ids in node_part (got dtype {node_part.dtype})")
    node_part = node_part.to(torch.int64)
    lo, hi = int(node_part.min()), int(node_part.max())
    if parts is None:
        parts = hi + 1
    if lo < 0 or hi >= parts:
        raise InputError(f"expected part ids in [0, {parts}) (got ids from {lo} to {hi})")
    sizes = torch.bincount(node_part, minlength=parts)
    empty = torch.nonzero(sizes == 0).flatten().tolist()
    if empty:
        shown = ", ".join(map(str, empty[:10])) + (" ..." if len(empty) > 10 else "")
        raise InputError(
            f"expected every one of the {parts} parts to own at least one node "
            f"(got {len(empty)} empty: part {shown})")
    return node_part


def _contiguous_typed(graph: Graph, parts: int) -> torch.Tensor:
    """``contiguous`` on a typed graph: part ``p`` gets the ``p``-th of ``P`` nearly equal ranges of
    every type (ids are contiguous per type, so plain ranges would give parts whole types). A type of
    under ``P`` nodes reaches only some parts; a graph whose every type is that small could leave a
    part empty, and gets the plain ranges."""
    counts = graph.node_types.counts
    if max(counts) >= parts:
        return torch.cat([_contiguous_labels(c, parts) for c in counts])
    return _contiguous_labels(graph.num_nodes, parts)


def _metis(graph: Graph, parts: int, seed: int, weight: str, sample: float) -> torch.Tensor:
    vweights = graph.in_degrees().numpy() + 1 if weight == "degree" else None
    return metis_csr(graph.indptr, graph.indices, parts, seed, vweights=vweights, name=graph.name, sample=sample,
                     node_types=graph.node_types)


def _fennel(graph: Graph, parts: int, seed: int, weight: str) -> torch.Tensor:
    """``fennel`` on ``graph``, then balanced per node type on a typed graph (module docstring)."""
    stream = CSRStream.of_arrays(graph.indptr, graph.indices, graph.name)
    node_part = fennel_stream(stream, parts, row_cost=1 if weight == "degree" else None, seed=seed)
    if graph.node_types is not None:

        node_part = balance_types(node_part, graph.indptr, graph.indices, graph.node_types, parts)
    return torch.from_numpy(node_part.astype(np.int64))


METIS_BYTES_PER_ENTRY = 20
"""METIS's peak memory per adjacency entry it is given, in units of its ``idx_t`` size (measured on
R-MAT graphs of 10^6-5·10^7 edges with 64-bit ``idx_t``: 143-156 bytes, i.e. ~18-20 ``idx_t``)."""

_SAMPLE_BLOCK = 1 << 22
"""Adjacency entries :func:`sample_edges` hashes at a time (its temporaries: ~40 bytes each)."""


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 (in place): a bijection whose every output bit depends on every
    input bit, so that ``mix(key) < q * 2**64`` keeps each key with probability ``q``."""
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def sample_edges(indptr: np.ndarray, indices: np.ndarray, q: float, seed: int = 0,
                 dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """A uniform sample of a symmetric CSR's undirected edges: ``(indptr, indices)`` of the graph that
    keeps each edge ``{u, v}`` with probability ``q``, in both directions or neither.

    Whether ``{u, v}`` stays is a hash of ``(min, max, seed)``, so the sample is symmetric, the same
    on every machine, and independent of the order of rows and entries. Rows stay sorted. Works
    through blocks of rows, so beside its output it holds a few temporaries of
    :data:`_SAMPLE_BLOCK` entries, never one the size of the edge list.
    """
    n = indptr.shape[0] - 1
    if not 0.0 < q <= 1.0:
        raise InputError(f"expected an edge sample rate in (0, 1] (got {q!r})")
    threshold = np.uint64(min(int(q * 2.0**64), 2**64 - 1))
    salt = _mix64(np.array([int(seed) % 2**64], dtype=np.uint64))[0]
    counts = np.zeros(n, dtype=np.int64)
    kept = []
    for r0, r1 in row_spans(indptr, _SAMPLE_BLOCK):
        cols = np.asarray(indices[int(indptr[r0]) : int(indptr[r1])], dtype=np.int64)
        rows = row_ids(indptr, r0, r1)
        key = (np.minimum(rows, cols).astype(np.uint64) * np.uint64(n) + np.maximum(rows, cols).astype(np.uint64))
        key ^= salt
        keep = _mix64(key) < threshold
        del key
        counts[r0:r1] = np.bincount(rows[keep] - r0, minlength=r1 - r0)
        kept.append(cols[keep].astype(dtype))
        del cols, rows, keep
    return indptr_from_counts(counts, dtype), (np.concatenate(kept) if kept else np.zeros(0, dtype=dtype))


def _check_metis_memory(entries: int, idx_bytes: int, sample: float, name: str) -> None:
    """Refuse, in one line, to start METIS on more edges than this machine's memory can take (it
    would be killed for lack of memory after minutes), naming the ``--metis-sample`` that fits."""
    from fullgraph.memory import available_memory_bytes

    need = entries * idx_bytes * METIS_BYTES_PER_ENTRY
    have = available_memory_bytes()
    if need <= have:
        return
    fits = math.floor(100 * sample * 0.9 * have / need) / 100
    hint = f"--metis-sample {fits:g} (METIS then sees that share of the edges)" if fits > 0 else \
        "--partitioner random"
    raise InputError(
        f"expected METIS on graph {name!r} to fit in the {have / 2**30:.1f} GiB available (got an estimate "
        f"of {need / 2**30:.1f} GiB for its {entries:,} adjacency entries, ~{idx_bytes * METIS_BYTES_PER_ENTRY} "
        f"bytes each); would fit: {hint}")


def _metis_arrays(indptr: torch.Tensor, indices: torch.Tensor, simple: bool | None, idx) -> tuple:
    """``(xadj, adjncy)`` of dtype ``idx`` that METIS reads: the CSR itself when it already is
    ``A ∪ Aᵀ`` without self loops (no copy when the dtypes agree), else that graph made with SciPy."""
    n = indptr.numel() - 1
    if simple is None:
        simple = is_standard_structure(indptr, indices)
    if simple:
        return np.asarray(indptr.numpy(), dtype=idx), np.asarray(indices.numpy(), dtype=idx)
    a = sp.csr_matrix((np.ones(indices.numel(), dtype=np.int8), indices.numpy(), indptr.numpy()), shape=(n, n))
    s = (a + a.T).tocsr()
    del a
    s.setdiag(0)
    s.eliminate_zeros()
    s.sort_indices()
    return s.indptr.astype(idx), s.indices.astype(idx)


def metis_csr(indptr: torch.Tensor, indices: torch.Tensor, parts: int, seed: int = 0,
              vweights: np.ndarray | None = None, name: str = "graph", simple: bool | None = None,
              sample: float = 1.0, node_types=None) -> torch.Tensor:
    """METIS k-way (volume objective) labels of the square graph ``(indptr, indices)``, edge
    directions ignored; every part non-empty or an ``InputError``.

    ``simple``: whether the CSR is already symmetric with sorted, repeat-free rows and no self
    loops (the loaders' standard structure); ``None`` checks it
    (:func:`fullgraph.data.preprocess.is_standard_structure`: exact, one in-place sort of ``E``
    int64 keys). Such a CSR goes to METIS as it is: no copy when its dtype is METIS's ``idx_t``
    (``pymetis.zero_copy_dtype()``, int64 in the pymetis wheels), one ``astype`` otherwise. Any
    other CSR is first made ``A ∪ Aᵀ`` without self loops with SciPy. Both give METIS the same
    arrays for the same graph, so the same parts. ``sample`` < 1: METIS sees :func:`sample_edges`
    of that graph instead (keyed by ``seed``). ``node_types``: a typed graph's ``NodeTypes``, whose
    every type is then balanced across the parts too (module docstring), by moves chosen on the
    graph METIS saw.
    """
    import pymetis

    n = indptr.numel() - 1
    idx = pymetis.zero_copy_dtype() if callable(getattr(pymetis, "zero_copy_dtype", None)) else np.int64
    xadj, adjncy = _metis_arrays(indptr, indices, simple, idx)
    if sample < 1.0:
        xadj, adjncy = sample_edges(xadj, adjncy, sample, seed, dtype=idx)
    _check_metis_memory(adjncy.size, np.dtype(idx).itemsize, sample, name)
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025.2
        graph_args = {"adjacency": pymetis.CSRAdjacency(xadj, adjncy)}
    else:
        graph_args = {"xadj": xadj, "adjncy": adjncy}
    if vweights is not None:
        vweights = np.asarray(vweights).astype(idx)
    options = pymetis.Options(seed=int(seed) % (2**31 - 1))
    obj_type = getattr(pymetis, "ObjType", None)
    options.objtype = int(obj_type.VOL) if obj_type is not None else _METIS_OBJTYPE_VOL
    # k-way (not recursive bisection): the volume objective only exists for the k-way scheme
    result = pymetis.part_graph(parts, vweights=vweights, options=options, recursive=False, **graph_args)
    node_part = np.asarray(result.vertex_part, dtype=np.int64)
    if node_types is not None:  # METIS kept the total; now each type (module docstring)

        node_part = balance_types(node_part, xadj, adjncy, node_types, parts)
    node_part = torch.as_tensor(node_part)
    sizes = torch.bincount(node_part, minlength=parts)
    empty = torch.nonzero(sizes == 0).flatten().tolist()
    if empty:
        raise InputError(
            f"METIS left {len(empty)} of {parts} parts empty for graph {name!r} with {n} nodes "
            f"(parts {empty[:10]}); use fewer parts or method 'random'/'contiguous'")
    return node_part


def partition_nodes(graph: Graph, parts: int, method: str = "metis", seed: int = 0,
                    weight: str = "nodes", sample: float = 1.0) -> torch.Tensor:
    """Assign every node of ``graph`` to one of ``parts`` parts.

    Args:
        graph: the global graph.
        parts: number of parts, ``1 <= parts <= N``.
        method: ``metis``, ``random``, ``contiguous``, ``permuted`` or ``fennel`` (see the module
            docstring).
        seed: seed of the random choices (METIS's seed, the permutations, fennel's tie-break).
        weight: what METIS and fennel balance: ``nodes`` (node count) or ``degree`` (degree + 1
            per node). The other methods always balance node counts. A typed graph's parts are
            balanced per node type as well (``metis``, ``fennel``, ``contiguous``: module docstring).
        sample: METIS sees each undirected edge with this probability (1: all of them); it bounds
            METIS's memory on big graphs (see the module docstring). Other methods ignore it.

    Returns:
        ``node_part``: int64 ``[N]``, every part non-empty.

    Raises:
        InputError: bad ``parts``, ``method`` or ``weight``, or METIS left a part empty.
    """
    if method not in METHODS:
        raise InputError(f"unknown partition method {method!r} (expected one of: {', '.join(METHODS)})")
    if isinstance(sample, bool) or not isinstance(sample, (int, float)) or not 0.0 < sample <= 1.0:
        raise InputError(f"expected a METIS edge sample rate in (0, 1] (got {sample!r})")
    if weight not in WEIGHTS:
        raise InputError(f"unknown partition weight {weight!r} (expected one of: {', '.join(WEIGHTS)})")
    if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)):
        raise InputError(f"expected an integer number of parts (got {parts!r})")
    parts = int(parts)
    n = graph.num_nodes
    if parts < 1:
        raise InputError(f"expected at least 1 part (got parts={parts})")
    if parts > n:
        raise InputError(f"expected no more parts than nodes (got parts={parts} for a graph of {n} nodes)")
    if parts == 1:
        return torch.zeros(n, dtype=torch.int64)
    if method == "metis":
        node_part = _metis(graph, parts, seed, weight, sample)
    elif method == "fennel":
        node_part = _fennel(graph, parts, seed, weight)
    elif method == "contiguous":
        node_part = _contiguous_labels(n, parts) if graph.node_types is None else _contiguous_typed(graph, parts)
    elif method == "random":
        node_part = _contiguous_labels(n, parts)[random_permutation(n, seed)]
    else:  # permuted: node perm[j] goes to the part of position j
        node_part = torch.empty(n, dtype=torch.int64)
        node_part[random_permutation(n, seed)] = _contiguous_labels(n, parts)
    return check_node_part(node_part, n, parts)
