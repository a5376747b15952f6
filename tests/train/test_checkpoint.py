"""Keeping what is trained: checkpoints, exact resume after a killed rank, model.pt, evaluate, predict.

"Exact" is bit for bit: a run killed (SIGKILL of one rank, ``FULLGRAPH_FAULT``) after a checkpoint
and resumed must write the same per-epoch losses, and end with the same weights, as a run that
never stopped. No tolerance applies: the resumed process reads the same bytes the uninterrupted
one held (weights, Adam's moments, the pipeline's tables), and every random draw is keyed by
(seed, epoch).
"""

import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from fullgraph.train.checkpoint import SafeReader, complete_checkpoints

from tests._equality import FLOAT32_REORDER, assert_same

ROOT_ARGS = ["--epochs", "4", "--checkpoint-every", "2", "--progress", "none", "--dropout", "0.5"]

CLOCKED = ("times", "bubbles")  # epoch times and pipeline bubble fractions: wall-clock measurements

LAYOUTS = {
    "single": [],
    "graph-p1": ["--parallel", "graph", "--nprocs", "2"],
    "graph-p0.1": ["--parallel", "graph", "--nprocs", "2", "--boundary-rate", "0.1"],
    "pipeline": ["--parallel", "pipeline", "--nprocs", "2", "--layers", "4", "--history-refresh", "2"],
    "hybrid": ["--parallel", "hybrid", "--nprocs", "4", "--stages", "2", "--graph-ways", "2", "--layers", "4",
               "--history-refresh", "2"],
    # int8's stochastic rounding is keyed like dropout: a resumed run rounds every row as before
    "spmm-1d-int8": ["--parallel", "spmm-1d", "--nprocs", "2", "--comm-precision", "int8"],
    "graph-int8": ["--parallel", "graph", "--nprocs", "2", "--comm-precision", "int8"],
    "tensor-int8": ["--parallel", "tensor", "--nprocs", "2", "--comm-precision", "int8"],
    "pipeline-int8": ["--parallel", "pipeline", "--nprocs", "2", "--layers", "4", "--comm-precision", "int8"],
    # the learning rate, the plateau's count and fp16's loss scale come back with the weights
    "single-plateau-fp16-clip": ["--lr-schedule", "plateau", "--lr-step", "1", "--precision", "fp16",
                                 "--clip-grad-norm", "0.05"],
    "pipeline-step-bf16-clip": ["--parallel", "pipeline", "--nprocs", "2", "--layers", "4", "--lr-schedule", "step",
                                "--lr-step", "1", "--warmup-epochs", "1", "--precision", "bf16", "--clip-grad-norm", "0.05"],
}


def cli(*args, env=None, ok=True):
    """``fullgraph ARGS`` in a new process (what a SIGKILL of the process itself needs)."""
    run = subprocess.run([sys.executable, "-m", "fullgraph", *args], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, **(env or {})))
    if ok:
        assert run.returncode == 0, run.stderr[-3000:]
    return run


class Said:
    def __init__(self, code: int, text: str):
        self.returncode, self.text = code, text


def train(*args, env=None, ok=True) -> Said:
    """``fullgraph train ARGS`` in this process (ranks, if any, are still processes of their own): the
    exit code, and what it printed or logged. Saves the interpreter's start-up per call."""
    import contextlib
    import io
    import logging

    from fullgraph.cli import main

    out, handler = io.StringIO(), logging.StreamHandler()
    handler.stream = out
    logger = logging.getLogger("fullgraph")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.INFO  # whatever pytest made of the root logger
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(["train", "--progress", "none", *args])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    if ok:
        assert code == 0, out.getvalue()[-3000:]
    return Said(code, out.getvalue())


def losses(run: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def newest_state(run: Path) -> dict[str, torch.Tensor]:
    """Every rank's tensors of the run's newest checkpoint, read back through torch.distributed.checkpoint."""
    import torch.distributed.checkpoint as dcp

    folder = complete_checkpoints(run)[0]
    meta = SafeReader(folder).read_metadata().state_dict_metadata
    state = {k: torch.empty(tuple(m.size), dtype=m.properties.dtype) for k, m in meta.items()}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.load(state, storage_reader=SafeReader(folder), no_dist=True)
    return state


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_killed_run_resumes_bit_for_bit(tmp_path, shared_data, layout):
    args = ["--dataset", "cora", "--root", str(shared_data), *ROOT_ARGS, *LAYOUTS[layout]]
    # one process computes in a process of its own each time, as a user's runs do: pytest's process
    # carries state from earlier tests that may change a kernel's last bits (ranks are processes anyway),
    # on one thread (as ranks do here): a threaded fp16 product's last bits followed the machine's load
    # (seen in 2 of 3 runs on a busy machine, before this change as after it)
    single = lambda *a, **k: cli("train", "--progress", "none", "--threads", "1", *a, **k)  # noqa: E731
    run = single if layout.startswith("single") else train
    run(*args, "--out", str(tmp_path / "whole"))
    killer = "kill:0:3" if layout.startswith("single") else "kill:1:3"  # the process itself; or rank 1
    killed = run(*args, "--out", str(tmp_path / "cut"), env={"FULLGRAPH_FAULT": killer}, ok=False)
    assert killed.returncode != 0
    assert [p.name for p in complete_checkpoints(tmp_path / "cut")] == ["epoch-000002"]
    assert len(losses(tmp_path / "cut")) == 2
    run("--resume", str(tmp_path / "cut"))
    assert losses(tmp_path / "cut") == losses(tmp_path / "whole")  # bit for bit, every epoch
    whole, cut = newest_state(tmp_path / "whole"), newest_state(tmp_path / "cut")
    assert sorted(whole) == sorted(cut) and any("/model/" in k for k in whole)
    for key in whole:
        if key.endswith("/meta"):  # the loop's record, but for what the clock measured
            a, b = ({k: v for k, v in json.loads(bytes(s[key].tolist()))["loop"].items() if k not in CLOCKED}
                    for s in (whole, cut))
            assert a == b
        else:
            assert torch.equal(whole[key], cut[key]), key
    a = torch.load(tmp_path / "whole" / "model.pt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "cut" / "model.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_damaged_checkpoint_is_refused_and_the_one_before_used(tmp_path):
    run = tmp_path / "run"
    train("--epochs", "5", "--checkpoint-every", "1", "--out", str(run))
    want = losses(run)
    newest, before = complete_checkpoints(run)[:2]
    data = next(newest.glob("*.distcp"))
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # one flipped byte
    data.write_bytes(bytes(blob))
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines[:4]))  # as if killed at 5
    said = train("--resume", str(run), "--epochs", "5").text
    assert f"checkpoint {newest} is damaged" in said and "using the one before it" in said
    assert f"resuming after epoch 4 from {before}" in said
    assert losses(run) == want


def test_every_checkpoint_damaged_is_one_error_without_a_one_before(tmp_path):
    """Both kept checkpoints damaged: the error names each; no line promises "the one before it" where
    none comes before (issue 63 §12)."""
    run = tmp_path / "run"
    train("--epochs", "2", "--checkpoint-every", "1", "--out", str(run))
    folders = complete_checkpoints(run)
    for folder in folders:
        (folder / "manifest.json").write_text("{")
    res = train("--resume", str(run), "--epochs", "3", ok=False)
    assert res.returncode == 2 and all(str(f) in res.text for f in folders), res.text
    assert res.text.count("using the one before it") == 1  # the newest's, which has one before it


def test_a_partial_checkpoint_is_never_resumed_from(tmp_path):
    run = tmp_path / "run"
    train("--epochs", "2", "--checkpoint-every", "1", "--out", str(run))
    (complete_checkpoints(run)[0] / "manifest.json").unlink()  # killed between the files and the manifest
    (run / "checkpoint" / ".tmp-epoch-000003").mkdir()  # killed while writing the next one
    said = train("--resume", str(run), "--epochs", "3").text
    assert "is incomplete (no manifest.json)" in said and "resuming after epoch 1" in said
    assert json.loads((run / "config.json").read_text())["epochs"] == 3  # a later --resume aims as far


def test_resume_refuses_a_changed_run_in_one_line(tmp_path):
    run = tmp_path / "run"
    train("--epochs", "2", "--checkpoint-every", "2", "--out", str(run))
    for extra, says in ((["--lr", "0.1"], "expected only options that do not change what the run computes with --resume"),
                        (["--epochs", "1"], "expected --epochs >= 2")):
        res = train("--resume", str(run), *extra, ok=False)
        assert res.returncode == 2 and res.text.count("\n") == 1 and says in res.text, res.text
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps(config | {"epochs": 1}))  # edited by hand below what ran
    res = train("--resume", str(run), ok=False)  # issue 63 §6: was accepted, and summary.json said 1 epoch
    assert res.returncode == 2 and res.text.count("\n") == 1, res.text
    assert "expected epochs >= 2" in res.text and "epoch-000002" in res.text and "config.json" in res.text, res.text
    (run / "config.json").write_text(json.dumps(config))
    res = train("--resume", str(tmp_path / "nothing"), ok=False)
    assert res.returncode == 2 and "config.json" in res.text
    res = train("--epochs", "2", "--out", str(run), ok=False)  # a fresh run would lose the checkpoints
    assert res.returncode == 2 and f"--resume {run}" in res.text and complete_checkpoints(run)
    # --resume auto: starts afresh without a checkpoint, resumes with one, refuses other options
    auto = tmp_path / "auto"
    train("--epochs", "2", "--checkpoint-every", "1", "--out", str(auto), "--resume", "auto")
    res = train("--epochs", "3", "--checkpoint-every", "1", "--out", str(auto), "--resume", "auto")
    assert "resuming after epoch 2" in res.text
    res = train("--epochs", "3", "--hidden", "8", "--checkpoint-every", "1", "--out", str(auto),
                "--resume", "auto", ok=False)
    assert res.returncode == 2 and "--hidden 64 -> 8" in res.text


def test_torchrun_max_restarts_picks_the_run_up_after_a_rank_dies(tmp_path, shared_data):
    """What the README shows: torchrun restarts every rank after one dies, and ``--resume auto``
    carries on from the newest checkpoint; the losses are those of a run that never stopped."""
    common = ["--dataset", "cora", "--root", str(shared_data), *ROOT_ARGS, "--parallel", "graph", "--nprocs", "2"]
    # (--progress none comes from ROOT_ARGS: torchrun's ranks get the same flags as train() below)
    train(*common, "--out", str(tmp_path / "whole"))
    env = dict(os.environ, FULLGRAPH_FAULT=f"kill:1:3:{tmp_path / 'fired'}")
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "--max-restarts", "1", "-m", "fullgraph", "train", *common, "--out", str(tmp_path / "cut"),
                          "--resume", "auto"], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "fired").exists()  # a rank did die
    assert losses(tmp_path / "cut") == losses(tmp_path / "whole")


def test_evaluate_and_predict_agree_with_the_summary(tmp_path, shared_data):
    run = tmp_path / "run"
    train("--dataset", "cora", "--root", str(shared_data), "--parallel", "graph", "--nprocs", "2", "--epochs", "8",
          "--out", str(run))
    summary = json.loads((run / "summary.json").read_text())
    got = json.loads(cli("evaluate", "--run", str(run), "--json").stdout)
    for key in ("train_metric", "val_metric", "test_metric", "train_acc", "val_acc", "test_acc"):
        assert got[key] == summary[key], key  # counts over the same nodes: exact
    assert_same(got["val_loss"], summary["val_loss"], FLOAT32_REORDER, "val_loss")  # summed in another order
    from fullgraph.train.apply import predict_run

    predict_run(str(run), str(tmp_path / "pred"), embeddings=True, device="cpu")
    pred = np.load(tmp_path / "pred" / "predictions.npy")
    proba = np.load(tmp_path / "pred" / "probabilities.npy")
    emb = np.load(tmp_path / "pred" / "embeddings.npy")
    assert pred.shape == (2708,) and proba.shape == (2708, 7) and emb.shape == (2708, 64)
    assert (proba.argmax(1) == pred).all() and np.allclose(proba.sum(1), 1, atol=1e-5)
    # the same, one part per process: every part's rows gathered and put back in node order
    cli("predict", "--run", str(run), "--out", str(tmp_path / "pred2"), "--embeddings", "--parallel", "graph",
        "--nprocs", "2", "--device", "cpu")
    assert (np.load(tmp_path / "pred2" / "predictions.npy") == pred).all()
    assert_same(np.load(tmp_path / "pred2" / "probabilities.npy"), proba, FLOAT32_REORDER, "probabilities, P = 2")
    assert_same(np.load(tmp_path / "pred2" / "embeddings.npy"), emb, FLOAT32_REORDER, "embeddings, P = 2")
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    g = load_graph(TrainConfig.of(dataset="cora", root=str(shared_data)))
    test = g.test_mask.numpy()
    assert (pred[test] == g.y.numpy()[test]).mean() == pytest.approx(summary["test_acc"], abs=1e-12)


def test_a_model_file_from_elsewhere_is_refused(tmp_path, shared_data):
    run = tmp_path / "run"
    train("--dataset", "cora", "--root", str(shared_data), "--epochs", "2", "--out", str(run))
    res = cli("evaluate", "--run", str(run), "--dataset", "citeseer", ok=False)
    assert res.returncode == 2 and "1433 features, citeseer has 3703" in res.stderr and "7 classes, citeseer has 6" \
        in res.stderr
    obj = torch.load(run / "model.pt", weights_only=True)
    obj["state_dict"]["layers.0.weight"] = torch.zeros(3, 3)  # another model's weights
    torch.save(obj, run / "model.pt")
    res = cli("evaluate", "--run", str(run), ok=False)
    assert res.returncode == 2 and "expected the weights" in res.stderr and "layers.0.weight" in res.stderr

    class Boom:  # a pickle that would run code when loaded
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    (run / "model.pt").write_bytes(pickle.dumps(Boom()))
    res = cli("evaluate", "--run", str(run), ok=False)
    assert res.returncode == 2 and "expected a fullgraph model file" in res.stderr
    assert not (tmp_path / "ran").exists()


def test_checkpoint_metadata_cannot_run_code(tmp_path):
    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    (tmp_path / ".metadata").write_bytes(pickle.dumps(Boom()))
    from fullgraph.errors import InputError

    with pytest.raises(InputError, match="posix.system|os.system"):
        SafeReader(tmp_path).read_metadata()
    assert not (tmp_path / "ran").exists()
