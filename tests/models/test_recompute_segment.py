"""``--recompute-segment K`` (``GNN.recompute_segment``): the layers run in checkpointed segments of K.

What must hold: the same loss and every gradient, bit for bit, as the stack run whole (the keyed dropout
masks are recomputed from the key the forward captured; batch norm's running statistics are taken once,
not again in the recomputation); what a training forward leaves for backward is each segment's input
and nothing else, which is the plan's count of a stack of ``ceil(L / K)`` layers that recomputes; and
the refusals (beyond one process, a model that reads every layer, K > layers) are one line each.
"""

from __future__ import annotations

import math

import pytest
import torch

from fullgraph.cli import main
from fullgraph.config import ModelOptions, TrainConfig
from fullgraph.data.synthetic import planted_partition
from fullgraph.errors import InputError
from fullgraph.models import build_model
from fullgraph.ops import Block
from fullgraph.ops.dropout import keyed_dropout
from fullgraph.plan import check_memory, estimate_peak_bytes, kept_activation_bytes
from fullgraph.train.trainer import Trainer

LAYERS, SEGMENT, HIDDEN = 7, 3, 8


@pytest.fixture(scope="module")
def graph():
    return planted_partition(num_nodes=300, num_classes=4, num_features=24, seed=2)


def _step(graph, name: str, segment: int, **kw):
    """One training forward and backward under keyed dropout: the loss, every gradient, the bytes the
    forward left for backward (``saved_tensors_hooks``) and the model."""
    torch.manual_seed(0)
    model = build_model(name, graph.num_features, graph.num_classes, layers=LAYERS, hidden=HIDDEN, dropout=0.5, **kw)
    model.recompute_segment = segment
    block = Block.from_graph(graph, model.norm)
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size() if t.layout == torch.strided else 0)
        return t

    with keyed_dropout(0, 3), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(block, graph.x)
    loss = torch.nn.functional.cross_entropy(out[graph.train_mask], graph.y[graph.train_mask])
    loss.backward()  # outside the key's context, as autograd's device threads run it: the forward captured it
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return loss.item(), grads, sum(saved), model


@pytest.mark.parametrize("name,kw", [("gcn", {}), ("sage", {}), ("gcnii", {}), ("gat", {"heads": 2}),
                                     ("gcn", {"norm": "batch"})])
def test_segments_give_the_same_loss_and_gradients(graph, name, kw):
    whole, seg = _step(graph, name, 0, **kw), _step(graph, name, SEGMENT, **kw)
    assert seg[0] == whole[0]
    assert seg[1].keys() == whole[1].keys()
    for n in whole[1]:
        assert torch.equal(seg[1][n], whole[1][n]), n
    assert seg[2] < whole[2]  # and keeps less
    for (n, a), (_, b) in zip(whole[3].named_buffers(), seg[3].named_buffers()):
        assert torch.equal(a, b), n  # batch norm's running statistics moved once


def test_recompute_moves_batch_norm_statistics_once(graph):
    """Per-layer ``--recompute`` runs a layer's forward again in backward too: its running statistics
    must equal those of a forward run once."""
    torch.manual_seed(0)
    a = build_model("gcn", graph.num_features, graph.num_classes, layers=3, hidden=HIDDEN, dropout=0.5, norm="batch")
    b = build_model("gcn", graph.num_features, graph.num_classes, layers=3, hidden=HIDDEN, dropout=0.5, norm="batch")
    b.load_state_dict(a.state_dict())
    b.recompute = True
    block = Block.from_graph(graph, "gcn")
    for model in (a, b):
        with keyed_dropout(0, 1):
            model(block, graph.x).sum().backward()
    for (n, x), (_, y) in zip(a.named_buffers(), b.named_buffers()):
        assert torch.equal(x, y), n


@pytest.mark.parametrize("name", ["gcn", "sage"])
def test_a_segmented_forward_keeps_the_segments_inputs_as_the_plan_counts(graph, name):
    """What the forward leaves for backward is each segment's input (the first: the dropped input
    features), the count of a stack of ceil(L / K) layers that recomputes; the plan's estimate adds
    one segment's internals, the peak while backward recomputes it."""
    _, _, kept, _ = _step(graph, name, SEGMENT)
    sizes = dict(nodes=graph.num_nodes, halo=0, block_nnz=graph.num_edges, features=graph.num_features,
                 classes=graph.num_classes, hidden=HIDDEN)
    segments = math.ceil(LAYERS / SEGMENT)
    assert kept == kept_activation_bytes(name, layers=segments, recompute=True, **sizes)
    whole = kept_activation_bytes(name, layers=LAYERS, **sizes)
    planned = kept_activation_bytes(name, layers=LAYERS, recompute_segment=SEGMENT, **sizes)
    per_layer = kept_activation_bytes(name, layers=3, **sizes) - kept_activation_bytes(name, layers=2, **sizes)
    assert planned == kept + SEGMENT * per_layer < whole


def test_training_with_segments_equals_the_whole_stack(graph):
    kw = dict(model="gcn", layers=6, hidden=HIDDEN, epochs=3, dropout=0.5, threads=1, progress="none")
    runs = []
    for segment in (0, 2):
        trainer = Trainer(TrainConfig.of(recompute_segment=segment, **kw), graph)
        try:
            runs.append(trainer.build().train())
        finally:
            trainer.close()
    assert runs[0].losses == runs[1].losses  # bit for bit
    assert runs[0].test_acc == runs[1].test_acc


def test_depth_is_bounded_by_memory_not_a_constant(graph):
    assert ModelOptions(layers=512).layers == 512
    with pytest.raises(InputError, match=r"expected layers >= 2 \(got 1\)"):
        ModelOptions(layers=1)
    stats = [dict(nodes=200000, edges=2000000, features=64, classes=5, feature_nnz=None, mmap_threshold=1 << 20)]
    cfg = TrainConfig.of(model="gcn", layers=256, hidden=256)
    whole = check_memory(cfg, stats, available_bytes=1 << 50)[0]
    k = round(math.sqrt(256))
    segmented = estimate_peak_bytes(**stats[0], model="gcn", layers=256, hidden=256, recompute_segment=k)
    assert segmented < whole / 4
    cfg.run.memory_limit = (segmented + (1 << 20)) / 2**30
    with pytest.raises(InputError, match=rf"would fit: .*--recompute-segment {k} \("):
        check_memory(cfg, stats)


@pytest.mark.parametrize("argv,expected", [
    (["--parallel", "graph", "--nprocs", "2"], "expected --recompute-segment only with --parallel single"),
    (["--layers", "3", "--recompute-segment", "4"], r"expected --recompute-segment at most --layers \(3\)"),
    (["--recompute-segment", "-1"], "expected recompute_segment >= 0"),
])
def test_refusals_are_one_line(argv, expected, capsys, tmp_path):
    base = ["train", "--epochs", "1", "--progress", "none", "--out", str(tmp_path / "run")]
    if "--recompute-segment" not in argv:
        argv = argv + ["--layers", "4", "--recompute-segment", "2"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and __import__("re").search(expected, err[0]), err


def test_a_model_that_reads_every_layer_is_refused(graph):
    cfg = TrainConfig.of(model="tests/user_models.py:sage_jk", recompute_segment=2, epochs=1, progress="none")
    trainer = Trainer(cfg, graph)
    try:
        with pytest.raises(InputError, match="reads every layer's output"):
            trainer.build()
    finally:
        trainer.close()
