"""What the command line says, each a user's minute (issue 50 §6): a mistyped flag gets the nearest
flag, early stopping names the metric it selected by, a run names its own graph whatever partition
cache it reads, and a run folder records only the options its model reads."""

from __future__ import annotations

import copy
import json

import pytest

from fullgraph.cli import main

from tests.train.test_checkpoint import cli, train


def test_a_mistyped_flag_is_one_line_with_the_nearest_flags(capsys):
    assert main(["train", "--paralel", "graph", "--epoch", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("fullgraph: error: unrecognized arguments: --paralel graph"), err
    assert "did you mean --parallel?" in err[0] and "fullgraph: error: fullgraph" not in err[0]
    assert main(["train", "--no-such-flag-at-all"]) == 2
    assert "did you mean" not in capsys.readouterr().err  # nothing near: no guess


def test_a_flag_of_another_command_is_named_as_such(capsys):
    """``plan --rgcn-bases`` once said "did you mean --rgcn-bases?" (plan takes it now): a flag that is
    train's, not plan's, is named as such."""
    assert main(["plan", "--dataset", "cora", "--nprocs", "2", "--gcnii-alpha", "0.2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--gcnii-alpha is an option of train only" in err and "did you mean" not in err, err


def test_a_negative_value_is_read_as_the_flags_value(capsys, shared_data, tmp_path):
    """``--link-split -0.1,0.6,0.5`` is the flag's (wrong) value, not a flag argparse cannot find (issue
    63 §13): the refusal says what is wrong with it."""
    assert main(["train", "--dataset", "cora", "--root", str(shared_data), "--task", "link", "--link-split",
                 "-0.1,0.6,0.5", "--epochs", "1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert "expected --link-split as three fractions TRAIN,VAL,TEST in [0, 1] (got '-0.1,0.6,0.5')" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "r").exists()


def test_early_stopping_names_the_metric_it_selects_by(shared_data):
    # a process of its own: what it logs is the command line's, whatever an earlier test did to logging
    res = cli("train", "--dataset", "cora", "--root", str(shared_data), "--metric", "rocauc", "--patience", "1",
              "--epochs", "50", "--hidden", "8", "--lr", "0.5", "--progress", "none")
    assert "no better validation ROC-AUC in 1 evaluations" in res.stdout, res.stdout


def test_a_graph_parallel_run_names_its_own_graph_not_a_cached_partitions(tmp_path, cora, monkeypatch):
    """One graph written under two names: the second run must not take the first's name from the
    partition cache (both have the same fingerprint)."""
    from fullgraph.data.formats.native import write_native

    monkeypatch.setenv("FULLGRAPH_CACHE", str(tmp_path / "cache"))
    for name in ("first", "second"):
        graph = copy.copy(cora)
        graph.name = name
        write_native(graph, tmp_path / name)
        train("--dataset", str(tmp_path / name), "--parallel", "graph", "--nprocs", "2", "--epochs", "1",
              "--hidden", "8", "--out", str(tmp_path / f"run-{name}"))
        assert json.loads((tmp_path / f"run-{name}" / "summary.json").read_text())["dataset"] == name


BUILDER = "from tests.user_models import sage as build\n"


@pytest.mark.parametrize("how", ["builder", "object"])
def test_a_run_records_only_the_options_its_model_reads(tmp_path, shared_data, how):
    """A builder or a model object decides its depth, widths and dropout: ``config.json`` and
    ``summary.json`` must not claim the built-in models' defaults (hidden 64, dropout 0.5)."""
    out = tmp_path / "run"
    if how == "builder":
        (tmp_path / "mine.py").write_text(BUILDER)
        train("--dataset", "cora", "--root", str(shared_data), "--model", f"{tmp_path}/mine.py:build",
              "--epochs", "1", "--out", str(out))
    else:
        import fullgraph
        from torch_geometric.nn import GraphSAGE

        fullgraph.train_model(GraphSAGE(1433, 16, 2, 7), dataset="cora", root=str(shared_data), epochs=1,
                              out=str(out), progress="none")
    for recorded in (json.loads((out / "config.json").read_text()),
                     json.loads((out / "summary.json").read_text())["config"]):
        assert not {"hidden", "layers", "dropout", "heads", "norm"} & set(recorded), recorded
        assert recorded["epochs"] == 1 and recorded["dataset"] == "cora"
    if how == "builder":  # the run folder still evaluates and resumes from what it recorded
        assert main(["evaluate", "--run", str(out), "--root", str(shared_data)]) == 0


def test_plan_json_is_the_json_document_alone_its_progress_on_stderr(shared_data, tmp_path):
    """``plan --json`` that cuts a partition first (whose rounds are logged) prints on stdout nothing but
    the JSON document, which a script parses as it is (the lent machine's sweep found it mixed)."""
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "fullgraph", "plan", "--dataset", "cora", "--root", str(shared_data),
                           "--nprocs", "2", "--layout", "graph", "--partitioner", "metis-memory", "--json"], capture_output=True, text=True,
                          timeout=300, env=os.environ | {"FULLGRAPH_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["layouts"] and "metis-memory round 1" in proc.stderr


def test_evaluate_and_predict_take_threads(tmp_path, capsys):
    """``evaluate`` and ``predict`` take ``--threads`` as ``train`` does (issue 63 §14: they refused it, and
    the suggestion proposed the very flag refused), within the same bounds."""
    import torch

    run = tmp_path / "run"
    train("--epochs", "1", "--out", str(run))
    before = torch.get_num_threads()
    try:
        assert main(["evaluate", "--run", str(run), "--threads", "1", "--json"]) == 0
        assert torch.get_num_threads() == 1
        assert main(["predict", "--run", str(run), "--threads", "1", "--out", str(tmp_path / "p")]) == 0
        assert (tmp_path / "p" / "predictions.npy").is_file()
    finally:
        torch.set_num_threads(before)
    capsys.readouterr()
    assert main(["evaluate", "--run", str(run), "--threads", "5000"]) == 2
    err = capsys.readouterr().err.strip()
    assert "expected --threads in [0, 1024] (got 5000)" in err and len(err.splitlines()) == 1, err
