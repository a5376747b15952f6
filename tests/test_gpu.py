"""The CUDA path: what runs only where a GPU is (the ``gpu`` marker; skipped elsewhere, see conftest),
and ``--device``'s refusal where none is.

What the design promises on a GPU, and what these tests hold it to:
- keyed dropout masks are integer hashes of (seed, epoch, site, row, column), so CUDA and the CPU
  draw the **same bits**;
- floating-point results are not bit-equal across devices (cuSPARSE and cuBLAS sum in other orders
  than MKL), so losses and weights are compared within CUDA_LOSSES and CUDA_WEIGHTS
  (tests/_equality.py says why those bounds hold);
- one process with a GPU of its own computes there (``--device auto``), records its peak GPU memory in
  summary.json, and a distributed rank with a GPU of its own talks over NCCL — including under
  torchrun, where the CLI joins the process group before ``Comm`` does.
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from fullgraph.config import TrainConfig
from fullgraph.data.synthetic import planted_partition
from fullgraph.models import UNTYPED_MODELS
from fullgraph.ops.dropout import DropoutKey, keyed_keep
from fullgraph.train.trainer import Trainer

from tests._equality import CUDA_LOSSES, CUDA_WEIGHTS, assert_same_losses, assert_same_state

HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def small():
    return planted_partition(num_nodes=800, num_features=32, seed=3)


def fit(graph, device, **kw):
    cfg = TrainConfig.of(progress="none", device=device, **kw)
    trainer = Trainer(cfg, graph)
    try:
        result = trainer.build().train()
        weights = {k: v.detach().cpu() for k, v in trainer.model.state_dict().items()}
        return result, weights
    finally:
        trainer.close()


@pytest.mark.skipif(HAS_CUDA, reason="checks the refusal on a machine without a GPU")
def test_device_cuda_is_refused_without_a_gpu_in_one_line():
    run = subprocess.run([sys.executable, "-m", "fullgraph", "train", "--device", "cuda", "--epochs", "1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "--device cuda" in run.stderr and "torch sees 0" in run.stderr


def test_device_cuda_shares_the_gpus_among_more_ranks(monkeypatch):
    """``--device cuda`` with fewer GPUs than local ranks: rank r on GPU r mod count, flagged as sharing
    (gloo, not NCCL); ``auto`` keeps such ranks on the CPU."""
    from fullgraph.device import resolve_device, shares_gpu

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert [resolve_device("cuda", r, 4) for r in range(4)] == [torch.device("cuda", i) for i in (0, 1, 0, 1)]
    assert shares_gpu(torch.device("cuda", 1), 4) and not shares_gpu(torch.device("cuda", 1), 2)
    assert not shares_gpu(torch.device("cpu"), 4)
    monkeypatch.delenv("FULLGRAPH_DEVICE")
    assert resolve_device("auto", 3, 4).type == "cpu"  # auto: a GPU of its own or none


def test_device_auto_is_cuda_where_each_process_has_a_gpu(monkeypatch):
    from fullgraph.device import resolve_device

    monkeypatch.delenv("FULLGRAPH_DEVICE")

    want = "cuda" if HAS_CUDA else "cpu"
    assert resolve_device("auto").type == want
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto", 0, torch.cuda.device_count() + 1).type == "cpu"  # not a GPU for each
    monkeypatch.setenv("FULLGRAPH_DEVICE", "cpu")
    assert resolve_device("auto").type == "cpu"


@pytest.mark.gpu
@pytest.mark.parametrize("model", UNTYPED_MODELS + ("rgcn",))
def test_every_model_trains_on_cuda_as_on_the_cpu(small, model, tmp_path):
    """Every built-in model; R-GCN on a small typed graph (it reads node types and relations: the lent GPU
    found it run on the untyped graph here, which it refuses)."""
    from tests.models.test_rgcn import small_typed

    graph = small if model in UNTYPED_MODELS else small_typed()
    kw = dict(model=model, layers=3, hidden=16, heads=2, epochs=5, dropout=0.5, threads=1, eval_every=5)
    cpu, w_cpu = fit(graph, "cpu", **kw)
    gpu, w_gpu = fit(graph, "cuda", out=str(tmp_path), **kw)
    assert_same_losses(gpu.losses, cpu.losses, CUDA_LOSSES, f"{model} losses on cuda")
    assert_same_state(w_gpu, w_cpu, CUDA_WEIGHTS, f"{model} weights on cuda")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["device"].startswith("cuda") and summary["peak_cuda_bytes"] > 0
    assert cpu.device == "cpu" and cpu.peak_cuda_bytes is None


@pytest.mark.gpu
def test_keyed_dropout_draws_the_same_bits_on_cuda_and_the_cpu():
    """On CUDA the mask is one compiled kernel (``COMPILED_MASK_DEVICES``), on the CPU eager passes over
    blocks: the same bits, for any number of rows (none included) and columns, and no fallback."""
    import warnings

    rows = torch.randperm(5000)[:3000]
    key = DropoutKey(seed=7, epoch=3)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*computing masks eagerly")  # compiling failed: a fallback
        for p, n, cols in ((0.1, 3000, 130), (0.5, 3000, 130), (0.9, 3000, 130), (0.5, 17, 1), (0.5, 0, 64)):
            cpu = keyed_keep(rows[:n], cols, p, key, site=2)
            gpu = keyed_keep(rows[:n].cuda(), cols, p, key, site=2)
            assert torch.equal(gpu.cpu(), cpu), (p, n, cols)


@pytest.mark.gpu
def test_fused_gcn_kernel_on_cuda_matches_plain_autograd(small):
    kw = dict(model="gcn", layers=4, hidden=32, epochs=4, dropout=0.5, eval_every=4)
    fused, w_fused = fit(small, "cuda", gcn_kernel="fused", **kw)
    plain, w_plain = fit(small, "cuda", gcn_kernel="autograd", **kw)
    assert_same_losses(fused.losses, plain.losses, CUDA_LOSSES, "fused kernel losses on cuda")
    assert_same_state(w_fused, w_plain, CUDA_WEIGHTS, "fused kernel weights on cuda")
    assert fused.peak_cuda_bytes < plain.peak_cuda_bytes  # one kept activation per layer, not several


def _cli(args, tmp_path, launcher=()):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("FULLGRAPH_DEVICE")  # the default, --device auto, as a user on this machine gets it
    run = subprocess.run([*launcher, "-m", "fullgraph", "train", "--progress", "none", *args],
                         capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads((tmp_path / "out" / "summary.json").read_text())


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["launcher", "torchrun"])
def test_a_rank_with_a_gpu_of_its_own_trains_over_nccl(tmp_path, how):
    """One graph-parallel rank on the GPU, started by fullgraph's launcher or by torchrun (whose path
    joins the process group in the CLI first): it computes on cuda:0, and its losses are those of
    the single process on the GPU."""
    common = ["--epochs", "4", "--eval-every", "4", "--dropout", "0.5", "--out", "out"]
    (tmp_path / "single").mkdir()
    _cli(common, tmp_path / "single", launcher=(sys.executable,))
    launcher = (sys.executable,) if how == "launcher" else (sys.executable, "-m", "torch.distributed.run",
                                                            "--standalone", "--nproc-per-node", "1")
    rank = _cli([*common, "--parallel", "graph", "--nprocs", "1"], tmp_path, launcher=launcher)
    assert rank["device"] == "cuda:0" and rank["peak_cuda_bytes"] > 0
    with open(tmp_path / "out" / "metrics.jsonl") as f:
        losses = [json.loads(line)["loss"] for line in f]
    with open(tmp_path / "single" / "out" / "metrics.jsonl") as f:
        want = [json.loads(line)["loss"] for line in f]
    assert_same_losses(losses, want, CUDA_LOSSES, f"rank on cuda:0 ({how}) losses")


SHARED_LAYOUTS = {
    "graph": ["--parallel", "graph", "--nprocs", "2"],
    "pipeline": ["--parallel", "pipeline", "--nprocs", "2", "--chunks", "2"],
    "spmm-1d": ["--parallel", "spmm-1d", "--nprocs", "2"],
    "tensor": ["--parallel", "tensor", "--nprocs", "2"],
}


@pytest.mark.gpu
@pytest.mark.shared_gpu
@pytest.mark.parametrize("layout", list(SHARED_LAYOUTS))
def test_ranks_sharing_one_gpu_train_as_on_the_cpu(tmp_path, layout):
    """Every multi-rank layout's CUDA path on one GPU: two ranks share it (``--device cuda`` with more
    ranks than GPUs), talk over gloo with host copies of what gloo does not move from a GPU, and give the
    losses the same layout gives on the CPU (within CUDA_LOSSES: cuBLAS and cuSPARSE sum in other orders)."""
    if torch.cuda.device_count() >= 2:
        pytest.skip("every rank has a GPU of its own here (NCCL): nothing is shared")
    common = ["--epochs", "4", "--eval-every", "4", "--dropout", "0.5", "--out", "out", *SHARED_LAYOUTS[layout]]
    (tmp_path / "cpu").mkdir()
    _cli([*common, "--device", "cpu"], tmp_path / "cpu", launcher=(sys.executable,))
    run = _cli([*common, "--device", "cuda"], tmp_path, launcher=(sys.executable,))
    assert run["device"].startswith("cuda") and run["peak_cuda_bytes"] > 0
    got, want = ([json.loads(line)["loss"] for line in open(d / "out" / "metrics.jsonl")]
                 for d in (tmp_path, tmp_path / "cpu"))
    assert_same_losses(got, want, CUDA_LOSSES, f"{layout}, two ranks on one GPU")
