"""Edge data moves with its edges wherever they go (issue 51 §1): a part's block, a sampled block, a
pipeline chunk and a pruned block each hand a layer, for every entry, the data of the graph's edge
(src, dst) it holds — checked against the graph itself, by global ids, not by the code that cut them
— and a part's normalized rows equal the whole graph's, bit for bit, with weights.

DGL's partition pipeline lost or shuffled edge features more than once (dgl #4361, #4623, #4658): a
check by reading the cutting code would not have caught that; these compare data with the source.
"""

from __future__ import annotations

import pytest
import torch

from fullgraph.ops import Block
from fullgraph.ops.csr import row_ids
from fullgraph.parallel.prune import pruned_block, receptive_field
from fullgraph.partition import PartitionBook, partition_nodes
from fullgraph.partition.chunks import ChunkSet, make_chunks

from tests._equality import FLOAT32_FEW_OPS, assert_same

NORMS = ("gcn", "mean", "self-loops")


@pytest.fixture(scope="module")
def book(cora_edges):
    return PartitionBook.build(cora_edges, partition_nodes(cora_edges, 3, method="metis", seed=0))


def dense(block: Block) -> torch.Tensor:
    a = block.adj
    return torch.sparse_csr_tensor(a.indptr, a.indices, a.values, a.shape, check_invariants=False).to_dense()


def assert_carries_graph_data(block: Block, graph) -> None:
    """Every entry's data is the graph's for that (src, dst) edge; an added loop at v is keyed -1 - v
    and carries weight 1, the mean of v's in-edges' features and the loops' own relation."""
    src, dst = block.edges()
    gsrc, gdst = block.src_ids[src], block.dst_ids[dst]
    eid = block.edge_ids
    real = eid >= 0
    assert torch.equal(graph.indices[eid[real]], gsrc[real]), "an entry's source is not its edge's"
    assert torch.equal(row_ids(graph.indptr)[eid[real]], gdst[real]), "an entry's destination is not its edge's"
    for kind in ("weight", "attr", "type"):
        assert torch.equal(getattr(block, f"edge_{kind}")[real], getattr(graph, f"edge_{kind}")[eid[real]]), kind
    loops = ~real
    assert torch.equal(gsrc[loops], gdst[loops]) and torch.equal(eid[loops], -1 - gdst[loops])
    if bool(loops.any()):
        v = gdst[loops]
        assert bool((block.edge_weight[loops] == 1).all())
        assert bool((block.edge_type[loops] == graph.num_relations).all())
        ip = graph.indptr
        want = torch.stack([graph.edge_attr[int(ip[u]):int(ip[u + 1])].double().mean(0).float() for u in v[:50]])
        assert_same(block.edge_attr[loops][:50], want, FLOAT32_FEW_OPS, "added loops' mean features")


@pytest.mark.parametrize("norm", NORMS)
def test_part_blocks_are_the_whole_graphs_rows_with_their_edges_data(cora_edges, book, norm):
    whole = Block.from_graph(cora_edges, norm)
    assert_carries_graph_data(whole, cora_edges) if whole.src_ids is not None else None
    w = dense(whole)
    for part in book.parts:
        blk = part.block(norm)
        assert torch.equal(dense(blk), w[part.inner][:, part.local_nodes]), f"part {part.part_id} rows of Â differ"
        assert_carries_graph_data(blk, cora_edges)
        keep = torch.arange(part.num_halo) % 3 != 0  # boundary sampling: a dropped column drops its edges' data
        sampled = part.block(norm, halo_keep=keep, scale=2.0)
        assert_carries_graph_data(sampled, cora_edges)
        assert sampled.adj.nnz == blk.adj.nnz - int((~keep[blk.adj.indices[blk.adj.indices >= part.num_inner]
                                                           - part.num_inner]).sum())


def test_chunks_and_pruned_blocks_carry_their_edges_data(cora_edges, book):
    part = book.part(1)
    node_chunk = make_chunks(cora_edges, book.node_part, 3, 4, "metis", seed=0)
    chunks = ChunkSet(part, node_chunk[part.local_nodes], 4, "gcn")
    assert sum(ch.block.adj.nnz for ch in chunks) == part.block("gcn").adj.nnz
    for ch in chunks:
        assert_carries_graph_data(ch.block, cora_edges)
    for ch in ChunkSet(part, node_chunk[part.local_nodes], 4, "gcn", induced=True):  # entries dropped
        assert_carries_graph_data(ch.block, cora_edges)
    blk = part.block("mean")
    pr = receptive_field(blk.adj, part.train_mask, 2)
    for layer in (1, 2):
        assert_carries_graph_data(pruned_block(blk, pr, layer), cora_edges)


def test_a_part_keeps_its_edges_data_through_its_file(cora_edges, book, tmp_path):
    from fullgraph.partition import save_partition
    from fullgraph.partition.store import load_meta, load_part

    save_partition(book, cora_edges, tmp_path / "parts", {"method": "metis", "parts": 3, "seed": 0})
    assert load_meta(tmp_path / "parts")["edge_data"] == ["weight", "attr", "type"]
    back = load_part(tmp_path / "parts", 2)
    assert back.degree.dtype == torch.float32  # the weighted in-degree the normalization reads
    assert_carries_graph_data(back.block("gcn"), cora_edges)
    assert torch.equal(dense(back.block("gcn")), dense(book.part(2).block("gcn")))
