"""A native folder keeps every fixed split of its source: ``fullgraph convert`` of a heterophilous graph
(ten splits) answers ``--split k`` with the masks the original gives, a split outside the folder's
is one line naming how many it holds, and folders with one split are still format version 1."""

import json
import shutil

import numpy as np
import pytest
import torch

from fullgraph.cli import main
from fullgraph.config import TrainConfig
from fullgraph.data.formats import load_native, write_native
from fullgraph.data.formats.native_read import read_native_meta
from fullgraph.data.load import load_graph
from fullgraph.data.synthetic import planted_partition
from fullgraph.errors import InputError

MASKS = ("train_mask", "val_mask", "test_mask")
S, N = 4, 30


def _hetero(path, splits: int = S):
    """A heterophilous-graphs ``.npz`` whose splits all differ (split k: a rotation by k)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    base = np.zeros((3, N), dtype=bool)
    base[0, :10], base[1, 10:20], base[2, 20:] = True, True, True
    masks = np.stack([np.roll(base, 3 * k, axis=1) for k in range(splits)], axis=1)  # [3, S, N]
    np.savez(path, node_features=rng.random((N, 6)).astype(np.float32), node_labels=np.arange(N) % 3,
             edges=rng.integers(0, N, (80, 2)), train_masks=masks[0], val_masks=masks[1], test_masks=masks[2])
    return path


def _same_split(a, b) -> bool:
    return all(torch.equal(getattr(a, m), getattr(b, m)) for m in MASKS)


def test_convert_keeps_every_split_and_train_picks_split_k(tmp_path, capsys):
    src, out = _hetero(tmp_path / "src" / "hetero.npz"), tmp_path / "native"
    assert main(["convert", "--dataset", str(src), "--split", "2", "--out", str(out)]) == 0
    assert f"hetero, {N} nodes" in capsys.readouterr().out
    meta = read_native_meta(out)
    assert meta["version"] == 2 and meta["counts"]["num_splits"] == S and len(meta["counts"]["split_sizes_all"]) == S
    assert np.load(out / "train_masks.npy").shape == (S, N)
    for k in range(S):
        want = load_graph(TrainConfig.of(dataset=str(src), split=k))
        got = load_graph(TrainConfig.of(dataset=str(out), split=k))
        assert _same_split(got, want) and got.fingerprint() == want.fingerprint(), k
    assert not _same_split(load_graph(TrainConfig.of(dataset=str(out), split=1)),
                           load_graph(TrainConfig.of(dataset=str(out), split=3)))
    assert main(["train", "--dataset", str(out), "--split", "3", "--epochs", "1", "--progress", "none",
                 "--out", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    want = load_graph(TrainConfig.of(dataset=str(src), split=3))
    assert summary["graph"]["train"] == int(want.train_mask.sum())
    capsys.readouterr()
    assert main(["train", "--dataset", str(out), "--split", str(S), "--epochs", "1", "--progress", "none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--split in 0..{S - 1}" in err[0] and f"holds {S} fixed splits" in err[0], err
    again = tmp_path / "again"  # a converted folder converts again with its splits
    assert main(["convert", "--dataset", str(out), "--split", "1", "--out", str(again)]) == 0
    assert _same_split(load_native(again, split=3), load_native(out, split=3))
    assert main(["convert", "--dataset", str(src), "--out", str(out)]) == 0  # replaces its own folder


def test_convert_squirrel_filtered_by_name_reproduces_its_splits(tmp_path, shared_data, capsys):
    out = tmp_path / "sq"
    assert main(["convert", "--dataset", "squirrel-filtered", "--root", str(shared_data), "--out", str(out)]) == 0
    assert "10 fixed splits" in capsys.readouterr().out
    for k in (3, 9):
        named = load_graph(TrainConfig.of(dataset="squirrel-filtered", root=str(shared_data), split=k))
        folder = load_graph(TrainConfig.of(dataset=str(out), split=k))
        assert _same_split(folder, named) and folder.fingerprint() == named.fingerprint()


def test_one_split_folders_stay_version_1_and_refuse_another_split(tmp_path, capsys):
    small = planted_partition(num_nodes=60, num_classes=3, num_features=4, seed=2, name="small")
    meta = write_native(small, tmp_path / "one")
    assert meta["version"] == 1 and "num_splits" not in meta["counts"]  # what an older fullgraph reads
    assert sorted(p.name for p in (tmp_path / "one").glob("*_masks.npy")) == []
    assert _same_split(load_native(tmp_path / "one"), small)
    assert main(["train", "--dataset", str(tmp_path / "one"), "--split", "1", "--epochs", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--split 0" in err[0] and "holds 1 fixed split)" in err[0], err
    doc = json.loads((tmp_path / "one" / "meta.json").read_text())
    (tmp_path / "one" / "meta.json").write_text(json.dumps(doc | {"version": 4}))  # 3: edge data (issue 51)
    with pytest.raises(InputError, match=r"version 1, 2 or 3 .*got 4; written by a newer fullgraph"):
        load_native(tmp_path / "one")


def test_bad_or_damaged_splits_are_one_error(tmp_path):
    small = planted_partition(num_nodes=60, num_classes=3, num_features=4, seed=2, name="small")
    splits = [torch.stack([getattr(small, m)] * 3) for m in MASKS]
    splits[1][2, :] = splits[0][2]  # split 2: validation is training
    with pytest.raises(InputError, match="a node in two splits in split 2"):
        write_native(small, tmp_path / "bad", splits=splits)
    with pytest.raises(InputError, match=r"bool \[S, 60\]"):
        write_native(small, tmp_path / "bad", splits=[m[:, :10] for m in splits])
    assert not (tmp_path / "bad").exists()
    splits = [torch.stack([torch.roll(getattr(small, m), k) for k in range(3)]) for m in MASKS]
    write_native(small, tmp_path / "ok", splits=splits)
    assert torch.equal(load_native(tmp_path / "ok", split=2).val_mask, splits[1][2])
    assert torch.equal(load_native(tmp_path / "ok").train_mask, splits[0][0])  # split 0, not the graph's own
    sizes = tmp_path / "sizes"
    shutil.copytree(tmp_path / "ok", sizes)
    doc = json.loads((sizes / "meta.json").read_text())
    doc["counts"]["split_sizes_all"][2]["test"] += 1
    (sizes / "meta.json").write_text(json.dumps(doc))
    load_native(sizes, split=1)
    with pytest.raises(InputError, match=r"test_masks\.npy \(row 2\) as meta\.json says"):
        load_native(sizes, split=2)
    (tmp_path / "ok" / "val_masks.npy").unlink()
    with pytest.raises(InputError, match=r"val_masks\.npy in the fullgraph dataset .*not found"):
        load_native(tmp_path / "ok")
