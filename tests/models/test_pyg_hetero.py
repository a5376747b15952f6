"""PyG's heterogeneous layers (``HeteroConv``, ``HGTConv``, ``to_hetero`` of one layer) through ``from_pyg``
and a builder that takes ``metadata`` and ``in_dims``, on a typed graph (issue 61 §1).

The reference is PyG's own modules run as PyG users run them, on the whole graph's ``x_dict`` and
``edge_index_dict`` (each type's own feature columns; a featureless type's rows are the model's learned table,
the same parameter), in float64: FLOAT64_REORDER (the same sums in another order); with edge features, which a
graph holds in float32, FLOAT32_CHAINED (a few float32 products and sums in another order). Every layout's equality
with one process is tests/parallel/test_typed_layouts.py's (model ``pyg-hgt``)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn
from torch_geometric.nn import (GATConv, GCNConv, GraphConv, HANConv, HeteroConv, HeteroDictLinear, HGTConv, SAGEConv,
                                to_hetero)
from torch_geometric.nn.models import GraphSAGE

from fullgraph.cli import main
from fullgraph.data.formats.native import write_native
from fullgraph.errors import InputError
from fullgraph.models import from_pyg
from fullgraph.ops import Block

from tests._equality import FLOAT32_CHAINED, FLOAT64_REORDER, assert_same
from tests.models.test_hgt import as_dicts
from tests.models.test_rgcn import small_typed

HETERO = Path(__file__).resolve().parents[1] / "hetero_user_models.py"


@pytest.fixture(scope="module")
def typed():
    return small_typed()


def metadata(types):
    return list(types.names), [tuple(r) for r in types.relations]


class OneSage(nn.Module):
    """One layer, for ``to_hetero``: PyG cannot trace a bare conv."""

    def __init__(self, width: int):
        super().__init__()
        self.conv = SAGEConv((-1, -1), width)

    def forward(self, x, edge_index):
        return self.conv(x, edge_index)


def layer_lists(types):
    md = metadata(types)
    in_dims = {n: w or 6 for n, w in zip(types.names, types.widths)}  # 6: the featureless table's width
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lazy modules' and to_hetero's warnings
        return {
            "sage": [HeteroConv({r: SAGEConv((-1, -1), 8) for r in md[1]}, aggr="sum"),
                     HeteroConv({r: SAGEConv(8, 3) for r in md[1]}, aggr="mean")],
            "gat-graphconv": [HeteroConv({r: GATConv((-1, -1), 4, heads=2, add_self_loops=False) if r[0] != r[2]
                                          else GraphConv(-1, 8) for r in md[1]}), nn.Linear(8, 3)],
            "hgt": [HGTConv(in_dims, 8, md, heads=2), HGTConv(8, 8, md, heads=2), nn.Linear(8, 3)],
            "to_hetero": [to_hetero(OneSage(8), md), to_hetero(OneSage(8), md), nn.ReLU(), nn.Linear(8, 3)],
        }


def pyg_forward(layers, model, types, x, edges, act):
    """The layers as a PyG user runs them (``act`` between the heterogeneous ones), every type's rows in id order."""
    h = {}
    for t, name in enumerate(types.names):
        a, b = types.offsets[t], types.offsets[t + 1]
        cols = types.column_offsets
        h[name] = x[a:b, cols[t] : cols[t + 1]] if types.widths[t] else model.input.embedding[: b - a]
    convs = [m for m in layers if not isinstance(m, (nn.Linear, nn.ReLU))]
    for i, conv in enumerate(convs):
        h = conv(h, edges)
        if i < len(convs) - 1 and act:
            h = {k: v.relu() for k, v in h.items()}
    out = torch.cat([h[name] for name in types.names])
    for m in layers[len(convs):]:
        out = m(out)
    return out


@pytest.mark.parametrize("kind", ["sage", "gat-graphconv", "hgt", "to_hetero"])
def test_heterogeneous_layers_equal_pygs_own_forward_and_gradients(kind, typed):
    types = typed.node_types
    torch.manual_seed(0)
    layers = layer_lists(types)[kind]
    act = kind != "hgt"
    model = from_pyg(layers, node_types=types, featureless_width=6, act="relu" if act else None).double()
    x = typed.x.to_dense().double()
    got = model(Block.from_graph(typed, model.norm), x)
    weights = torch.randn_like(got)
    (got * weights).sum().backward()
    ours = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    want = pyg_forward(layers, model, types, x, as_dicts(typed, x)[1], act)
    (want * weights).sum().backward()
    assert_same(got, want, FLOAT64_REORDER, f"{kind} output")
    assert "input.embedding" in ours  # the featureless venues' table is learned, and its gradient is PyG's
    for name, p in model.named_parameters():  # (a parameter no output reads has no gradient on either side)
        if ours[name] is None or p.grad is None:
            assert ours[name] is None and p.grad is None, name
        else:
            assert_same(ours[name], p.grad, FLOAT64_REORDER, f"{kind} gradient of {name}")


def test_a_block_of_shuffled_rows_and_a_halo_computes_the_same_rows(typed):
    """A part's block: its dst rows first, its src rows in any order, halo rows whose outputs are dropped."""
    from fullgraph.models.contract import check_model

    torch.manual_seed(1)
    model = from_pyg(layer_lists(typed.node_types)["hgt"], node_types=typed.node_types, featureless_width=6)
    check_model(model, distributed=True)  # the contract's permuted probe blocks, halo included
    model = model.double()
    whole = Block.from_graph(typed, model.norm)
    x = typed.x.to_dense().double()
    h = model.pre(x)
    want = model.layers[0](whole, h)
    keep = torch.arange(0, typed.num_nodes, 2)  # every second node as dst, its in-neighbours as the halo
    src, dst = whole.edges()
    sel = torch.isin(dst, keep)
    halo = torch.unique(src[sel][~torch.isin(src[sel], keep)])
    ids = torch.cat([keep, halo])
    local = torch.full((typed.num_nodes,), -1, dtype=torch.int64)
    local[ids] = torch.arange(ids.numel())
    from fullgraph.ops import SparseOp
    from fullgraph.ops.edge_data import EdgeData

    rows, cols = local[dst[sel]], local[src[sel]]
    order = torch.argsort(rows * ids.numel() + cols)
    ip = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.bincount(rows, minlength=keep.numel()), 0)])
    eid = whole.edge_ids[sel][order]
    block = Block(SparseOp(ip, cols[order], torch.ones(eid.numel()), (keep.numel(), ids.numel())), model.norm,
                  src_ids=ids, dst_ids=keep, edata=EdgeData(eid, None, None, typed.edge_type[eid], typed.num_relations))
    assert_same(model.layers[0](block, h[ids]), want[keep], FLOAT64_REORDER, "a part's rows")


class Skip(nn.Module):
    """Three convs whose last sums in the first one's rows: a skip across a layer, which no cut passes."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3 = (SAGEConv((-1, -1), 8) for _ in range(3))

    def forward(self, x, edge_index):
        h1 = self.c1(x, edge_index).relu()
        return self.c3(self.c2(h1, edge_index).relu(), edge_index) + h1


class Framed(nn.Module):
    """A per-type ``Linear`` before the first conv and after the last, a residual sum within a layer."""

    def __init__(self):
        super().__init__()
        self.inp, self.c1, self.c2, self.out = nn.LazyLinear(8), SAGEConv(8, 8), SAGEConv(8, 8), nn.Linear(8, 3)

    def forward(self, x, edge_index):
        h = self.inp(x).relu()
        h = self.c1(h, edge_index).relu() + h
        return self.out(self.c2(h, edge_index).tanh())


def _whole(make, types):
    torch.manual_seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = to_hetero(make(), metadata(types), aggr="sum")
    return whole, from_pyg([whole], node_types=types, featureless_width=6).double()


def _equals_pyg(whole, model, typed, what: str) -> None:
    x = typed.x.to_dense().double()
    got = model(Block.from_graph(typed, model.norm), x)
    want = pyg_forward([whole], model, typed.node_types, x, as_dicts(typed, x)[1], act=False)
    assert_same(got, want, FLOAT64_REORDER, what)


WHOLE = {"GraphSAGE": lambda: GraphSAGE((-1, -1), 8, 2, 3), "Framed": Framed}


@pytest.mark.parametrize("name", list(WHOLE))
def test_a_whole_to_hetero_model_is_cut_into_its_layers_and_runs_everywhere(name, typed):
    """``to_hetero`` of a model of two convs (PyG's GraphSAGE, with its per-layer trims; one with per-type
    linear maps around the convs and a residual sum) is cut into two one-hop layers
    (``models.pyg_hetero_split``): PyG's own forward of the whole model, and every layout takes it."""
    from fullgraph.config import TrainConfig
    from fullgraph.parallel.registry import check_model_layout

    whole, model = _whole(WHOLE[name], typed.node_types)
    assert model.num_layers == 2 and not model.whole_graph
    assert sum(p.numel() for p in model.layers.parameters()) == sum(p.numel() for p in whole.parameters())
    _equals_pyg(whole, model, typed, f"to_hetero({name}) cut in two")
    for mode in (dict(parallel="single"), dict(parallel="graph", nprocs=2), dict(parallel="pipeline", nprocs=2),
                 dict(prune=True)):
        check_model_layout(TrainConfig.of(**mode), model)


WHOLE_ONLY = {"Skip": Skip, "jumping knowledge": lambda: GraphSAGE((-1, -1), 8, 3, 3, jk="cat")}


@pytest.mark.parametrize("name", list(WHOLE_ONLY))
def test_a_whole_model_that_is_no_chain_runs_in_one_process_only(name, typed):
    """A model whose later conv reads rows from before the previous one (a skip across a layer, jumping
    knowledge's concatenation of every layer) is no chain of layers: it runs as one layer that reads the
    whole graph, PyG's own forward in one process; a layout whose blocks hold one hop of halo, or
    ``--prune``, refuses it in one line."""
    from fullgraph.config import TrainConfig
    from fullgraph.parallel.registry import check_model_layout

    whole, model = _whole(WHOLE_ONLY[name], typed.node_types)
    assert model.num_layers == 1 and model.whole_graph
    _equals_pyg(whole, model, typed, f"to_hetero({name}), whole")
    check_model_layout(TrainConfig.of(parallel="single"), model)
    for mode in (dict(parallel="graph", nprocs=2), dict(parallel="pipeline", nprocs=2), dict(prune=True)):
        with pytest.raises(InputError, match="expected layers of one hop each") as e:
            check_model_layout(TrainConfig.of(**mode), model)
        assert "\n" not in str(e.value) and "train it in one process" in str(e.value)


class Dropped(nn.Module):
    """Two convs with ``F.dropout`` between them: cut in two, its draws still cannot be keyed by node."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = SAGEConv((-1, -1), 8), SAGEConv((-1, -1), 8)

    def forward(self, x, edge_index):
        h = nn.functional.dropout(self.c1(x, edge_index).relu(), p=0.3, training=self.training)
        return self.c2(h, edge_index)


REFUSED = {  # a list of layers, and what its one-line refusal names
    "F.dropout": (lambda md: [to_hetero(Dropped(), md)], "expected no dropout inside ToHeteroLayer1 (layer 0"),
    "HeteroDictLinear": (lambda md: [HeteroDictLinear(-1, 8, types=md[0])], "HeteroDictLinear, which is not a layer"),
    "HANConv": (lambda md: [HANConv(-1, 8, md)], "HANConv, which needs metapaths"),
    "a missing relation": (lambda md: [HeteroConv({("paper", "likes", "venue"): SAGEConv((-1, -1), 8)})],
                           "paper__likes__venue, which it lacks"),
    "GCNConv": (lambda md: [HeteroConv({("paper", "cites", "paper"): GCNConv(-1, 8)})], "normalizing GCNConv"),
}


@pytest.mark.parametrize("what", list(REFUSED))
def test_what_cannot_run_is_refused_in_one_line(what, typed):
    make, words = REFUSED[what]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layers = make(metadata(typed.node_types))
    with pytest.raises(InputError) as e:
        model = from_pyg(layers, node_types=typed.node_types)
        model.check_layout(True)
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_builder_takes_metadata_and_in_dims_and_trains_from_the_command_line(typed, tmp_path):
    """``--hidden`` is a featureless type's table width (the builder's ``in_dims`` say so); ``evaluate``
    rebuilds the model from ``model.pt``; graph parallelism keeps each table row with its node's owner."""
    folder = tmp_path / "small-typed"
    write_native(typed, folder)
    runs = {}
    for name, extra in (("one", []), ("graph", ["--parallel", "graph", "--nprocs", "2"])):
        out = tmp_path / name
        assert main(["train", "--dataset", str(folder), "--model", f"{HETERO}:hgt_layers", "--hidden", "12",
                     "--model-arg", "dropout=0.5", "--epochs", "3", "--progress", "none", "--threads", "1",
                     "--out", str(out), *extra]) == 0
        runs[name] = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert runs["graph"] == pytest.approx(runs["one"], rel=1e-5), runs
    state = torch.load(tmp_path / "one" / "model.pt", weights_only=True)["state_dict"]
    assert state["input.embedding"].shape == (6, 12)  # the venues' table, --hidden wide
    assert main(["evaluate", "--run", str(tmp_path / "one")]) == 0
    assert main(["train", "--dataset", str(folder), "--model", f"{HETERO}:sage_layers", "--epochs", "2",
                 "--progress", "none", "--threads", "1", "--out", str(tmp_path / "sage")]) == 0


def test_edge_features_reach_each_relations_convs(typed):
    """``GINEConv`` in a ``HeteroConv`` reads its relation's edge features (``edge_attr_dict``): PyG's own
    forward; a graph without them is refused before training, in one line."""
    import dataclasses

    from torch_geometric.nn import GINEConv

    types = typed.node_types
    torch.manual_seed(4)
    attr = torch.randn(typed.num_edges, 4)
    graph = dataclasses.replace(typed, edge_attr=attr)
    mlp = lambda: nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))  # noqa: E731
    layers = [HeteroConv({r: SAGEConv((-1, -1), 8) for r in metadata(types)[1]}),
              HeteroConv({r: GINEConv(mlp(), edge_dim=4) for r in metadata(types)[1]}), nn.Linear(8, 3)]
    model = from_pyg(layers, node_types=types, featureless_width=6)  # float32: a graph's edge features are
    assert model.edge_needs.kinds == ("attr", "type") and model.edge_needs.width == 4
    x = graph.x.to_dense()
    got = model(Block.from_graph(graph, model.norm), x)
    _, edges = as_dicts(graph, x)
    feats = {rel: attr[graph.edge_type == r] for r, rel in enumerate(map(tuple, types.relations))}
    h = pyg_forward(layers[:1], model, types, x, edges, act=False)
    h = {n: v.relu() for n, v in zip(types.names, h.split(list(types.counts)))}
    want = layers[2](torch.cat([layers[1](h, edges, edge_attr_dict=feats)[n] for n in types.names]))
    assert_same(got, want, FLOAT32_CHAINED, "GINEConv per relation")
    with pytest.raises(InputError, match="expected edge features") as e:
        model.check_edge_data(("type",), None, types.num_relations)
    assert "\n" not in str(e.value)


def test_a_typed_builder_on_a_graph_of_one_type_is_one_line(tmp_path, capsys, shared_data):
    """A builder that takes ``metadata`` needs node types: one line, exit 2, not the builder's TypeError."""
    assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--model", f"{HETERO}:sage_layers",
                 "--epochs", "1", "--progress", "none", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected a typed graph" in err[0] and "takes metadata" in err[0], err


def test_resume_keeps_a_typed_builders_hidden(typed, tmp_path):
    """``--hidden`` is a typed builder's table width: ``config.json`` keeps it, so ``--resume`` rebuilds the
    same model."""
    folder = tmp_path / "small-typed"
    write_native(typed, folder)
    out = tmp_path / "run"
    args = ["train", "--dataset", str(folder), "--model", f"{HETERO}:hgt_layers", "--hidden", "12", "--progress",
            "none", "--threads", "1", "--out", str(out)]
    assert main([*args, "--epochs", "2", "--checkpoint-every", "1"]) == 0
    assert json.loads((out / "config.json").read_text())["hidden"] == 12
    assert main(["train", "--resume", str(out), "--epochs", "3", "--progress", "none"]) == 0
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 3
