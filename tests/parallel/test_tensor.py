"""Tensor parallelism (NeutronTP) equals single-process training for every model it takes, and moves
exactly the volume derived here, independently of ``plan.volumes``.

Tolerance: each process multiplies the whole Â by its column slice, so every output value is summed
in the same order as in one process, and the losses agree to the last bit in practice; the weight
gradients are a sum over the processes' row ranges (``grad/allreduce``) and GAT's score gradients a
sum over column slices, so the weights are compared within WEIGHTS_REORDERED and the losses within
LOSSES_REORDERED (tests/_equality.py says why), as for the other layouts.
"""

from __future__ import annotations

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.data.load import load_graph
from fullgraph.errors import InputError
from fullgraph.train.trainer import Trainer

from tests._equality import assert_same_losses, assert_same_state
from tests.distributed import cora_config, ledger, planned_bytes, run_ranks, single_runs

EPOCHS = 10
DROPOUT = 0.5  # keyed by (seed, epoch, site, global node id): every layout drops alike
SETTINGS = {"gcn": dict(layers=3, hidden=16), "sage": dict(layers=3, hidden=16), "gcnii": dict(layers=4, hidden=16),
            "resgcn+": dict(layers=3, hidden=16), "gat": dict(layers=2, hidden=16, heads=4),
            "appnp": dict(layers=4, hidden=16)}
N, F, C = 2708, 1433, 7  # Cora


def config(model: str, root: str, **extra) -> dict:
    return cora_config(model, root, SETTINGS, EPOCHS, DROPOUT, **extra)


@pytest.fixture(scope="module")
def single(shared_data):
    return single_runs(str(shared_data), SETTINGS, EPOCHS, DROPOUT)


def switched(width: int, P: int) -> int:
    """Bytes of one product of width ``width`` over P processes, counted from the definition: every
    value of the ``[N, width]`` matrix leaves its process once on the way to column slices unless the
    row's owner also owns the column, and once on the way back likewise."""
    rows = torch.tensor_split(torch.arange(N), P)
    cols = torch.tensor_split(torch.arange(width), P)
    kept = sum(len(rows[r]) * len(cols[r]) for r in range(P))
    return 2 * (N * width - kept) * 4


def expected(model: str, P: int, decoupled: bool = False) -> dict:
    """tp/fwd, tp/bwd and tp/attn of one training epoch, from each model's products (written out by
    hand: Cora's features are sparse, so the first GCN / SAGE layer transforms before it aggregates)."""
    H, L = SETTINGS[model]["hidden"], SETTINGS[model]["layers"]
    if decoupled:  # APPNP: one switch of the classes each way per pass
        return {"tp/fwd": switched(C, P), "tp/bwd": switched(C, P)}
    if model == "gat":  # switches of [N, heads·d] per layer; two [N, heads] score gathers, each summed back
        heads = SETTINGS[model]["heads"]
        layers = [(H, heads)] * (L - 1) + [(C, 1)]
        fwd = sum(switched(w, P) for w, _ in layers)
        return {"tp/fwd": fwd, "tp/bwd": fwd, "tp/attn": sum(2 * 2 * (P - 1) * N * k * 4 for _, k in layers)}
    widths = {"gcn": [H] * (L - 1) + [C], "sage": [H] * (L - 1) + [C], "gcnii": [H] * L, "resgcn+": [H] * L,
              "appnp": [C] * L}[model]
    fwd = sum(switched(w, P) for w in widths)
    return {"tp/fwd": fwd, "tp/bwd": fwd}  # every backward product is needed here (layer 1 transforms first)


RUNS = {2: [(m, {}) for m in SETTINGS],
        4: [(m, {}) for m in SETTINGS] + [("gcn", dict(tensor_chunks=3)), ("sage", dict(tensor_chunks=2)),
                                          ("appnp", dict(tensor_decoupled=True))]}


@pytest.mark.parametrize("nprocs", [2, 4])
def test_tensor_layout_equals_single_process_and_moves_the_derived_volume(shared_data, cora, single, nprocs,
                                                                           tmp_path):
    root = str(shared_data)
    runs = [{"name": f"{m}-{'-'.join(f'{k}{v}' for k, v in extra.items())}", "model": m, "extra": extra,
             "config": config(m, root, **extra)} for m, extra in RUNS[nprocs]]
    got = run_ranks("tensor_runs", nprocs, {"runs": runs}, tmp_path)
    for run in runs:
        name, model, extra = run["name"], run["model"], run["extra"]
        comm = got[name]["comm"]
        assert got[name]["spread"] == 0.0, name  # every process ends with the same weights, bit for bit
        assert ledger(comm) == planned_bytes(dict(run["config"], parallel="tensor", nprocs=nprocs), cora), name
        want = expected(model, nprocs, decoupled=extra.get("tensor_decoupled", False))
        assert {k: comm.get(k, 0) for k in ("tp/fwd", "tp/bwd", "tp/attn")} == want | {"tp/attn": want.get("tp/attn", 0)}
        assert not any(k.startswith(("halo", "pipe", "spmm")) for k in comm), (name, comm)
        losses, state = single[model]
        assert_same_losses(got[name]["losses"], losses, what=f"tensor P={nprocs} {name} losses")
        assert_same_state(got[name]["state"], state, what=f"tensor P={nprocs} {name} weights")


def test_batch_norm_over_all_processes_equals_single_process(shared_data, tmp_path):
    """BatchNorm's statistics are summed over the processes' row ranges (``Block.reduce``)."""
    root = str(shared_data)
    cfg = dict(config("gcn", root), norm="batch", epochs=4, eval_every=4)
    got = run_ranks("tensor_runs", 2, {"runs": [{"name": "bn", "config": cfg}]}, tmp_path)
    assert got["bn"]["comm"]["norm/fwd"] == got["bn"]["comm"]["norm/bwd"] == 2 * (2 * 16 + 1) * 4 * 2  # Σx, Σx², n
    assert ledger(got["bn"]["comm"]) == planned_bytes(dict(cfg, parallel="tensor", nprocs=2), load_graph(
        TrainConfig.of(dataset="cora", root=root)))
    trainer = Trainer(TrainConfig.of(**cfg, progress="none"), None)
    result = trainer.build().train()
    assert_same_losses(got["bn"]["losses"], torch.tensor(result.losses, dtype=torch.float64), what="batch norm")
    assert_same_state(got["bn"]["state"], trainer.model.state_dict(), what="batch norm weights")


@pytest.mark.parametrize("options, message", [
    (dict(model="gin", parallel="tensor", nprocs=2), "one sparse product or attention"),
    (dict(model="gcn", parallel="tensor", nprocs=2, tensor_decoupled=True), "keeps the feature columns apart"),
    (dict(parallel="graph", nprocs=2, tensor_chunks=2), "only with --parallel tensor"),
    (dict(parallel="tensor", nprocs=2, tensor_chunks=-1), "tensor_chunks"),
    (dict(parallel="tensor", nprocs=2, boundary_rate=0.5), "no boundary to sample"),
    (dict(model="appnp", parallel="tensor", nprocs=2, tensor_decoupled=True, tensor_chunks=2), "--tensor-chunks 0"),
])
def test_what_the_tensor_layout_cannot_run_is_refused_in_one_line(options, message):
    with pytest.raises(InputError, match=message):
        TrainConfig.of(**options)


def test_recompute_is_refused_with_the_tensor_layout(shared_data):
    cfg = TrainConfig.of(**config("gcn", str(shared_data)), parallel="tensor", nprocs=2, recompute=True,
                         progress="none")
    with pytest.raises(InputError, match="--recompute only with"):
        Trainer(cfg, None, engine=object()).build()
