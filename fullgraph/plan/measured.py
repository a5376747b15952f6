"""The memory of a model without a memory model of its own (a user's builder): measured, not derived.

A built-in model's spec counts what each of its layers' autograd keeps (``MemoryModel.kept``). A
user's model says nothing, so its kept bytes are measured: the model is built for the graph's
widths and run forward in training mode on probe blocks cut as a part would be (dst rows, halo rows,
edges), counting every tensor autograd saves for backward (``torch.autograd.graph.saved_tensors_hooks``,
each storage once). What a forward keeps is a sum of per-row, per-halo-row and per-edge terms (and
the probe's own inputs are left out), so probes of different shapes fix the three rates (with and without a halo apart); the
estimate for a rank is those rates times its sizes.

What is not measured: the temporaries of the peak moment of a step and the heap's overhead, which
are taken as the built-in models' most demanding (:data:`TRANSIENT_ROWS`, :data:`HEAP`), in units of
the model's widest activation; and dense probe features, so that sparse input features are counted
as if dense (an overestimate on bag-of-words graphs).
"""

from __future__ import annotations

import functools
import json
from typing import NamedTuple

import numpy as np
import torch

from fullgraph.models import MemoryModel, build_model
from fullgraph.models.contract import probe_block
from fullgraph.ops.edge_data import EdgeFacts
from fullgraph.ops.dropout import keyed_dropout

__all__ = ["measured_memory", "measured_rates", "Rates", "PROBES"]

PROBES = {False: ((300, 0, 4.0), (600, 0, 12.0), (900, 0, 4.0)),
          True: ((300, 300, 4.0), (600, 100, 12.0), (400, 200, 8.0), (800, 100, 4.0))}
"""(dst rows, halo rows, mean degree) of the probe blocks, without a halo (one process) and with one
(a part, whose layers after the first read a fetched copy of their input: a different set of kept
tensors, so a fit of its own): shapes far enough apart to separate the rates and the constant."""
TRANSIENT_ROWS = (4.0, 5.5)
"""Temporaries at a step's peak, in activations of the widest layer (without, with recompute): the
largest of the built-in models' measured values."""
HEAP = (3.0, 4.5)
"""Peak RSS over live bytes under glibc's heap (without, with recompute): near the built-ins' largest."""


class Rates(NamedTuple):
    """What a model's forward keeps: ``per_row * dst rows + per_halo * halo rows + per_edge * entries +
    constant`` bytes. The constant is what does not grow with the block: a weight composed in the forward
    and saved for backward (R-GCN's ``[R, d_in, d_out]`` relation weights: 4.4 MB a layer with a knowledge
    graph's 1,070 relations), which a fit without it spread over the probes' few hundred rows and so
    multiplied by a rank's tens of thousands (3.6x the measured peak at a tenth of ogbl-wikikg2).
    ``params``: trainable parameters; ``owned``: those of them owned by nodes (``GNN.owned_numel``), of
    which a graph-parallel rank holds its nodes' share; ``width``: the widest activation."""

    per_row: float
    per_halo: float
    per_edge: float
    constant: float
    params: int
    owned: int
    width: int


@functools.lru_cache(maxsize=16)
def measured_rates(name: str, options: str, features: int, classes: int, recompute: bool, halo: bool) -> Rates:
    """The :class:`Rates` of model ``name`` built with ``options`` (JSON: a builder's ``model_args``, or a
    built-in model's options), on blocks with a halo or without."""
    opts = json.loads(options)
    typed = opts.pop("_typed", None)  # a builder's typed graph (models.user.typed_args)
    with torch.random.fork_rng():  # the caller's generator is left as it was
        torch.manual_seed(0)
        model = build_model(name, features, classes, model_args=opts, recompute=recompute, typed=typed, **opts)
    model.train()
    rows, kept = [], []
    for i, (dst, extra, degree) in enumerate(PROBES[halo]):
        needs = getattr(model, "edge_needs", None)
        block, _ = probe_block(model.norm, dst=dst, halo=extra, seed=i, density=degree / (dst + extra),
                               edges=needs if needs is not None else EdgeFacts())
        x = torch.randn(dst + extra, features)
        fetch = (lambda h, k=extra: torch.cat([h, h[:k] * 1.0])) if extra else None  # stands for the halo exchange
        rows.append((dst, extra, block.adj.nnz, 1) if halo else (dst, block.adj.nnz, 1))
        kept.append(_saved_bytes(model, block, x, fetch))
    fit, *_ = np.linalg.lstsq(np.array(rows, dtype=np.float64), np.array(kept, dtype=np.float64), rcond=None)
    per_row, per_halo, per_edge, constant = (max(0.0, float(r)) for r in (fit if halo else (fit[0], 0.0, *fit[1:])))
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    width = max(max(model.layer_input_widths()), classes)
    return Rates(per_row, per_halo, per_edge, constant, params, int(getattr(model, "owned_numel", 0) or 0), width)


def _saved_bytes(model, block, x, fetch) -> int:
    saved: dict[int, int] = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        # The storage is kept (a freed one's address could be reused and counted once for two), but
        # through a detached view: ``t`` itself, when the forward saves its own output, would point
        # its graph node back at it, a cycle through C++ that Python's collector cannot see, so
        # every probe's graph and input (26 MB on ACM's features) lived as long as the process.
        return t.detach()

    block.edges()
    with keyed_dropout(0, 1), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(block, x, fetch=fetch)
    saved.pop(x.untyped_storage().data_ptr(), None)  # the features themselves are graph data
    return sum(saved.values())


def measured_memory(name: str, options: dict, features: int, classes: int, recompute: bool,
                    heap: tuple[float, float] | None = None) -> MemoryModel:
    """The memory model of ``name`` built with ``options`` (a builder's ``model_args``, or a built-in
    model's options) for a graph of ``features`` and ``classes``, from what its forward keeps on the
    probe blocks (measured once per process and shape). ``heap``: the model's heap overhead where
    measured (its spec's), else :data:`HEAP`."""
    key, r = json.dumps(options, sort_keys=True), bool(recompute)

    whole = measured_rates(name, key, features, classes, r, False)

    def kept(*, nodes, halo, block_nnz, **_) -> int:
        m = measured_rates(name, key, features, classes, r, halo > 0)
        return int(m.per_row * nodes + m.per_halo * halo + m.per_edge * block_nnz + m.constant)

    return MemoryModel(lambda *_, **__: whole.params, kept, heap_overhead=heap or HEAP, transient=TRANSIENT_ROWS,
                       width=whole.width, owned=whole.owned)
