"""``fullgraph generate | convert`` and training on what they write (``fullgraph.cli.data``)."""

import json

import pytest

from fullgraph.cli import main
from fullgraph.config import TrainConfig
from fullgraph.data.formats import load_native, write_native
from fullgraph.data.formats.native import is_preprocessed
from fullgraph.data.formats.native_read import is_native_folder, read_native_meta
from fullgraph.data.load import feature_norm_of, load_graph
from fullgraph.data.synthetic import planted_partition
from tests._equality import assert_same_graph


@pytest.fixture(scope="module")
def small():
    return planted_partition(num_nodes=300, num_classes=3, num_features=8, seed=1, name="small")


def test_generate_rmat_and_planted(tmp_path, capsys):
    assert main(["generate", "rmat", "--scale", "8", "--edges", "2000", "--features", "6", "--classes", "3",
                 "--seed", "2", "--out", str(tmp_path / "r")]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"wrote {tmp_path / 'r'}: rmat-8, 256 nodes, ") and "bytes" in line and "peak RSS" in line
    g = load_native(tmp_path / "r")
    assert (g.num_nodes, g.num_features, g.num_classes) == (256, 6, 3) and is_preprocessed(g)
    assert read_native_meta(tmp_path / "r")["source"].startswith("fullgraph generate rmat --scale 8")
    assert main(["generate", "planted", "--nodes", "200", "--classes", "4", "--features", "5", "--avg-degree", "6",
                 "--homophily", "0.9", "--seed", "3", "--out", str(tmp_path / "p")]) == 0
    assert "planted-200, 200 nodes" in capsys.readouterr().out
    g = load_native(tmp_path / "p")
    want = planted_partition(200, 4, 6.0, 0.9, 5, seed=3, name="planted-200")
    assert_same_graph(want, g)
    assert main(["generate", "planted", "--nodes", "200", "--homophily", "2", "--out", str(tmp_path / "q")]) == 2
    assert main(["generate", "rmat", "--scale", "40", "--edges", "10", "--out", str(tmp_path / "q")]) == 2
    assert not (tmp_path / "q").exists()
    assert main(["generate", "--out", str(tmp_path / "q")]) == 2


def test_convert_cora_trains_like_cora(tmp_path, shared_data, capsys):
    out = tmp_path / "cora-native"
    assert main(["convert", "--dataset", "cora", "--root", str(shared_data), "--out", str(out)]) == 0
    assert "cora, 2708 nodes, 10556 edges" in capsys.readouterr().out
    assert is_native_folder(out) and read_native_meta(out)["feature_norm"] == "row"
    named = TrainConfig.of(dataset="cora", root=str(shared_data))
    cfg = TrainConfig.of(dataset=str(out))
    assert feature_norm_of(cfg) == "row"
    assert load_graph(cfg).fingerprint() == load_graph(named).fingerprint()
    assert main(["convert", "--dataset", "cora", "--root", str(tmp_path), "--out", str(tmp_path / "x")]) == 2


def test_a_second_convert_into_one_out_is_refused_naming_the_first(small, tmp_path, capsys):
    """Issue 63 §2: two converts into one --out both said "wrote", one's folder silently replaced. The
    lock sits beside the folder (the writer replaces the folder itself by a rename) and leaves nothing."""
    from fullgraph.train.run_lock import RunLock

    write_native(small, tmp_path / "g")
    out = tmp_path / "native"
    with RunLock(out, beside=True):  # a convert into out that is still running
        assert main(["convert", "--dataset", str(tmp_path / "g"), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"expected {out} to be free" in err[0] and "pid" in err[0], err
        assert not out.exists()
    assert main(["convert", "--dataset", str(tmp_path / "g"), "--out", str(out)]) == 0
    assert is_native_folder(out) and sorted(p.name for p in tmp_path.iterdir()) == ["g", "native"]


def test_train_and_partition_a_native_folder(small, tmp_path, capsys):
    write_native(small, tmp_path / "g")
    assert main(["train", "--dataset", str(tmp_path / "g"), "--epochs", "2", "--progress", "none",
                 "--out", str(tmp_path / "run")]) == 0
    assert "small gcn, 2 layers: test accuracy" in capsys.readouterr().out
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["epochs_run"] == 2
    assert main(["partition", "--dataset", str(tmp_path / "g"), "--parts", "2", "--partitioner", "random",
                 "--out", str(tmp_path / "parts")]) == 0
    assert "2 parts by random" in capsys.readouterr().out
