"""What each rank must hold (:func:`estimate_peak_bytes`, :func:`check_memory`): the peak resident
memory (RSS) of one training process, from its rank's sizes, before anything is launched. It is the
sum of

* the process itself: Python, PyTorch and fullgraph imported, thread pools and first-use kernels
  started (:data:`PROCESS_BYTES`, measured; a graph-parallel rank measures the same);
* the graph data it holds: structure, features, labels, the normalized block, its int32 kernel
  indices and, where backward needs it, its transpose (counted array by array);
* weights and the kept best weights (2 copies), and during a step their gradients and Adam's two
  moments (3 more);
* activations: what the forward pass keeps for backward (:func:`kept_activation_bytes`, counted
  from what each layer's autograd saves: within 2% of the live heap for every model, one process
  and one part, with and without recompute), plus the temporaries of the peak moment of a step
  (each model spec's ``MemoryModel.transient``), times the allocator's overhead.

That overhead is glibc's. Allocations from its mmap threshold up are mapped on their own and unmapped when
freed; smaller ones come from the heap, where the tensors kept for backward sit between freed temporaries that
later allocations cannot all reuse, so that the heap grows well past the live bytes. ``fullgraph train
--release-memory`` fixes the threshold at 1 MiB (``fullgraph.memory.return_freed_memory``), where activations
of any real graph are mmapped and the peak RSS is within ~10% of the live bytes (:data:`MMAP_OVERHEAD`). A
library caller keeps glibc's dynamic threshold, which rises with the first freed blocks up to 32 MiB:
activations under that come from the heap, and the peak RSS is 1.6-5x the live bytes depending on the model's
order of allocations (``MemoryModel.heap_overhead``, measured per model; recompute's many short-lived
temporaries fare worst there). ``mmap_threshold`` selects the case; by default the estimate asks this process.

Calibration (torch 2.13 CPU, glibc 2.36; planted-partition graphs of 20k and 80k nodes, Cora,
CiteSeer, Coauthor-CS/Physics, Amazon-Computers, Tolokers, Squirrel; every model with and without
recompute, 2-64 layers, hidden 16-256): estimate / measured peak RSS 0.87-1.15 with the threshold
fixed (one process, and each rank of graph parallelism with P = 2), 0.77-1.31 with glibc's dynamic
threshold. The estimate is of host memory; on a GPU the activations live in device memory instead.
"""

from __future__ import annotations

import math

import torch

from fullgraph.models import model_spec

__all__ = ["estimate_peak_bytes", "device_peak_bytes", "tensor_peak_bytes", "partition_peak", "single_peak", "spmm_peak", "tensor_peak",
           "memory_breakdown", "model_memory_options", "variable_bytes", "graph_memory_stats",
           "part_memory_stats", "partition_memory_stats", "kept_activation_bytes"]


def _memory_model(model: str, features: int, classes: int, sizes: dict):
    """``model``'s memory model: its spec's, or for a model without one (a user's builder) the one
    measured on probe blocks for these widths and options (``fullgraph.plan.measured``)."""
    spec = model_spec(model)
    if spec.memory is not None:
        return spec.memory
    from fullgraph.plan.measured import measured_memory

    options = sizes["model_args"] or {} if not spec.builtin else {
        "layers": sizes["layers"], "hidden": sizes["hidden"], "heads": sizes["heads"], "dropout": 0.5,
        "gcn_kernel": sizes["gcn_kernel"]}  # a built-in model without a memory model: dropout taken as on
    if spec.builtin and spec.reads_node_types:  # built for the graph's types, with its own options (R-GCN)
        options |= (sizes["model_args"] or {}) | {"node_types": sizes.get("node_types")}
    elif not spec.builtin and sizes.get("node_types") is not None:  # a builder on a typed graph: handed its types
        from fullgraph.models.user import typed_args

        options = dict(options) | {"_typed": typed_args(sizes["node_types"], sizes["hidden"])}
    return measured_memory(model, options, features, classes, sizes["recompute"], spec.heap_overhead)


def kept_activation_bytes(model: str, *, nodes: int, halo: int, block_nnz: int, features: int, classes: int,
                          layers: int, hidden: int, heads: int = 8, feature_nnz: int | None = None,
                          recompute: bool = False, gcn_kernel: str = "fused", model_args: dict | None = None,
                          node_types: dict | None = None, recompute_segment: int = 0) -> int:
    """Bytes a training forward pass leaves alive for backward (dropout on), beyond the graph data.

    ``nodes`` dst rows (n), ``halo`` extra src rows (m = n + halo: a layer after the first reads the
    fetched copy ``cat(h, halo rows)``, which backward keeps), ``block_nnz`` stored entries of the
    block (E'), ``feature_nnz`` stored entries of sparse input features (None: dense). Each model's
    count is its spec's (``MemoryModel.kept``, counted from what its layers' autograd saves);
    tests/plan/test_memory.py checks it against ``torch.autograd.graph.saved_tensors_hooks``. With
    ``recompute`` a graph layer keeps only its inputs (``pre`` and ``post`` are not recomputed). With
    ``recompute_segment`` k (``GNN.recompute_segment``) the stack keeps its ``S = ceil(L / k)`` segments' inputs,
    counted as a stack of S layers that recomputes, plus what one segment of k hidden layers keeps while
    backward recomputes it (k times a hidden layer's kept bytes: the difference of stacks of 3 and 2).
    """
    if recompute_segment and layers > 2:
        args = dict(nodes=nodes, halo=halo, block_nnz=block_nnz, features=features, classes=classes, hidden=hidden,
                    heads=heads, feature_nnz=feature_nnz, gcn_kernel=gcn_kernel, model_args=model_args,
                    node_types=node_types)
        k = min(recompute_segment, layers)
        inputs = kept_activation_bytes(model, layers=max(2, -(-layers // k)), recompute=True, **args)
        per_layer = (kept_activation_bytes(model, layers=3, recompute=recompute, **args)
                     - kept_activation_bytes(model, layers=2, recompute=recompute, **args))
        return inputs + k * per_layer
    sparse = feature_nnz is not None
    m = nodes + halo
    dropped_x = 4 * feature_nnz if sparse else 4 * m * features  # dropout(X): a dense copy, or new sparse values
    sizes = dict(layers=layers, hidden=hidden, heads=heads, recompute=recompute, gcn_kernel=gcn_kernel,
                 model_args=model_args, node_types=node_types)
    return int(_memory_model(model, features, classes, sizes).kept(
        nodes=nodes, halo=halo, block_nnz=block_nnz, features=features, classes=classes, layers=layers,
        hidden=hidden, heads=heads, sparse=sparse, dropped_x=dropped_x, recompute=recompute, gcn_kernel=gcn_kernel))


GIB = 1 << 30
MIB = 1 << 20
PROCESS_BYTES = (675 if torch.version.cuda else 330) * MIB
"""RSS of a training process before its graph counts: interpreter, PyTorch, fullgraph, their
libraries and first-use allocations (a tiny graph's peak, one process or a graph-parallel rank:
327-344 MiB with torch 2.13's CPU build). A CUDA build of PyTorch maps its GPU libraries too, even
for a run on the CPU: 341-371 MiB more in every host-memory case measured with torch 2.11+cu130 on
an H100 machine (import alone: 546 MiB against ~200)."""
MMAP_OVERHEAD = 1.1
"""The same ratio when activations are mmapped (measured: 1.02-1.2)."""
# Each model's heap overhead (peak RSS over live bytes of the training step when activations come
# from the heap, measured with glibc's dynamic threshold) and transient (the temporaries of the peak
# moment of a step, in activations [n, hidden] of the rank's own rows, or messages [E', hidden] for
# attention; with recompute they include one layer's recomputed internals) are in its spec's
# MemoryModel. Halo rows add no temporaries of their own at that moment: the received rows are
# consumed by the aggregation (what backward keeps of them is in kept_activation_bytes). Measured on
# the 22.7M-edge R-MAT graph, SAGE 3 x 128, P = 4 (halo 0.04-1.3 times the inner rows): counting them
# put the four ranks 10-30% over their measured peaks, growing with the halo.


def _graph_bytes(*, nodes: int, halo: int, edges: int, features: int, feature_nnz: int | None, norm: str,
                 part: bool, edge_bytes: int = 0) -> int:
    """The rank's graph data as the trainer holds it: structure, features, labels and splits, the
    block (with its int32 kernel indices) and, where backward needs it, its transpose; edge data
    (``edge_bytes`` per entry) for the graph's edges and again for the block's where it adds loops."""
    n, m, e, F = nodes, nodes + halo, edges, features
    total = 8 * (n + 1) + 8 * e + 8 * n + 3 * n  # in-edge CSR, labels, three masks
    if part:
        total += 8 * n + 8 * 3 * halo + 8 * m  # inner ids, halo ids and owners, send list, degrees
    nnz_b = e if norm == "mean" else e + n  # gcn and attention blocks have self loops
    total += 12 * (n + 1) + 16 * nnz_b  # the block: int64 and int32 indices, float32 values
    total += edge_bytes * (e + (nnz_b if nnz_b != e else 0))  # a mean block shares the graph's edge data
    if norm == "mean" or (part and halo) :  # not symmetric: its transpose is built for backward
        total += 4 * (m + 1) + 16 * nnz_b
    if norm == "self-loops":
        total += 8 * nnz_b  # attention's per-edge dst ids
    if norm == "relation-mean":  # R-GCN's block cut by relation (Block.relation_ops): each relation's CSR
        total += 48 * nnz_b  # (int64 and int32 indices, values), its transpose for backward, the gather index
    if feature_nnz is None:
        total += 4 * m * F
    else:
        nnz = feature_nnz
        total += 8 * (m + 1) + 12 * nnz  # the CSR as loaded
        if nnz >= 0.1 * m * F:
            total += 4 * m * F  # dense enough to be multiplied as a dense matrix
        else:
            total += 4 * (m + 1) + 4 * nnz + 4 * (F + 1) + 20 * nnz  # int32 indices, transpose (+ dropped copy's)
    return total


def memory_breakdown(*, nodes: int, edges: int, features: int, classes: int, model: str, layers: int,
                     hidden: int, heads: int = 8, halo: int = 0, feature_nnz: int | None = None,
                     recompute: bool = False, gcn_kernel: str = "fused", distributed: bool = False,
                     mmap_threshold: int | None = None, model_args: dict | None = None,
                     edge_bytes: int = 0, node_types: dict | None = None, pair_bytes: int = 0,
                     owned_share: float | None = None, split_bytes: int = 0,
                     recompute_segment: int = 0) -> dict[str, int]:
    """The parts of :func:`estimate_peak_bytes`: ``process``, ``graph``, ``weights``, ``activations``.
    ``owned_share``: the fraction of the graph's nodes whose node-owned parameters (``MemoryModel.owned``:
    R-GCN's embeddings) this rank holds, under graph parallelism its inner nodes'; ``None``: all of them.
    ``split_bytes``: a link split's tables, which every rank holds whole (``LinkTask.memory``)."""
    from fullgraph.memory import mmap_threshold as this_process_threshold

    mem = _memory_model(model, features, classes, dict(layers=layers, hidden=hidden, heads=heads, recompute=recompute,
                                                       gcn_kernel=gcn_kernel, model_args=model_args,
                                                       node_types=node_types))
    n, H = nodes, hidden
    norm = model_spec(model).norm or "gcn"  # a user's model: counted with self loops, the larger case
    E = edges if norm == "mean" else edges + nodes
    params = mem.params(features, H, classes, layers, heads)
    if owned_share is not None:  # a rank keeps its own nodes' rows of a node-owned table (parallel.owned)
        params -= mem.owned - round(mem.owned * min(1.0, owned_share))
    kept = kept_activation_bytes(model, nodes=n, halo=halo, block_nnz=E, features=features, classes=classes,
                                 layers=layers, hidden=H, heads=heads, feature_nnz=feature_nnz, recompute=recompute,
                                 gcn_kernel=gcn_kernel, model_args=model_args, node_types=node_types,
                                 recompute_segment=recompute_segment)
    unit = 4 * (E if mem.per_edge else n) * (mem.width or H)
    again = bool(recompute or recompute_segment)  # backward runs forwards again: their temporaries
    # + gradients and Adam's moments, and a link step's scored pairs
    step = kept + mem.transient[again] * unit + 3 * 4 * params + pair_bytes
    threshold = this_process_threshold() if mmap_threshold is None else mmap_threshold
    overhead = MMAP_OVERHEAD if 4 * n * (mem.width or H) >= threshold else mem.heap_overhead[again]
    return {
        "process": PROCESS_BYTES,
        "graph": _graph_bytes(nodes=n, halo=halo, edges=edges, features=features, feature_nnz=feature_nnz,
                              norm=norm, part=distributed, edge_bytes=edge_bytes) + split_bytes,
        "weights": 2 * 4 * params,  # the parameters and the kept best weights
        "activations": int(overhead * step),
    }


def estimate_peak_bytes(*, nodes: int, edges: int, features: int, classes: int, model: str, layers: int,
                        hidden: int, heads: int = 8, halo: int = 0, feature_nnz: int | None = None,
                        recompute: bool = False, gcn_kernel: str = "fused", distributed: bool = False,
                        mmap_threshold: int | None = None, model_args: dict | None = None,
                        edge_bytes: int = 0, node_types: dict | None = None, pair_bytes: int = 0,
                        owned_share: float | None = None, split_bytes: int = 0,
                        recompute_segment: int = 0) -> int:
    """Estimated peak RSS of one training process, in bytes (see the module docstring).

    Args:
        nodes: rows this rank computes (the inner nodes of its part; single process: all nodes).
        edges: in-edges of those rows, without self loops (``part_stats[i]["edges"]`` of a
            partition; single process: the graph's edges).
        features, classes: input width and number of classes of the graph.
        model, layers, hidden, heads, recompute, gcn_kernel: as in ``TrainConfig``.
        halo: halo rows of the part (0 in one process).
        feature_nnz: stored entries of the rank's feature rows (inner and halo) when the features are
            sparse; ``None`` when they are dense.
        distributed: a rank of a distributed run (it holds a part's index arrays).
        mmap_threshold: the size from which the process's allocations are mmapped, so freed ones
            leave it: ``None`` asks this process (``fullgraph.memory.mmap_threshold``: 1 MiB once the
            command line fixed it, else glibc's dynamic threshold at its 32 MiB ceiling); a launcher
            estimating for ranks that run the command line may pass ``fullgraph.memory.MMAP_THRESHOLD_BYTES``.
        pair_bytes: what a link-prediction step's scored pairs hold on this rank (``LinkTask.memory``).
        recompute_segment: layers per recomputed segment (``--recompute-segment``; 0: none).
    """
    return sum(memory_breakdown(nodes=nodes, edges=edges, features=features, classes=classes, model=model,
                                layers=layers, hidden=hidden, heads=heads, halo=halo, feature_nnz=feature_nnz,
                                recompute=recompute, gcn_kernel=gcn_kernel, distributed=distributed,
                                mmap_threshold=mmap_threshold, model_args=model_args,
                                edge_bytes=edge_bytes, node_types=node_types, pair_bytes=pair_bytes,
                                owned_share=owned_share, split_bytes=split_bytes,
                                recompute_segment=recompute_segment).values())


def device_peak_bytes(*, nodes: int, edges: int, **options) -> int:
    """Estimated peak of PyTorch's allocator on a GPU for one process training the whole graph
    (``torch.cuda.max_memory_allocated``): what :func:`memory_breakdown` counts, less what stays on the
    host (the process itself, the graph's own CSR) and less the host allocator's overhead; the block,
    its transpose where backward needs one, features, labels and masks, the weights, and a step's
    activations, gradients and Adam's moments, as they are held on the device. ``options``: as
    :func:`estimate_peak_bytes` takes them (``halo`` and ``distributed`` do not apply)."""
    b = memory_breakdown(nodes=nodes, edges=edges, **(options | {"distributed": False, "mmap_threshold": 1}))
    host_csr = 8 * (nodes + 1) + 8 * edges  # the graph's in-edge CSR: the trainer keeps it on the host
    return int(b["graph"] - host_csr + b["weights"] + b["activations"] / MMAP_OVERHEAD)


def tensor_peak_bytes(*, nodes: int, edges: int, nprocs: int, model: str, **options) -> int:
    """Estimated peak RSS of one process of ``--parallel tensor`` (``parallel.tensor``): a block row's
    worth of everything node-wise (its ``nodes / P`` rows, as an SpMM rank holds them, with as many
    rows again for the switch's buffers: the ``[N, w / P]`` column slice and its product), plus the
    rest of the whole graph's structure, which every process holds: Â's other non-zeros (int64 and
    int32 indices, float32 values; Âᵀ too where Â is not symmetric) and, while the process reads it,
    the one-block-row file's copy (int64 indices, float32 values)."""
    rows, P = math.ceil(nodes / nprocs), nprocs
    share = estimate_peak_bytes(nodes=rows, edges=math.ceil(edges / P), halo=rows, model=model, **options)
    norm = model_spec(model).norm or "gcn"
    nnz = edges if norm == "mean" else edges + nodes
    per_entry = 16 * (2 if norm == "mean" else 1)
    return share + (nnz - math.ceil(nnz / P)) * per_entry + 12 * nnz


def variable_bytes(stats: dict, model_opts: dict) -> float:
    """A rank's estimated bytes less what does not grow with its share of the graph (the process, the
    weights): its graph data and activations for ``stats`` (as :func:`estimate_peak_bytes` takes
    them) and the model ``model_opts`` (:func:`model_memory_options`). The allocator's overhead is
    taken as for mmapped activations whatever their size, so the result is linear in the counts
    (the heap's larger overhead applies to small ranks only): what a balance of memory needs."""
    b = memory_breakdown(**(model_opts | stats | {"distributed": True, "mmap_threshold": 1}))
    return float(b["graph"] + b["activations"])


def graph_memory_stats(graph) -> dict:
    """The sizes :func:`estimate_peak_bytes` needs for single-process training on ``graph`` (the
    counts a memory balance costs a whole graph by: ``fullgraph.partition.balance.graph_counts``)."""
    from fullgraph.partition.balance import graph_counts

    return graph_counts(graph) | _types(graph.node_types)


def _types(types) -> dict:  # the node types as the estimates take them, for a model built for them (R-GCN)
    return {} if types is None else {"node_types": types.record()["node_types"]}


def part_memory_stats(part) -> dict:
    """The same for the rank that holds ``part`` (a ``Part``) in graph parallelism."""
    x = part.x
    return {"nodes": part.num_inner, "edges": int(part.indices.numel()), "halo": part.num_halo,
            "features": int(x.shape[1]), "classes": int(part.num_classes), "distributed": True,
            "edge_bytes": part.edge_facts.entry_bytes, **_types(getattr(part, "node_types", None)),
            "feature_nnz": int(x.values().numel()) if x.layout == torch.sparse_csr else None}


_PART_FILE_OVERHEAD = 5400
"""Bytes of a part file that are not tensor data (torch.save's zip entries and pickled names)."""


def partition_memory_stats(meta: dict) -> list[dict]:
    """Per part of a partition folder (its ``partition.json``, as ``load_meta`` returns it), the sizes
    :func:`estimate_peak_bytes` needs, without reading the parts.

    Sparse features: the number of stored entries of each part is not in ``partition.json``; it is
    inferred from the part file's size (``files[i]["bytes"]``), which is the part's tensors: its
    int64 ids and structure, labels and masks, and the features' CSR (12 bytes per entry).
    """
    from fullgraph.ops.edge_data import EdgeFacts
    from fullgraph.ops.node_types import NodeTypes

    files = {int(f["part"]): int(f["bytes"]) for f in meta.get("files", [])}
    out = []
    for st in meta["part_stats"]:
        i, n, h, e = int(st["part"]), int(st["inner"]), int(st["halo"]), int(st["edges"])
        m = n + h
        nnz = None
        if meta.get("sparse_features"):
            parts = int(meta["parts"])
            known = (8 * (n + 2 * h + int(st.get("send", h)) + (n + 1) + e + m + (m + 1) + n) + 3 * n + 16 * parts
                     + _PART_FILE_OVERHEAD)
            nnz = max(0, (files.get(i, known) - known) // 12)
        out.append({"nodes": n, "edges": e, "halo": h, "features": int(meta["num_features"]),
                    "classes": int(meta["num_classes"]), "feature_nnz": nnz, "distributed": True,
                    "edge_bytes": EdgeFacts.of_record(meta).entry_bytes, **_types(NodeTypes.of_record(meta))})
    return out


def _rank_inputs(cfg, graph, release_memory: bool, task_bytes: dict | None = None):
    """What every layout's estimate of a rank's peak shares: the model's options, the graph's sizes,
    what the task holds on a rank (``task_bytes``: ``pair_bytes`` and ``split_bytes``, ``Task.memory``),
    the ranks' glibc threshold (the one ``fullgraph train`` will run with: fixed with
    ``--release-memory``, else glibc's own, not this process's), and ``nnz(rows)``, the stored feature
    entries of ``rows`` rows where features are sparse (the graph's average; else ``None``)."""
    from fullgraph.memory import GLIBC_MMAP_THRESHOLD_MAX, MMAP_THRESHOLD_BYTES

    threshold = MMAP_THRESHOLD_BYTES if release_memory else GLIBC_MMAP_THRESHOLD_MAX
    opts = model_memory_options(cfg) | dict(features=graph.num_features, classes=graph.num_classes,
                                            distributed=True, mmap_threshold=threshold,
                                            edge_bytes=graph.edge_facts().entry_bytes, **(task_bytes or {}),
                                            **_types(graph.node_types))
    sparse = graph.x.layout == torch.sparse_csr

    def nnz(rows: int) -> int | None:
        return math.ceil(graph.x.values().numel() * rows / graph.num_nodes) if sparse else None

    return opts, nnz


def partition_peak(cfg, graph, parts: list[dict], bounds: list[tuple[int, int]], release_memory: bool = False,
                   task_bytes: dict | None = None) -> int:
    """The largest rank's peak under graph parallelism, the pipeline or the hybrid: its part's rows and
    halo, with its stage's share of the layers (``bounds``; a measured model counts all its layers)."""
    opts, nnz = _rank_inputs(cfg, graph, release_memory, task_bytes)
    layers = max(b - a for a, b in bounds)
    owns = cfg.parallel.mesh.owns_node_rows and not cfg.parallel.prune  # node-owned rows stay with their ranks
    return max(estimate_peak_bytes(**(opts | {"layers": max(2, layers)}), nodes=p["inner"], edges=p["edges"],
                                   halo=p["halo"], feature_nnz=nnz(p["inner"] + p["halo"]),
                                   owned_share=p["inner"] / graph.num_nodes if owns else None) for p in parts)


def single_peak(cfg, graph, release_memory: bool = False, task_bytes: dict | None = None) -> int:
    """One process's peak (``--parallel single``): the whole graph, no part's index arrays."""
    opts, _ = _rank_inputs(cfg, graph, release_memory, task_bytes)
    return estimate_peak_bytes(**(opts | graph_memory_stats(graph) | {"distributed": False}))


def spmm_peak(cfg, graph, parts, bounds, release_memory: bool = False, task_bytes: dict | None = None) -> int:
    """An SpMM rank's peak: a block row of every matrix, and as many rows again for what it receives."""
    opts, nnz = _rank_inputs(cfg, graph, release_memory, task_bytes)
    opts["edge_bytes"] = 0  # a weight is in Â's values; no other edge data reaches these ranks
    R = cfg.parallel.mesh.block_rows
    rows = math.ceil(graph.num_nodes / R)
    return estimate_peak_bytes(**opts, nodes=rows, edges=math.ceil(graph.num_edges / R), halo=rows,
                               feature_nnz=nnz(2 * rows))


def tensor_peak(cfg, graph, parts, bounds, release_memory: bool = False, task_bytes: dict | None = None) -> int:
    """A tensor rank's peak (``tensor_peak_bytes``)."""
    opts, nnz = _rank_inputs(cfg, graph, release_memory, task_bytes)
    opts["edge_bytes"] = 0  # as for SpMM: a weight is in Â's values
    P = cfg.parallel.nprocs
    return tensor_peak_bytes(**opts, nodes=graph.num_nodes, edges=graph.num_edges, nprocs=P,
                             feature_nnz=nnz(math.ceil(graph.num_nodes / P)))


def model_memory_options(cfg) -> dict:
    """The options of ``cfg`` (a ``TrainConfig``) that :func:`estimate_peak_bytes` takes."""
    m = cfg.model
    spec = model_spec(m.name)
    args = dict(m.args) if not (spec.builtin and spec.reads_node_types) else {  # its own options, for a measurement
        k: getattr(m, k) for k in spec.options if k not in ("layers", "hidden", "dropout")}
    return dict(model=m.name, layers=m.layers, hidden=m.hidden, heads=m.heads, recompute=m.recompute,
                gcn_kernel=m.gcn_kernel, model_args=args,
                **({"recompute_segment": m.recompute_segment} if m.recompute_segment else {}))
