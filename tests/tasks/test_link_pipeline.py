"""Link prediction under GNNPipe's layouts, the pipeline and the hybrid (issue 62 §1): the last stage keeps
every chunk's output rows of a step, scores the step's pairs once all are in, and starts each chunk's
backward from its rows of the loss's gradient (``parallel.stage_pairs``).

What is proved, dropout on, three steps an epoch, the MLP decoder's weights trained on the last stage:
* with one chunk the chunked-stale rule reads no history, so the one-process simulation and the hybrid
  1 × 2 are exact training: equal to one process on the whole graph (``Trainer`` with ``SingleEngine``,
  whose loss test_link_split.py checks against its formula), an independent reference (a pipeline of
  S stages needs S chunks or more); and with four chunks whose cross-chunk edges are cut (``--chunk-edges
  induced``: no history either) the simulation is exact training on the graph without those edges, so the
  chunks' rows must be put back in node order before the pairs are scored;
* with four chunks the pipeline follows its one-process simulation of the same chunks
  (``tests.parallel.test_pipeline.simulate``) and the hybrid 2 × 2 its 1 × 2;
* the ledger's pair exchange (within the last stage's graph ways) and its evaluation's gather of the
  scores (over every rank) equal ``plan.link``'s count.

Tolerances: LOSSES_REORDERED and WEIGHTS_REORDERED (tests/_equality.py says why); the hybrid sums its
weight gradients over parts, as graph parallelism does.
"""

from __future__ import annotations

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.data.load import load_link_graph
from fullgraph.parallel.engine import SingleEngine
from fullgraph.plan.link import link_epoch_volume, link_eval_volume
from fullgraph.tasks import task_for
from fullgraph.train.trainer import Trainer

from tests._equality import assert_same_losses, assert_same_state
from tests.distributed import run_ranks
from tests.parallel.test_pipeline import prepare, simulate

EPOCHS = 3
HIDDEN = 16
K = 4


def config(root: str, link_file: str | None = None, **extra) -> dict:
    return dict(dataset="cora", root=root, task="link", model="gcn", layers=2, hidden=HIDDEN, dropout=0.5,
                edge_batch=2000, negatives=2, decoder="mlp", epochs=EPOCHS, eval_every=1, seed=0, lr=0.01,
                **({"link_file": link_file} if link_file else {})) | extra


@pytest.fixture(scope="module")
def link_graph(shared_data):
    return load_link_graph(TrainConfig.of(**config(str(shared_data))))


@pytest.fixture(scope="module")
def runs(link_graph, shared_data, tmp_path_factory):
    """The pipeline (S = 2) and the hybrid 2 × 2 with four chunks, the hybrid 1 × 2 with four and with one:
    three starts of ranks, on the encoder graph's partitions and chunks."""
    graph, split = link_graph
    tmp = tmp_path_factory.mktemp("link-pipeline")
    link_file = str(split.save(tmp / "split.npz"))
    root = str(shared_data)
    four = prepare(graph, 1, K, tmp / "one")
    book, pdir, cfile2 = prepare(graph, 2, K, tmp / "two")
    _, _, cfile2_1 = prepare(graph, 2, 1, tmp / "two")

    def run(name, files, chunks, **layout):
        return {"name": name, "config": config(root, link_file, partition_dir=files[1], chunk_file=files[2],
                                               chunks=chunks, **layout)}

    pipeline = run_ranks("chunked_runs", 2, {"runs": [run("k4", four, K, parallel="pipeline")]}, tmp / "pipe")
    hybrid = dict(parallel="hybrid", graph_ways=2)
    two_two = run_ranks("chunked_runs", 4, {"runs": [run("k4", (book, pdir, cfile2), K, **hybrid)]}, tmp / "2x2")
    one_two = run_ranks("chunked_runs", 2, {"runs": [run("k4", (book, pdir, cfile2), K, stages=1, **hybrid),
                                                      run("k1", (book, pdir, cfile2_1), 1, stages=1, **hybrid)]},
                        tmp / "1x2")
    return {"pipeline": pipeline, "2x2": two_two, "1x2": one_two, "cfile": four[2], "book": book}


@pytest.fixture(scope="module")
def single(link_graph, shared_data):
    graph, split = link_graph
    cfg = TrainConfig.of(**config(str(shared_data)), progress="none", threads=1)
    trainer = Trainer(cfg, engine=SingleEngine(graph, "gcn"), split=split)
    result = trainer.build().train()
    assert trainer.task.steps(1) == 3
    return result, trainer.model.state_dict()


def test_one_chunk_trains_links_exactly_as_one_process(link_graph, runs, single, shared_data, tmp_path):
    graph, split = link_graph
    ref, state = single
    cfg = TrainConfig.of(**config(str(shared_data), str(split.save(tmp_path / "split.npz"))), progress="none",
                         threads=1)
    losses, simulated, result = simulate(graph, cfg, 1)
    hybrid = runs["1x2"]["k1"]
    for name, (got, weights, metric) in {"simulation": (losses, simulated, result.test_metric),
                                         "hybrid 1x2": (hybrid["losses"], hybrid["state"], hybrid["test_metric"])}.items():
        assert_same_losses(got, ref.losses, what=f"{name} one-chunk link losses")
        assert_same_state(weights, state, what=f"{name} one-chunk encoder and decoder weights")
        assert metric == pytest.approx(ref.test_metric, abs=1e-6)
    assert any(k.startswith("decoder.") for k in hybrid["state"])


def test_induced_chunks_train_links_as_one_process_without_their_cut_edges(link_graph, runs, shared_data, tmp_path):
    """The reference trains one process on Â with every entry between two chunks zeroed (the others keep
    the whole graph's normalization, as the induced chunks' blocks do) and evaluates on the whole Â."""
    from fullgraph.ops import Block, SparseOp
    from fullgraph.ops.csr import indptr_from_rows, row_ids
    from fullgraph.partition.chunks import load_chunks

    from tests.distributed import sampled_reference

    graph, split = link_graph
    n, chunk = graph.num_nodes, load_chunks(runs["cfile"], graph.num_nodes, K)
    whole = Block.from_graph(graph, "gcn").adj
    rows, cols = row_ids(whole.indptr.long()), whole.indices.long()
    keep = chunk[rows] == chunk[cols]
    cut = Block(SparseOp(indptr_from_rows(rows[keep], n), cols[keep], whole.values[keep], (n, n)), "gcn")
    cfg = TrainConfig.of(**config(str(shared_data), str(split.save(tmp_path / "split.npz")), chunk_edges="induced"),
                         progress="none", threads=1)
    trainer = Trainer(cfg, engine=sampled_reference(lambda norm, epoch: cut, graph, "gcn"), split=split)
    ref = trainer.build().train()
    losses, state, result = simulate(graph, cfg, K, runs["cfile"])
    assert 0 < int(keep.sum()) < cols.numel()
    assert_same_losses(losses, ref.losses, what="induced chunks: link losses")
    assert_same_state(state, trainer.model, what="induced chunks: link weights")
    assert result.test_metric == pytest.approx(ref.test_metric, abs=1e-6)


def test_the_pipeline_trains_links_as_its_one_process_simulation(link_graph, runs, shared_data, tmp_path):
    graph, _ = link_graph
    link_file = str(link_graph[1].save(tmp_path / "split.npz"))
    cfg = TrainConfig.of(**config(str(shared_data), link_file), progress="none", threads=1)
    losses, state, result = simulate(graph, cfg, K, runs["cfile"])
    got = runs["pipeline"]["k4"]
    assert_same_losses(got["losses"], losses, what="pipeline link losses")
    assert_same_state(got["state"], state, what="pipeline link weights")
    assert got["test_metric"] == pytest.approx(result.test_metric, abs=1e-6)


def test_the_hybrid_2x2_trains_links_as_its_1x2(runs):
    got, want = runs["2x2"]["k4"], runs["1x2"]["k4"]
    assert_same_losses(got["losses"], want["losses"], what="hybrid 2x2 link losses")
    assert_same_state(got["state"], want["state"], what="hybrid 2x2 link weights")


@pytest.mark.parametrize("layout", ["pipeline", "2x2"])
def test_the_pair_exchange_moves_what_the_plan_counts(link_graph, runs, shared_data, layout):
    """The pipeline's one last stage holds every row and exchanges none; the hybrid's last stage
    exchanges within its two graph ways (the parts' owners). Every epoch draws other pairs: the ledger's
    median epoch against the plan's count of the same epoch's pairs."""
    from fullgraph.parallel.pairs import planned_owners

    graph, split = link_graph
    flags = dict(parallel="pipeline", nprocs=2) if layout == "pipeline" else dict(parallel="hybrid", nprocs=4,
                                                                                   graph_ways=2)
    cfg = TrainConfig.of(**config(str(shared_data)), **flags)
    mesh = cfg.parallel.mesh
    owners = planned_owners(mesh, graph.num_nodes, False, 0)
    if owners is None:
        owners = runs["book"].node_part
    ranks, groups = mesh.pair_group
    task = task_for(cfg, split)
    comm = runs[layout]["k4"]["comm"]
    planned = [link_epoch_volume(task, epoch, owners, HIDDEN, ranks, groups=groups) for epoch in range(1, EPOCHS + 1)]
    for category in ("link/index", "link/fwd", "link/bwd"):
        assert comm.get(category, 0) == sorted(p[category] for p in planned)[EPOCHS // 2], category
    for category, want in link_eval_volume(task, owners, HIDDEN, ranks, world=mesh.nprocs).items():
        assert comm.get(category, 0) == want, category
    assert (planned[0]["link/fwd"] > 0) == (layout == "2x2")
