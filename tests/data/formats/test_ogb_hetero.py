"""OGB's heterogeneous layout (``fullgraph.data.formats.ogb_hetero``) on a tiny synthetic ogbn-mag
(``fullgraph.data.synthetic.ogb_hetero``), every damaged folder refused in one line naming the file, and
``fullgraph generate typed`` (``fullgraph.data.synthetic.typed``) trained with R-GCN. The folder is written
and loaded once per module (scale 2e-4: 388 nodes, 4,222 edges): the file stays fast."""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pytest
import torch

from fullgraph.cli import main
from fullgraph.config import TrainConfig
from fullgraph.data.detect import detect
from fullgraph.data.formats.native_read import load_native, read_native_meta
from fullgraph.data.formats.ogb_hetero import load_ogb_hetero
from fullgraph.data.load import load_graph
from fullgraph.data.synthetic.ogb_hetero import MAG_FEATURES, MAG_RELATIONS, write_synthetic_mag
from fullgraph.errors import InputError

SCALE = 2e-4
WRITES = ("author", "writes", "paper")


@pytest.fixture(scope="module")
def mag(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ogb") / "mag"
    return folder, write_synthetic_mag(folder, SCALE, seed=3)


@pytest.fixture(scope="module")
def graph(mag):
    return load_ogb_hetero(mag[0])


def _table(path, dtype=np.int64) -> np.ndarray:
    with gzip.open(path, "rt") as f:
        return np.loadtxt(f, dtype=dtype, delimiter=",", ndmin=2)


def _rel(folder, triplet):
    return folder / "raw" / "relations" / "___".join(triplet)


def test_a_synthetic_mag_is_one_typed_graph(mag, graph):
    folder, wrote = mag
    t = graph.node_types
    assert t.names == ("author", "field_of_study", "institution", "paper") and t.labelled == ("paper",)
    assert dict(zip(t.names, t.counts)) == wrote["nodes"] == {"author": 227, "field_of_study": 12, "institution": 2,
                                                              "paper": 147}
    assert t.widths == (0, 0, 0, MAG_FEATURES) and graph.x.shape == (388, MAG_FEATURES)
    between = sorted(r for r in MAG_RELATIONS if r[0] != r[2])
    assert t.relations == (*sorted(MAG_RELATIONS), *((d, "rev_" + r, s) for s, r, d in between))
    cites = _table(_rel(folder, ("paper", "cites", "paper")) / "edge.csv.gz")
    both_ways = np.unique(np.concatenate([cites, cites[:, ::-1]]), axis=0)  # made symmetric in place
    assert graph.num_edges == 2 * sum(wrote["edges"][r] for r in between) + len(both_ways)
    lo = t.offsets[3]
    assert torch.equal(graph.y[lo:], torch.from_numpy(_table(folder / "raw/node-label/paper/node-label.csv.gz")[:, 0]))
    assert bool((graph.y[:lo] == -1).all()) and graph.num_classes == int(graph.y.max()) + 1
    x = _table(folder / "raw/node-feat/paper/node-feat.csv.gz", np.float32)
    assert torch.equal(graph.x[lo:], torch.from_numpy(x)) and not graph.x[:lo].any()
    for mask, split in zip((graph.train_mask, graph.val_mask, graph.test_mask), ("train", "valid", "test")):
        ids = _table(folder / f"split/time/paper/{split}.csv.gz")[:, 0]
        assert torch.equal(mask.nonzero().flatten(), torch.from_numpy(np.sort(ids) + lo))
    assert int((graph.train_mask | graph.val_mask | graph.test_mask).sum()) == 147  # every paper, as in ogbn-mag
    det = detect(folder)
    assert det.kind == "ogb_hetero"  # before OGB's homogeneous rule
    assert load_graph(TrainConfig.of(dataset=str(folder))).fingerprint() == graph.fingerprint()  # symmetric already


def test_one_edge_against_its_file(mag, graph):
    author, paper = (int(v) for v in _table(_rel(mag[0], WRITES) / "edge.csv.gz")[-1])
    t = graph.node_types
    a, p = t.offsets[t.index("author")] + author, t.offsets[t.index("paper")] + paper
    src, dst = graph.edges()
    for u, v, rel in ((a, p, WRITES), (p, a, ("paper", "rev_writes", "author"))):
        at = ((src == u) & (dst == v)).nonzero().flatten()
        assert at.numel() == 1 and t.relations[int(graph.edge_type[at[0]])] == rel


# ------------------------------------------------------------------------------------ damaged folders
def _rewrite(path, edit) -> None:
    with gzip.open(path, "rt") as f:
        lines = f.read().splitlines()
    with gzip.open(path, "wt") as f:
        f.write("".join(line + "\n" for line in edit(lines)))


def _last_paper_past(folder) -> None:
    _rewrite(_rel(folder, WRITES) / "edge.csv.gz", lambda rows: rows[:-1] + [rows[-1].split(",")[0] + ",147"])


W = WRITES
DAMAGE = {
    "edge id past its type": (_last_paper_past, ["author___writes___paper/edge.csv.gz", "column 2",
                                                 "paper ids in [0, 147) (num-node-dict.csv.gz)", "(got 147 at row"]),
    "relation of an unknown type": (lambda f: _rewrite(f / "raw/triplet-type-list.csv.gz",
                                                       lambda rows: rows + ["author,writes,venue"]),
                                    ["triplet-type-list.csv.gz", "author___writes___venue", "unknown type 'venue'"]),
    "labels on a type with no split": (lambda f: shutil.rmtree(f / "split/time/paper"),
                                       ["split/time", "labelled type 'paper'", "(got labels in", "node-label.csv.gz",
                                        "splits for no type)"]),
    "feature rows short of the type": (lambda f: _rewrite(f / "raw/node-feat/paper/node-feat.csv.gz", lambda r: r[:-1]),
                                       ["node-feat.csv.gz", "one feature row per paper, 147", "(got 146)"]),
    "a missing file": (lambda f: (_rel(f, W) / "edge_reltype.csv.gz").unlink(),
                       ["author___writes___paper/edge_reltype.csv.gz", "(not found)"]),
    "an edge count the edges miss": (lambda f: _rewrite(_rel(f, W) / "num-edge-list.csv.gz", lambda r: ["2000"]),
                                     ["expected 2000 edges (num-edge-list.csv.gz)", "writes___paper/edge.csv.gz",
                                      "(got 1429)"]),
    "two relation ids in one file": (lambda f: _rewrite(_rel(f, W) / "edge_reltype.csv.gz", lambda r: r[:-1] + ["0"]),
                                     ["one relation id on every row", "edge_reltype.csv.gz", "(got 1 and 0 at row 1429)"]),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_folder_is_one_line_naming_the_file(mag, tmp_path, case):
    folder = shutil.copytree(mag[0], tmp_path / "mag")
    damage, words = DAMAGE[case]
    damage(folder)
    with pytest.raises(InputError) as e:
        load_ogb_hetero(folder)
    text = str(e.value)
    assert "\n" not in text and text.startswith("expected") and all(w in text for w in words), text


def test_the_command_line_refuses_a_damaged_folder_and_writes_nothing(mag, tmp_path, capsys):
    folder = shutil.copytree(mag[0], tmp_path / "mag")
    _last_paper_past(folder)
    out = tmp_path / "native"
    assert main(["convert", "--dataset", str(folder), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "edge.csv.gz" in err and "(got 147 at row" in err and not out.exists()


def test_generate_typed_writes_a_folder_rgcn_trains_on(tmp_path, capsys):
    out = tmp_path / "typed"
    assert main(["generate", "typed", "--nodes", "300", "--edges", "2000", "--node-types", "3", "--relations", "4",
                 "--features", "6", "--classes", "3", "--seed", "1", "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: typed-3x4, 300 nodes, ")
    g = load_native(out)
    t = g.node_types
    assert t.names == ("type0", "type1", "type2") and sum(t.counts) == 300 and t.widths == (6, 0, 6)
    assert t.relations[:4] == (("type0", "rel0", "type1"), ("type1", "rel1", "type2"), ("type2", "rel2", "type0"),
                               ("type0", "rel3", "type0")) and g.num_relations == 7  # rel3 symmetric in place
    assert t.labelled == ("type0",) and g.num_classes == 3 and bool((g.y[t.counts[0]:] == -1).all())
    assert read_native_meta(out)["source"].startswith("fullgraph generate typed --nodes 300")
    run = tmp_path / "run"
    assert main(["train", "--dataset", str(out), "--model", "rgcn", "--epochs", "1", "--hidden", "8", "--threads", "1",
                 "--progress", "none", "--out", str(run)]) == 0
    assert "typed-3x4 rgcn, 2 layers" in capsys.readouterr().out and (run / "summary.json").is_file()
    assert main(["generate", "typed", "--nodes", "300", "--edges", "2000", "--relations", "7", "--out",
                 str(tmp_path / "q")]) == 2  # 3 types: 6 pairs, so 6 relations at most
    assert "expected 1 <= --relations <= 6" in capsys.readouterr().err and not (tmp_path / "q").exists()
