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
* ``random``: a balanced uniform random assignment: the labels ``0..P-1`` repeated in nearly equal
  runs, shuffled by a seeded permutation.
* ``contiguous``: node ids cut into ``P`` contiguous, nearly equal ranges.
* ``permuted`` (MG-GCN §5.2): contiguous ranges of a seeded random permutation of the node ids. The
  partition book lists inner nodes by global id, so this is distributed exactly like ``random``
  (a different draw for the same seed); it exists because the paper's algebraic layouts describe
  their split this way, and :func:`random_permutation` gives them the permutation itself.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fullgraph.data.graph import Graph
from fullgraph.data.preprocess import is_standard_structure
from fullgraph.errors import InputError

__all__ = ["METHODS", "WEIGHTS", "partition_nodes", "metis_csr", "random_permutation", "check_node_part"]

METHODS = ("metis", "random", "contiguous", "permuted")
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


def _metis(graph: Graph, parts: int, seed: int, weight: str) -> torch.Tensor:
    vweights = graph.in_degrees().numpy() + 1 if weight == "degree" else None
    return metis_csr(graph.indptr, graph.indices, parts, seed, vweights=vweights, name=graph.name)


def metis_csr(indptr: torch.Tensor, indices: torch.Tensor, parts: int, seed: int = 0,
              vweights: np.ndarray | None = None, name: str = "graph", simple: bool | None = None) -> torch.Tensor:
    """METIS k-way (volume objective) labels of the square graph ``(indptr, indices)``, edge
    directions ignored; every part non-empty or an ``InputError``.

    ``simple``: whether the CSR is already symmetric with sorted, repeat-free rows and no self
    loops (the loaders' standard structure); ``None`` checks it
    (:func:`fullgraph.data.preprocess.is_standard_structure`: exact, one in-place sort of ``E``
    int64 keys). Such a CSR goes to METIS as it is: no copy when its dtype is METIS's ``idx_t``
    (``pymetis.zero_copy_dtype()``, int64 in the pymetis wheels), one ``astype`` otherwise. Any
    other CSR is first made ``A ∪ Aᵀ`` without self loops with SciPy. Both give METIS the same
    arrays for the same graph, so the same parts.
    """
    import pymetis

    n = indptr.numel() - 1
    idx = pymetis.zero_copy_dtype() if callable(getattr(pymetis, "zero_copy_dtype", None)) else np.int64
    if simple is None:
        simple = is_standard_structure(indptr, indices)
    if simple:
        xadj = np.asarray(indptr.numpy(), dtype=idx)
        adjncy = np.asarray(indices.numpy(), dtype=idx)
    else:
        a = sp.csr_matrix((np.ones(indices.numel(), dtype=np.int8), indices.numpy(), indptr.numpy()),
                          shape=(n, n))
        s = (a + a.T).tocsr()
        del a
        s.setdiag(0)
        s.eliminate_zeros()
        s.sort_indices()
        xadj, adjncy = s.indptr.astype(idx), s.indices.astype(idx)
        del s
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
    node_part = torch.as_tensor(np.asarray(result.vertex_part, dtype=np.int64))
    sizes = torch.bincount(node_part, minlength=parts)
    empty = torch.nonzero(sizes == 0).flatten().tolist()
    if empty:
        raise InputError(
            f"METIS left {len(empty)} of {parts} parts empty for graph {name!r} with {n} nodes "
            f"(parts {empty[:10]}); use fewer parts or method 'random'/'contiguous'")
    return node_part


def partition_nodes(graph: Graph, parts: int, method: str = "metis", seed: int = 0,
                    weight: str = "nodes") -> torch.Tensor:
    """Assign every node of ``graph`` to one of ``parts`` parts.

    Args:
        graph: the global graph.
        parts: number of parts, ``1 <= parts <= N``.
        method: ``metis``, ``random``, ``contiguous`` or ``permuted`` (see the module docstring).
        seed: seed of the random choices (METIS's seed, the permutations).
        weight: what METIS balances: ``nodes`` (node count) or ``degree`` (degree + 1 per node).
            The other methods always balance node counts.

    Returns:
        ``node_part``: int64 ``[N]``, every part non-empty.

    Raises:
        InputError: bad ``parts``, ``method`` or ``weight``, or METIS left a part empty.
    """
    if method not in METHODS:
        raise InputError(f"unknown partition method {method!r} (expected one of: {', '.join(METHODS)})")
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
        node_part = _metis(graph, parts, seed, weight)
    elif method == "contiguous":
        node_part = _contiguous_labels(n, parts)
    elif method == "random":
        node_part = _contiguous_labels(n, parts)[random_permutation(n, seed)]
    else:  # permuted: node perm[j] goes to the part of position j
        node_part = torch.empty(n, dtype=torch.int64)
        node_part[random_permutation(n, seed)] = _contiguous_labels(n, parts)
    return check_node_part(node_part, n, parts)
