"""Training on a graph whose edges carry data equals one process in every layout that takes it
(issue 51 §3): weighted GCN (``gcn_norm`` with weights), weighted-mean SAGE and weighted-sum GIN,
the built-in GAT reading edge features, and PyG's ``GATConv(edge_dim)`` (its attention dropout on),
``GINEConv`` and ``RGCNConv`` through ``from_pyg``, dropout on, under graph parallelism (METIS, P = 2; and with
``--prune``), and the pipeline (S = 2) and the hybrid (2 × 2) against the one-process run of the
same chunks, as ``test_user_models`` does; the algebraic layouts train the weighted models.

The reference is ``Trainer`` on the whole ``Graph`` (``Block.from_graph``: the weighted Â of
``ops.adjacency.normalized_data``, checked against PyG's ``gcn_norm`` in ``tests/ops``); a part's
rows come from its own file and its own weighted degrees. Tolerances: LOSSES_REORDERED and
WEIGHTS_REORDERED (tests/_equality.py says why).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.models import norm_and_depth
from fullgraph.parallel.history import History
from fullgraph.parallel.pipeline import ChunkedEngine
from fullgraph.parallel.schedule import ChunkSchedule, stage_bounds
from fullgraph.partition import PartitionBook, partition_nodes, save_partition
from fullgraph.partition.chunks import cached_chunks, load_chunks
from fullgraph.train.trainer import Trainer

from tests._equality import assert_same_losses, assert_same_state
from tests.distributed import run_ranks, sampled_reference, sampled_rows

EPOCHS = 5
K = 4
REPO = Path(__file__).resolve().parents[2]
RUNS = {  # name: settings
    "gat-edges": dict(model=f"{REPO}/tests/user_models.py:gat_edges"),  # GATConv(edge_dim), attention dropout
    "gine": dict(model=f"{REPO}/tests/user_models.py:gine"),
    "rgcn": dict(model=f"{REPO}/tests/user_models.py:rgcn"),
    "gcn": dict(model="gcn", layers=2, hidden=16),
    "sage": dict(model="sage", layers=2, hidden=16),
    "gin": dict(model="gin", layers=2, hidden=16),
    "gat": dict(model="gat", layers=2, hidden=16, heads=2),  # built with edge_dim = 3: reads the features
    "gcn-prune": dict(model="gcn", layers=2, hidden=16, prune=True),
}


def config(name: str, **extra) -> dict:
    builtin = {} if ".py:" in RUNS[name]["model"] else dict(dropout=0.5)  # a builder decides its own (0.5)
    return dict(RUNS[name], **builtin, epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01, **extra)


@pytest.fixture(scope="module")
def single(cora_edges):
    out = {}
    for name in RUNS:
        trainer = Trainer(TrainConfig.of(**config(name), progress="none"), cora_edges)
        result = trainer.build().train()
        out[name] = (torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict())
    return out


def test_weights_change_the_training(cora, cora_edges, single):
    """The reference is weighted at all: the same run without the weights trains otherwise."""
    trainer = Trainer(TrainConfig.of(**config("gcn"), progress="none"), cora)
    trainer.build().train()
    weighted = single["gcn"][1]
    gap = max(float((v - weighted[k]).abs().max()) for k, v in trainer.model.state_dict().items())
    assert gap > 1e-3, gap


def test_graph_parallel_with_edge_data_equals_one_process(cora_edges, single, tmp_path):
    node_part = partition_nodes(cora_edges, 2, method="metis", seed=0)
    save_partition(PartitionBook.build(cora_edges, node_part), cora_edges, tmp_path / "parts",
                   {"method": "metis", "parts": 2, "seed": 0})
    runs = [{"name": name, "partition_dir": str(tmp_path / "parts"), "config": config(name)} for name in RUNS]
    got = run_ranks("train_runs", 2, {"runs": runs}, tmp_path)
    for name, (losses, state) in single.items():
        assert_same_losses(got[name]["losses"], losses, what=f"graph P=2 {name} losses")
        assert_same_state(got[name]["state"], state, what=f"graph P=2 {name} weights")


def simulate(graph, cfg: TrainConfig, chunk_file: str):
    norm, layers = norm_and_depth(cfg.model.name, cfg.model.layers, cfg.model.args,
                                  lambda: (graph.num_features, graph.num_classes, graph.node_types))
    part = PartitionBook.build(graph, torch.zeros(graph.num_nodes, dtype=torch.int64)).part(0)
    engine = ChunkedEngine(part, load_chunks(chunk_file, graph.num_nodes, K)[part.local_nodes], norm,
                           ChunkSchedule(K, tuple(stage_bounds(layers, 1)), shuffle=cfg.parallel.shuffle),
                           History(cfg.parallel.history_refresh))
    engine.node_types = graph.node_types  # what build_engine reads from the graph (a typed graph's R-GCN)
    result = Trainer(cfg, engine=engine).build().train()
    return torch.tensor(result.losses, dtype=torch.float64)


@pytest.mark.parametrize("stages, ways", [(2, 1), (2, 2)], ids=["pipeline-2", "hybrid-2x2"])
def test_chunked_layouts_with_edge_data_follow_the_one_process_chunks(cora_edges, stages, ways, tmp_path):
    """Global chunk k is the union of the parts' chunk k: the hybrid's ranks hold a part's chunks and
    their edges' data, and follow the same one-process run as the pipeline's."""
    node_part = (partition_nodes(cora_edges, ways, method="metis", seed=0) if ways > 1
                 else torch.zeros(cora_edges.num_nodes, dtype=torch.int64))
    save_partition(PartitionBook.build(cora_edges, node_part), cora_edges, tmp_path / "parts",
                   {"method": "metis", "parts": ways, "seed": 0})
    cfile = str(cached_chunks(cora_edges, node_part, ways, K, "metis", 0, tmp_path))
    names = ("gcn", "gat", "rgcn") if ways == 1 else ("gcn", "gat-edges")
    mode = dict(parallel="pipeline") if ways == 1 else dict(parallel="hybrid", stages=stages, graph_ways=ways)
    runs = [{"name": n, "config": config(n, partition_dir=str(tmp_path / "parts"), chunks=K, chunk_file=cfile,
                                         history_refresh=2, **mode)} for n in names]
    got = run_ranks("chunked_runs", stages * ways, {"runs": runs}, tmp_path)
    for n in names:
        want = simulate(cora_edges, TrainConfig.of(**config(n, history_refresh=2), progress="none"), cfile)
        assert_same_losses(got[n]["losses"], want, what=f"{stages}x{ways} {n} losses")


@pytest.fixture(scope="module")
def edges_folder(cora_edges, tmp_path_factory):
    """``cora_edges`` as a native folder (its edge files beside the CSR), which the ranks of the algebraic
    layouts load as a user's run would: the same graph, bit for bit."""
    from fullgraph.data.formats.native import write_native
    from fullgraph.data.load import load_graph

    folder = tmp_path_factory.mktemp("cora-edges") / "folder"
    write_native(cora_edges, folder)
    loaded = load_graph(TrainConfig.of(dataset=str(folder), feature_norm="none"))
    assert loaded.fingerprint() == cora_edges.fingerprint()
    return folder


@pytest.mark.parametrize("mode", ["spmm-1d", "tensor"])
def test_algebraic_layouts_train_weighted_models_as_one_process(edges_folder, single, mode, tmp_path):
    """A weight only changes Â's values, which these layouts multiply by: the same training as one process."""
    names = ("gcn", "sage")
    layout = {} if mode == "tensor" else dict(parallel=mode)
    runs = [{"name": n, "config": config(n, dataset=str(edges_folder), feature_norm="none", **layout)} for n in names]
    got = run_ranks("tensor_runs" if mode == "tensor" else "spmm_runs", 2, {"runs": runs}, tmp_path)
    for n in names:
        losses, state = single[n]
        assert_same_losses(got[n]["losses"], losses, what=f"{mode} P=2 {n} losses")
        assert_same_state(got[n]["state"], state, what=f"{mode} P=2 {n} weights")


def test_layouts_that_keep_only_weights_refuse_a_model_that_reads_edge_features(cora_edges):
    """SpMM and tensor hand a layer Â, whose values hold the weights, and nothing of the edges: a model
    that reads edge features is refused there in one line that names the layouts that take them."""
    from types import SimpleNamespace

    from fullgraph.errors import InputError
    from fullgraph.parallel.registry import check_edge_data
    from tests.user_models import gine

    model, engine = gine(8, 3), SimpleNamespace(edges=cora_edges.edge_facts())
    with pytest.raises(InputError, match=r"expected a model that reads no edge features with --parallel tensor "
                                         r".* under --parallel single, graph, pipeline, hybrid$"):
        check_edge_data(TrainConfig.of(model="gcn", parallel="tensor", nprocs=2), model, engine)
    check_edge_data(TrainConfig.of(model="gcn", parallel="graph", nprocs=2), model, engine)
    lacking = SimpleNamespace(edges=cora_edges.edge_facts().only(("weight",)))  # the graph itself has none
    with pytest.raises(InputError, match="expected edge features .* for GINEConv"):
        check_edge_data(TrainConfig.of(model="gcn", parallel="tensor", nprocs=2), model, lacking)


def test_boundary_sampling_with_edge_data_equals_one_process_on_the_sampled_graph(cora_edges, tmp_path):
    """BNS-GCN with p = 0.5: a dropped halo column drops its edges and their data. (GINEConv is left
    out here: its sum aggregation spikes the loss at epoch 2, and one first-layer weight whose gradient
    is ~0 takes an Adam step of another sign in one of the two sums' orders — the float noise
    LOSSES_REORDERED describes, not a difference in the data; it equals one process without sampling
    above.) The reference
    trains one process on each epoch's sampled graph, put together from the parts' sampled rows (as
    ``test_graph_parallel`` does), whose entries take their features from the graph itself, found by
    their global (dst, src), not from the parts."""
    from fullgraph.ops import Block, SparseOp
    from fullgraph.ops.csr import row_ids
    from fullgraph.ops.edge_data import EdgeData

    p, g = 0.5, cora_edges
    book = PartitionBook.build(g, partition_nodes(g, 2, method="metis", seed=0))
    save_partition(book, g, tmp_path / "bns", {"method": "metis", "parts": 2, "seed": 0})
    n = g.num_nodes
    graph_keys = row_ids(g.indptr) * n + g.indices  # ascending: rows sorted, each row's columns sorted

    def sampled(norm: str, epoch: int) -> Block:
        ip, ix, vals = sampled_rows(book, norm, epoch, p, n)
        r = row_ids(ip)
        loop = ix == r  # the loops gcn adds: no edge of the graph (weight 1, the mean of the in-edges' features)
        eid = torch.searchsorted(graph_keys, r * n + ix).clamp(max=g.num_edges - 1)
        assert torch.equal(graph_keys[eid][~loop], (r * n + ix)[~loop])  # every other entry is an edge of the graph
        mean = torch.zeros(n, g.edge_attr.shape[1], dtype=torch.float64).index_add_(
            0, row_ids(g.indptr), g.edge_attr.double()) / g.indptr.diff().clamp(min=1).unsqueeze(1)
        data = EdgeData(torch.where(loop, -1 - r, eid), torch.where(loop, 1.0, g.edge_weight[eid]),
                        torch.where(loop.unsqueeze(1), mean[r].float(), g.edge_attr[eid]),
                        torch.where(loop, g.num_relations, g.edge_type[eid]), g.num_relations)
        return Block(SparseOp(ip, ix, vals, (n, n)), norm, edata=data)

    names = ("gcn", "gat-edges")  # weights in Â's values; features in GATConv's attention
    got = run_ranks("train_runs", 2, {"runs": [{"name": name, "partition_dir": str(tmp_path / "bns"),
                                                "config": config(name, boundary_rate=p)} for name in names]}, tmp_path)
    for name in names:
        trainer = Trainer(TrainConfig.of(**config(name, boundary_rate=p), progress="none"),
                          engine=sampled_reference(sampled, g, "gcn" if name == "gcn" else "mean"))
        ref = trainer.build().train()
        assert_same_losses(got[name]["losses"], ref.losses, what=f"p = {p} {name} losses")
        assert_same_state(got[name]["state"], trainer.model, what=f"p = {p} {name} weights")
