"""Pairs in two relations under the layouts (issue 60 §1): R-GCN on a graph where two thousand
(paper, author) pairs are both ``writes`` and ``reviews`` edges (tests/models/test_rgcn_multi_relation.py
checks the layer against PyG's ``RGCNConv`` on it) trains the same weights as one process under graph
parallelism (METIS and fennel, P = 2, the featureless authors' embeddings with their owners), with
boundary sampling against one process on each epoch's sampled graph, and the pipeline follows the
one-process run of its chunks; every part's entries are the graph's (src, dst, relation) triples.

Tolerances: LOSSES_REORDERED and WEIGHTS_REORDERED (tests/_equality.py says why)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.partition import PartitionBook, partition_nodes, save_partition
from fullgraph.partition.chunks import cached_chunks
from fullgraph.train.trainer import Trainer

from tests._equality import assert_same_losses, assert_same_state
from tests.distributed import run_ranks, sampled_reference
from tests.models.test_rgcn_multi_relation import two_relation_graph
from tests.parallel.test_edge_data_layouts import simulate

EPOCHS, K, BNS = 4, 4, 0.5


def config(**extra) -> dict:
    return dict(model="rgcn", layers=2, hidden=8, dropout=0.5, epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01,
                **extra)


@pytest.fixture(scope="module")
def graph():
    return two_relation_graph(papers=200, authors=150, pairs=2500, both=2000)


@pytest.fixture(scope="module")
def single(graph):
    trainer = Trainer(TrainConfig.of(**config(), progress="none", threads=1), graph)
    result = trainer.build().train()
    return torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict()


def _save(graph, method, folder, ways=2):
    node_part = partition_nodes(graph, ways, method=method, seed=0)
    book = PartitionBook.build(graph, node_part)
    save_partition(book, graph, folder, {"method": method, "parts": ways, "seed": 0})
    return book


def test_every_part_holds_the_graphs_triples(graph):
    book = PartitionBook.build(graph, partition_nodes(graph, 2, method="metis", seed=0))
    src, dst = graph.edges()
    want = set(zip(src.tolist(), dst.tolist(), graph.edge_type.tolist()))
    got = []
    for part in book.parts:
        local = torch.cat([part.inner, part.halo])
        rows = part.inner.repeat_interleave(part.indptr.diff())
        got += list(zip(local[part.indices].tolist(), rows.tolist(), part.edata.type.tolist()))
        assert torch.equal(part.edata.type, graph.edge_type[part.edata.eid])  # each entry's own relation
    assert len(got) == len(want) == graph.num_edges and set(got) == want


@pytest.fixture(scope="module")
def graph_runs(graph, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two-relations")
    runs = []
    for method in ("metis", "fennel"):
        _save(graph, method, tmp / method)
        runs.append({"name": method, "partition_dir": str(tmp / method), "config": config()})
    runs.append({"name": "bns", "partition_dir": str(tmp / "metis"), "config": config(boundary_rate=BNS)})
    return runs, run_ranks("train_runs", 2, {"runs": runs}, tmp)


def test_graph_parallel_equals_one_process(single, graph_runs):
    runs, got = graph_runs
    losses, state = single
    for run in runs[:-1]:
        assert_same_losses(got[run["name"]]["losses"], losses, what=f"graph P=2 {run['name']} losses")
        assert_same_state(got[run["name"]]["state"], state, what=f"graph P=2 {run['name']} weights")


def test_boundary_sampling_equals_one_process_on_the_sampled_graph(graph, graph_runs):
    """Each epoch's whole-graph block put together from the parts' sampled rows, each entry with its
    own relation found by its global edge id (a pair's two relations stay two entries)."""
    from fullgraph.ops import Block, SparseOp
    from fullgraph.ops.csr import indptr_from_rows
    from fullgraph.parallel.graph import boundary_sample

    runs, got = graph_runs
    book = PartitionBook.build(graph, partition_nodes(graph, 2, method="metis", seed=0))
    n = graph.num_nodes

    def sampled(norm: str, epoch: int) -> Block:
        rows, cols, vals, eids = [], [], [], []
        for part in book.parts:
            keep = boundary_sample(0, epoch, part.part_id, part.num_halo, BNS)
            blk = part.block(norm, halo_keep=keep, scale=1.0 / BNS)
            rows.append(part.inner.repeat_interleave(blk.adj.indptr.diff()))
            cols.append(torch.cat([part.inner, part.halo[keep]])[blk.adj.indices])
            vals.append(blk.adj.values)
            eids.append(blk.edata.eid)
        rows, cols, vals, eid = (torch.cat(t) for t in (rows, cols, vals, eids))
        order = torch.from_numpy(np.lexsort((graph.edge_type[eid].numpy(), cols.numpy(), rows.numpy())))
        rows, cols, vals, eid = rows[order], cols[order], vals[order], eid[order]
        assert torch.equal(graph.edges()[0][eid], cols) and torch.equal(graph.edges()[1][eid], rows)
        data = graph.edge_data().take(eid)
        return Block(SparseOp(indptr_from_rows(rows, n), cols, vals, (n, n)), norm, edata=data)

    trainer = Trainer(TrainConfig.of(**config(boundary_rate=BNS), progress="none", threads=1),
                      engine=sampled_reference(sampled, graph, "relation-mean"))
    ref = trainer.build().train()
    assert_same_losses(got["bns"]["losses"], ref.losses, what=f"p = {BNS} R-GCN losses")
    assert_same_state(got["bns"]["state"], trainer.model, what=f"p = {BNS} R-GCN weights")


def test_pipeline_follows_the_one_process_chunks(graph, tmp_path):
    folder = tmp_path / "one-part"
    node_part = torch.zeros(graph.num_nodes, dtype=torch.int64)
    save_partition(PartitionBook.build(graph, node_part), graph, folder, {"method": "metis", "parts": 1, "seed": 0})
    cfile = str(cached_chunks(graph, node_part, 1, K, "metis", 0, tmp_path))
    runs = [{"name": "pipe", "config": config(partition_dir=str(folder), chunks=K, chunk_file=cfile, history_refresh=2,
                                               parallel="pipeline")}]
    got = run_ranks("chunked_runs", 2, {"runs": runs}, tmp_path)
    want = simulate(graph, TrainConfig.of(**config(history_refresh=2), progress="none", threads=1), cfile)
    assert_same_losses(got["pipe"]["losses"], want, what="pipeline 2 R-GCN losses on two-relation pairs")


def test_native_folder_and_streamed_parts_keep_both_relations(graph, tmp_path):
    """The native folder holds the two-relation graph bit for bit, and partitioning it from its files
    writes the parts the in-memory book writes."""
    import json

    from fullgraph.data.formats.native import write_native
    from fullgraph.data.formats.native_read import load_native
    from fullgraph.partition.stream_store import save_partition_streaming

    meta = write_native(graph, tmp_path / "native")
    assert meta["preprocessed"]  # symmetric triple by triple, rows ascending by (column, relation)
    back = load_native(tmp_path / "native", verify=True)
    assert back.fingerprint() == graph.fingerprint() and torch.equal(back.edge_type, graph.edge_type)
    node_part = partition_nodes(graph, 2, method="metis", seed=0)
    a = save_partition(PartitionBook.build(graph, node_part), graph, tmp_path / "memory")
    b = save_partition_streaming(tmp_path / "native", node_part.numpy().astype(np.int8), tmp_path / "stream",
                                 max_edges=97, block_bytes=1 << 12)
    assert json.loads((b / "partition.json").read_text()) == json.loads((a / "partition.json").read_text())
    for i in range(2):
        assert (b / f"part-{i}/part.pt").read_bytes() == (a / f"part-{i}/part.pt").read_bytes()
