"""Edge data on a PyG ``Data`` is refused, not dropped: ``from_pyg`` and ``write_pyg`` stop in one line
that names what was found, why it cannot be kept yet and how to go on without it (issue 50)."""

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
def test_edge_data_is_refused_in_one_line(key, value, read, tmp_path):
    data = small()
    data[key] = value
    with pytest.raises(InputError) as e:
        from_pyg(data) if read == "from_pyg" else write_pyg(data, tmp_path / "out")
    message = str(e.value)
    assert "\n" not in message
    assert f"expected no edge data on the PyG Data (got {key})" in message
    assert "cannot be kept" in message and f"data.{key} = None" in message and "model will not see them" in message
    assert not (tmp_path / "out").exists()


def test_every_edge_tensor_is_named_and_dropping_them_writes_the_graph(tmp_path):
    data = small()
    data.edge_weight, data.edge_attr, data.edge_type = torch.rand(6), torch.rand(6, 2), torch.zeros(6)
    with pytest.raises(InputError, match=r"got edge_attr, edge_type, edge_weight\).*data.edge_attr = None; "
                                         r"data.edge_type = None; data.edge_weight = None"):
        write_pyg(data, tmp_path / "out")
    data.edge_weight = data.edge_attr = data.edge_type = None
    write_pyg(data, tmp_path / "out")
    assert load_native(tmp_path / "out").num_edges == 6
