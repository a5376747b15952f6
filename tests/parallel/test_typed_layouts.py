"""R-GCN and HGT on heterogeneous graphs equal one process in every layout that takes them (issue 52 §3,
issue 61 §2): HeCo's
ACM and DBLP, dropout on, the featureless types' learned embeddings on, under graph parallelism (METIS
and fennel, P = 2; boundary sampling p = 0.5 against one process on each epoch's sampled graph), and the
pipeline (S = 2) and the hybrid (2 × 2) against the one-process run of the same chunks; the algebraic
layouts refuse it in one line (its aggregation is no single sparse product).

The reference is ``Trainer`` on the whole typed ``Graph`` (``Block.from_graph``: the relation-mean Â
of ``ops.adjacency``; the layer itself is checked against PyG's ``RGCNConv`` in tests/models/test_rgcn.py).
A part's rows come from its own file. Tolerances: LOSSES_REORDERED and WEIGHTS_REORDERED
(tests/_equality.py says why). HGT runs ACM under METIS, boundary sampling, the pipeline and the hybrid: its
blocks are R-GCN's (the relation-mean structure, cut by relation), its layers attend over them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.partition import PartitionBook, partition_nodes, save_partition
from fullgraph.partition.chunks import cached_chunks
from fullgraph.partition.store import load_meta
from fullgraph.train.trainer import Trainer

from tests._equality import assert_same_losses, assert_same_state
from tests.distributed import ledger, planned_bytes, run_ranks, sampled_reference, sampled_rows
from tests.parallel.test_edge_data_layouts import simulate

EPOCHS = 4
K = 4


PYG_HGT = str(Path(__file__).resolve().parents[1] / "hetero_user_models.py") + ":hgt_layers"
"""PyG's ``HGTConv`` layers through a builder (``models.pyg_hetero_layer``), keyed dropout between them."""
PYG_TO_HETERO = str(Path(__file__).resolve().parents[1] / "hetero_user_models.py") + ":to_hetero_gnn"
"""PyG's ``to_hetero`` of a whole two-conv model, which fullgraph cuts into its layers (``models.pyg_hetero_split``)."""
MODELS = ("rgcn", "hgt", "pyg-hgt", "pyg-to-hetero")


def config(model: str = "rgcn", **extra) -> dict:
    if model.startswith("pyg-"):
        args = {"model": PYG_HGT, "model_args": {"dropout": 0.5}} if model == "pyg-hgt" else {"model": PYG_TO_HETERO}
        return dict(**args, hidden=16, epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01, **extra)
    return dict(model=model, layers=2, hidden=16, dropout=0.5, epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01,
                **extra)


@pytest.fixture(scope="module")
def typed(shared_data):
    from fullgraph.data.formats.heco import load_heco

    return {name: load_heco(shared_data / f"heco_{name}", name=name) for name in ("acm", "dblp")}


@pytest.fixture(scope="module")
def single(typed):
    out = {}
    for model in MODELS:
        for name, graph in typed.items() if model == "rgcn" else [("acm", typed["acm"])]:
            trainer = Trainer(TrainConfig.of(**config(model), progress="none", threads=1), graph)
            result = trainer.build().train()
            shared = sum(p.numel() for k, p in trainer.model.named_parameters() if p.requires_grad and "embedding" not in k)
            out[model, name] = (torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict(), shared)
            assert any(k.endswith("embedding") for k in out[model, name][1])  # the featureless rows are trained
    return out


def parts(graph, method: str, folder, ways: int = 2):
    node_part = partition_nodes(graph, ways, method=method, seed=0)
    save_partition(PartitionBook.build(graph, node_part), graph, folder, {"method": method, "parts": ways, "seed": 0})
    return node_part


BNS = 0.5  # the boundary rate of the sampled run


@pytest.fixture(scope="module")
def graph_runs(typed, tmp_path_factory):
    """Every graph-parallel run in one start of two ranks: ACM (METIS, fennel, and METIS with boundary
    sampling) and DBLP (METIS)."""
    tmp = tmp_path_factory.mktemp("typed-graph")
    runs = []
    for name, method in (("acm", "metis"), ("acm", "fennel"), ("dblp", "metis")):
        parts(typed[name], method, tmp / f"{name}-{method}")
        runs.append({"name": f"{name}-{method}", "partition_dir": str(tmp / f"{name}-{method}"), "config": config()})
    for model in MODELS[1:]:
        runs.append({"name": f"acm-metis-{model}", "partition_dir": str(tmp / "acm-metis"), "config": config(model)})
    for model in MODELS:
        runs.append({"name": f"bns-{model}", "partition_dir": str(tmp / "acm-metis"),
                     "config": config(model, boundary_rate=BNS)})
    return runs, run_ranks("train_runs", 2, {"runs": runs}, tmp)


def test_graph_parallel_typed_models_equal_one_process(typed, single, graph_runs):
    runs, got = graph_runs
    for run in runs:
        if run["name"].startswith("bns"):
            continue
        name, model = run["name"].split("-")[0], run["name"].split("-", 2)[2] if run["name"].count("-") > 1 else "rgcn"
        losses, state, shared = single[model, name]
        assert_same_losses(got[run["name"]]["losses"], losses, what=f"graph P=2 {run['name']} losses")
        assert_same_state(got[run["name"]]["state"], state, what=f"graph P=2 {run['name']} weights")
        # the embeddings stay with their owners: pre's output crosses as a layer input (both layers read
        # hidden-wide halo rows), and the all-reduce carries every weight but them (fullgraph plan says so)
        halo = sum(int(st["halo"]) for st in load_meta(run["partition_dir"])["part_stats"])
        comm = got[run["name"]]["comm"]
        first = 16 if not model.startswith("pyg-") else typed[name].num_features + 16  # PyG's: [features | table]
        assert comm["halo/fwd"] == comm["halo/bwd"] == halo * (first + 16) * 4, run["name"]
        # every trainable weight but the table (PyG's HGTConv: its skips of the types whose width changes read
        # nothing and are frozen, models.pyg_hetero_layer)
        assert comm["grad/allreduce"] == 2 * 4 * shared, run["name"]
        assert ledger(comm) == planned_bytes(config(model, parallel="graph", nprocs=2), typed[name], halo), run["name"]


@pytest.mark.parametrize("model", MODELS)
def test_boundary_sampling_typed_models_equal_one_process_on_the_sampled_graph(typed, graph_runs, model):
    """p = 0.5: each epoch's block is put together from the parts' sampled rows, with each entry's
    relation found in the graph itself by its global (dst, src), not taken from the parts."""
    from fullgraph.ops import Block, SparseOp
    from fullgraph.ops.csr import row_ids
    from fullgraph.ops.edge_data import EdgeData

    p, g = BNS, typed["acm"]
    runs, got = graph_runs
    book = PartitionBook.build(g, partition_nodes(g, 2, method="metis", seed=0))  # the acm-metis run's parts
    n = g.num_nodes
    graph_keys = row_ids(g.indptr) * n + g.indices  # ascending: rows sorted, each row's columns sorted

    def sampled(norm: str, epoch: int) -> Block:
        ip, ix, vals = sampled_rows(book, norm, epoch, p, n)
        eid = torch.searchsorted(graph_keys, row_ids(ip) * n + ix)
        assert torch.equal(graph_keys[eid], row_ids(ip) * n + ix)  # every entry is an edge of the graph
        data = EdgeData(eid, None, None, g.edge_type[eid], g.num_relations)
        return Block(SparseOp(ip, ix, vals, (n, n)), norm, edata=data)

    trainer = Trainer(TrainConfig.of(**config(model, boundary_rate=p), progress="none", threads=1),
                      engine=sampled_reference(sampled, g, "relation-mean"))
    ref = trainer.build().train()
    assert_same_losses(got[f"bns-{model}"]["losses"], ref.losses, what=f"p = {p} {model} losses")
    assert_same_state(got[f"bns-{model}"]["state"], trainer.model, what=f"p = {p} {model} weights")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stages, ways", [(2, 1), (2, 2)], ids=["pipeline-2", "hybrid-2x2"])
def test_chunked_layouts_typed_models_follow_the_one_process_chunks(typed, stages, ways, model, tmp_path):
    """Pipeline (ACM and DBLP; HGT: ACM) and hybrid (ACM) against the one-process run of the same chunks."""
    runs, cfiles = [], {}
    for name in ("acm", "dblp") if ways == 1 and model == "rgcn" else ("acm",):
        g, folder = typed[name], tmp_path / f"{name}-parts"
        node_part = (parts(g, "metis", folder, ways) if ways > 1 else torch.zeros(g.num_nodes, dtype=torch.int64))
        if ways == 1:
            save_partition(PartitionBook.build(g, node_part), g, folder, {"method": "metis", "parts": 1, "seed": 0})
        cfiles[name] = str(cached_chunks(g, node_part, ways, K, "metis", 0, tmp_path))
        mode = dict(parallel="pipeline") if ways == 1 else dict(parallel="hybrid", stages=stages, graph_ways=ways)
        runs.append({"name": name, "config": config(model, partition_dir=str(folder), chunks=K, chunk_file=cfiles[name],
                                                    history_refresh=2, **mode)})
    got = run_ranks("chunked_runs", stages * ways, {"runs": runs}, tmp_path)
    for name, cfile in cfiles.items():
        want = simulate(typed[name], TrainConfig.of(**config(model, history_refresh=2), progress="none", threads=1),
                        cfile)
        assert_same_losses(got[name]["losses"], want, what=f"{stages}x{ways} {name} {model} losses")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("mode", ["spmm-1d", "tensor"])
def test_algebraic_layouts_refuse_typed_models_in_one_line(mode, model):
    name = config(model)["model"]
    with pytest.raises(InputError, match=re.escape(name)):
        TrainConfig.of(**config(model, parallel=mode, nprocs=2))
