"""PyG on a typed (heterogeneous) graph: convs that take ``edge_type`` (``RGCNConv``, ``FastRGCNConv``)
through ``from_pyg`` and ``--model FILE.py:build`` run on the one typed graph fullgraph makes of a
heterogeneous one; PyG's per-relation forms (``to_hetero(model, metadata)``, ``HeteroConv``,
``HGTConv``) are refused in one line that says what to do where no node types are known (an object,
``from_pyg`` without ``node_types``) and as whole models (``fullgraph.models.pyg_hetero``); as lists of
layers on a typed graph they train (tests/models/test_pyg_hetero.py).

The reference is PyG's own forward on the whole typed graph, fed its global ``edge_index`` (in the
graph's CSR order, ``block.edges()``'s) and ``edge_type``: FLOAT32_CHAINED, a few float32 products
and sums in another order (as ``tests/models/test_pyg_edge_data.py``)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from torch_geometric.nn import FastRGCNConv, HGTConv, RGCNConv

import fullgraph
from fullgraph.cli import main
from fullgraph.config import TrainConfig
from fullgraph.data.formats.native import write_native
from fullgraph.errors import InputError
from fullgraph.models import as_gnn, from_pyg
from fullgraph.ops import Block
from fullgraph.parallel.engine import input_features
from fullgraph.train.trainer import Trainer

from tests import hetero_user_models as hetero
from tests._equality import FLOAT32_CHAINED, assert_same
from tests.models.test_rgcn import small_typed

REPO = Path(__file__).resolve().parents[2]
HETERO = REPO / "tests" / "hetero_user_models.py"
USER = REPO / "tests" / "user_models.py"
TYPED_WORDS = ("RGCNConv", "FastRGCNConv", "edge_type", "--model rgcn", "--model hgt", "docs/your-model.md")


@pytest.fixture(scope="module")
def typed():
    return small_typed()


@pytest.fixture(scope="module")
def typed_folder(typed, tmp_path_factory):
    folder = tmp_path_factory.mktemp("typed") / "small-typed"
    write_native(typed, folder)
    return folder


def built(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # to_hetero's and lazy modules' warnings
        return getattr(hetero, name)(17, 3)


HETERO_MODELS = {  # builder, what the refusal names
    "to_hetero_sage": "a to_hetero model: a torch.fx GraphModule on dicts x, edge_index",
    "hetero_conv": "HeteroConv, which runs on dicts",
    "hetero_gnn": "HeteroGNN, which runs on dicts",  # a user's module whose forward takes x_dict
    "hetero_convs": "HeteroConv, which runs on dicts of per-type tensors, in item 0",
}


def assert_typed_refusal(message: str, got: str):
    assert "\n" not in message and message.startswith("expected ") and f"(got {got}" in message, message
    assert all(w in message for w in TYPED_WORDS), message


@pytest.mark.parametrize("name", list(HETERO_MODELS))
def test_pygs_heterogeneous_forms_need_the_graphs_node_types(name, typed_folder, tmp_path):
    """Without node types (``as_gnn``, ``from_pyg`` without ``node_types``) PyG's heterogeneous forms are
    refused in one line that says how they run; as an object for ``train_model`` they wait for the graph's
    types (``train.run_model``) and train, in one process (a whole model runs only there)."""
    model = built(name)
    for adapt in (as_gnn, from_pyg):
        with pytest.raises(InputError) as e:
            adapt(model)
        assert_typed_refusal(str(e.value), HETERO_MODELS[name])
    out = tmp_path / "run"
    fullgraph.train_model(model=model, dataset=str(typed_folder), epochs=2, progress="none", threads=1, out=str(out))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["model"] == f"<{type(model).__name__}>", summary["config"]


def test_convs_on_dicts_are_refused_too():
    conv = HGTConv(4, 8, hetero.METADATA, heads=2)  # a MessagePassing, yet on dicts of per-type tensors
    with pytest.raises(InputError) as e:
        from_pyg([conv])
    assert_typed_refusal(str(e.value), "HGTConv, which runs on dicts")


def test_a_builder_returning_a_whole_to_hetero_model_trains_cut_into_its_layers(typed_folder, tmp_path):
    """``to_hetero`` of PyG's GraphSAGE is cut into its two layers (``models.pyg_hetero_split``): graph
    parallelism trains it, equal to one process."""
    args = ["train", "--dataset", str(typed_folder), "--model", f"{HETERO}:to_hetero_sage", "--epochs", "2",
            "--progress", "none", "--threads", "1"]
    losses = {}
    for name, extra in (("one", []), ("graph", ["--parallel", "graph", "--nprocs", "2"])):
        assert main([*args, "--out", str(tmp_path / name), *extra]) == 0
        losses[name] = [json.loads(line)["loss"] for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    assert losses["graph"] == pytest.approx(losses["one"], rel=1e-5), losses


def test_a_builder_returning_a_whole_model_on_dicts_trains_in_one_process_only(typed_folder, capsys, tmp_path):
    """A user's own module on dicts runs as one layer that reads the whole graph (tests/models/test_pyg_hetero.py
    checks such models against PyG's forward): one process trains it; a layout whose blocks hold one hop of
    halo refuses it in one line, exit 2, naming the list of layers that runs there."""
    args = ["train", "--dataset", str(typed_folder), "--model", f"{HETERO}:hetero_gnn", "--epochs", "2",
            "--progress", "none", "--threads", "1"]
    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "graph"), "--parallel", "graph", "--nprocs", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fullgraph: error:") and "expected layers of one hop each" in err[0], err
    assert "a whole model on dicts" in err[0] and "train it in one process" in err[0], err


@pytest.mark.parametrize("conv", [RGCNConv, FastRGCNConv])
def test_typed_convs_through_from_pyg_equal_pygs_forward_on_the_typed_graph(conv, typed):
    torch.manual_seed(0)
    R = typed.node_types.num_relations
    convs = [conv(typed.num_features, 16, R, num_bases=2), conv(16, typed.num_classes, R)]
    model = from_pyg(convs).eval()
    block = Block.from_graph(typed, model.norm)
    src, dst = block.edges()
    ei = torch.stack([typed.indices, torch.repeat_interleave(torch.arange(typed.num_nodes), typed.indptr.diff())])
    assert torch.equal(torch.stack([src, dst]), ei)  # the block's entries are the graph's, in CSR order
    x = typed.x.to_dense().requires_grad_(True)  # every type's features, each in its own column block
    want = convs[1](convs[0](x, ei, typed.edge_type).relu(), ei, typed.edge_type)
    (want * torch.arange(want.numel()).view_as(want).sin()).sum().backward()
    want_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    got = model(block, input_features(typed.x))
    (got * torch.arange(got.numel()).view_as(got).sin()).sum().backward()
    assert_same(got, want, FLOAT32_CHAINED, f"{conv.__name__} x2 output")
    for i, (g, w) in enumerate(zip([p.grad for p in model.parameters()], want_grads)):
        assert_same(g, w, FLOAT32_CHAINED, f"{conv.__name__} gradient {i}")


@pytest.mark.parametrize("conv", [RGCNConv, FastRGCNConv])
def test_typed_convs_train_on_the_typed_graph(conv, typed):
    torch.manual_seed(0)
    R = typed.node_types.num_relations
    cfg = TrainConfig.of(model="gcn", epochs=5, eval_every=5, seed=1, progress="none", threads=1)
    trainer = Trainer(cfg, typed, model=[conv(typed.num_features, 16, R), conv(16, typed.num_classes, R)])
    losses = torch.tensor(trainer.build().train().losses)
    assert bool((losses.diff() < 0).all()), losses


def test_a_typed_builder_trains_from_the_command_line(typed_folder, tmp_path):
    out = tmp_path / "run"
    assert main(["train", "--dataset", str(typed_folder), "--model", f"{USER}:rgcn", "--model-arg", "relations=5",
                 "--model-arg", "dropout=0", "--epochs", "4", "--progress", "none", "--threads", "1",
                 "--out", str(out)]) == 0
    losses = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) == 4 and all(b < a for a, b in zip(losses, losses[1:])), losses
