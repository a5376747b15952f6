"""What each layout must move: analytic communication volumes, in bytes per epoch summed over ranks,
by ledger category (``fullgraph.comm.ledger``): each layout family's own (``partition_volume``,
``spmm_epoch_volume``, ``tensor_epoch_volume``, registered with the layout in ``parallel.registry``)
and what every layout adds (``epoch_volume``). That sum is what ``fullgraph plan`` prints and what
the tests check every layout's ledger against, category by category, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["gcn_product_widths", "spmm_volume", "switch_bytes", "tensor_volume", "ModelShape", "boundary_row",
           "partition_volume", "spmm_epoch_volume", "tensor_epoch_volume", "epoch_volume"]

F32, F64 = 4, 8  # bytes of the activations and gradients; of the metric sums
EVAL_SUMS = 7  # the evaluation's all-reduce: hits and counts of three splits, and the validation loss


def gcn_product_widths(dims: list[int], sparse_input: bool) -> list[int]:
    """Widths of the dense matrices a GCN epoch multiplies by Â (forward) and Âᵀ (backward).

    The fused layer multiplies Â by ``H W`` (width d_out) unless d_in < d_out, when it aggregates
    first (width d_in); sparse input features are always transformed first. Its backward product has
    the same width and is skipped only in the first layer when that layer aggregated first (its input
    needs no gradient).
    """
    widths = []
    for i in range(len(dims) - 1):
        d_in, d_out = dims[i], dims[i + 1]
        aggregate_first = not (i == 0 and sparse_input) and d_in < d_out
        w = d_in if aggregate_first else d_out
        widths += [w] if (i == 0 and aggregate_first) else [w, w]
    return widths


def spmm_volume(mode: str, widths: list[int], n: int, nprocs: int, nnz: int, replication: int = 1,
                permute: bool = True, seed: int = 0, precision: str = "fp32") -> dict[str, int]:
    """Bytes per epoch of an ``spmm-*`` layout for products of the given widths; a dense row of width
    w costs ``rb(w) = row_bytes(w, precision)`` (4w at fp32).

    * 1D / 1.5D (R = P/c block rows): every block row of width w goes once to the other R - 1
      processes of one grid column, ``(R-1)·n·rb(w)``; 1.5D adds the grid-row reduction: at fp32 an
      all-reduce to which each of the c replicas contributes its partial block row, ``c·n·w·4``;
      below fp32 a reduce-scatter and an all-gather of encoded rows, ``2·(c-1)·n·rb(w)``. Per
      process this is CAGNET §4.1/§4.2: ≈ n·w (1D) and ≈ n·w/c + n·w·c/P (1.5D).
    * 2D (q = √P, d = 1) and 3D (q = ∛P, d = q layers), w cut into q column slices w_j: the slices
      trade places within grid rows before and after the product (``spmm/redist``); dense blocks are
      broadcast along grid columns, ``(q-1)·n·Σ_j rb(w_j)``; sparse blocks along grid rows,
      ``(q-1)·(8·q·d·(n+q) + 12·nnz)`` (int64 row pointers and column indices, float32 values, at
      every precision); 3D sums the d layers' partial products along each fiber: at fp32 an
      all-reduce, ``d·n·w·4``; below it a reduce-scatter of encoded rows, ``(d-1)·n·Σ_j rb(w_j)``.
    """
    from fullgraph.comm.mesh import Mesh
    from fullgraph.comm.precision import row_bytes
    from fullgraph.partition.blockrows import row_blocks

    out = {"spmm/bcast": 0, "spmm/reduce": 0, "spmm/redist": 0}
    mesh = Mesh.for_mode(mode, nprocs, replication=replication)
    if not mesh.spmm:
        raise ValueError(f"no volume model for {mode!r}")
    exact = precision == "fp32"
    if not mesh.summa:
        R, c = mesh.block_rows, mesh.replication
        for w in widths:
            out["spmm/bcast"] += (R - 1) * n * row_bytes(w, precision)
            if c > 1:
                out["spmm/reduce"] += c * n * w * F32 if exact else 2 * (c - 1) * n * row_bytes(w, precision)
        return out
    q, _, d = mesh.grid
    blocks = [b.numel() for b in row_blocks(n, q, permute, seed)]
    subs = [[len(t) for t in torch.tensor_split(torch.arange(nb), d)] for nb in blocks]
    for w in widths:
        slices = [row_bytes(len(x), precision) for x in torch.tensor_split(torch.arange(w), q)]
        rb = sum(slices)  # a whole row, slice by slice (= 4w at fp32)
        for i in range(q):
            for m in range(d):
                pieces = [len(p) for p in torch.tensor_split(torch.arange(subs[i][m]), q)]
                for j in range(q):
                    out["spmm/redist"] += pieces[j] * (rb - slices[j]) + (subs[i][m] - pieces[j]) * slices[j]
        out["spmm/bcast"] += (q - 1) * n * rb + (q - 1) * (8 * q * d * (n + q) + 12 * nnz)
        if d > 1:
            out["spmm/reduce"] += d * n * w * F32 if exact else (d - 1) * n * rb
    return out


def switch_bytes(num_nodes: int, width: int, nprocs: int, precision: str = "fp32") -> int:
    """Bytes one tensor-parallel product of width ``width`` moves, summed over processes
    (``parallel.tensor``): the switch to column slices (process r sends its ``n_r`` rows' slice j to
    each j ≠ r) and the switch back (r sends each other owner k its ``n_k`` rows of slice r); a row of
    w values costs ``row_bytes(w, precision)``. At fp32 with P dividing N and w: 2·(P−1)/P·N·w·4."""
    from fullgraph.comm.precision import row_bytes
    from fullgraph.partition.blockrows import column_counts, node_counts

    n, w = node_counts(num_nodes, nprocs), column_counts(width, nprocs)
    return sum(n[r] * row_bytes(w[j], precision) + n[j] * row_bytes(w[r], precision)
               for r in range(nprocs) for j in range(nprocs) if j != r)


def tensor_volume(model: "ModelShape", nodes: int, nprocs: int, *, decoupled: bool = False, evaluate: bool = True,
                  precision: str = "fp32") -> dict[str, int]:
    """Bytes per epoch of ``--parallel tensor`` by category, summed over processes.

    * ``tp/fwd``, ``tp/bwd``: a ``switch_bytes`` per product of the forward (``forward_widths``) and of
      the backward (the rest of ``product_widths``: the first layer's is skipped where its input needs
      no gradient); attention layers switch their ``[n, heads·d]`` transform both ways; decoupled, one
      switch of the propagated width per pass.
    * ``tp/attn``: each attention layer gathers two ``[N, heads]`` score tensors (every process
      receives the others' rows, ``(P−1)·N·heads`` floats each) and sums their gradients back to the
      owners (as many), fp32.
    * the evaluation's forward: its ``tp/fwd`` and ``tp/attn`` again, under ``eval/``.
    * batch statistics as graph parallelism's (every process holds distinct rows); every process
      all-reduces the replicated weights' gradients.
    """
    sb = lambda w: switch_bytes(nodes, w, nprocs, precision)  # noqa: E731
    scores = lambda heads: 2 * (nprocs - 1) * nodes * heads * F32  # noqa: E731 (two score tensors)
    if decoupled:
        fwd, bwd, attn = sb(model.input_widths[0]), sb(model.input_widths[0]), 0
    elif model.attention:
        fwd = bwd = sum(sb(w) for w, _ in model.attention)
        attn = sum(scores(k) for _, k in model.attention)
    else:
        fwd = sum(sb(w) for w in model.forward_widths)
        bwd, attn = sum(sb(w) for w in model.product_widths) - fwd, 0
    stats = sum(2 * w + 1 for w in model.norm_widths) * F32 * nprocs
    out = {"tp/fwd": fwd, "tp/bwd": bwd, "tp/attn": 2 * attn, "norm/fwd": stats, "norm/bwd": stats,
           "grad/allreduce": nprocs * model.params * F32}
    if evaluate:
        out |= {"eval/tp/fwd": fwd, "eval/tp/attn": attn}
    return out


@dataclass(frozen=True)
class ModelShape:
    """What a layout's traffic depends on in a model.

    Args:
        input_widths: each graph layer's input width (``GNN.layer_input_widths``).
        params: trainable parameters.
        h0_width: the width of ``H0`` when layers read it (GCNII; it travels the pipeline), else 0.
        norm_widths: the width of each batch-norm layer (its statistics are summed over ranks).
        product_widths: the widths an epoch multiplies by Â, forward then backward, in order
            (``gcn_product_widths``; the SpMM layouts' models), and ``forward_widths`` those of a
            forward pass alone (evaluation).
        attention: per graph layer, the width and heads of its attention (GAT), else empty.
        owned: elements of its node-owned parameters (R-GCN's embeddings: ``parallel.owned``), which graph
            parallelism keeps with their nodes' owners: out of the all-reduce, and ``pre``'s output then
            crosses as one more layer input.
    """

    input_widths: tuple[int, ...]
    params: int
    h0_width: int = 0
    norm_widths: tuple[int, ...] = ()
    product_widths: tuple[int, ...] = ()
    forward_widths: tuple[int, ...] = ()
    attention: tuple[tuple[int, int], ...] = ()
    owned: int = 0

    @classmethod
    def of(cls, name: str, model, features: int, classes: int, sparse_input: bool) -> "ModelShape":
        """The shape of a built model (``fullgraph.models.build_model(name, ...)``)."""
        from torch.nn import BatchNorm1d  # ours, and those between a PyG model's convolutions

        from fullgraph.models import model_spec

        widths = tuple(model.layer_input_widths())
        params = sum(p.numel() for p in model.parameters() if p.requires_grad)
        norms = tuple(m.num_features for m in model.modules() if isinstance(m, BatchNorm1d))
        if model_spec(name).spmm == "narrower":  # the product order follows the layer's widths
            dims = [features, *widths[1:], classes]
            products, forward = gcn_product_widths(dims, sparse_input), _forward_widths(dims, sparse_input)
        else:  # GCNII, ResGCN+: every layer aggregates hidden rows, and each input needs its gradient
            products, forward = [w for w in widths for _ in (0, 1)], list(widths)
        attention = tuple((layer.heads * layer.d_head, layer.heads) for layer in model.layers) \
            if model_spec(name).attention else ()
        return cls(widths, params, widths[0] if model.uses_h0 else 0, norms, tuple(products), tuple(forward),
                   attention, int(getattr(model, "owned_numel", 0)))


def _forward_widths(dims: list[int], sparse_input: bool) -> list[int]:
    """One product per layer, of the width ``gcn_product_widths`` gives its forward."""
    return [dims[i] if not (i == 0 and sparse_input) and dims[i] < dims[i + 1] else dims[i + 1]
            for i in range(len(dims) - 1)]


def boundary_row(model: ModelShape, first_layer: int, precision: str) -> int:
    """Bytes of one node's row at a stage boundary: the layer's input, and H0 when the layers read it."""
    from fullgraph.comm.precision import row_bytes

    h0 = row_bytes(model.h0_width, precision) if model.h0_width else 0
    return row_bytes(model.input_widths[first_layer], precision) + h0


def _halo_bytes(rows: list[int], model: ModelShape, precision: str, first: int = 1) -> int:
    """Bytes of ``rows[i]`` halo rows of the input of each graph layer ``first + i`` (from 0)."""
    from fullgraph.comm.precision import row_bytes

    return sum(r * row_bytes(w, precision) for r, w in zip(rows, model.input_widths[first:], strict=True))


def spmm_epoch_volume(mesh, model: ModelShape, *, nodes: int, nnz: int = 0, evaluate: bool = True,
                      permute: bool = True, seed: int = 0, precision: str = "fp32", **_) -> dict[str, int]:
    """An SpMM layout's own bytes per epoch: its products' ``spmm_volume`` (``nnz``: Â's non-zeros, self
    loops included), the evaluation's, and the replicated weights' gradient sum on every rank."""
    out = {"grad/allreduce": mesh.nprocs * model.params * F32}
    for prefix, widths in (("", model.product_widths), ("eval/", model.forward_widths if evaluate else ())):
        for k, v in spmm_volume(mesh.parallel, list(widths), nodes, mesh.nprocs, nnz, mesh.replication, permute,
                                seed, precision).items():
            out[prefix + k] = out.get(prefix + k, 0) + v
    return out


def tensor_epoch_volume(mesh, model: ModelShape, *, nodes: int, evaluate: bool = True, precision: str = "fp32",
                        decoupled: bool = False, **_) -> dict[str, int]:
    """Tensor parallelism's own bytes per epoch: ``tensor_volume`` (``decoupled``: ``--tensor-decoupled``)."""
    return tensor_volume(model, nodes, mesh.nprocs, decoupled=decoupled, evaluate=evaluate, precision=precision)


def partition_volume(mesh, model: ModelShape, *, nodes: int, halo_rows: int = 0, stage_starts: list[int] = (),
                     evaluate: bool = True, precision: str = "fp32", pruned_halo: list[int] | None = None,
                     **_) -> dict[str, int]:
    """Graph parallelism's, the pipeline's and the hybrid's own bytes per epoch.

    * graph (and the hybrid's stage groups, W > 1): every halo row of layers 1..L-1 once forward and
      once backward (the first layer reads its halo's features from the part itself; a model with
      node-owned rows, ``ModelShape.owned``, fetches its first layer's too and all-reduces the rest), ``halo_rows``
      being the halo of all W parts together; batch statistics ``(2w + 1)`` floats per norm layer and
      rank each way; each of the W ranks all-reduces its gradients (``params`` floats). Pruned, training
      moves the halo rows each layer 2..L reads (``pruned_halo``, ``plan.pruned``); evaluation all.
    * pipeline (and the hybrid's S stages): at each stage boundary (``stage_starts``: the first layer
      of every stage but the first) every node's row of that layer's input (and of H0 for GCNII)
      forward, its gradient backward; stage weights are distinct (all-reduced only across graph ways).
    """
    S, W = mesh.stages, mesh.graph_ways
    out: dict[str, int] = {}
    if W > 1:
        owned = model.owned if S == 1 and pruned_halo is None else 0  # kept by owners: graph, unpruned
        first = 0 if owned else 1
        halo = _halo_bytes([halo_rows] * (len(model.input_widths) - first), model, precision, first)
        train = halo if pruned_halo is None else _halo_bytes(pruned_halo, model, precision)
        stats = sum(2 * w + 1 for w in model.norm_widths) * F32 * W * S
        out |= {"halo/fwd": train, "halo/bwd": train, "eval/halo/fwd": halo if evaluate else 0,
                "norm/fwd": stats, "norm/bwd": stats, "grad/allreduce": W * (model.params - owned) * F32}
    if S > 1:
        if len(stage_starts) != S - 1:
            raise ValueError(f"expected the first layer of each of stages 2..{S} (got {list(stage_starts)})")
        pipe = nodes * sum(boundary_row(model, b, precision) for b in stage_starts)
        out |= {"pipe/fwd": pipe, "pipe/bwd": pipe, "eval/pipe/fwd": pipe if evaluate else 0}
    return out


def epoch_volume(mesh, model: ModelShape, own, *, evaluate: bool = True, grad_norm: bool = False,
                 chunked_stats: int = 3, **sizes) -> dict[str, int]:
    """Bytes per epoch (and per evaluation, when ``evaluate``) by ledger category, summed over ranks: the
    layout's ``own(mesh, model, evaluate=..., **sizes)`` (its registered volume:
    ``partition_volume``, ``spmm_epoch_volume``, ``tensor_epoch_volume``), and what every layout adds.
    An activation row costs ``row_bytes(width, precision)``; weight gradients and statistics fp32.

    * evaluation: a forward pass, the metric sums (not ROC-AUC's scores); ``grad_norm``: a float64 per rank.
    * ``meta/metrics``: the per-epoch all-reduce of the loss and the ledger (one float64 per category,
      and three more), plus the chunked engines' all-gather of ``chunked_stats`` timing floats.
    """
    from fullgraph.comm.ledger import CATEGORIES

    P = mesh.nprocs
    if P == 1:
        return {}
    out = {k: int(v) for k, v in own(mesh, model, evaluate=evaluate, **sizes).items() if v}
    common = {"eval/reduce": P * EVAL_SUMS * F64 if evaluate else 0, "grad/norm": P * F64 if grad_norm else 0,
              "meta/metrics": P * (len(CATEGORIES) + 3) * F64 + (P * (P - 1) * chunked_stats * F64
                                                                 if mesh.chunked else 0)}
    for k, v in common.items():
        if v:
            out[k] = out.get(k, 0) + int(v)
    return out
