"""A run folder is never silently replaced: ``--out`` refuses an earlier run unless ``--overwrite``, and
what it replaces is removed first, so old and new results never mix; other files stay."""

import json

import pytest

from fullgraph.cli import main


def _train(out, *extra):
    return main(["train", "--epochs", "2", "--hidden", "8", "--out", str(out), "--progress", "none", *extra])


def test_out_refuses_an_earlier_run_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(out) == 0
    first = (out / "metrics.jsonl").read_text()
    (out / "notes.txt").write_text("mine")  # a user's own file in the folder
    assert _train(out, "--seed", "1") == 2
    err = capsys.readouterr().err
    assert "holds an earlier run" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert (out / "metrics.jsonl").read_text() == first  # untouched
    assert json.loads((out / "config.json").read_text())["seed"] == 0
    assert _train(out, "--seed", "1", "--overwrite") == 0
    assert json.loads((out / "config.json").read_text())["seed"] == 1
    assert json.loads((out / "summary.json").read_text())["config"]["seed"] == 1
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2  # the new run's epochs only
    assert (out / "notes.txt").read_text() == "mine"


def test_overwrite_never_replaces_checkpoints(tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(out, "--checkpoint-every", "1") == 0
    assert _train(out, "--overwrite") == 2
    assert "holds checkpoints of an earlier run" in capsys.readouterr().err


@pytest.mark.parametrize("toml", ['[model]\nmodel = "sage"\nhidden = 12\n[optimization]\nepochs = 2\n',
                                  '[train]\nmodel = "sage"\nhidden = 12\nepochs = 2\n',
                                  'model = "sage"\nhidden = 12\nepochs = 2\n'])
def test_toml_options_in_section_tables_a_train_table_or_flat(tmp_path, toml):
    cfg = tmp_path / "run.toml"
    cfg.write_text(toml)
    out = tmp_path / "out"
    assert main(["train", "--config", str(cfg), "--out", str(out), "--progress", "none"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["model"], summary["hidden"], summary["epochs_run"]) == ("sage", 12, 2)


def test_every_option_has_a_group_a_docstring_and_a_flag():
    import argparse

    from fullgraph.cli import build_parser
    from fullgraph.config import TrainConfig
    from fullgraph.models import MODELS
    from fullgraph.options import options_of

    opts = options_of(TrainConfig)  # raises where a field lacks a section or a docstring
    assert sorted(o.name for o in opts) == sorted(TrainConfig.field_names())
    train = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]
    flags = {s for a in train._actions for s in a.option_strings}
    assert all(o.flag in flags for o in opts)
    model = next(a for a in train._actions if "--model" in a.option_strings)
    assert model.metavar == "{" + ",".join(MODELS) + "}|FILE.py:FUNCTION"  # names from the model registry
