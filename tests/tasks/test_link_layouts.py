"""Link prediction equals one process in every layout that takes it (issue 53 §2), dropout on, several
steps an epoch, the MLP decoder's weights trained too: graph parallelism (METIS P = 2) against one
process on the whole encoder graph, boundary sampling p = 0.5 against one process on each epoch's
sampled graph, the SpMM grids (1D and tensor parallelism P = 2, 1.5D and 2D P = 4, 3D P = 8) against one
process; the pair exchange's bytes per epoch, training's and an evaluation's, equal ``plan.link``'s count
from the pairs and the rows' owners. The pipeline and the hybrid: test_link_pipeline.py.

The reference is ``Trainer`` on the whole graph (``SingleEngine``: a pair's rows read straight from the
output in id order), whose loss is checked against its formula in test_link_split.py. Tolerances:
LOSSES_REORDERED and WEIGHTS_REORDERED (tests/_equality.py says why).
"""

from __future__ import annotations

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.data.load import load_link_graph
from fullgraph.partition import PartitionBook, partition_nodes, save_partition
from fullgraph.plan.link import link_epoch_volume, link_eval_volume
from fullgraph.tasks import task_for
from fullgraph.train.trainer import Trainer

from tests._equality import assert_same_losses, assert_same_state
from tests.distributed import run_ranks, sampled_reference, sampled_rows

EPOCHS = 3
BNS = 0.5
HIDDEN = 16


def config(root: str, link_file: str | None = None, **extra) -> dict:
    return dict(dataset="cora", root=root, task="link", model="sage", layers=2, hidden=HIDDEN, dropout=0.5,
                edge_batch=2000, negatives=2, decoder="mlp", epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01,
                **({"link_file": link_file} if link_file else {})) | extra


@pytest.fixture(scope="module")
def link_graph(shared_data):
    return load_link_graph(TrainConfig.of(**config(str(shared_data))))


@pytest.fixture(scope="module")
def single(link_graph, shared_data):
    graph, split = link_graph
    trainer = Trainer(TrainConfig.of(**config(str(shared_data)), progress="none", threads=1), graph, split=split)
    result = trainer.build().train()
    assert trainer.task.steps(1) == 3 and any(k.startswith("decoder.") for k in trainer.model.state_dict())
    return torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict(), result


@pytest.fixture(scope="module")
def graph_runs(link_graph, shared_data, tmp_path_factory):
    """METIS P = 2, plain and boundary-sampled, in one start of two ranks."""
    graph, split = link_graph
    tmp = tmp_path_factory.mktemp("link-graph")
    link_file = str(split.save(tmp / "split.npz"))
    node_part = partition_nodes(graph, 2, method="metis", seed=0)
    save_partition(PartitionBook.build(graph, node_part), graph, tmp / "parts", {"method": "metis", "parts": 2, "seed": 0})
    root = str(shared_data)
    runs = [{"name": "metis", "partition_dir": str(tmp / "parts"), "config": config(root, link_file)},
            {"name": "bns", "partition_dir": str(tmp / "parts"), "config": config(root, link_file, boundary_rate=BNS)},
            {"name": "evaluated", "partition_dir": str(tmp / "parts"),  # an evaluation every epoch, for its bytes
             "config": config(root, link_file, epochs=2, eval_every=1)}]
    return node_part, run_ranks("train_runs", 2, {"runs": runs}, tmp)


def test_graph_parallel_link_prediction_equals_one_process(single, graph_runs):
    losses, state, result = single
    _, got = graph_runs
    assert_same_losses(got["metis"]["losses"], losses, what="graph P = 2 link losses")
    assert_same_state(got["metis"]["state"], state, what="graph P = 2 encoder and decoder weights")
    assert got["metis"]["test_metric"] == pytest.approx(result.test_metric, abs=1e-6)


def test_pair_exchange_moves_what_the_plan_counts(link_graph, graph_runs, shared_data):
    """Every epoch draws other pairs, so the ledger's median epoch is compared with the plan's count of
    that same epoch's pairs (the median of the three counts); an evaluation's exchange and its gather of
    the scores are the same every epoch."""
    graph, split = link_graph
    node_part, got = graph_runs
    task = task_for(TrainConfig.of(**config(str(shared_data))), split)
    planned = [link_epoch_volume(task, epoch, node_part, HIDDEN, 2) for epoch in range(1, EPOCHS + 1)]
    comm = got["metis"]["comm"]
    for category in ("link/index", "link/fwd", "link/bwd"):
        want = sorted(p[category] for p in planned)[EPOCHS // 2]
        assert comm[category] == want, category
    assert planned[0]["link/fwd"] > 0
    evaluation = link_eval_volume(task, node_part, HIDDEN, 2)  # the same pairs every evaluation
    evaluated = got["evaluated"]["comm"]  # the median of 2 epochs: their mean
    for category, want in evaluation.items():
        assert evaluated[category] == want, category
    assert evaluation["eval/link/fwd"] > 0 and "eval/link/bwd" not in evaluated


def test_boundary_sampled_link_prediction_equals_one_process_on_the_sampled_graph(link_graph, graph_runs,
                                                                                  shared_data):
    from fullgraph.ops import Block, SparseOp

    graph, split = link_graph
    node_part, got = graph_runs
    book = PartitionBook.build(graph, node_part)
    n = graph.num_nodes

    def sampled(norm: str, epoch: int) -> Block:
        ip, ix, vals = sampled_rows(book, norm, epoch, BNS, n)
        return Block(SparseOp(ip, ix, vals, (n, n)), norm)

    cfg = TrainConfig.of(**config(str(shared_data), boundary_rate=BNS), progress="none", threads=1)
    trainer = Trainer(cfg, engine=sampled_reference(sampled, graph, "mean"), split=split)
    ref = trainer.build().train()
    assert_same_losses(got["bns"]["losses"], ref.losses, what=f"p = {BNS} link losses")
    assert_same_state(got["bns"]["state"], trainer.model, what=f"p = {BNS} link weights")


@pytest.fixture(scope="module")
def operator_runs(link_graph, shared_data, tmp_path_factory):
    """The SpMM grids and tensor parallelism, each rank reading its block-row folder: ``spmm-1d`` and tensor
P = 2, ``spmm-1.5d`` (2 × 2) and ``spmm-2d`` (2 × 2) P = 4 in one start, ``spmm-3d`` (2 × 2 × 2) P = 8."""
    _, split = link_graph
    tmp = tmp_path_factory.mktemp("link-operator")
    link_file = str(split.save(tmp / "split.npz"))
    root = str(shared_data)
    spmm = lambda mode, **grid: {"name": mode, "config": config(root, link_file, model="gcn", parallel=mode,  # noqa: E731
                                                                eval_every=1, **grid)}
    tensor = {"name": "tensor", "config": config(root, link_file, model="gcn", eval_every=1)}  # (names its layout)
    return {"spmm-1d": run_ranks("spmm_runs", 2, {"runs": [spmm("spmm-1d")]}, tmp),
            "spmm-1.5d": run_ranks("spmm_runs", 4, {"runs": [spmm("spmm-1.5d", replication=2), spmm("spmm-2d")]}, tmp),
            "spmm-3d": run_ranks("spmm_runs", 8, {"runs": [spmm("spmm-3d")]}, tmp),
            "tensor": run_ranks("tensor_runs", 2, {"runs": [tensor]}, tmp)}


@pytest.fixture(scope="module")
def gcn_single(link_graph, shared_data):
    graph, split = link_graph
    cfg = TrainConfig.of(**config(str(shared_data), model="gcn", eval_every=1), progress="none", threads=1)
    trainer = Trainer(cfg, graph, split=split)
    return trainer.build().train(), trainer.model.state_dict()


OPERATOR_LAYOUTS = {"spmm-1d": ("spmm-1d", 2, {}), "spmm-1.5d": ("spmm-1.5d", 4, dict(replication=2)),
                    "spmm-2d": ("spmm-1.5d", 4, {}), "spmm-3d": ("spmm-3d", 8, {}), "tensor": ("tensor", 2, {})}
"""Each layout by the start of ranks that ran it, its world and its grid."""


@pytest.mark.parametrize("mode", list(OPERATOR_LAYOUTS))
def test_operator_layouts_train_links_as_one_process(link_graph, operator_runs, gcn_single, shared_data, mode):
    """The reference is one process with the same GCN (these layouts multiply by Â itself); 1.5D's replica
    columns each score every pair (their gradients summed within the column), 2D and 3D's processes
    each own a piece of a block row. The ledger's pair exchange equals ``plan.link``'s count over the
    owners ``planned_owners`` gives, in every group that runs it (``Mesh.pair_group``)."""
    from fullgraph.parallel.pairs import planned_owners

    graph, split = link_graph
    ref, state = gcn_single
    start, nprocs, grid = OPERATOR_LAYOUTS[mode]
    got = operator_runs[start][mode]
    assert_same_losses(got["losses"], ref.losses, what=f"{mode} link losses")
    assert_same_state(got["state"], state, what=f"{mode} link weights")
    assert got["test_acc"] == pytest.approx(ref.test_acc, abs=1e-6)
    run_cfg = TrainConfig.of(**config(str(shared_data), model="gcn", parallel=mode, nprocs=nprocs, **grid))
    mesh = run_cfg.parallel.mesh
    owners = planned_owners(mesh, graph.num_nodes, run_cfg.parallel.permute, 0)
    ranks, groups = mesh.pair_group
    task = task_for(run_cfg, split)
    planned = [link_epoch_volume(task, epoch, owners, HIDDEN, ranks, groups=groups) for epoch in range(1, EPOCHS + 1)]
    for category in ("link/index", "link/fwd", "link/bwd"):
        assert got["comm"][category] == sorted(p[category] for p in planned)[EPOCHS // 2], category
    assert planned[0]["link/fwd"] > 0
    for category, want in link_eval_volume(task, owners, HIDDEN, ranks, world=nprocs).items():
        assert got["comm"][category] == want, category
