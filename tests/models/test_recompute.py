"""``--recompute``: layers keep only their inputs and recompute the rest in backward.

What is proved here:
* the same losses (RECOMPUTED, relative 1e-6) with and without it, for every model, with dropout 0.5 over
  several epochs: the recomputation redraws the same keyed dropout masks (a different mask would
  give a gradient of another network, and the losses would part from the second epoch on);
* it does recompute: each layer's ``compute`` runs twice per step with it, once without;
* the masks are the same even when backward runs on another thread, where the dropout key (a
  context variable) is not set: autograd runs GPU backward on its own threads;
* unkeyed masks (a model used on its own) are redrawn alike too (checkpoint restores the RNG);
* the live memory a forward pass leaves for backward drops (GCNII, GAT, ResGCN+);
* graph parallel (P = 2) gives the same losses and moves the same bytes with it: the halo fetch
  is outside the recomputed region, so the ledger is unchanged; the pipeline honours it as is.
"""

from __future__ import annotations

import threading

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.data.synthetic import planted_partition
from fullgraph.errors import InputError
from fullgraph.models import UNTYPED_MODELS as MODELS, build_model  # R-GCN's: test_rgcn.py
from fullgraph.ops import Block
from fullgraph.ops.dropout import keyed_dropout
from fullgraph.memory import heap_bytes
from fullgraph.train.trainer import Trainer

from tests._equality import RECOMPUTED, assert_same_losses, assert_same_state
from tests.distributed import run_ranks

SETTINGS = {
    "gcn": dict(layers=3, hidden=16),
    "sage": dict(layers=3, hidden=16),
    "gat": dict(layers=3, hidden=16, heads=2),
    "gcnii": dict(layers=4, hidden=16),
    "resgcn+": dict(layers=3, hidden=16),
    "gin": dict(layers=3, hidden=16),
    "appnp": dict(layers=3, hidden=16),
}


@pytest.fixture(scope="module")
def small():
    return planted_partition(num_nodes=600, num_features=16, seed=1)


def train(graph, **kw):
    trainer = Trainer(TrainConfig.of(progress="none", threads=1, **kw), graph)
    try:
        return torch.tensor(trainer.build().train().losses, dtype=torch.float64)
    finally:
        trainer.close()


@pytest.mark.parametrize("model", list(MODELS))
def test_same_losses_with_and_without_recompute(small, model):
    kw = dict(model=model, dropout=0.5, epochs=6, eval_every=6, seed=2, **SETTINGS[model])
    plain, again = train(small, **kw), train(small, recompute=True, **kw)
    assert_same_losses(again, plain, RECOMPUTED, f"{model} losses with --recompute")
    if model == "gcn":  # the fused kernel's aggregate-first order (hidden > input width) too
        kw = dict(kw, hidden=32)
        assert_same_losses(train(small, recompute=True, **kw), train(small, **kw), RECOMPUTED,
                           "gcn (aggregate first) losses with --recompute")


def grads(model, fn) -> dict:
    model.zero_grad(set_to_none=True)
    fn()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("model", list(MODELS))
def test_each_layer_recomputes_once_per_step(small, model):
    torch.manual_seed(0)
    net = build_model(model, small.num_features, small.num_classes, dropout=0.5, **SETTINGS[model])
    calls = []
    for i, layer in enumerate(net.layers):
        compute = layer.compute
        layer.compute = lambda *a, _c=compute, _i=i: calls.append(_i) or _c(*a)
    block = Block.from_graph(small, net.norm)
    # APPNP's propagation keeps nothing for backward (a constant sparse product, a scaling): there is
    # nothing to rebuild, so checkpointing never runs it again
    again = 1 if model == "appnp" else 2
    for recompute, times in ((False, 1), (True, again)):
        net.recompute = recompute
        calls.clear()
        with keyed_dropout(0, 1):
            net(block, small.x).sum().backward()
        assert sorted(calls) == sorted(list(range(net.num_layers)) * times)
    calls.clear()
    with torch.no_grad():  # evaluation records no graph: nothing to recompute
        net.eval()
        net(block, small.x)
    assert sorted(calls) == list(range(net.num_layers))


@pytest.mark.parametrize("model", list(MODELS))
def test_masks_are_redrawn_alike_on_another_thread_and_unkeyed(small, model):
    torch.manual_seed(0)
    net = build_model(model, small.num_features, small.num_classes, dropout=0.5, **SETTINGS[model])
    block = Block.from_graph(small, net.norm)
    loss = lambda: net(block, small.x).square().mean()  # noqa: E731

    def keyed_forward_thread_backward():
        with keyed_dropout(5, 3):
            out = loss()
        t = threading.Thread(target=out.backward)  # no dropout key is set on that thread
        t.start()
        t.join()

    net.recompute = False
    ref = grads(net, keyed_forward_thread_backward)
    net.recompute = True
    got = grads(net, keyed_forward_thread_backward)
    assert_same_state(got, ref, RECOMPUTED, f"{model} gradients, backward on another thread")

    def unkeyed():  # masks from the global generator: checkpoint restores its state for the recomputation
        torch.manual_seed(7)
        loss().backward()

    net.recompute = False
    ref = grads(net, unkeyed)
    net.recompute = True
    got = grads(net, unkeyed)
    assert_same_state(got, ref, RECOMPUTED, f"{model} gradients, unkeyed masks")


# measured (hidden 64): gcnii 0.46, gat 0.04, resgcn+ 0.42, sage 0.45; the fused GCN layer already
# keeps one activation per layer, its output, which is the next layer's input: recompute saves nothing
@pytest.mark.parametrize("model,layers,bound", [("gcnii", 16, 0.6), ("gat", 4, 0.1), ("resgcn+", 8, 0.55),
                                                ("sage", 8, 0.6), ("gcn", 16, 1.05)])
def test_recompute_keeps_less_for_backward(model, layers, bound):
    """Bytes alive between forward and backward (the C heap, where CPU tensors live): with recompute,
    each layer keeps about its input only."""
    if heap_bytes() is None:
        pytest.skip("needs glibc's mallinfo2")
    graph = planted_partition(num_nodes=4000, num_features=32, seed=0)
    torch.manual_seed(0)
    net = build_model(model, graph.num_features, graph.num_classes, layers=layers, hidden=64, heads=4, dropout=0.5)
    block = Block.from_graph(graph, net.norm)
    block.edges()  # GAT's edge list is cached on the block: build it before measuring
    kept = {}
    for recompute in (False, True):
        net.recompute = recompute
        with keyed_dropout(0, 1):
            before = heap_bytes()
            out = net(block, graph.x)
            kept[recompute] = heap_bytes() - before
            out.sum().backward()
        del out
    assert kept[True] < bound * kept[False], kept


def test_recompute_is_refused_where_the_product_communicates():
    with pytest.raises(InputError, match="--recompute"):
        Trainer(TrainConfig.of(parallel="spmm-1d", nprocs=2, recompute=True, progress="none")).build()


def test_graph_parallel_same_losses_and_ledger_with_recompute(cora, tmp_path):
    from fullgraph.partition import PartitionBook, partition_nodes, save_partition

    folder = tmp_path / "metis-2"
    book = PartitionBook.build(cora, partition_nodes(cora, 2, method="metis", seed=0))
    save_partition(book, cora, folder, {"method": "metis", "parts": 2, "seed": 0})
    runs = []
    for model in ("gcn", "gcnii", "gat"):
        for recompute in (False, True):
            cfg = dict(model=model, dropout=0.5, epochs=5, eval_every=5, seed=0, recompute=recompute,
                       **SETTINGS[model])
            runs.append({"name": f"{model}/{recompute}", "partition_dir": str(folder), "config": cfg})
    got = run_ranks("train_runs", 2, {"runs": runs}, tmp_path)
    for model in ("gcn", "gcnii", "gat"):
        plain, again = got[f"{model}/False"], got[f"{model}/True"]
        assert_same_losses(again["losses"], plain["losses"], RECOMPUTED, f"graph parallel {model} losses")
        assert again["comm"] == plain["comm"], model  # recomputation moves no byte
        assert again["comm"]["halo/fwd"] > 0


def test_pipeline_honours_recompute_unchanged(cora, tmp_path):
    """The pipeline calls the layers as they are; their checkpoint covers the local computation only
    (halo rows and history were put in place before the call)."""
    from fullgraph.partition import PartitionBook, save_partition
    from fullgraph.partition.chunks import cached_chunks

    node_part = torch.zeros(cora.num_nodes, dtype=torch.int64)
    pdir = tmp_path / "parts1"
    save_partition(PartitionBook.build(cora, node_part), cora, pdir, {"method": "metis", "parts": 1, "seed": 0})
    cfile = cached_chunks(cora, node_part, 1, 4, "metis", 0, tmp_path)
    runs = [{"name": f"gcnii/{r}", "config": dict(model="gcnii", layers=4, hidden=16, dropout=0.5, epochs=5,
                                                  eval_every=5, seed=0, parallel="pipeline", partition_dir=str(pdir),
                                                  chunks=4, chunk_file=str(cfile), recompute=r)}
            for r in (False, True)]
    got = run_ranks("chunked_runs", 2, {"runs": runs}, tmp_path)
    plain, again = got["gcnii/False"], got["gcnii/True"]
    assert_same_losses(again["losses"], plain["losses"], RECOMPUTED, "pipeline gcnii losses")
    assert again["comm"] == plain["comm"]
