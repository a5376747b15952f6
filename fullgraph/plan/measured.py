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

import numpy as np
import torch

from fullgraph.models import MemoryModel, build_model
from fullgraph.models.contract import probe_block
from fullgraph.ops.edge_data import EdgeFacts
from fullgraph.ops.dropout import keyed_dropout

__all__ = ["measured_memory", "measured_rates", "PROBES"]

PROBES = {False: ((300, 0, 4.0), (600, 0, 12.0)), True: ((300, 300, 4.0), (600, 100, 12.0), (400, 200, 8.0))}
"""(dst rows, halo rows, mean degree) of the probe blocks, without a halo (one process) and with one
(a part, whose layers after the first read a fetched copy of their input: a different set of kept
tensors, so a fit of its own): shapes far enough apart to separate the rates."""
TRANSIENT_ROWS = (4.0, 5.5)
"""Temporaries at a step's peak, in activations of the widest layer (without, with recompute): the
largest of the built-in models' measured values."""
HEAP = (3.0, 4.5)
"""Peak RSS over live bytes under glibc's heap (without, with recompute): near the built-ins' largest."""


@functools.lru_cache(maxsize=16)
def measured_rates(name: str, options: str, features: int, classes: int, recompute: bool, halo: bool
                   ) -> tuple[float, float, float, int, int]:
    """Bytes kept per dst row, per halo row and per block entry by model ``name`` built with
    ``options`` (JSON: a builder's ``model_args``, or a built-in model's options), on blocks with a
    halo or without; its parameters and its widest activation."""
    opts = json.loads(options)
    with torch.random.fork_rng():  # the caller's generator is left as it was
        torch.manual_seed(0)
        model = build_model(name, features, classes, model_args=opts, recompute=recompute, **opts)
    model.train()
    rows, kept = [], []
    for i, (dst, extra, degree) in enumerate(PROBES[halo]):
        needs = getattr(model, "edge_needs", None)
        block, _ = probe_block(model.norm, dst=dst, halo=extra, seed=i, density=degree / (dst + extra),
                               edges=needs if needs is not None else EdgeFacts())
        x = torch.randn(dst + extra, features)
        fetch = (lambda h, k=extra: torch.cat([h, h[:k] * 1.0])) if extra else None  # stands for the halo exchange
        rows.append((dst, extra, block.adj.nnz))
        kept.append(_saved_bytes(model, block, x, fetch))
    rates, *_ = np.linalg.lstsq(np.array(rows, dtype=np.float64), np.array(kept, dtype=np.float64), rcond=None)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    width = max(max(model.layer_input_widths()), classes)
    return (*(max(0.0, float(r)) for r in rates), params, width)


def _saved_bytes(model, block, x, fetch) -> int:
    saved: dict[int, int] = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    block.edges()
    with keyed_dropout(0, 1), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(block, x, fetch=fetch)
    saved.pop(x.untyped_storage().data_ptr(), None)  # the features themselves are graph data
    return sum(saved.values())


def measured_memory(name: str, options: dict, features: int, classes: int, recompute: bool) -> MemoryModel:
    """The memory model of ``name`` built with ``options`` (a builder's ``model_args``, or a built-in
    model's options) for a graph of ``features`` and ``classes``, from what its forward keeps on the
    probe blocks (measured once per process and shape)."""
    key, r = json.dumps(options, sort_keys=True), bool(recompute)

    params, width = measured_rates(name, key, features, classes, r, False)[3:]

    def kept(*, nodes, halo, block_nnz, **_) -> int:
        per_row, per_halo, per_edge, _, _ = measured_rates(name, key, features, classes, r, halo > 0)
        return int(per_row * nodes + per_halo * halo + per_edge * block_nnz)

    return MemoryModel(lambda *_, **__: params, kept, heap_overhead=HEAP, transient=TRANSIENT_ROWS, width=width)
