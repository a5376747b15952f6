"""The chunked-stale engine: pipeline and hybrid layouts (docs/design.md, "One semantics for every layout").

What is proved here:
* the engine computes the chunked-stale forward and its exact backward with no historical
  gradients: loss and every weight gradient match a dense, written-out reference of the rule,
  epoch by epoch, for GCN and GCNII (the H0 path) on one part, and for GCN on two parts of a hybrid
  group (current and historical halo rows), with the history replaced every 2 epochs;
* with one chunk it is exact single-process training, for every model;
* pipeline(S) for S = 2, 4 follows the one-process simulation (S = 1) of the same chunks, order and
  seeds; hybrid 2×2 follows hybrid 1×2; hybrid with one chunk is exact training;
* the ledger moves exactly GNNPipe's volumes: 2·(S-1)·N·H·4 bytes of pipeline traffic (GCNII twice
  that: H0 travels with each chunk), plus, in the hybrid, each halo row once per layer per epoch.

Tolerances (tests/_equality.py says why each holds). Pipeline stages run exactly the simulation's
kernels on the same chunk blocks, so their losses agree to float32 resolution (LOSSES_REORDERED:
1e-6 relative through epoch 3, then growing x1.7 per epoch). The hybrid sums a chunk's rows over local columns
(inner, then halo) and its weight gradients as a sum of per-part partial sums, like graph
parallelism: LOSSES_REORDERED and WEIGHTS_REORDERED. The dense reference multiplies a dense Â, so
its sums run in another order: DENSE_REFERENCE_LOSS and DENSE_REFERENCE_GRADS.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch.nn import functional as F

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.models import MODELS, UNTYPED_MODELS, build_model
from fullgraph.ops import Block
from fullgraph.parallel.engine import SingleEngine
from fullgraph.parallel.pipeline import ChunkedEngine
from fullgraph.parallel.history import History
from fullgraph.parallel.schedule import ChunkSchedule, chunk_order, stage_bounds
from fullgraph.partition import PartitionBook, partition_nodes, save_partition
from fullgraph.partition.chunks import ChunkSet, cached_chunks, load_chunks, make_chunks
from fullgraph.train.trainer import Trainer

from tests._equality import (DENSE_REFERENCE_GRADS, DENSE_REFERENCE_LOSS, assert_same, assert_same_losses,
                             assert_same_state)
from tests.distributed import ledger, planned_bytes, run_ranks

EPOCHS = 20
DROPOUT = 0.5  # masks are keyed by (seed, epoch, site, global node id): every layout drops alike
SETTINGS = {
    "gcn": dict(layers=4, hidden=16),
    "sage": dict(layers=4, hidden=16),
    "gcnii": dict(layers=4, hidden=16),
    "gat": dict(layers=2, hidden=16, heads=2),
    "resgcn+": dict(layers=4, hidden=16),
}


def config(model: str, **extra) -> dict:
    return dict(model=model, dropout=DROPOUT, epochs=EPOCHS, eval_every=EPOCHS, seed=0, lr=0.01,
                **SETTINGS[model]) | extra


def prepare(graph, parts: int, chunks: int, folder, chunker: str = "metis"):
    """A partition folder into ``parts`` and the chunk file of ``chunks`` chunks per part."""
    node_part = (partition_nodes(graph, parts, "metis", seed=0) if parts > 1
                 else torch.zeros(graph.num_nodes, dtype=torch.int64))
    book = PartitionBook.build(graph, node_part)
    pdir = folder / f"parts{parts}"
    save_partition(book, graph, pdir, {"method": "metis", "parts": parts, "seed": 0})
    cfile = cached_chunks(graph, node_part, parts, chunks, chunker, 0, folder)
    return book, str(pdir), str(cfile)


def simulate(graph, cfg: TrainConfig, chunks: int, chunk_file: str | None = None):
    """The one-process run of the chunked-stale rule (S = W = 1)."""
    norm = MODELS[cfg.model.name].norm
    part = PartitionBook.build(graph, torch.zeros(graph.num_nodes, dtype=torch.int64)).part(0)
    node_chunk = (load_chunks(chunk_file, graph.num_nodes, chunks) if chunk_file else
                  make_chunks(graph, torch.zeros(graph.num_nodes, dtype=torch.int64), 1, chunks))
    schedule = ChunkSchedule(chunks, tuple(stage_bounds(cfg.model.layers, 1)), shuffle=cfg.parallel.shuffle,
                             seed=cfg.optimization.seed, induced=cfg.parallel.chunk_edges == "induced")
    engine = ChunkedEngine(part, node_chunk[part.local_nodes], norm, schedule, History(cfg.parallel.history_refresh))
    trainer = Trainer(cfg, engine=engine)
    result = trainer.build().train()
    return torch.tensor(result.losses, dtype=torch.float64), trainer.model.state_dict(), result


# ---------------------------------------------------------------------- chunks
def test_chunks_cover_each_part_and_reassemble_its_block(cora):
    node_part = partition_nodes(cora, 2, "metis", seed=0)
    node_chunk = make_chunks(cora, node_part, 2, 5, "metis", seed=0)
    book = PartitionBook.build(cora, node_part)
    for part in book.parts:
        local_chunk = node_chunk[part.local_nodes]
        assert torch.equal(torch.unique(local_chunk[: part.num_inner]), torch.arange(5))
        chunks = ChunkSet(part, local_chunk, 5, "gcn")
        full = part.block("gcn").adj.to_dense()
        rebuilt = torch.zeros_like(full)
        for ch in chunks:
            cols = torch.cat([ch.dst, ch.others])
            assert not bool(torch.isin(ch.others, ch.dst).any())
            assert torch.equal(ch.others_chunk, local_chunk[ch.others])
            rebuilt[ch.dst.unsqueeze(1), cols.unsqueeze(0)] = ch.block.adj.to_dense()
            # the chunk's halo rows are exactly its halo nodes of the same chunk
            halo = ch.recv_idx
            assert bool((local_chunk[halo] == ch.index).all()) and sum(ch.recv_counts) == halo.numel()
            assert torch.equal(ch.dst[ch.send_pos], ch.send_idx)
        assert torch.equal(rebuilt, full)
        induced = ChunkSet(part, local_chunk, 5, "gcn", induced=True)
        for ch in induced:  # only edges inside the (global) chunk remain
            assert bool((local_chunk[ch.others] == ch.index).all())


def test_random_chunker_is_balanced_and_bad_counts_are_refused(cora):
    zeros = torch.zeros(cora.num_nodes, dtype=torch.int64)
    sizes = torch.bincount(make_chunks(cora, zeros, 1, 7, "random", seed=3))
    assert int(sizes.max() - sizes.min()) <= 1
    with pytest.raises(InputError, match="--chunks <= 2708"):
        make_chunks(cora, zeros, 1, 5000, "metis")
    with pytest.raises(InputError, match="--chunker"):
        make_chunks(cora, zeros, 1, 4, "spectral")


def test_stage_parameters_split_every_model_without_overlap():
    for name in UNTYPED_MODELS:  # R-GCN's: tests/models/test_rgcn.py
        model = build_model(name, 8, 3, layers=6, hidden=16, dropout=0.0, heads=2)
        bounds = stage_bounds(6, 3)
        seen = []
        for s, (a, b) in enumerate(bounds):
            seen += [id(p) for p in model.stage_parameters(a, b, with_pre=s == 0, with_post=s == 2)]
        assert sorted(seen) == sorted(id(p) for p in model.parameters()), name


# ---------------------------------------------------------------------- the rule itself
def dense_layer(model, i: int, A_rows, src, h0_rows):
    """Graph layer ``i`` of a GCN or GCNII (dropout off) with a dense Â: the rows ``A_rows`` select."""
    layer = model.layers[i]
    if model.uses_h0:  # GCNII: relu(S ((1-β) I + β W)), S = (1-α) Â H + α H0
        support = (1 - layer.alpha) * (A_rows @ src) + layer.alpha * h0_rows
        return F.relu((1 - layer.beta) * support + layer.beta * support @ layer.weight)
    z = A_rows @ src @ layer.weight + layer.bias
    return z if i == len(model.layers) - 1 else F.relu(z)


def dense_history(model, A, x):
    """One exact pass with the current weights: every layer's input (layers 1..L-1), the history a
    run starts from."""
    with torch.no_grad():
        h0 = h = model.pre(x)
        hist = {}
        for i in range(len(model.layers) - 1):
            h = dense_layer(model, i, A, h, h0)
            hist[i + 1] = h
    return hist


def dense_reference(model, A, x, y, train, order, node_chunk, hist):
    """The chunked-stale forward written out with dense matrices over the whole graph: chunk k (of
    every part at once: chunk ids are shared by the parts) reads, at each layer, the current rows of
    the chunks processed so far this epoch (itself included) and the history of the others. Autograd
    gives its exact gradient; the history (constants) receives none. Returns the loss and this
    epoch's layer inputs (the next history)."""
    h0 = model.pre(x)
    processed = torch.zeros(x.shape[0], dtype=torch.bool)
    cur = {i: torch.zeros_like(hist[i]) for i in hist}
    loss = 0.0
    for k in order:
        rows = torch.nonzero(node_chunk == k).flatten()
        processed = processed.clone()
        processed[rows] = True
        for i in range(len(model.layers)):
            src = h0 if i == 0 else torch.where(processed[:, None], cur[i], hist[i])
            z = dense_layer(model, i, A[rows], src, h0[rows])
            if i < len(model.layers) - 1:
                cur[i + 1] = cur[i + 1].index_put((rows,), z)
        logits = model.post(z)
        mask = train[rows]
        loss = loss + F.cross_entropy(logits[mask], y[rows][mask], reduction="sum") / int(train.sum())
    return loss, {i: t.detach() for i, t in cur.items()}


def replay(model, A, x, graph, node_chunk, chunks: int, refresh: int, epochs: int, got_step):
    """Epochs 1..``epochs`` of the reference beside the engine's (``got_step(epoch)`` returns the
    engine's loss and weight gradients for the current weights); both then take ``w -= 0.5 grad``.
    History: the exact pass with the initial weights, replaced by an epoch's values at the end of
    epochs ``refresh``, ``2 refresh``, ..."""
    hist = dense_history(model, A, x)
    for epoch in range(1, epochs + 1):
        loss, grads = got_step(epoch)
        model.zero_grad()
        ref, cur = dense_reference(model, A, x, graph.y, graph.train_mask, chunk_order(0, epoch, chunks, True),
                                   node_chunk, hist)
        ref.backward()
        assert_same(loss, ref.item(), DENSE_REFERENCE_LOSS, f"epoch {epoch} loss")
        assert_same_state(grads, {n: p.grad for n, p in model.named_parameters()}, DENSE_REFERENCE_GRADS,
                          f"epoch {epoch} weight gradients")
        if epoch % refresh == 0:
            hist = cur
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.5 * p.grad


@pytest.mark.parametrize("model_name, layers, refresh, epochs", [("gcn", 3, 10, 2), ("gcnii", 4, 2, 5)])
def test_engine_is_the_chunked_stale_rule_with_its_exact_gradient(cora, model_name, layers, refresh, epochs):
    """One part, 4 chunks, checked epoch by epoch against the dense reference. GCNII adds the H0
    path (H0 rows travel with each chunk; its gradient is collected per chunk), and with refresh 2
    over 5 epochs the history is replaced twice (epochs 3-4 read epoch 2's values, epoch 5 epoch 4's)."""
    torch.manual_seed(0)
    model = build_model(model_name, cora.num_features, cora.num_classes, layers=layers, hidden=16, dropout=0.0)
    engine_model = build_model(model_name, cora.num_features, cora.num_classes, layers=layers, hidden=16,
                               dropout=0.0)
    engine_model.load_state_dict(model.state_dict())
    zeros = torch.zeros(cora.num_nodes, dtype=torch.int64)
    node_chunk = make_chunks(cora, zeros, 1, 4, "metis", seed=0)
    part = PartitionBook.build(cora, zeros).part(0)
    engine = ChunkedEngine(part, node_chunk[part.local_nodes], MODELS[model_name].norm,
                           ChunkSchedule(4, tuple(stage_bounds(layers, 1))), History(refresh))

    def got_step(epoch):
        engine_model.zero_grad()
        loss = engine.step(engine_model, epoch)
        grads = {n: p.grad.clone() for n, p in engine_model.named_parameters()}
        with torch.no_grad():
            for p in engine_model.parameters():
                p -= 0.5 * p.grad
        return loss, grads

    replay(model, Block.from_graph(cora, MODELS[model_name].norm).adj.to_dense(), cora.dense_x(), cora,
           node_chunk, 4, refresh, epochs, got_step)


def test_hybrid_halo_rows_follow_the_chunked_stale_rule(cora, tmp_path):
    """Two parts (a hybrid group of W = 2, one stage), 4 chunks each, refresh 2, 5 epochs, against the
    same dense reference over the whole graph: a part's halo rows are current when their owner's
    chunk has been processed this epoch (received with that chunk) and history otherwise."""
    _, pdir, cfile = prepare(cora, 2, 4, tmp_path)
    cfg = dict(model="gcn", layers=3, hidden=16, dropout=0.0, seed=0, parallel="hybrid", stages=1, graph_ways=2,
               chunks=4, chunk_file=cfile, partition_dir=pdir, history_refresh=2)
    got = run_ranks("chunked_steps", 2, {"config": cfg, "epochs": 5}, tmp_path)
    torch.manual_seed(0)
    model = build_model("gcn", cora.num_features, cora.num_classes, layers=3, hidden=16, dropout=0.0)
    replay(model, Block.from_graph(cora, "gcn").adj.to_dense(), cora.dense_x(), cora,
           load_chunks(cfile, cora.num_nodes, 4), 4, 2, 5,
           lambda epoch: (got["losses"][epoch - 1], got["grads"][epoch - 1]))


@pytest.mark.parametrize("model", list(SETTINGS))
def test_one_chunk_is_exact_single_process_training(cora, model):
    cfg = TrainConfig.of(**config(model), progress="none")
    ref = Trainer(cfg, engine=SingleEngine(cora, MODELS[model].norm))
    ref_losses = torch.tensor(ref.build().train().losses, dtype=torch.float64)
    losses, state, _ = simulate(cora, cfg, chunks=1)
    assert_same_losses(losses, ref_losses, what=f"{model} losses")
    assert_same_state(state, ref.model, what=f"{model} weights")


# ---------------------------------------------------------------------- distributed equalities
PIPE_MODELS = ("gcn", "gcnii", "sage")
K = 8


@pytest.fixture(scope="module")
def pipe_inputs(cora, tmp_path_factory):
    return prepare(cora, 1, K, tmp_path_factory.mktemp("pipe"))


@pytest.fixture(scope="module")
def simulated(cora, pipe_inputs):
    _, _, cfile = pipe_inputs
    return {m: simulate(cora, TrainConfig.of(**config(m, history_refresh=3), progress="none"), K, cfile)
            for m in PIPE_MODELS}


VARIANTS = {  # the switches, each checked against its own simulation (2 stages)
    "gcn-induced": dict(chunk_edges="induced"),
    "gcn-fixed-order-refresh-1": dict(shuffle=False, history_refresh=1),
}


def test_pipeline_switches_follow_their_simulations(cora, pipe_inputs, tmp_path):
    _, pdir, cfile = pipe_inputs
    runs = [{"name": name, "config": config("gcn", parallel="pipeline", partition_dir=pdir, chunks=K, chunk_file=cfile,
                                            **opts)} for name, opts in VARIANTS.items()]
    got = run_ranks("chunked_runs", 2, {"runs": runs}, tmp_path)
    for name, opts in VARIANTS.items():
        losses, _, _ = simulate(cora, TrainConfig.of(**config("gcn", **opts), progress="none"), K, cfile)
        assert_same_losses(got[name]["losses"], losses, what=f"{name} losses")


@pytest.mark.parametrize("stages", [2, 4])
def test_pipeline_follows_the_one_process_simulation(cora, pipe_inputs, simulated, stages, tmp_path):
    _, pdir, cfile = pipe_inputs
    runs = [{"name": m, "config": config(m, history_refresh=3, parallel="pipeline", partition_dir=pdir,
                                         chunks=K, chunk_file=cfile)} for m in PIPE_MODELS]
    got = run_ranks("chunked_runs", stages, {"runs": runs}, tmp_path)
    N = cora.num_nodes
    for m in PIPE_MODELS:
        losses, state, _ = simulated[m]
        assert_same_losses(got[m]["losses"], losses, what=f"S={stages} {m} losses")
        assert_same_state(got[m]["state"], state, what=f"S={stages} {m} weights")
        H = SETTINGS[m]["hidden"]
        per_direction = (stages - 1) * N * H * 4 * (2 if m == "gcnii" else 1)  # GCNII: H0 travels too
        comm = got[m]["comm"]
        assert comm["pipe/fwd"] == per_direction and comm["pipe/bwd"] == per_direction, (m, comm)
        assert "halo/fwd" not in comm and "grad/allreduce" not in comm  # a pure pipeline moves nothing else
        assert ledger(comm) == planned_bytes(dict(runs[PIPE_MODELS.index(m)]["config"], nprocs=stages), cora), m
        assert 0.0 <= got[m]["bubble"] < 1.0


def test_hybrid_2x2_follows_1x2_and_one_chunk_is_exact(cora, tmp_path):
    book, pdir, cfile = prepare(cora, 2, 4, tmp_path)
    _, _, cfile1 = prepare(cora, 2, 1, tmp_path)
    runs = [{"name": m, "config": config(m, parallel="hybrid", partition_dir=pdir, chunks=4, chunk_file=cfile,
                                         graph_ways=2)} for m in ("gcn", "gcnii")]
    four = run_ranks("chunked_runs", 4, {"runs": runs}, tmp_path / "four")
    exact = [{"name": f"{m}-k1", "config": config(m.split("-")[0], parallel="hybrid", partition_dir=pdir, chunks=1,
                                                   chunk_file=cfile1, graph_ways=2, stages=1, **opts)}
             for m, opts in EXACT.items()]
    two = run_ranks("chunked_runs", 2, {"runs": [dict(r, config=dict(r["config"], stages=1)) for r in runs] + exact},
                    tmp_path / "two")
    halo_rows = sum(p.num_halo for p in book.parts)
    N = cora.num_nodes
    for m in ("gcn", "gcnii"):
        assert_same_losses(four[m]["losses"], two[m]["losses"], what=f"hybrid 2x2 {m} losses")
        assert_same_state(four[m]["state"], two[m]["state"], what=f"hybrid 2x2 {m} weights")
        L, H = SETTINGS[m]["layers"], SETTINGS[m]["hidden"]
        halo = (L - 1) * halo_rows * H * 4  # every halo row once per layer (but the first) per epoch
        pipe = N * H * 4 * (2 if m == "gcnii" else 1)  # S - 1 = 1 stage boundary
        for got, pipe_bytes, P, S in ((four[m]["comm"], pipe, 4, 2), (two[m]["comm"], 0, 2, 1)):
            assert got["halo/fwd"] == halo and got["halo/bwd"] == halo, (m, got)
            assert got.get("pipe/fwd", 0) == pipe_bytes and got.get("pipe/bwd", 0) == pipe_bytes, (m, got)
            run = next(r for r in runs if r["name"] == m)["config"]
            assert ledger(got) == planned_bytes(dict(run, nprocs=P, stages=S), cora, halo_rows), (m, S)
    for m, opts in EXACT.items():  # one chunk: the exact single-process run, BatchNorm's statistics included
        model = m.split("-")[0]
        ref = Trainer(TrainConfig.of(**config(model, **opts), progress="none"),
                      engine=SingleEngine(cora, MODELS[model].norm))
        ref_losses = ref.build().train().losses
        assert_same_losses(two[f"{m}-k1"]["losses"], ref_losses, what=f"hybrid one chunk {m} losses")
        # the trained parameters, gathered from their owners
        assert_same_state(two[f"{m}-k1"]["state"], dict(ref.model.named_parameters()),
                          what=f"hybrid one chunk {m} weights")


EXACT = {"gcn": {}, "sage-batch": dict(norm="batch")}  # hybrid runs with one chunk, checked against one process


# ---------------------------------------------------------------------- the command line
@pytest.mark.parametrize("flags, message", [
    ("--parallel pipeline --nprocs 3 --layers 2", "at most one stage per layer"),
    ("--parallel pipeline --nprocs 2 --layers 4 --chunks 1", "--chunks >= the number of stages"),
    ("--parallel pipeline --nprocs 2 --layers 4 --chunks 9999", "--chunks <= 5000"),
    ("--parallel hybrid --nprocs 4 --stages 3 --graph-ways 2 --layers 4", "--stages × --graph-ways = --nprocs"),
    ("--parallel hybrid --nprocs 4 --layers 4", "--stages S and --graph-ways W"),
    ("--parallel pipeline --nprocs 2 --layers 4 --stage-layers 1,2", "--stage-layers"),
    ("--parallel pipeline --nprocs 2 --layers 4 --chunk-edges none", "chunk_edges"),
])
def test_bad_layouts_get_one_clear_error_before_launch(flags, message, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fullgraph", "train", *flags.split(), "--epochs", "1"],
                          capture_output=True, text=True, timeout=120, env={"FULLGRAPH_CACHE": str(tmp_path),
                                                                              "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
