"""Edge data on a PyG ``Data``: ``edge_weight``, ``edge_attr`` and ``edge_type`` are carried into the
graph and its native folder (issue 51); any other ``edge_*`` tensor is refused, not dropped, in one
line that names what was found, why it cannot be kept and how to go on without it (issue 50)."""

from __future__ import annotations

import pytest
import torch

from fullgraph.data.formats.native_read import load_native
from fullgraph.data.pyg import from_pyg, write_pyg
from fullgraph.errors import InputError


def small():
    from torch_geometric.data import Data

    edge_index = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    masks = {k: torch.tensor(v) for k, v in (("train_mask", [1, 0, 1, 0]), ("val_mask", [0, 1, 0, 0]),
                                             ("test_mask", [0, 0, 0, 1]))}
    return Data(x=torch.eye(4), edge_index=edge_index, y=torch.tensor([0, 1, 0, 1]), num_nodes=4,
                **{k: m.bool() for k, m in masks.items()})


@pytest.mark.parametrize("key, value", [("edge_weight", torch.rand(6)), ("edge_attr", torch.rand(6, 3))])
@pytest.mark.parametrize("read", ["from_pyg", "write_pyg"])
def test_edge_weight_and_attr_are_kept(key, value, read, tmp_path):
    data = small()
    data[key] = value
    g = from_pyg(data) if read == "from_pyg" else (write_pyg(data, tmp_path / "out"), load_native(tmp_path / "out"))[1]
    src, dst = g.edges()  # in CSR order (by destination): each entry has the value of its edge_index column
    listed = {(int(s), int(d)): i for i, (s, d) in enumerate(data.edge_index.t().tolist())}
    assert torch.equal(getattr(g, key), value[[listed[(s, d)] for s, d in zip(src.tolist(), dst.tolist())]])


@pytest.mark.parametrize("read", ["from_pyg", "write_pyg"])
def test_other_edge_tensors_are_refused_in_one_line(read, tmp_path):
    data = small()
    data.edge_time = torch.rand(6)
    with pytest.raises(InputError) as e:
        from_pyg(data) if read == "from_pyg" else write_pyg(data, tmp_path / "out")
    message = str(e.value)
    assert "\n" not in message
    assert "expected no edge data on the PyG Data but edge_weight, edge_attr, edge_type (got edge_time)" in message
    assert "cannot be kept" in message and "data.edge_time = None" in message and "model will not see them" in message
    assert not (tmp_path / "out").exists()


def test_every_edge_tensor_is_kept_and_dropping_the_others_writes_the_graph(tmp_path):
    data = small()
    data.edge_weight, data.edge_attr = torch.rand(6), torch.rand(6, 2)
    data.edge_type = torch.zeros(6, dtype=torch.int64)
    data.edge_time, data.edge_mask = torch.rand(6), torch.rand(6)
    with pytest.raises(InputError, match=r"got edge_mask, edge_time\).*data.edge_mask = None; data.edge_time = None"):
        write_pyg(data, tmp_path / "out")
    data.edge_time = data.edge_mask = None
    write_pyg(data, tmp_path / "out")
    g = load_native(tmp_path / "out")
    assert g.num_edges == 6 and g.edge_kinds == ("weight", "attr", "type") and g.num_relations == 1
