"""A user's model from the command line: ``--model FILE.py:FUNCTION`` (or ``package.module:FUNCTION``),
``--model-arg``, ``[model.args]``; the run folder it leaves (``model.pt``, ``evaluate``, ``predict``,
``--resume``) and every way it can be given wrong (one line, exit 2).

The layouts' equalities for these models are ``tests/parallel/test_user_models.py``'s; here the
command line's own path is checked once: one process against graph parallelism, P = 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fullgraph.cli import main

from tests._equality import LOSSES_REORDERED, assert_same_losses

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "tests" / "user_models.py"
SAGE = f"{MODELS}:sage"


def fullgraph(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "fullgraph", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env=os.environ | {"PYTHONWARNINGS": "ignore"})


def losses(run: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]


BAD = [
    (["--model", "/no/such/dir/model.py:build"], "expected a Python file at /no/such/dir/model.py"),
    (["--model", f"{MODELS}:nope"], "expected a function 'nope'"),
    (["--model", "no_such_package_xyz.models:build"], "expected an importable module 'no_such_package_xyz.models'"),
    (["--model", f"{MODELS}:raises"], "it raised ValueError: no such width"),
    (["--model", f"{MODELS}:not_a_model"], "to return a fullgraph GNN, a PyG convolution, a list of them"),
    (["--model", f"{MODELS}:multi_hop"], "got TAGConv, which aggregates over several hops"),
    (["--model", f"{MODELS}:gcn", "--model-arg", "widht=3"], "unknown --model-arg widht for"),
    (["--model", f"{MODELS}:gcn", "--model-arg", "3=4"], "expected --model-arg as key=value"),
    (["--model", f"{MODELS}:gcn", "--layers", "4"], "expected no --layers 4 with --model"),
    (["--model", "gcn", "--model-arg", "hidden=4"], "expected --model-arg only with a model's builder"),
    (["--model", f"{MODELS}:gcn", "--parallel", "spmm-1d", "--nprocs", "2"], "one sparse product"),
    (["--model", f"{MODELS}:gine"], "expected edge features (edge_attr) for GINEConv (layer 0)"),  # issue 51
    (["--model", f"{MODELS}:rgcn"], "expected edge types (edge_type) for RGCNConv (layer 0)"),
]


@pytest.mark.parametrize("args, words", BAD, ids=[" ".join(a[1:]) for a, _ in BAD])
def test_a_bad_user_model_is_one_line_and_exit_2(args, words, capsys, tmp_path):
    assert main(["train", *args, "--epochs", "1", "--progress", "none", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fullgraph: error:") and words in err[0], err


def test_toml_model_args_and_flags_reach_the_builder(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'[model]\nmodel = "{SAGE}"\n[model.args]\nhidden = 24\nlayers = 3\n')
    out = tmp_path / "out"
    assert main(["train", "--config", str(cfg), "--model-arg", "layers=2", "--epochs", "1", "--out", str(out),
                 "--progress", "none"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["layers"], summary["hidden"]) == (2, 24)  # the flag overrides the table's key
    assert summary["config"]["model_args"] == {"hidden": 24, "layers": 2}


def test_user_model_trains_by_module_and_by_path_alike_and_graph_parallel_equals_it(tmp_path, shared_data):
    # one thread each: two processes on two busy cores may otherwise split a sparse product's sums
    # differently (a threaded kernel may take fewer threads when the machine is busy), and the first
    # comparison below is bit for bit
    common = ["train", "--dataset", "cora", "--root", str(shared_data), "--model-arg", "hidden=8", "--epochs", "4",
              "--eval-every", "4", "--progress", "none", "--checkpoint-every", "2", "--threads", "1"]
    by_path = fullgraph(*common, "--model", SAGE, "--out", str(tmp_path / "one"))
    assert by_path.returncode == 0, by_path.stderr
    by_module = fullgraph(*common, "--model", "tests.user_models:sage", "--out", str(tmp_path / "module"))
    assert by_module.returncode == 0, by_module.stderr
    assert losses(tmp_path / "module") == losses(tmp_path / "one")  # the same builder: bit for bit
    two = fullgraph(*common, "--model", SAGE, "--parallel", "graph", "--nprocs", "2", "--out", str(tmp_path / "two"))
    assert two.returncode == 0, two.stderr
    assert_same_losses(losses(tmp_path / "two"), losses(tmp_path / "one"), LOSSES_REORDERED, "graph P=2 via the CLI")
    # under torchrun every rank imports the builder itself (rank 0 partitions, the others wait)
    torchrun = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                               "-m", "fullgraph", *common, "--model", SAGE, "--parallel", "graph", "--nprocs", "2",
                               "--out", str(tmp_path / "torchrun")], capture_output=True, text=True, timeout=300,
                              cwd=REPO, env=os.environ | {"PYTHONWARNINGS": "ignore"})
    assert torchrun.returncode == 0, torchrun.stderr[-3000:]
    assert_same_losses(losses(tmp_path / "torchrun"), losses(tmp_path / "one"), LOSSES_REORDERED, "under torchrun")
    # the run folder rebuilds the model from its reference: evaluate reproduces the summary
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    ev = fullgraph("evaluate", "--run", str(tmp_path / "two"), "--json")
    assert ev.returncode == 0, ev.stderr
    assert abs(json.loads(ev.stdout)["test_metric"] - summary["test_metric"]) < 1e-9
    pred = fullgraph("predict", "--run", str(tmp_path / "one"), "--out", str(tmp_path / "pred"), "--embeddings")
    assert pred.returncode == 0, pred.stderr
    assert np.load(tmp_path / "pred" / "predictions.npy").shape == (2708,)
    # and --resume carries on from the checkpoint with the saved builder and its arguments
    more = fullgraph("train", "--resume", str(tmp_path / "one"), "--epochs", "6")
    assert more.returncode == 0, more.stderr
    assert len(losses(tmp_path / "one")) == 6


def test_boundary_sampling_runs_a_user_model(tmp_path, shared_data):
    proc = fullgraph("train", "--dataset", "cora", "--root", str(shared_data), "--model", f"{MODELS}:gcn",
                     "--parallel", "graph", "--nprocs", "2", "--boundary-rate", "0.1", "--epochs", "3",
                     "--progress", "none", "--out", str(tmp_path / "bns"))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "bns" / "summary.json").read_text())
    assert summary["comm_bytes_per_epoch"]["sample/index"] > 0


def test_python_api_trains_an_object_and_a_builder_in_one_process_and_across_processes(tmp_path, shared_data):
    import fullgraph
    from torch_geometric.nn.models import GraphSAGE

    from tests.user_models import sage

    common = dict(dataset="cora", root=str(shared_data), epochs=3, eval_every=3, progress="none")
    obj = fullgraph.train_model(GraphSAGE(1433, 8, 2, 7), **common)
    assert obj.model == "<GraphSAGE>" and len(obj.losses) == 3
    one = fullgraph.train_model(sage, model_args={"hidden": 8}, **common)  # a function: by its reference
    assert one.model == "tests.user_models:sage"
    two = fullgraph.train_model(sage, model_args={"hidden": 8}, parallel="graph", nprocs=2, out=str(tmp_path / "two"),
                          **common)
    assert_same_losses(two.losses, one.losses, LOSSES_REORDERED, "fullgraph.train_model, graph P=2")
    with pytest.raises(Exception, match="expected a builder .* to start several processes"):
        fullgraph.train_model(GraphSAGE(1433, 8, 2, 7), parallel="graph", nprocs=2, **common)


SCRIPT = '''import fullgraph
from torch_geometric.nn import GCNConv
from fullgraph.models import from_pyg


def build(in_dim, out_dim):
    return from_pyg([GCNConv(in_dim, 8), GCNConv(8, out_dim)])

'''
CALL = 'fullgraph.train_model(build, nprocs={nprocs}, parallel="{parallel}", epochs=1, progress="none", out="run")\n'


@pytest.mark.parametrize("nprocs", [1, 2])
def test_a_script_without_the_main_guard_is_told_where_to_put_it_and_trains_with_it(nprocs, tmp_path):
    """The ranks (and every later import: evaluate, predict, --resume) import the script to find its
    builder: an unguarded top-level call would run again there. It is refused, before any rank starts,
    in one line that names the script and the guard."""
    call = CALL.format(nprocs=nprocs, parallel="graph" if nprocs > 1 else "single")
    script = tmp_path / "train_script.py"
    script.write_text(SCRIPT + call)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=os.environ | {"PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout
    err = proc.stderr.strip().splitlines()
    assert err[-1] == (f'fullgraph.errors.InputError: put the fullgraph.train_model(...) call in {script} under `if '
                       f'__name__ == "__main__":`: every process that trains (and evaluate, predict, --resume) '
                       f'imports {script} to find the builder, and the import ran the call again'), proc.stderr
    assert proc.stderr.count("put the") == 1 and not (tmp_path / "run").exists()
    if nprocs == 1:  # the guarded script trains (across processes: tests/test_api_data.py)
        script.write_text(SCRIPT + 'if __name__ == "__main__":\n    ' + call)
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path, env=os.environ | {"PYTHONWARNINGS": "ignore"})
        assert proc.returncode == 0, proc.stderr
        assert len(losses(tmp_path / "run")) == 1
