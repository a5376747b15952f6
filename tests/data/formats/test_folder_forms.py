"""Every file form docs/data.md lists for your own graph, read THROUGH THE FOLDER (``--dataset PATH``
detection and ``--dataset edgelist --root PATH``), not only through the file readers: the folder
scan once looked for fewer names than the readers read, so ``features.npz`` and ``edges.npy`` were
refused or not recognised."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.cli import main
from fullgraph.config import TrainConfig
from fullgraph.data.detect import detect
from fullgraph.data.load import load_graph
from fullgraph.errors import InputError

DOCS = Path(__file__).resolve().parents[3] / "docs" / "data.md"
N, F = 12, 5
EDGES = np.array([[i, (i + 1) % N] for i in range(N)] + [[0, 6], [3, 9]], dtype=np.int64)
X = np.round(np.random.default_rng(0).random((N, F)), 3).astype(np.float32)
Y = np.arange(N) % 3
SPLIT = {"train": [0, 1, 2, 3, 4, 5], "val": [6, 7, 8], "test": [9, 10, 11]}
TEXT = (".txt", ".csv", ".tsv")
DOCUMENTED = {"edges": (*TEXT, ".npy"), "features": (".npy", ".npz", *TEXT), "labels": (".npy", *TEXT),
              **{s: (".npy", *TEXT) for s in SPLIT}}
"""The files docs/data.md lists (its table is checked against this and the loader's own table)."""
EDGE_SPLIT = {f"edge_{s}": (".npy", *TEXT) for s in SPLIT}
"""An edge task's split files (their forms load in tests/tasks/test_edge_sources.py)."""


def _text(path: Path, rows, sep: str = " ", header: str | None = None) -> None:
    lines = ([header] if header else []) + [sep.join(str(v) for v in np.atleast_1d(r)) for r in rows]
    path.write_text("\n".join(lines) + "\n")


def _sep(ext: str) -> str:
    return {".csv": ",", ".tsv": "\t"}.get(ext, " ")


def _write(folder: Path, stem: str, ext: str, variant: str = "") -> None:
    """One file of the folder in one documented form."""
    p = folder / f"{stem}{ext}"
    if stem == "edges":
        if ext == ".npy":
            np.save(p, EDGES)
        else:
            text = "# a comment line\n" if ext == ".txt" else ""
            _text(p, EDGES, _sep(ext), header="src" + _sep(ext) + "dst")
            p.write_text(text + p.read_text())
    elif stem == "features":
        if ext == ".npy":
            np.save(p, X)
        elif ext == ".npz" and variant == "dense":
            np.savez(p, X)
        elif ext == ".npz":
            sp.save_npz(p, sp.csr_matrix(X))
        else:
            _text(p, X, _sep(ext))
    elif stem == "labels":
        np.save(p, Y) if ext == ".npy" else _text(p, Y, _sep(ext))
    elif ext == ".npy" and variant == "mask":
        mask = np.zeros(N, dtype=bool)
        mask[SPLIT[stem]] = True
        np.save(p, mask)
    else:
        np.save(p, np.array(SPLIT[stem])) if ext == ".npy" else _text(p, SPLIT[stem], _sep(ext))


def _folder(tmp: Path, forms: dict[str, tuple[str, str]], splits: bool = True) -> Path:
    base = {"edges": (".txt", ""), "features": (".npy", ""), "labels": (".txt", "")}
    if splits:
        base |= {s: (".txt", "") for s in SPLIT}
    tmp.mkdir(parents=True)
    for stem, (ext, variant) in (base | forms).items():
        _write(tmp, stem, ext, variant)
    return tmp


def _forms():
    """Every (stem, extension, variant) the docs' table lists."""
    for stem, exts in DOCUMENTED.items():
        for ext in exts:
            yield stem, ext, ""
            if (stem, ext) == ("features", ".npz"):
                yield stem, ext, "dense"
            if stem in SPLIT and ext == ".npy":
                yield stem, ext, "mask"


def test_the_docs_table_lists_what_the_folder_reads():
    """docs/data.md's table of your own graph's files and the loader's FOLDER_FILES name the same forms."""
    from fullgraph.data.formats.edgelist import FOLDER_FILES

    text = DOCS.read_text()
    table = text[text.index("## Your own graph"):text.index("## Any folder")]
    documented: dict[str, set[str]] = {}
    for row in re.findall(r"^\| (`[^|]*) \|", table, re.M):
        names = re.findall(r"`(\w+)(\.\w+)`", row)
        others = set(re.findall(r"`(\.\w+)`", row))
        for stem, ext in names:
            documented[stem] = {ext} | others
    assert documented == {stem: set(exts) for stem, exts in (DOCUMENTED | EDGE_SPLIT).items()}
    assert documented == {stem: set(exts) for stem, exts in FOLDER_FILES.items()}


def test_every_documented_form_loads_through_the_folder(tmp_path):
    """Each form, with the other files in their first form: recognised as an edge list, and the same
    graph through ``--dataset PATH`` and ``--dataset edgelist --root PATH``."""
    want = load_graph(TrainConfig.of(dataset=str(_folder(tmp_path / "reference", {}))))
    failures = []
    for stem, ext, variant in _forms():
        d = tmp_path / f"{stem}{ext}{variant}"
        if stem in SPLIT:  # one of the three in this form, the others as text
            forms = {s: (ext, variant) if s == stem else (".txt", "") for s in SPLIT}
        else:
            forms = {stem: (ext, variant)}
        _folder(d, forms)
        try:
            assert detect(d).kind == "edgelist"
            by_path = load_graph(TrainConfig.of(dataset=str(d)))
            by_root = load_graph(TrainConfig.of(dataset="edgelist", root=str(d)))
            assert by_path.fingerprint() == by_root.fingerprint()
            sparse = (stem, ext, variant) == ("features", ".npz", "")
            assert (by_path.x.layout == torch.sparse_csr) == sparse
            assert torch.equal(by_path.dense_x(), want.dense_x())
            assert torch.equal(by_path.y, want.y)
            assert torch.equal(by_path.indices, want.indices) and torch.equal(by_path.indptr, want.indptr)
            assert all(torch.equal(getattr(by_path, m), getattr(want, m)) for m in ("train_mask", "val_mask", "test_mask"))
        except (AssertionError, InputError) as e:
            failures.append(f"{stem}{ext} {variant}: {type(e).__name__}: {e}".strip())
    assert not failures, "\n".join(failures)


def test_sparse_features_npz_stay_sparse_through_training(tmp_path, capsys, monkeypatch):
    """A scipy sparse features.npz (with edges.npy) trains from the folder without being densified:
    ``Graph.x`` is the CSR matrix, the run reports sparse features, and nothing calls ``to_dense``
    on the [N, F] features; ``convert`` stores them as CSR files too."""
    n, f = 200, 300
    d = tmp_path / "my graph"
    d.mkdir()
    rng = np.random.default_rng(1)
    x = sp.random(n, f, density=0.02, format="csr", random_state=2, dtype=np.float32)
    sp.save_npz(d / "features.npz", x)
    np.save(d / "edges.npy", rng.integers(0, n, (1000, 2)))
    np.save(d / "labels.npy", np.arange(n) % 4)
    assert detect(d).kind == "edgelist"
    g = load_graph(TrainConfig.of(dataset=str(d)))
    assert g.x.layout == torch.sparse_csr and g.x.col_indices().dtype == torch.int64
    assert g.x.values().numel() == x.nnz and np.array_equal(g.x.to_dense().numpy(), x.toarray())
    densified = []
    to_dense = torch.Tensor.to_dense
    monkeypatch.setattr(torch.Tensor, "to_dense",
                        lambda self, *a, **k: densified.append(tuple(self.shape)) or to_dense(self, *a, **k))
    for source in (["--dataset", str(d)], ["--dataset", "edgelist", "--root", str(d)]):
        out = tmp_path / f"run-{len(source)}"
        assert main(["train", *source, "--epochs", "1", "--progress", "none", "--out", str(out)]) == 0, \
            capsys.readouterr().err
        assert json.loads((out / "summary.json").read_text())["graph"]["sparse_features"] is True
    assert (n, f) not in densified
    monkeypatch.undo()
    assert main(["convert", "--dataset", str(d), "--out", str(tmp_path / "native")]) == 0
    assert json.loads((tmp_path / "native" / "meta.json").read_text())["features"] == "sparse_csr"
    assert (tmp_path / "native" / "x_values.npy").is_file() and not (tmp_path / "native" / "x.npy").exists()


def _cli_error(args, capsys) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fullgraph: error: expected"), err
    return err[0]


def test_folder_refusals_are_one_line(tmp_path, capsys):
    two = _folder(tmp_path / "two", {})
    sp.save_npz(two / "features.npz", sp.csr_matrix(X))
    assert "one features file" in _cli_error(["train", "--dataset", str(two), "--epochs", "1"], capsys)
    some = _folder(tmp_path / "some", {}, splits=False)
    _write(some, "train", ".npy", "mask")
    assert "(got only train.npy)" in _cli_error(["train", "--dataset", str(some), "--epochs", "1"], capsys)
    fixed = _folder(tmp_path / "fixed", {})
    line = _cli_error(["train", "--dataset", str(fixed), "--split", "3", "--epochs", "1"], capsys)
    assert "--split 0" in line and "one fixed split" in line and "(got 3)" in line
    no_edges = _folder(tmp_path / "no-edges", {"features": (".npz", "")}, splits=False)
    (no_edges / "edges.txt").unlink()  # features.npz alone is not read as a Shchur .npz
    assert detect(no_edges).kind == "edgelist"
    assert "edges.npy" in _cli_error(["train", "--dataset", str(no_edges), "--epochs", "1"], capsys)
    bad = _folder(tmp_path / "bad-npz", {"edges": (".npy", "")}, splits=False)
    (bad / "features.npy").unlink()
    np.savez(bad / "features.npz", a=X, b=X)
    assert "save_npz file or one numpy.savez array" in _cli_error(["train", "--dataset", str(bad)], capsys)
    np.save(bad / "edges.npy", EDGES.T)
    (bad / "features.npz").unlink()
    np.save(bad / "features.npy", X)
    with pytest.raises(InputError, match=r"\[E, 2\] array .*edge_index is \[2, E\]"):
        load_graph(TrainConfig.of(dataset=str(bad)))
