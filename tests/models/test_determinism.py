"""Same seed, same bits: training twice in one process, with several threads, gives bit-identical
losses and weights (docs/training.md promises it; issue 49 §5).

GAT once broke it: ``wh[src]`` differentiates into an accumulating ``index_put_``, whose threads add
a node's edge gradients in the order they happen to run, so the last bits of the weights (and, a
few epochs later, of the loss) changed from run to run. It now gathers and sums over edges through
``ops.edges`` (CSR products, each row summed by one thread in a fixed order). The check is exact
(``==``, no tolerance): that is the promise. At two threads the old code failed it in every run.
"""

import pytest
import torch
from torch.nn import functional as F

from fullgraph.models import UNTYPED_MODELS as MODELS, build_model  # R-GCN: test_rgcn.py
from fullgraph.ops import Block, SparseOp
from fullgraph.ops.dropout import keyed_dropout
from fullgraph.parallel.engine import input_features

EPOCHS = 20
SETTINGS = {"gat": dict(layers=2, hidden=64, heads=8, dropout=0.6)}  # the paper's Cora model
OTHERS = dict(layers=2, hidden=32, dropout=0.5)


@pytest.fixture
def two_threads():
    """At least two threads: the thread scheduling is what varied the sums."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train(graph, model: str, seed: int = 0) -> tuple[list[float], dict[str, torch.Tensor]]:
    """``EPOCHS`` epochs of full-graph Adam on ``graph``, as one process trains: the losses and the
    final weights."""
    torch.manual_seed(seed)
    net = build_model(model, graph.num_features, graph.num_classes, **SETTINGS.get(model, OTHERS))
    block, x = Block.from_graph(graph, net.norm), input_features(graph.x)
    blocks = [block] * net.num_layers
    opt = torch.optim.Adam(net.parameters(), lr=0.01, weight_decay=5e-4)
    train_mask, y = graph.train_mask, graph.y
    losses = []
    for epoch in range(1, EPOCHS + 1):
        opt.zero_grad()
        with keyed_dropout(seed, epoch):
            loss = F.cross_entropy(net(blocks, x)[train_mask], y[train_mask])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in net.state_dict().items()}


@pytest.mark.parametrize("model", list(MODELS))
def test_same_seed_gives_the_same_bits(cora, two_threads, model):
    losses, weights = train(cora, model)
    again, weights_again = train(cora, model)
    differ = [e + 1 for e, (a, b) in enumerate(zip(losses, again)) if a != b]
    assert not differ, f"{model}: the losses of epochs {differ} differ between two runs with the same seed"
    changed = [k for k in weights if not torch.equal(weights[k], weights_again[k])]
    assert not changed, f"{model}: the weights {changed} differ between two runs with the same seed"


def test_edge_sums_are_the_gathers_and_sums_they_stand_for():
    """``ops.edges``' kernels against ``x[src]``, ``x[dst]`` and ``index_add_``, and their backward
    passes against autograd's numerical gradient (float64), on a block with more src rows than dst
    rows (a part's, with halo columns) and a dst row without edges."""
    indptr, indices = torch.tensor([0, 2, 2, 5]), torch.tensor([4, 0, 1, 4, 2])
    sums = Block(SparseOp(indptr, indices, torch.ones(5), (3, 5)), "self-loops").edge_sums()
    src, dst = indices, torch.tensor([0, 0, 2, 2, 2])
    x = torch.randn(5, 2, 3, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    m = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.equal(sums.gather_src(x), x[src]) and torch.equal(sums.gather_dst(y), y[dst])
    assert torch.allclose(sums.sum_at_dst(m), torch.zeros(3, 4, dtype=torch.float64).index_add_(0, dst, m))
    for fn, arg in ((sums.gather_src, x), (sums.gather_dst, y), (sums.sum_at_dst, m)):
        assert torch.autograd.gradcheck(fn, (arg,))


def test_tensor_parallel_attention_gives_the_same_bits(tmp_path, shared_data):
    """GAT under ``--parallel tensor`` sums its column slices over the whole graph's edges
    (``parallel.tensor_engine.WholeGraphAttention``): the same seed, layout, process count and
    ``--threads`` give the same losses, bit for bit. With ``x[src]`` and ``alpha[:, head]`` there
    (accumulating backward passes), 4 to 5 of 30 epochs differed at two threads per rank."""
    import json

    from tests.train.test_checkpoint import train as fullgraph_train

    runs = []
    for i in range(2):
        out = tmp_path / f"run{i}"
        fullgraph_train("--dataset", "cora", "--root", str(shared_data), "--model", "gat", "--parallel", "tensor",
                        "--nprocs", "2", "--threads", "2", "--epochs", "30", "--out", str(out))
        runs.append([json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()])
    differ = [e + 1 for e, (a, b) in enumerate(zip(*runs)) if a != b]
    assert len(runs[0]) == 30 and not differ, f"the losses of epochs {differ} differ between two runs"
