"""Jumping knowledge (PyG's ``BasicGNN(jk=...)``), residual connections (``from_pyg(residual=True)``) and
PyG's ``LayerNorm(mode='graph')`` across processes, as docs/your-model.md promises them:

* graph parallelism, P = 2 (METIS parts), equals one process, dropout on (keyed by node id), and
  moves the bytes ``fullgraph plan`` counts; the whole-graph LayerNorm's statistics are two sums over
  the ranks per layer, forward and backward, three floats each (counted here from that definition);
* an SpMM layout and tensor parallelism, whose ranks hold their rows of every layer, equal one
  process with jumping knowledge (a model object, as ``fullgraph.train_model(model=...)`` hands one
  to each torchrun rank: these layouts refuse a user's model by name);
* the pipeline and the hybrid refuse jumping knowledge in one line (exit 2) that says why (a stage
  holds only its own layers' outputs) and what to use instead.

The one-process references are the same trainer on the whole graph; that the adapted models compute
what plain PyG computes is ``tests/models/test_pyg_residual_jk.py``'s. Tolerances: LOSSES_REORDERED
and WEIGHTS_REORDERED (tests/_equality.py says why), over EPOCHS epochs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch_geometric.nn.models import GraphSAGE

from fullgraph.cli import main
from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.models import from_pyg
from fullgraph.models.user import load_builder
from fullgraph.parallel.registry import check_model_layout
from fullgraph.partition import PartitionBook, partition_nodes, save_partition
from fullgraph.train.trainer import Trainer

from tests._equality import assert_same_losses, assert_same_state
from tests.distributed import ledger, planned_bytes, run_ranks

REPO = Path(__file__).resolve().parents[2]
MODELS = f"{REPO}/tests/user_models.py"
BUILDERS = {
    "jk-cat": (f"{MODELS}:sage_jk", {}),
    "jk-max": (f"{MODELS}:sage_jk", {"jk": "max"}),
    "jk-lstm": (f"{MODELS}:sage_jk", {"jk": "lstm", "layers": 2}),
    "residual": (f"{MODELS}:residual_sage", {}),
    "graph-layernorm": (f"{MODELS}:sage_graph_norm", {}),
}
EPOCHS = 8
GRAPH_NORM_LAYERS = 2  # sage_graph_norm: 3 convs, a LayerNorm after each hidden one


def config(name: str, **extra) -> dict:
    ref, args = BUILDERS[name]
    return dict(model=ref, model_args=args, epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01) | extra


@pytest.fixture(scope="module")
def single(cora):
    out = {}
    for name in BUILDERS:
        trainer = Trainer(TrainConfig.of(**config(name), progress="none", threads=1), cora)
        result = trainer.build().train()
        out[name] = (torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict())
    return out


def test_graph_parallel_equals_one_process(cora, single, tmp_path):
    folder = tmp_path / "metis-2"
    node_part = partition_nodes(cora, 2, method="metis", seed=0)
    book = PartitionBook.build(cora, node_part)
    save_partition(book, cora, folder, {"method": "metis", "parts": 2, "seed": 0})
    halo = sum(p.num_halo for p in book.parts)
    runs = [{"name": name, "partition_dir": str(folder), "config": config(name, partition_dir=str(folder))}
            for name in BUILDERS]
    got = run_ranks("train_runs", 2, {"runs": runs}, tmp_path)
    for run in runs:
        name = run["name"]
        losses, state = single[name]
        assert_same_losses(got[name]["losses"], losses, what=f"P=2 {name} losses")
        assert_same_state(got[name]["state"], state, what=f"P=2 {name} weights")
        plan = planned_bytes(dict(run["config"], parallel="graph", nprocs=2), cora, halo)
        comm = ledger(got[name]["comm"])
        if name == "graph-layernorm":  # [Σx, count] and Σ(x - μ)² per norm, summed on 2 ranks; their gradients back
            stats = {"norm/fwd": GRAPH_NORM_LAYERS * 3 * 4 * 2, "norm/bwd": GRAPH_NORM_LAYERS * 3 * 4 * 2}
            assert {k: comm.pop(k, 0) for k in stats} == stats, comm
            plan = {k: v for k, v in plan.items() if k not in stats}
        assert comm == plan, name


def object_of(name: str, graph) -> torch.nn.Module:
    """The model ``name``'s builder makes, as an object, from the run's seed (each rank makes the same)."""
    ref, args = BUILDERS[name]
    torch.manual_seed(0)
    return from_pyg(load_builder(ref)(graph.num_features, graph.num_classes, **args))


OBJECT_LAYOUTS = [("tensor_runs", dict(parallel="tensor"), 2), ("spmm_runs", dict(parallel="spmm-1d"), 2)]


@pytest.mark.parametrize("task, layout, nprocs", OBJECT_LAYOUTS, ids=[t for t, _, _ in OBJECT_LAYOUTS])
def test_operator_layouts_hold_every_layer_and_equal_one_process(cora, shared_data, task, layout, nprocs, tmp_path):
    names = ["jk-cat", "jk-max"]
    # the options name a built-in model of the objects' block normalization (D^-1 A), which the block rows carry
    options = dict(model="sage", dataset="cora", root=str(shared_data), epochs=EPOCHS, eval_every=EPOCHS, seed=0,
                   lr=0.01)
    runs = [{"name": name, "builder": BUILDERS[name][0], "builder_args": BUILDERS[name][1],
             "widths": [cora.num_features, cora.num_classes], "config": options | layout} for name in names]
    got = run_ranks("object_runs", nprocs, {"runs": runs}, tmp_path)
    for name in names:
        model = object_of(name, cora)
        result = Trainer(TrainConfig.of(**options, progress="none", threads=1), cora, model=model).build().train()
        assert_same_losses(got[name]["losses"], result.losses, what=f"{layout['parallel']} {name} losses")
        assert_same_state(got[name]["state"], model.state_dict(), what=f"{layout['parallel']} {name} weights")


@pytest.mark.parametrize("mode", [dict(parallel="pipeline", nprocs=2),
                                  dict(parallel="hybrid", nprocs=4, stages=2, graph_ways=2)])
def test_chunked_layouts_refuse_a_built_jk_model_in_one_line(mode):
    cfg = TrainConfig.of(**mode)
    model = from_pyg(GraphSAGE(8, 16, 3, 4, jk="cat"))
    with pytest.raises(InputError) as err:
        check_model_layout(cfg, model)
    text = str(err.value)
    assert "\n" not in text and f"--parallel {mode['parallel']}" in text and "jk='cat'" in text
    assert "a stage holds only its own layers' outputs" in text and "--parallel graph" in text
    for fine in (dict(parallel="graph", nprocs=2), dict(parallel="single")):
        check_model_layout(TrainConfig.of(**fine), model)
    check_model_layout(cfg, from_pyg(GraphSAGE(8, 16, 3, 4, jk="last")))  # its end reads the last layer only


def test_pipeline_refuses_jumping_knowledge_in_one_line_and_exit_2(shared_data, tmp_path, capsys):
    status = main(["train", "--dataset", "cora", "--root", str(shared_data), "--model", f"{MODELS}:sage_jk",
                   "--parallel", "pipeline", "--nprocs", "2", "--epochs", "1", "--progress", "none",
                   "--out", str(tmp_path / "run")])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.strip()]
    assert status == 2, err
    assert len(err) == 1 and err[0].startswith("fullgraph: error:"), err
    assert "jk='cat'" in err[0] and "a stage holds only its own layers' outputs" in err[0], err
    assert "--parallel graph" in err[0] and "without jumping knowledge" in err[0], err


def test_the_plan_lists_no_chunked_layout_for_a_jk_model(cora):
    """``fullgraph plan`` checks a user's built model against each layout as training does: a jk model
    is no candidate for the pipeline or the hybrid, and the line says why."""
    from fullgraph.cli.plan import candidates

    ref, args = BUILDERS["jk-cat"]
    probe = object_of("jk-cat", cora)
    fits, refused = candidates(4, 2, ref, args, probe)
    assert {o["parallel"] for o in fits} >= {"graph"} and not {"pipeline", "hybrid"} & {o["parallel"] for o in fits}
    assert any(line.startswith("hybrid") and "reads every layer" in line for line in refused), refused
