"""PyG ``HeteroData`` both ways as typed graphs (``data.pyg_hetero``): the conversion numbers nodes type
after type and lays features out in column blocks, as a hand-built expectation says; both round trips
are exact; ``T.ToUndirected()`` gives what ``reverse=True`` gives; and what cannot be converted is
refused in one line."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("torch_geometric")

import torch_geometric.transforms as T  # noqa: E402
from torch_geometric.data import HeteroData  # noqa: E402

from fullgraph.data.pyg import from_pyg  # noqa: E402
from fullgraph.data.typed.pyg import graph_from_hetero, graph_to_hetero  # noqa: E402
from fullgraph.data.typed import typed_graph  # noqa: E402
from fullgraph.errors import InputError  # noqa: E402

PAPER_X = torch.arange(12, dtype=torch.float32).reshape(4, 3) + 1
AUTHOR_X = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
WRITES = torch.tensor([[0, 1, 2, 2], [0, 0, 1, 3]])  # author -> paper
CITES = torch.tensor([[0, 1, 3], [1, 2, 2]])  # paper -> paper
MASKS = {"train_mask": [1, 1, 0, 0], "val_mask": [0, 0, 1, 0], "test_mask": [0, 0, 0, 1]}


def small() -> HeteroData:
    """Papers (dense features, labelled), authors (sparse features), venues (featureless), 2 relations."""
    data = HeteroData()
    data["paper"].x = PAPER_X
    data["paper"].y = torch.tensor([0, 1, 2, 1])
    for key, m in MASKS.items():
        data["paper"][key] = torch.tensor(m, dtype=torch.bool)
    data["author"].x = AUTHOR_X.to_sparse()
    data["venue"].num_nodes = 2
    data["author", "writes", "paper"].edge_index = WRITES
    data["paper", "cites", "paper"].edge_index = CITES
    return data


def triples(graph) -> set[tuple[int, int, str]]:
    src, dst = graph.edges()
    names = [graph.node_types.relation_name(int(r)) for r in graph.edge_type]
    return set(zip(src.tolist(), dst.tolist(), names))


def test_conversion_matches_a_hand_built_graph():
    g = graph_from_hetero(small())
    types = g.node_types
    assert types.names == ("paper", "author", "venue") and types.counts == (4, 3, 2) and types.widths == (3, 2, 0)
    assert types.offsets == (0, 4, 7, 9) and types.labelled == ("paper",)
    assert types.relations == (("author", "writes", "paper"), ("paper", "cites", "paper"))  # no reverse by default
    want = {(4 + s, d, "author__writes__paper") for s, d in WRITES.t().tolist()}
    want |= {(s, d, "paper__cites__paper") for s, d in CITES.t().tolist()}
    assert triples(g) == want
    x = torch.zeros(9, 5)
    x[0:4, 0:3], x[4:7, 3:5] = PAPER_X, AUTHOR_X  # column blocks; venues' rows are zero
    assert g.x.layout == torch.sparse_csr and torch.equal(g.x.to_dense(), x)
    assert g.y.tolist() == [0, 1, 2, 1] + [-1] * 5
    for key, m in MASKS.items():
        assert getattr(g, key).tolist() == [bool(v) for v in m] + [False] * 5


def test_from_pyg_dispatches_on_hetero_data():
    assert from_pyg(small()).fingerprint() == graph_from_hetero(small()).fingerprint()


def test_hetero_round_trip():
    data = small()
    back = graph_to_hetero(graph_from_hetero(data))
    assert back.node_types == data.node_types and back.edge_types == data.edge_types
    for t, x in (("paper", PAPER_X), ("author", AUTHOR_X)):  # stored sparse (two featured types): CSR blocks
        assert back[t].x.layout == torch.sparse_csr and torch.equal(back[t].x.to_dense(), x)
    assert "x" not in back["venue"] and back["venue"].num_nodes == 2
    assert "y" not in back["author"] and torch.equal(back["paper"].y, data["paper"].y)
    for key in MASKS:
        assert torch.equal(back["paper"][key], data["paper"][key])
    for key in data.edge_types:
        assert set(map(tuple, back[key].edge_index.t().tolist())) == set(map(tuple, data[key].edge_index.t().tolist()))
    assert torch.equal(graph_to_hetero(graph_from_hetero(data), dense_x=True)["author"].x, AUTHOR_X)
    del data["author"].x
    data["author"].num_nodes = 3
    assert torch.equal(graph_to_hetero(graph_from_hetero(data))["paper"].x, PAPER_X)  # stored dense: dense


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("features", ["dense one", "sparse two", "none"])
def test_graph_round_trip(reverse, features):
    """A typed graph, with its ``rev_`` relations carried as plain ones, comes back with its fingerprint."""
    feats = {"dense one": {"paper": PAPER_X}, "sparse two": {"paper": PAPER_X, "author": AUTHOR_X.to_sparse()},
             "none": {}}[features]
    splits = {k.removesuffix("_mask"): torch.tensor(m).nonzero()[:, 0] for k, m in MASKS.items()}
    g = typed_graph({"paper": 4, "author": 3, "venue": 2}, feats,
                    {("author", "writes", "paper"): WRITES, ("paper", "cites", "paper"): CITES},
                    ("paper", torch.tensor([0, 1, 2, 1])), splits, name="toy", num_classes=4, reverse=reverse)
    back = graph_from_hetero(graph_to_hetero(g))
    assert back.fingerprint() == g.fingerprint() and back.node_types == g.node_types
    assert back.x.layout == g.x.layout and (back.name, back.num_classes) == ("toy", 4)


def test_to_undirected_equals_reverse():
    """PyG's ``ToUndirected`` on the raw data and ``reverse=True`` on it give the same typed graph."""
    ours = graph_from_hetero(small(), reverse=True)
    theirs = graph_from_hetero(T.ToUndirected()(small()))
    assert triples(ours) == triples(theirs)
    assert ours.node_types == theirs.node_types and ours.fingerprint() == theirs.fingerprint()


def test_a_pair_in_two_relations_both_ways():
    """An author who writes and reviews one paper: two edges from ``HeteroData``, two edge types back,
    and PyG's ``ToUndirected`` gives what ``reverse=True`` gives (issue 60)."""
    data = small()
    data["author", "reviews", "paper"].edge_index = WRITES[:, :3]
    g = graph_from_hetero(data, reverse=True)
    assert g.num_edges == 2 * (4 + 3) + 2 * 3 and len(triples(g)) == g.num_edges
    back = graph_to_hetero(g)
    for key in (("author", "writes", "paper"), ("author", "reviews", "paper")):
        assert set(map(tuple, back[key].edge_index.t().tolist())) == set(map(tuple, data[key].edge_index.t().tolist()))
    assert graph_from_hetero(back).fingerprint() == g.fingerprint()
    theirs = graph_from_hetero(T.ToUndirected()(data))
    assert triples(theirs) == triples(g) and theirs.fingerprint() == g.fingerprint()


def _one_line_error(data, match: str, **kw) -> None:
    with pytest.raises(InputError, match=match) as e:
        graph_from_hetero(data, **kw)
    assert "\n" not in str(e.value)


def test_refusals_are_one_line():
    data = small()
    data["author"].y = torch.tensor([0, 1, 0])
    _one_line_error(data, r"exactly one node type.*label_type=.*paper, author")
    assert graph_from_hetero(data, label_type="paper").node_types.labelled == ("paper",)
    data = small()
    del data["paper"].test_mask
    _one_line_error(data, r"labelled node type 'paper' \(got no test_mask\)")
    data = small()
    del data["paper"].y
    _one_line_error(data, r"exactly one node type.*got y on none")
    data = small()
    data["author", "writes", "paper"].edge_attr = torch.rand(4, 2)
    _one_line_error(data, r"author__writes__paper.*edge_attr.*not supported for typed graphs")
    with pytest.raises(InputError, match="expected a typed graph") as e:
        graph_to_hetero(from_pyg(_homogeneous()))
    assert "\n" not in str(e.value)


def _homogeneous():
    from torch_geometric.data import Data

    return Data(x=torch.eye(3), edge_index=torch.tensor([[0, 1], [1, 2]]), y=torch.tensor([0, 1, 0]),
                train_mask=torch.tensor([True, False, False]), val_mask=torch.tensor([False, True, False]),
                test_mask=torch.tensor([False, False, True]))


def test_write_pyg_takes_hetero_data_and_the_folder_trains_as_the_data(tmp_path):
    """``write_pyg`` of a ``HeteroData`` (after ``ToUndirected``, as PyG users symmetrize) writes a native
    folder holding the typed graph ``pyg_graph`` builds in memory: types, relations, edges, features."""
    from fullgraph.cli import main
    from fullgraph.data.formats.native_read import load_native
    from fullgraph.data.pyg import pyg_graph, write_pyg

    data = T.ToUndirected()(small())
    write_pyg(data, tmp_path / "hetero")
    stored, built = load_native(tmp_path / "hetero"), pyg_graph(data)
    assert stored.node_types == built.node_types and triples(stored) == triples(built)
    assert torch.equal(stored.x.to_dense(), built.x.to_dense()) and torch.equal(stored.y, built.y)
    assert main(["train", "--dataset", str(tmp_path / "hetero"), "--model", "rgcn", "--epochs", "1", "--hidden", "4",
                 "--progress", "none", "--out", str(tmp_path / "run")]) == 0
