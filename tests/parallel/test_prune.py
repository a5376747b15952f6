"""``--prune`` trains exactly as full computation does (docs/design.md, "Exact layouts").

The reference is the unpruned run: single-process training, which never reads the pruning code. A
pruned layer sums each row over its columns renumbered (the rows it keeps, then its halo), so the
float32 sums change order as a graph-parallel part's do: losses and weights are compared within
LOSSES_REORDERED and WEIGHTS_REORDERED (tests/_equality.py), with dropout on (masks are keyed by
global node id, so a row kept by pruning draws the mask it draws unpruned).

The rows and halo rows each layer needs are counted here again, on the whole graph with SciPy and
the partition, independently of ``fullgraph.parallel.prune``: the ledger's halo bytes and the
summary's rows per layer must be exactly those.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.train.trainer import Trainer

from tests._equality import assert_same_losses, assert_same_state
from tests.distributed import ledger, planned_bytes, run_ranks
from tests.parallel.test_graph_parallel import write_partition

EPOCHS = 8
MODELS = {  # the four the issue names: GCNII's H0 path reads every row its layers read
    "gcn": dict(layers=3, hidden=16),
    "sage": dict(layers=3, hidden=16),
    "gat": dict(layers=2, hidden=8, heads=2),
    "gcnii": dict(layers=4, hidden=16),
}


def config(model: str, **extra) -> dict:
    return dict(model=model, dropout=0.5, epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01, **MODELS[model], **extra)


def train(graph, **options):
    trainer = Trainer(TrainConfig.of(**options, progress="none"), graph)
    result = trainer.build().train()
    return torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict(), result


@pytest.fixture(scope="module")
def unpruned(cora):
    return {model: train(cora, **config(model)) for model in MODELS}


def needed_rows(graph, layers: int) -> list[np.ndarray]:
    """``need[l]``: the nodes layer l must compute for the loss (l = L: the training nodes), by SciPy."""
    n = graph.num_nodes
    a = sp.csr_matrix((np.ones(graph.indices.numel()), graph.indices.numpy(), graph.indptr.numpy()), shape=(n, n))
    need = [None] * (layers + 1)
    need[layers] = graph.train_mask.numpy().copy()
    for layer in range(layers, 0, -1):
        need[layer - 1] = need[layer] | (a.T @ need[layer].astype(float) > 0)
    return need, a


def pruned_halo(graph, node_part: np.ndarray, layers: int) -> list[int]:
    """Per layer 2..L, the halo rows all parts read: nodes of another part that a needed row reads."""
    need, a = needed_rows(graph, layers)
    out = []
    for layer in range(2, layers + 1):
        total = 0
        for r in np.unique(node_part):
            rows = np.flatnonzero(need[layer] & (node_part == r))
            cols = np.unique(a[rows].indices)
            total += int((node_part[cols] != r).sum())
        out.append(total)
    return out


@pytest.mark.parametrize("model", list(MODELS))
def test_pruned_single_process_equals_full(cora, unpruned, model):
    losses, state, result = train(cora, **config(model, prune=True))
    ref_losses, ref_state, ref = unpruned[model]
    assert_same_losses(losses, ref_losses, what=f"{model} pruned losses")
    assert_same_state(state, ref_state, what=f"{model} pruned weights")
    need, _ = needed_rows(cora, MODELS[model]["layers"])
    want = [int(need[layer].sum()) for layer in range(1, MODELS[model]["layers"] + 1)]
    assert result.rows_per_layer == {"computed": want, "needed": want}
    assert ref.rows_per_layer == {"computed": [cora.num_nodes] * len(want), "needed": want}
    assert want[-1] == int(cora.train_mask.sum()) and sum(want) < 0.5 * cora.num_nodes * len(want)


@pytest.mark.parametrize("nprocs", [2, 4])
def test_pruned_graph_parallel_equals_single_process(cora, unpruned, nprocs, tmp_path):
    book = write_partition(cora, nprocs, "metis", tmp_path / "parts")
    runs = [{"name": model, "partition_dir": str(tmp_path / "parts"), "config": config(model, prune=True)}
            for model in MODELS]
    results = run_ranks("train_runs", nprocs, {"runs": runs}, tmp_path)
    node_part = book.node_part.numpy() if torch.is_tensor(book.node_part) else np.asarray(book.node_part)
    for model, (ref_losses, ref_state, ref) in unpruned.items():
        got = results[model]
        assert_same_losses(got["losses"], ref_losses, what=f"{model} P={nprocs} pruned losses")
        assert_same_state(got["state"], ref_state, what=f"{model} P={nprocs} pruned weights")
        assert got["rows"] == {"computed": ref.rows_per_layer["needed"], "needed": ref.rows_per_layer["needed"]}
        if model in ("gcn", "sage"):  # every layer after the first reads hidden-wide rows
            halo = pruned_halo(cora, node_part, MODELS[model]["layers"])
            expected = sum(halo) * MODELS[model]["hidden"] * 4
            assert got["comm"]["halo/fwd"] == expected == got["comm"]["halo/bwd"], (model, halo)
            full = sum(p.num_halo for p in book.parts) * MODELS[model]["hidden"] * 4 * (MODELS[model]["layers"] - 1)
            assert expected < full
            plan = planned_bytes(config(model, parallel="graph", nprocs=nprocs, prune=True), cora,
                                 sum(p.num_halo for p in book.parts), torch.as_tensor(node_part))
            assert ledger(got["comm"]) == plan, model


def test_pruning_composes_with_boundary_sampling(cora, tmp_path):
    """Pruned and unpruned runs on the same sampled halos (p = 0.5, and p = 0: isolated parts)."""
    write_partition(cora, 2, "metis", tmp_path / "parts")
    runs = [{"name": f"{model}/{p}/{prune}", "partition_dir": str(tmp_path / "parts"),
             "config": config(model, boundary_rate=p, prune=prune)}
            for model in ("sage", "gcnii") for p in (0.5, 0.0) for prune in (False, True)]
    results = run_ranks("train_runs", 2, {"runs": runs}, tmp_path)
    for model in ("sage", "gcnii"):
        for p in (0.5, 0.0):
            got, want = results[f"{model}/{p}/True"], results[f"{model}/{p}/False"]
            assert_same_losses(got["losses"], want["losses"], what=f"{model} p={p} pruned losses")
            assert_same_state(got["state"], want["state"], what=f"{model} p={p} pruned weights")
            assert got["comm"].get("halo/fwd", 0) < want["comm"].get("halo/fwd", 0) or p == 0.0


def test_prune_is_refused_where_it_cannot_be_exact(cora):
    with pytest.raises(InputError, match="--prune runs with --parallel single or graph"):
        TrainConfig.of(model="gcn", parallel="pipeline", nprocs=2, layers=2, prune=True)
    with pytest.raises(InputError, match="without statistics over all nodes"):
        Trainer(TrainConfig.of(model="sage", norm="batch", layers=2, prune=True, progress="none"), cora).build()


def test_plan_counts_the_pruned_rows_and_bytes(shared_data, cora, capsys, tmp_path):
    """``fullgraph plan --prune``: graph parallelism planned pruned, the other layouts as they run."""
    import json

    from fullgraph.cli import main

    flags = ["plan", "--dataset", "cora", "--root", str(shared_data), "--nprocs", "2", "--layers", "3", "--hidden",
             "16", "--layout", "graph", "--json", "--partition-dir", str(tmp_path / "parts")]
    book = write_partition(cora, 2, "metis", tmp_path / "parts")
    plans = {}
    for prune in (False, True):
        assert main(flags + (["--prune"] if prune else [])) == 0
        plans[prune] = json.loads(capsys.readouterr().out)
    full, pruned = plans[False]["layouts"][0], plans[True]["layouts"][0]
    need, _ = needed_rows(cora, 3)
    assert pruned["layout"] == "graph --prune" and full["layout"] == "graph"
    assert pruned["rows_per_layer"] == [int(need[layer].sum()) for layer in (1, 2, 3)]
    assert full["rows_per_layer"] == [cora.num_nodes] * 3
    halo = pruned_halo(cora, np.asarray(book.node_part), 3)
    assert pruned["by_category"]["halo/fwd"] == sum(halo) * 16 * 4 < full["by_category"]["halo/fwd"]
    assert pruned["by_category"]["eval/halo/fwd"] == full["by_category"]["eval/halo/fwd"]
    assert plans[True]["minibatch"].startswith("full-graph training with --prune would likely")  # 140 nodes: 1 batch
