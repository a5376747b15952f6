"""A user's model, named by its builder, trains the same under every layout (docs/your-model.md,
docs/design.md): PyG's GCNConv, SAGEConv (a BasicGNN with BatchNorm), GATConv, GINConv and GraphConv, and a
layer written against the contract (``examples/gated_sage.py``), dropout on.

* graph parallelism, P = 2 and 4, METIS and random parts, equals one process;
* the pipeline (S = 2) follows the one-process simulation of the same chunks, and the hybrid 2×2
  follows it too (the chunked-stale rule depends only on the chunking, not on the layout);
* the SpMM layouts refuse a user's model in one line (its aggregation is not declared one product).

The one-process references are the same trainer on one block (graph parallelism) or on the same
chunks in one process (pipeline, hybrid); that the adapted convolutions compute what PyG computes is
``tests/models/test_pyg.py``'s. Tolerances: LOSSES_REORDERED and WEIGHTS_REORDERED
(tests/_equality.py says why), over EPOCHS epochs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.models import norm_and_depth
from fullgraph.parallel.pipeline import ChunkedEngine
from fullgraph.parallel.history import History
from fullgraph.parallel.schedule import ChunkSchedule, stage_bounds
from fullgraph.partition import PartitionBook, partition_nodes, save_partition
from fullgraph.partition.chunks import cached_chunks, load_chunks
from fullgraph.train.trainer import Trainer

from tests._equality import assert_same_losses, assert_same_state
from tests.distributed import ledger, planned_bytes, run_ranks

REPO = Path(__file__).resolve().parents[2]
BUILDERS = {name: f"{REPO}/tests/user_models.py:{name}" for name in ("gcn", "sage", "gat", "gin", "graphconv")}
BUILDERS["gated_sage"] = f"{REPO}/examples/gated_sage.py:build"
EPOCHS = 8
K = 4  # chunks per part
NOISE = {"sage": ("layers.0.conv.lin_l.bias", "layers.0.norm.module.running_mean")}
"""Parameters float noise decides: PyG's SAGEConv keeps its bias before the BatchNorm, which
subtracts it again, so the bias's gradient is zero up to rounding and Adam turns that rounding into
steps of size lr (``fullgraph/ops/norm.py`` says more); the running mean tracks that bias, a few
epochs behind. Neither changes what training computes (the losses are compared in full); evaluation,
which reads the running mean, moves by that noise, so the test metric is compared for the others."""


def weights(state: dict, name: str) -> dict:
    return {k: v for k, v in state.items() if k not in NOISE.get(name, ())}


def config(name: str, **extra) -> dict:
    return dict(model=BUILDERS[name], epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01) | extra


def write_partition(graph, parts: int, method: str, folder: Path):
    node_part = (partition_nodes(graph, parts, method=method, seed=0) if parts > 1
                 else torch.zeros(graph.num_nodes, dtype=torch.int64))
    book = PartitionBook.build(graph, node_part)
    save_partition(book, graph, folder, {"method": method, "parts": parts, "seed": 0})
    return node_part


@pytest.fixture(scope="module")
def single(cora):
    out = {}
    for name in BUILDERS:
        trainer = Trainer(TrainConfig.of(**config(name), progress="none"), cora)
        result = trainer.build().train()
        out[name] = (torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict(), result.test_metric)
    return out


@pytest.mark.parametrize("nprocs", [2, 4])
def test_graph_parallel_user_models_equal_one_process(cora, single, nprocs, tmp_path):
    runs, halo = [], {}
    for method in ("metis", "random"):
        folder = tmp_path / f"{method}-{nprocs}"
        node_part = write_partition(cora, nprocs, method, folder)
        halo[method] = sum(p.num_halo for p in PartitionBook.build(cora, node_part).parts)
        runs += [{"name": f"{method}/{name}", "partition_dir": str(folder),
                  "config": config(name, partition_dir=str(folder))} for name in BUILDERS]
    got = run_ranks("train_runs", nprocs, {"runs": runs}, tmp_path)
    for run in runs:
        name = run["name"].split("/")[1]
        losses, state, metric = single[name]
        assert_same_losses(got[run["name"]]["losses"], losses, what=f"P={nprocs} {run['name']} losses")
        assert_same_state(weights(got[run["name"]]["state"], name), weights(state, name),
                          what=f"P={nprocs} {run['name']} weights")
        if name not in NOISE:  # one of the 1000 test nodes may flip on a near-tie of its two top logits
            assert abs(got[run["name"]]["test_metric"] - metric) <= 1.5e-3, (run["name"], metric)
        # every byte as fullgraph plan counts it for this model (its widths, parameters and norms)
        plan = planned_bytes(dict(run["config"], parallel="graph", nprocs=nprocs), cora, halo[run["name"].split("/")[0]])
        assert ledger(got[run["name"]]["comm"]) == plan, run["name"]


def simulate(graph, cfg: TrainConfig, chunk_file: str, parts: int):
    """The chunked-stale rule in one process, on the chunks of ``chunk_file`` (K per part, ``parts``
    parts: global chunk k is the union of the parts' chunk k)."""
    norm, layers = norm_and_depth(cfg.model.name, cfg.model.layers, cfg.model.args,
                                  lambda: (graph.num_features, graph.num_classes, graph.node_types))
    part = PartitionBook.build(graph, torch.zeros(graph.num_nodes, dtype=torch.int64)).part(0)
    node_chunk = load_chunks(chunk_file, graph.num_nodes, K)
    engine = ChunkedEngine(part, node_chunk[part.local_nodes], norm,
                           ChunkSchedule(K, tuple(stage_bounds(layers, 1)), shuffle=cfg.parallel.shuffle),
                           History(cfg.parallel.history_refresh))
    trainer = Trainer(cfg, engine=engine)
    result = trainer.build().train()
    return torch.tensor(result.losses, dtype=torch.float64), dict(trainer.model.named_parameters())


@pytest.mark.parametrize("stages, ways", [(2, 1), (2, 2)], ids=["pipeline-2", "hybrid-2x2"])
def test_chunked_layouts_follow_the_one_process_simulation(cora, stages, ways, tmp_path):
    node_part = write_partition(cora, ways, "metis", tmp_path / "parts")
    cfile = str(cached_chunks(cora, node_part, ways, K, "metis", 0, tmp_path))
    mode = dict(parallel="pipeline") if ways == 1 else dict(parallel="hybrid", stages=stages, graph_ways=ways)
    runs = [{"name": name, "config": config(name, partition_dir=str(tmp_path / "parts"), chunks=K, chunk_file=cfile,
                                            history_refresh=2, **mode)} for name in BUILDERS]
    got = run_ranks("chunked_runs", stages * ways, {"runs": runs}, tmp_path)
    for name in BUILDERS:
        losses, state = simulate(cora, TrainConfig.of(**config(name, history_refresh=2), progress="none"), cfile,
                                 ways)
        assert_same_losses(got[name]["losses"], losses, what=f"{stages}x{ways} {name} losses")
        assert_same_state(weights(got[name]["state"], name), weights(state, name),
                          what=f"{stages}x{ways} {name} weights")
        if ways == 1:  # the pipeline's bytes as fullgraph plan counts them for this model
            plan = planned_bytes(dict(runs[list(BUILDERS).index(name)]["config"], nprocs=stages), cora)
            assert ledger(got[name]["comm"]) == plan, name


@pytest.mark.parametrize("mode", ["spmm-1d", "spmm-2d"])
def test_spmm_layouts_refuse_a_user_model_in_one_line(mode):
    with pytest.raises(InputError, match=f"expected a model whose aggregation is one sparse product .* with "
                                         f"--parallel {mode}"):
        TrainConfig.of(model=BUILDERS["gcn"], parallel=mode, nprocs=4)
