"""The shape every model shares: a node-wise ``pre``, a stack of graph ``layers``, a node-wise ``post``.

Only the layers read the graph, and each reads it through one ``Block``:
``h_dst = layer(block, h_src, h0_dst)``. ``pre`` and ``post`` act row by row, so any layout may run
them on whatever rows it owns. A pipeline stage owns a run of layers; a graph-parallel rank owns a
block per layer; neither needs the model to know about it. Models import no process group.

A model whose ``post`` reads every layer's output (jumping knowledge, ``GNN.reads_every_layer``)
gets them all, cut to the rows it computes: a layout whose ranks hold their rows of every layer (one
process, graph, SpMM, tensor) runs it; a pipeline stage, which holds only its own layers' outputs,
cannot (``reads_every_layer_refusal``).
"""

from __future__ import annotations

import contextvars
import math
from typing import Callable, Sequence

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from fullgraph.ops import Block, SparseOp, matmul

__all__ = ["GNN", "GraphLayer", "Linear", "glorot_", "INITS", "dst_rows", "reads_every_layer_refusal"]

INITS = ("glorot", "torch")
"""How :class:`Linear` draws its parameters: ``glorot`` (Glorot & Bengio: weights U(±√(6 / (fan_in +
fan_out))), bias zero; what PyG's convolutions use) or ``torch`` (``torch.nn.Linear``'s default:
weights and bias U(±1 / √fan_in); what PyG's ``Linear`` and plain MLP layers use)."""


def glorot_(w: torch.Tensor) -> torch.Tensor:
    bound = math.sqrt(6.0 / (w.shape[-2] + w.shape[-1]))
    with torch.no_grad():
        return w.uniform_(-bound, bound)


class Linear(nn.Module):
    """``x W + b`` for dense input or constant sparse input features (``SparseOp``).

    ``weight`` is stored ``[d_in, d_out]`` (the transpose of ``torch.nn.Linear``'s), so that the
    product is ``x @ W`` for sparse ``x`` too; ``init`` (one of :data:`INITS`) says how it is drawn.
    """

    def __init__(self, d_in: int, d_out: int, bias: bool = True, init: str = "glorot"):
        super().__init__()
        if init not in INITS:
            raise ValueError(f"unknown init {init!r} (expected one of {', '.join(INITS)})")
        self.weight = nn.Parameter(torch.empty(d_in, d_out))
        self.bias = nn.Parameter(torch.zeros(d_out)) if bias else None
        if init == "glorot":
            glorot_(self.weight)
        else:  # torch.nn.Linear: kaiming_uniform_(a=√5) on [out, in] is U(±1/√fan_in); the bias alike
            bound = 1.0 / math.sqrt(d_in)
            with torch.no_grad():
                self.weight.uniform_(-bound, bound)
                if self.bias is not None:
                    self.bias.uniform_(-bound, bound)

    def forward(self, x: torch.Tensor | SparseOp) -> torch.Tensor:
        out = matmul(x, self.weight)
        return out + self.bias if self.bias is not None else out


def dst_rows(h: torch.Tensor | SparseOp, block: Block) -> torch.Tensor | SparseOp:
    """The dst rows of a layer's input ``h``: its first ``block.num_dst`` rows, whether ``h`` is dense
    or the constant sparse input features a first layer may receive (a ``SparseOp``, which
    :class:`Linear` and ``ops.matmul`` multiply as they are)."""
    return h.rows(block.num_dst) if isinstance(h, SparseOp) else h[: block.num_dst]


class GraphLayer(nn.Module):
    """Base of the graph layers: ``forward(block, h, h0)`` runs :meth:`compute`, or with ``recompute``
    on (and gradients being recorded) runs it under ``torch.utils.checkpoint`` (non-reentrant).

    Recompute (SAR's rematerialization): the layer keeps only its inputs (``h``, ``h0``) for backward
    and runs :meth:`compute` again there to rebuild what it needs, one layer at a time. Only the
    local computation is checkpointed: the halo rows of ``h`` were fetched by the layout before the
    call (``GNN.forward``'s ``fetch``, the pipeline's transport), so recomputation moves no byte and
    the communication ledger is the same with and without it.

    Recomputation gives the same numbers: keyed dropout masks (``ops.dropout``) are a function of
    (seed, epoch, site, node id), and the key is read from a context variable, which is captured at
    forward time and restored for the recomputation (backward may run on another thread, e.g.
    autograd's device threads on a GPU); unkeyed masks come from the global generators, whose states
    ``checkpoint`` saves and restores.

    What it saves is what each layer keeps beyond its input (``plan.kept_activation_bytes`` counts
    it per model): several activations per hidden layer for GCNII, SAGE and ResGCN+, per-edge
    messages and scores for GAT. The fused GCN layer already keeps only its output, the next layer's
    input, so in one process it saves nothing; a graph-parallel rank still drops the output beside
    the fetched copy with its halo. The cost is one more forward per layer (more for GCNII, whose
    keyed dropout masks are hashed again). The measured savings and costs are in
    benchmarks/README.md ("Recompute, SAGE's initialization and the allocator").
    """

    in_width: int
    """Width of the input rows ``h`` (set by each layer's constructor)."""

    dropout_site: int | None = None
    """Dropout site of this layer (set by the model: GNN numbers its layers)."""
    recompute: bool = False
    """Keep only the inputs for backward and recompute the rest (set by ``GNN.recompute``)."""

    def forward(self, block: Block, h, h0=None) -> torch.Tensor:
        if self.recompute and self.training and torch.is_grad_enabled():
            ctx = contextvars.copy_context()  # the dropout key, as the recomputation must see it
            return checkpoint(_run_in, ctx, self.compute, block, h, h0, use_reentrant=False)
        return self.compute(block, h, h0)

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        """The layer: ``h`` holds the src rows of ``block``, ``h0`` the dst rows of ``H[0]`` (or None)."""
        raise NotImplementedError


def reads_every_layer_refusal(what: str, mode: str | None = None) -> str:
    """The one line that refuses ``what``, a model whose ``post`` reads every layer's output, under
    ``--parallel mode``; ``None``: found out as the model ran, its ``post`` handed one layer's output
    (a pipeline or hybrid stage; ``fullgraph plan``, which times ``post`` alone, too)."""
    instead = ("a stage holds only its own layers' outputs; train it with --parallel graph (or spmm-*/tensor, for "
               "the models they take), or without jumping knowledge")
    if mode is None:
        return (f"expected every graph layer's output at the end of {what} (got one layer's, as a pipeline or "
                f"hybrid stage holds it): {instead}")
    return (f"expected a model whose output reads only its last graph layer with --parallel {mode} (got {what}, "
            f"which reads every layer's output at the end): {instead}")


def _run_in(ctx: contextvars.Context, fn, *args):
    return ctx.run(fn, *args)


class GNN(nn.Module):
    """Base of all models.

    Subclasses set ``norm`` (the block normalization they aggregate with), ``uses_h0`` (whether
    layers read the initial representation, as GCNII does) and fill ``self.layers``.
    """

    norm: str = "gcn"
    uses_h0: bool = False
    pre_modules: tuple[str, ...] = ()
    """Names of the submodules ``pre`` uses (a pipeline's first stage owns them)."""
    post_modules: tuple[str, ...] = ()
    """Names of the submodules ``post`` uses (a pipeline's last stage owns them)."""
    head_modules: tuple[str, ...] = ("decoder",)
    """Names of the submodules a task may attach after ``post`` (link prediction's decoder,
    ``tasks.with_task_head``), which read the output rows: a pipeline's last stage owns those present."""
    reads_every_layer: bool = False
    """Whether ``post`` reads every graph layer's output, not the last one only (jumping knowledge):
    ``forward`` then hands it the list of them, each cut to the rows of the last block's dst nodes.
    The pipeline and the hybrid refuse such a model: a stage holds only its own layers' outputs."""

    fetches_input: bool = False
    """Whether ``pre`` reads rows this process holds for its own nodes only (node-owned embeddings, set
    by ``hold_rows``): ``forward`` then runs it on the first block's dst rows and fetches the other src
    rows of its output as it fetches a layer's (one more halo exchange, at ``pre``'s width)."""

    recompute_segment: int = 0
    """Layers per recomputed segment of the stack (``--recompute-segment``; 0: none). Where set, a training
    forward in one process runs the layers in segments of this many under ``torch.utils.checkpoint``
    (non-reentrant): only each segment's input stays alive for backward, which runs the segment's forward
    again, one segment at a time. ``L`` layers then keep ``ceil(L / k)`` activations, plus one segment's
    ``k`` while it is recomputed: about ``2√L`` at ``k ≈ √L`` instead of ``L`` (Chen et al., "Training deep
    nets with sublinear memory cost", 2016), for one more forward of every layer. The numbers are the same:
    keyed dropout masks are functions of the key, captured here and restored for the recomputation. A
    layout that moves rows between layers (``fetch``) would move them again: there it is refused
    (``parallel.rules.check_segments``), and ``forward`` ignores it where ``fetch`` is given."""

    PRE_SITE = 0
    """Dropout site of ``pre``; graph layer ``i`` is site ``i + 1`` and ``post`` is ``num_layers + 1``."""

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name == "layers":  # number the layers' dropout sites, whatever model built them
            for i, layer in enumerate(value):
                layer.dropout_site = i + 1

    @property
    def recompute(self) -> bool:
        """Whether the graph layers recompute their internals in backward (see ``GraphLayer``)."""
        return any(getattr(layer, "recompute", False) for layer in self.layers)

    @recompute.setter
    def recompute(self, on: bool) -> None:
        for layer in self.layers:
            layer.recompute = bool(on)

    @property
    def post_site(self) -> int:
        return len(self.layers) + 1

    def pre(self, x: torch.Tensor | SparseOp, rows: torch.Tensor | None = None) -> torch.Tensor | SparseOp:
        """Node-wise input map; ``rows`` are the global ids of ``x``'s rows (they key dropout)."""
        return x

    def post(self, h: torch.Tensor | list[torch.Tensor], rows: torch.Tensor | None = None) -> torch.Tensor:
        """Node-wise output map; ``rows`` are the global ids of ``h``'s rows (they key dropout). ``h`` is
        the last layer's output, or every layer's in order where ``reads_every_layer`` is set."""
        return h

    def forward(self, blocks: Block | Sequence[Block], x: torch.Tensor | SparseOp,
                fetch: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
        """Logits of the dst rows of the last block (all nodes, in single-process training).

        ``x`` holds the src rows of the first block. Between layers, ``fetch`` (given by a parallel
        layout) turns a layer's dst rows into the next layer's src rows, e.g. by appending halo rows
        received from other parts; without it the dst rows are used as they are. Where ``post`` reads
        every layer (``reads_every_layer``), each layer's output is kept as it left the layer, before
        the next fetch, and cut to the last block's dst rows: a layer's dst rows are always its
        successor's first src rows, so these are the same nodes in every layer (``--prune`` included).
        """
        first = blocks if isinstance(blocks, Block) else blocks[0]
        if self.fetches_input and fetch is not None:  # pre holds its own nodes' rows only: theirs, then the halo's
            h = fetch(self.pre(dst_rows(x, first), first.dst_ids))
        else:
            h = self.pre(x, first.src_ids)
        h0 = h if self.uses_h0 else None
        last = blocks if isinstance(blocks, Block) else blocks[len(self.layers) - 1]
        if self._segmented(fetch):
            ctx = contextvars.copy_context()  # the dropout key, as each segment's recomputation must see it
            for start in range(0, len(self.layers), self.recompute_segment):
                stop = min(start + self.recompute_segment, len(self.layers))
                h = checkpoint(_run_in, ctx, self._run_layers, blocks, h, h0, start, stop, use_reentrant=False)
            return self.post(h, last.dst_ids)
        outs = []
        for i, layer in enumerate(self.layers):
            block = blocks if isinstance(blocks, Block) else blocks[i]
            if i > 0 and fetch is not None:
                h = fetch(h)
            h = layer(block, h, None if h0 is None else h0[: block.num_dst])
            if self.reads_every_layer:
                outs.append(h)
        if self.reads_every_layer:
            h = [out[: block.num_dst] for out in outs]
        return self.post(h, last.dst_ids)

    def _segmented(self, fetch) -> bool:
        """Whether this forward runs its layers in recomputed segments (``recompute_segment``): a training
        forward that records gradients, in one process (no ``fetch``), of a model whose ``post`` reads
        only the last layer (one reading them all keeps them all anyway)."""
        return (self.recompute_segment > 0 and fetch is None and self.training and torch.is_grad_enabled()
                and not self.reads_every_layer)

    def _run_layers(self, blocks, h, h0, start: int, stop: int):
        """Graph layers ``start..stop-1`` on ``h`` (one recomputed segment)."""
        for i in range(start, stop):
            block = blocks if isinstance(blocks, Block) else blocks[i]
            h = self.layers[i](block, h, None if h0 is None else h0[: block.num_dst])
        return h

    def check_edge_data(self, kinds=(), edge_width: int | None = None, num_relations: int | None = None) -> None:
        """Refuse, in one line before training, edge data the model needs and the graph lacks (or has in
        another width or number). ``kinds``: what the edges carry (a subset of ``("weight", "attr",
        "type")``), ``edge_width`` the features' width, ``num_relations`` the graph's; or one
        ``ops.edge_data.EdgeFacts`` that says all three. The built-in models read no edge data beyond
        the weights the normalization folds into Â: they accept any (``PyGModel`` checks its convs,
        the built-in GAT the features it was built for)."""

    @property
    def edge_needs(self):
        """The edge data the model cannot run without (``ops.edge_data.EdgeFacts``): none here. The
        contract's probe block carries such data (``models.contract``)."""
        from fullgraph.ops.edge_data import EdgeFacts

        return EdgeFacts()

    def hold_rows(self, ids: torch.Tensor) -> bool:
        """Keep only the node-owned parameter rows of the nodes ``ids`` (global, sorted: a graph-parallel
        rank's inner nodes), their optimizer state thereby too; ``True`` where the model has such rows
        (and ``fetches_input`` is then set). None here: every parameter is replicated."""
        return False

    def owned_tables(self) -> dict[str, torch.Tensor]:
        """After ``hold_rows``: each node-owned parameter's state-dict key and the global ids of its rows,
        from which a layout puts the whole table back together (``model.pt``)."""
        return {}

    def param_groups(self, weight_decay: float, conv_weight_decay: float | None = None) -> list[dict]:
        """Optimizer groups; models with a separate decay for graph-layer weights override this."""
        return [{"params": [p for p in self.parameters() if p.requires_grad], "weight_decay": weight_decay}]

    def stage_parameters(self, first: int, last: int, *, with_pre: bool, with_post: bool) -> list[nn.Parameter]:
        """The parameters of graph layers ``first..last-1``, plus those of ``pre`` / ``post`` when asked:
        what one pipeline stage trains."""
        mods = list(self.layers[first:last])
        mods += [getattr(self, m) for m in self.pre_modules] if with_pre else []
        mods += [getattr(self, m) for m in self.post_modules] if with_post else []
        heads = [m for m in self.head_modules if m in self._modules and m not in self.post_modules]
        mods += [getattr(self, m) for m in heads] if with_post else []
        return [p for m in mods for p in m.parameters() if p.requires_grad]

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def layer_input_widths(self) -> list[int]:
        """The width of each graph layer's input rows (``in_width``, set by every layer): what a
        pipeline stage receives, sends back the gradient of, and keeps tables of."""
        return [layer.in_width for layer in self.layers]
