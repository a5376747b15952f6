"""Block rows on disk (fullgraph/partition/blockrows.py): the rows of Â they hold are exactly the
full graph's, every rank's file is refused when it was cut for another grid or is damaged."""

from __future__ import annotations

import pytest
import torch

from fullgraph.data.synthetic import planted_partition
from fullgraph.errors import InputError
from fullgraph.ops import Block
from fullgraph.partition.blockrows import load_block_row, row_blocks, save_block_rows


@pytest.fixture(scope="module")
def graph():
    return planted_partition(num_nodes=300, num_features=8, seed=1)


@pytest.mark.parametrize("norm", ["gcn", "mean"])
def test_block_rows_reassemble_the_full_adjacency(graph, norm, tmp_path):
    """Stitching every block row's column blocks back to global ids gives Block.from_graph's Â (an
    independent builder) entry for entry; for mean aggregation the stored Âᵀ rows are its transpose."""
    R = 3
    save_block_rows(graph, norm, R, True, 7, tmp_path / "rows")
    blocks = row_blocks(graph.num_nodes, R, True, 7)
    dense = torch.zeros(graph.num_nodes, graph.num_nodes)
    dense_t = torch.zeros(graph.num_nodes, graph.num_nodes)
    for i in range(R):
        row = load_block_row(tmp_path / "rows", i, blocks=R, norm=norm, permute=True, seed=7)
        assert torch.equal(row.rows, blocks[i])
        assert torch.equal(row.y, graph.y[blocks[i]]) and torch.equal(row.x, graph.x[blocks[i]])
        for k, (a, at) in enumerate(zip(row.adjacency(blocks), row.adjacency(blocks, transpose=True))):
            dense[blocks[i].unsqueeze(1), blocks[k].unsqueeze(0)] = a.to_dense()
            dense_t[blocks[i].unsqueeze(1), blocks[k].unsqueeze(0)] = at.to_dense()
    ref = Block.from_graph(graph, norm).adj.to_dense()
    assert torch.equal(dense, ref)
    assert torch.equal(dense_t, ref.T)


def test_a_folder_cut_for_another_grid_or_damaged_is_refused(graph, tmp_path):
    out = save_block_rows(graph, "gcn", 2, True, 0, tmp_path / "rows")
    with pytest.raises(InputError, match="cut for"):
        load_block_row(out, 0, blocks=4, norm="gcn", permute=True, seed=0)
    with pytest.raises(InputError, match="cut for"):
        load_block_row(out, 0, blocks=2, norm="mean", permute=True, seed=0)
    path = out / "row-1.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="corrupt"):
        load_block_row(out, 1, blocks=2, norm="gcn", permute=True, seed=0)
    (out / "blockrows.json").write_text("{")
    with pytest.raises(InputError, match="valid JSON"):
        load_block_row(out, 0, blocks=2, norm="gcn", permute=True, seed=0)
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="refusing to overwrite"):
        save_block_rows(graph, "gcn", 2, True, 0, tmp_path / "foreign")
