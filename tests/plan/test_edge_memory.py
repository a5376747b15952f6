"""``fullgraph plan`` counts edge data in a rank's memory (issue 51 §3): the global edge id, weight,
features and type of every edge the rank holds, and again of its block's entries where the
normalization adds self loops (a mean block shares the graph's). It travels nowhere: a part's edge
data is written once into its file, so no ledger category carries it (the layout tests compare the
ledger with the plan's bytes, which have no edge term)."""

from __future__ import annotations

import pytest

from fullgraph.config import TrainConfig
from fullgraph.plan.rank_memory import partition_memory_stats, single_peak, spmm_peak


def test_entry_bytes(cora_edges):
    assert cora_edges.edge_facts().entry_bytes == 8 + 4 + 4 * 3 + 8  # id, weight, 3 features, type


@pytest.mark.parametrize("model, loops", [("gcn", True), ("sage", False)])
def test_a_rank_holds_its_edges_data(cora, cora_edges, model, loops):
    cfg = TrainConfig.of(model=model)
    e, n = cora.num_edges, cora.num_nodes
    per = cora_edges.edge_facts().entry_bytes
    grown = single_peak(cfg, cora_edges) - single_peak(cfg, cora)
    assert grown == per * (e + (e + n if loops else 0))


def test_spmm_ranks_hold_no_edge_data(cora, cora_edges):
    cfg = TrainConfig.of(model="gcn", parallel="spmm-1d", nprocs=2)
    assert spmm_peak(cfg, cora_edges, None, None) == spmm_peak(cfg, cora, None, None)


def test_partition_folder_stats_carry_the_edge_bytes(cora_edges, tmp_path):
    from fullgraph.partition import PartitionBook, partition_nodes, save_partition
    from fullgraph.partition.store import load_meta

    book = PartitionBook.build(cora_edges, partition_nodes(cora_edges, 2, method="random", seed=0))
    save_partition(book, cora_edges, tmp_path, {"method": "random", "parts": 2, "seed": 0})
    assert {s["edge_bytes"] for s in partition_memory_stats(load_meta(tmp_path))} == {32}


def test_plan_leaves_out_the_layouts_that_would_refuse_a_model_reading_edge_features(cora_edges):
    from fullgraph.cli.plan import candidates

    fits, refused = candidates(2, 2, "gat", edges=cora_edges.edge_facts())
    assert "tensor" not in {o["parallel"] for o in fits} and {"graph", "pipeline"} <= {o["parallel"] for o in fits}
    assert any("tensor: expected a model that reads no edge features" in r for r in refused), refused
    fits, _ = candidates(2, 2, "gat")  # no edge features: tensor takes GAT
    assert "tensor" in {o["parallel"] for o in fits}
