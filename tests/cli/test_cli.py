"""The command line as a user meets it: ``fullgraph`` and ``python -m fullgraph``, flags, TOML, errors."""

import json
import os
import subprocess
import sys

import pytest

from fullgraph.cli import main


def fullgraph(*args, timeout=300, cwd=None):
    return subprocess.run([sys.executable, "-m", "fullgraph", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=os.environ | {"PYTHONWARNINGS": "ignore"})


def test_python_dash_m_trains_the_builtin_graph_and_writes_results(tmp_path):
    out = tmp_path / "run"
    proc = fullgraph("train", "--epochs", "20", "--eval-every", "5", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "test accuracy" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dataset"] == "synthetic" and summary["epochs_run"] == 20
    assert summary["test_acc"] > 0.5
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 20 and sum("val_acc" in r for r in records) == 4
    # not a terminal: plain lines, one per evaluation, no progress-bar control characters
    assert proc.stdout.count("epoch ") >= 4 and "\r" not in proc.stdout


def test_toml_config_and_flags_override_it(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[train]\nmodel = "sage"\nhidden = 24\nepochs = 4\nweight-decay = 0.001\n')
    out = tmp_path / "out"
    assert main(["train", "--config", str(cfg), "--epochs", "2", "--out", str(out), "--progress", "none"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["model"], summary["hidden"], summary["epochs_run"]) == ("sage", 24, 2)
    assert summary["config"]["weight_decay"] == 0.001


BAD_ARGS = [
    (["train", "--layers", "1"], "expected layers >= 2 (got 1)"),
    (["train", "--model", "transformer"], "expected model to be one of"),
    (["train", "--dropout", "1.5"], "expected dropout in [0, 1)"),
    (["train", "--epochs", "ten"], "invalid int value"),
    (["train", "--no-such-flag"], "unrecognized arguments"),
    (["train", "--model", "gat", "--hidden", "10", "--heads", "3"], "multiple of heads"),
    (["train", "--dataset", "imagenet"], "expected a known dataset name"),
    (["train", "--config", "/nonexistent/run.toml"], "no such file"),
    (["train", "--dataset", "/nonexistent/graph"], "which does not exist"),
    (["generate", "rmat", "--scale", "4"], "the following arguments are required: --edges, --out"),
    (["generate", "tree", "--out", "x"], "invalid choice: 'tree'"),
    (["convert", "--dataset", "cora"], "the following arguments are required: --out"),
]


@pytest.mark.parametrize("args,words", BAD_ARGS, ids=[" ".join(a[1:]) for a, _ in BAD_ARGS])
def test_bad_flags_exit_2_with_one_line(args, words, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fullgraph: error:") and words in err[0], err


def test_bad_toml_exits_2(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("hiden = 16\n")
    assert main(["train", "--config", str(cfg)]) == 2
    assert "unknown option 'hiden'" in capsys.readouterr().err
    cfg.write_text('layers = "three"\n')
    assert main(["train", "--config", str(cfg)]) == 2
    assert "expected layers to be a int (got str 'three')" in capsys.readouterr().err


def test_missing_dataset_files_say_which_and_where(tmp_path):
    proc = fullgraph("train", "--dataset", "pubmed", "--root", str(tmp_path), timeout=120)
    assert proc.returncode == 2
    assert f"{tmp_path}/pubmed/ind.pubmed.allx" in proc.stderr and "Traceback" not in proc.stderr


def test_out_that_is_a_file_is_refused_and_left_alone(tmp_path, capsys):
    f = tmp_path / "results.txt"
    f.write_text("precious")
    assert main(["train", "--epochs", "1", "--out", str(f), "--progress", "none"]) == 2
    assert f.read_text() == "precious"
    assert "expected --out to be a folder" in capsys.readouterr().err


def test_datasets_lists_what_is_present(shared_data):
    proc = fullgraph("datasets", "--root", str(shared_data), "--json")
    assert proc.returncode == 0, proc.stderr
    listing = {d["name"]: d["present"] for d in json.loads(proc.stdout)["datasets"]}
    assert listing["cora"] and listing["coauthor-physics"] and listing["tolokers"]
    assert not listing["pubmed"]  # allx is not in the offline copy
    assert not listing["ogbn-products"]


def test_generate_a_folder_then_train_on_it(tmp_path):
    out = tmp_path / "graph"
    proc = fullgraph("generate", "planted", "--nodes", "400", "--features", "8", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}: planted-400, 400 nodes, ") and "peak RSS" in proc.stdout
    proc = fullgraph("train", "--dataset", str(out), "--epochs", "2", "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["dataset"] == "planted-400"
