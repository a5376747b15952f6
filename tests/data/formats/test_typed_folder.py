"""The typed folder (``data/formats/typed_folder.py``): a heterogeneous graph from an edge file per relation
and a feature file per node type. HeCo's ACM with two edge files renamed loads as the HeCo reader loads it;
a small folder in every form the layout allows; convert keeps every split; damaged folders, one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.cli import main
from fullgraph.data.detect import detect, fixed_splits, load_path
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.formats.typed_folder import load_typed_folder
from fullgraph.errors import InputError

RENAMED = {"pa.txt": "p__written_by__a.txt", "ps.txt": "p__has_subject__s.txt"}


@pytest.fixture(scope="module")
def acm_renamed(shared_data, tmp_path_factory):
    """HeCo's ACM folder with its two edge files renamed, nothing else touched (links to the shared files)."""
    folder = tmp_path_factory.mktemp("typed") / "acm"
    folder.mkdir()
    for f in (shared_data / "heco_acm").iterdir():
        (folder / RENAMED.get(f.name, f.name)).symlink_to(f)
    return folder


def _by_relation(g) -> dict:
    """Each relation's (src, dst) pairs by the relation's name (the two readers number relations apart)."""
    dst = torch.repeat_interleave(torch.arange(g.num_nodes), g.indptr.diff())
    names = [r[1] for r in g.node_types.relations]
    return {names[r]: sorted(zip(g.indices[g.edge_type == r].tolist(), dst[g.edge_type == r].tolist()))
            for r in range(g.num_relations)}


@pytest.mark.parametrize("split", [0, 2])
def test_heco_acm_with_two_files_renamed_is_the_heco_graph(acm_renamed, shared_data, split):
    assert detect(acm_renamed).kind == "typed"
    mine, heco = load_path(acm_renamed, split=split), load_path(shared_data / "heco_acm", split=split)
    t, h = mine.node_types, heco.node_types
    assert t.names == ("p", "a", "s") and t.counts == h.counts and t.widths == h.widths and t.labelled == ("p",)
    assert sorted(r[1] for r in t.relations) == sorted(r[1] for r in h.relations)
    assert _by_relation(mine) == _by_relation(heco)
    assert torch.equal(mine.x.to_dense(), heco.x.to_dense()) and torch.equal(mine.y, heco.y)
    for m in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(mine, m), getattr(heco, m))
    assert int(mine.train_mask.sum()) == 3 * (20, 40, 60)[split]


def _small(folder, *, splits: bool = True) -> None:
    """Three types (user with features, item with sparse features, tag featureless), three relations in
    three forms: text with a header and a comment, .npy [E, 2], .npy [2, E]."""
    folder.mkdir()
    rng = np.random.default_rng(0)
    np.save(folder / "user_feat.npy", rng.random((12, 3)).astype(np.float32))
    sp.save_npz(folder / "item_feat.npz", sp.random(9, 5, density=0.4, random_state=1, format="csr"))
    (folder / "user__buys__item.txt").write_text("# who bought what\nuser item\n" +
                                                 "".join(f"{u} {u % 9}\n" for u in range(12)))
    np.save(folder / "item__has__tag.npy", np.array([[i, i % 4] for i in range(9)]))
    np.save(folder / "user__follows__user.npy", np.array([[u for u in range(11)], [u + 1 for u in range(11)]]))
    (folder / "num_nodes.json").write_text(json.dumps({"tag": 6}))  # two tags no item names
    np.save(folder / "user_labels.npy", np.arange(12) % 3)
    if splits:
        for k, (tr, va, te) in {10: ([0, 1, 2], [3, 4], [5, 6]), 20: ([0, 1, 2, 3, 4, 5], [6, 7], [8, 9])}.items():
            for s, ids in (("train", tr), ("val", va), ("test", te)):
                np.save(folder / f"{s}_{k}.npy", np.array(ids))


def test_a_small_folder_in_every_form(tmp_path):
    _small(tmp_path / "shop")
    g = load_typed_folder(tmp_path / "shop")
    t = g.node_types
    assert t.names == ("user", "item", "tag") and t.counts == (12, 9, 6) and t.widths == (3, 5, 0)
    assert set(t.relations) == {("item", "has", "tag"), ("user", "buys", "item"), ("user", "follows", "user"),
                                ("tag", "rev_has", "item"), ("item", "rev_buys", "user")}
    assert g.num_edges == 2 * (12 + 9 + 11)  # every relation and its reverse (within users: symmetric)
    assert g.train_mask.nonzero().flatten().tolist() == [0, 1, 2]  # --split 0: the smallest K
    assert load_typed_folder(tmp_path / "shop", split=1).train_mask.sum() == 6
    with pytest.raises(InputError, match=r"expected --split 0\.\.1 for the split files .*\(got 2\)"):
        load_typed_folder(tmp_path / "shop", split=2)


def test_without_split_files_the_split_is_drawn_per_class_and_seeded(tmp_path):
    _small(tmp_path / "shop", splits=False)
    a, b, c = (load_typed_folder(tmp_path / "shop", split=s) for s in (0, 0, 1))
    assert torch.equal(a.train_mask, b.train_mask) and not torch.equal(a.train_mask, c.train_mask)
    assert not (a.train_mask & a.test_mask).any() and int(a.train_mask[12:].sum()) == 0  # users only


def test_convert_keeps_every_split_and_trains(tmp_path):
    _small(tmp_path / "shop")
    assert main(["convert", "--dataset", str(tmp_path / "shop"), "--out", str(tmp_path / "native")]) == 0
    stored, loaded = load_native(tmp_path / "native", split=1), load_path(tmp_path / "shop", split=1)
    assert stored.node_types == loaded.node_types and torch.equal(stored.train_mask, loaded.train_mask)
    assert fixed_splits(str(tmp_path / "shop"))[0].shape == (2, loaded.num_nodes)
    assert main(["train", "--dataset", str(tmp_path / "shop"), "--model", "rgcn", "--epochs", "2", "--hidden", "8",
                 "--progress", "none", "--out", str(tmp_path / "run")]) == 0


def _write(path, text):
    path.write_text(text)


DAMAGE = {
    "id past its type": (lambda f: _write(f / "user__buys__item.txt", "0 1\n3 9\n"),
                         ["user__buys__item.txt", "column 2", "item ids in [0, 9)", "item_feat.npz", "(got 9 at row 2)"]),
    "a name of four parts": (lambda f: _write(f / "user__buys__item__twice.txt", "0 1\n"),
                             ["SRC__REL__DST", "user__buys__item__twice.txt"]),
    "two files of one relation": (lambda f: np.save(f / "user__buys__item.npy", np.array([[0, 1]])),
                                  ["one edge file of relation user__buys__item", ".npy", ".txt"]),
    "labels of no type's size": (lambda f: [(f / "user_labels.npy").unlink(),
                                            np.save(f / "labels.npy", np.zeros(5, dtype=np.int64))],
                                 ["as many nodes as", "labels.npy", "5", "TYPE_labels.npy"]),
    "labels of an unknown type": (lambda f: (f / "user_labels.npy").rename(f / "buyer_labels.npy"),
                                  ["buyer_labels.npy", "'buyer'"]),
    "no labels": (lambda f: (f / "user_labels.npy").unlink(), ["labels.npy", "(got none)"]),
    "a split file missing": (lambda f: (f / "test_20.npy").unlink(), ["test_20.npy", "train_20.npy"]),
    "edges not pairs": (lambda f: np.save(f / "item__has__tag.npy", np.zeros((4, 3), dtype=np.int64)),
                        ["item__has__tag.npy", "[E, 2]", "(4, 3)"]),
    "a count against the features": (lambda f: _write(f / "num_nodes.json", '{"user": 5}'),
                                     ["num_nodes.json", "'user'", "12", "(got 5)"]),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_folder_is_one_line_naming_the_file(tmp_path, case, capsys):
    damage, needles = DAMAGE[case]
    _small(tmp_path / "shop")
    damage(tmp_path / "shop")
    with pytest.raises(InputError) as err:
        load_typed_folder(tmp_path / "shop", split=1 if case == "a split file missing" else 0)
    for needle in needles:
        assert needle in str(err.value), (case, str(err.value))
    code = main(["convert", "--dataset", str(tmp_path / "shop"), "--out", str(tmp_path / "new" / "out"),
                 "--split", "1" if case == "a split file missing" else "0"])
    assert code == 2 and not (tmp_path / "new").exists()  # nor the folder made for its lock
    assert len([line for line in capsys.readouterr().err.splitlines() if line.strip()]) == 1
