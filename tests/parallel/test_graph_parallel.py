"""Graph-parallel training equals single-process training (docs/design.md, "One semantics for every layout").

Tolerance: a part sums each row of Â·H over its local columns (inner nodes first, then halo nodes)
where one process sums in global column order, and the weight gradients arrive as a sum of P
partial sums; in float32 that changes the last bits of every product. Per-epoch losses and final
weights are compared within LOSSES_REORDERED and WEIGHTS_REORDERED (tests/_equality.py says why
those bounds hold).
"""

from __future__ import annotations

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.partition import PartitionBook, partition_nodes, save_partition
from fullgraph.train.trainer import Trainer

from tests._equality import WEIGHTS_BATCH_NORM, WEIGHTS_REORDERED, assert_same_losses, assert_same_state
from tests.distributed import ledger, planned_bytes, run_ranks

EPOCHS = 20
DROPOUT = 0.5  # masks are keyed by (seed, epoch, site, global node id): every layout drops alike
MODELS = {  # model: extra settings
    "gcn": dict(layers=3, hidden=16),
    "sage": dict(layers=3, hidden=16),
    "gcnii": dict(layers=4, hidden=16),
    "gat": dict(layers=2, hidden=16, heads=2),
    "resgcn+": dict(layers=3, hidden=16),
}


def config(model: str, **extra) -> dict:
    return dict(model=model, dropout=DROPOUT, epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01, **MODELS[model], **extra)


@pytest.fixture(scope="module")
def single(cora):
    out = {}
    for model in MODELS:
        trainer = Trainer(TrainConfig.of(**config(model), progress="none"), cora)
        result = trainer.build().train()
        out[model] = (torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict())
    return out


def write_partition(graph, parts: int, method: str, folder):
    book = PartitionBook.build(graph, partition_nodes(graph, parts, method=method, seed=0))
    save_partition(book, graph, folder, {"method": method, "parts": parts, "seed": 0})
    return book


@pytest.mark.parametrize("nprocs", [2, 4])
def test_graph_parallel_equals_single_process(cora, single, nprocs, tmp_path):
    runs, books = [], {}
    for method in ("metis", "random"):
        folder = tmp_path / f"{method}-{nprocs}"
        books[method] = write_partition(cora, nprocs, method, folder)
        for model in MODELS:
            runs.append({"name": f"{method}/{model}", "partition_dir": str(folder), "config": config(model)})
    results = run_ranks("train_runs", nprocs, {"runs": runs}, tmp_path)
    for method, book in books.items():
        halo_total = sum(p.num_halo for p in book.parts)
        for model, (ref_losses, ref_state) in single.items():
            got = results[f"{method}/{model}"]
            assert_same_losses(got["losses"], ref_losses, what=f"{method}/{model} losses")
            assert_same_state(got["state"], ref_state, what=f"{method}/{model} weights")
            # the ledger: halo rows cross once per layer after the first, forward and backward
            hidden = MODELS[model]["hidden"]
            layers = MODELS[model]["layers"]
            expected = halo_total * hidden * 4 * (layers - 1)
            assert got["comm"]["halo/fwd"] == expected, (method, model)
            assert got["comm"]["halo/bwd"] == expected, (method, model)
            assert got["comm"].get("sample/index", 0) == 0
            # and every category as the planner predicts it (fullgraph plan)
            plan = planned_bytes(config(model, parallel="graph", nprocs=nprocs), cora, halo_total)
            assert ledger(got["comm"]) == plan, (method, model)


# ---------------------------------------------------------------- norm layers and gathered metrics
NORM_RUNS = {"gcn-batch": ("gcn", "batch"), "sage-batch": ("sage", "batch"), "gat-batch": ("gat", "batch"),
             "sage-layer": ("sage", "layer")}


@pytest.fixture(scope="module")
def single_norms(cora):
    out = {}
    for name, (model, norm) in NORM_RUNS.items():
        trainer = Trainer(TrainConfig.of(**config(model, norm=norm, metric="rocauc"), progress="none"), cora)
        result = trainer.build().train()
        out[name] = (torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict(), result.test_metric)
    return out


@pytest.mark.parametrize("nprocs", [2, 4])
def test_norm_layers_and_gathered_roc_auc_equal_single_process(cora, single_norms, nprocs, tmp_path):
    """BatchNorm's statistics summed over the parts are the whole graph's: same losses, weights and
    running statistics as one process. The ROC-AUC of the gathered scores is the one process's
    (to 1e-3: a float32 near-tie may swap two of the ~10^6 pairs)."""
    folder = tmp_path / f"metis-{nprocs}"
    write_partition(cora, nprocs, "metis", folder)
    runs = [{"name": name, "partition_dir": str(folder), "config": config(model, norm=norm, metric="rocauc")}
            for name, (model, norm) in NORM_RUNS.items()]
    results = run_ranks("train_runs", nprocs, {"runs": runs}, tmp_path)
    for name, (model, norm) in NORM_RUNS.items():
        ref_losses, ref_state, ref_metric = single_norms[name]
        got = results[name]
        assert_same_losses(got["losses"], ref_losses, what=f"{name} losses")
        assert_same_state(got["state"], ref_state, WEIGHTS_BATCH_NORM if norm == "batch" else WEIGHTS_REORDERED,
                          what=f"{name} state")  # running statistics included
        assert got["test_metric"] == pytest.approx(ref_metric, abs=1e-3), name
        # two sums per hidden layer (hidden + 1, then hidden floats) from every rank, and again in backward
        hidden, layers = MODELS[model]["hidden"], MODELS[model]["layers"]
        expected = nprocs * (layers - 1) * (2 * hidden + 1) * 4 if norm == "batch" else 0
        assert got["comm"].get("norm/fwd", 0) == expected, (name, got["comm"])
        assert got["comm"].get("norm/bwd", 0) == expected, (name, got["comm"])


# ---------------------------------------------------------------- boundary node sampling
def sampled_global_block(book, norm: str, epoch: int, p: float, seed: int = 0):
    """The single-process view of one epoch of BNS-GCN: every part's sampled rows, put back together."""
    import scipy.sparse as sp

    from fullgraph.ops import Block, SparseOp
    from fullgraph.parallel.graph import boundary_sample

    rows, cols, vals = [], [], []
    for part in book.parts:
        keep = boundary_sample(seed, epoch, part.part_id, part.num_halo, p)
        blk = part.block(norm, halo_keep=keep, scale=1.0 / p if p > 0 else 1.0)
        local_to_global = torch.cat([part.inner, part.halo[keep]])
        r = torch.repeat_interleave(torch.arange(blk.num_dst), blk.adj.indptr.diff())
        rows.append(part.inner[r])
        cols.append(local_to_global[blk.adj.indices])
        vals.append(blk.adj.values)
    n = book.node_part.numel()
    m = sp.csr_matrix((torch.cat(vals).numpy(), (torch.cat(rows).numpy(), torch.cat(cols).numpy())), shape=(n, n))
    m.sort_indices()
    t = lambda a: torch.from_numpy(a.astype("int64"))  # noqa: E731
    return Block(SparseOp(t(m.indptr), t(m.indices), torch.from_numpy(m.data), (n, n)), norm)


@pytest.mark.parametrize("p", [0.5, 0.0])
def test_boundary_sampling_equals_single_process_on_the_sampled_graph(cora, tmp_path, p):
    from fullgraph.parallel.engine import SingleEngine

    epochs, model = 10, "sage"
    book = write_partition(cora, 2, "metis", tmp_path / "bns")
    cfg = dict(config(model), epochs=epochs, eval_every=epochs, boundary_rate=p)

    class SampledReference(SingleEngine):
        def forward(self, model_, epoch, training):
            if training and p < 1:
                return model_(sampled_global_block(book, model_.norm, epoch, p), self.x)
            return super().forward(model_, epoch, training)

    trainer = Trainer(TrainConfig.of(**cfg, progress="none"), engine=SampledReference(cora, "mean"))
    ref = trainer.build().train()
    got = run_ranks("train_runs", 2, {"runs": [{"name": "bns", "partition_dir": str(tmp_path / "bns"),
                                                "config": cfg}]}, tmp_path)["bns"]
    assert_same_losses(got["losses"], ref.losses, what=f"p = {p} losses")
    assert_same_state(got["state"], trainer.model, what=f"p = {p} weights")
    halo_total = sum(part.num_halo for part in book.parts)
    if p == 0:  # isolated parts: nothing is asked for and no halo row moves
        assert got["comm"].get("halo/fwd", 0) == 0
    else:  # about p of the halo rows move, per layer after the first
        per_layer = got["comm"]["halo/fwd"] / (MODELS[model]["hidden"] * 4 * (MODELS[model]["layers"] - 1))
        assert abs(per_layer / halo_total - p) < 0.05
        assert got["comm"]["sample/index"] > 0
