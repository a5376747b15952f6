"""``fullgraph convert`` of OGB's heterogeneous layout in bounded memory (``ogb_hetero_convert``).

The reference is the in-memory road the command took before: ``write_native(load_path(folder))``, i.e.
``preprocess(load_ogb_hetero(folder))``. The streamed folder must hold the same files (every sha256
equal) and load to the graph ``load_ogb_hetero`` builds, whatever the block sizes (tiny text blocks
and sort blocks cut every relation and the feature file into many pieces), on synthetic ogbn-mag
folders and on one edited to hold what the synthetic one never does: repeated pairs, both
directions of a citation, a self loop.
"""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
import torch

from fullgraph.cli import main
from fullgraph.data.datasets import preprocess
from fullgraph.data.detect import load_path
from fullgraph.data.formats import _common
from fullgraph.data.formats.native import write_native
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.formats.ogb_hetero import load_ogb_hetero
from fullgraph.data.formats.ogb_hetero_convert import convert_ogb_hetero, streamable
from fullgraph.data.synthetic.ogb_hetero import write_synthetic_mag
from fullgraph.errors import InputError

CITES, WRITES = ("paper", "cites", "paper"), ("author", "writes", "paper")


@pytest.fixture(scope="module")
def mags(tmp_path_factory):
    root = tmp_path_factory.mktemp("mags")
    for scale in (2e-4, 1e-3):
        write_synthetic_mag(root / f"mag-{scale}", scale, seed=5)
    return {scale: root / f"mag-{scale}" for scale in (2e-4, 1e-3)}


def _rel(folder, triplet):
    return folder / "raw" / "relations" / "___".join(triplet)


def _lines(path) -> list[str]:
    with gzip.open(path, "rt") as f:
        return f.read().splitlines()


def _write_lines(path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write("".join(line + "\n" for line in lines))


def _set_edges(folder, triplet, rows, reltype: int) -> None:
    """A relation's three files holding ``rows`` (``"src,dst"`` each), in agreement."""
    _write_lines(_rel(folder, triplet) / "edge.csv.gz", rows)
    _write_lines(_rel(folder, triplet) / "num-edge-list.csv.gz", [str(len(rows))])
    _write_lines(_rel(folder, triplet) / "edge_reltype.csv.gz", [str(reltype)] * len(rows))


def _files(meta) -> dict:
    return {k: f["sha256"] for k, f in meta["files"].items()}


@pytest.fixture(scope="module")
def memory(mags, tmp_path_factory):
    """Each synthetic folder's in-memory graph and the folder ``write_native`` makes of it (no loops in
    them: ``load_path``'s ``preprocess`` leaves them as ``load_ogb_hetero`` builds them)."""
    out = {}
    for scale, folder in mags.items():
        graph = load_ogb_hetero(folder)
        out[scale] = graph, write_native(graph, tmp_path_factory.mktemp("memory") / "native", preprocessed=True)
    return out


def _same(got: dict, want: dict) -> None:
    """Two native folders' files (every sha256), counts and meta.json short of where they came from."""
    assert _files(got) == _files(want) and got["counts"] == want["counts"]
    drop = ("files", "source", "total_bytes")
    assert {k: v for k, v in got.items() if k not in drop} == {k: v for k, v in want.items() if k not in drop}


@pytest.mark.parametrize("scale, text_bytes, block_bytes", [(2e-4, 4096, 2048), (1e-3, 1 << 15, 1 << 16)])
def test_streamed_folder_is_the_in_memory_one(mags, memory, tmp_path, monkeypatch, scale, text_bytes, block_bytes):
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", text_bytes)  # several blocks per relation, several buckets
    graph, want = memory[scale]
    got = convert_ogb_hetero(mags[scale], tmp_path / "stream", block_bytes=block_bytes)
    _same(got, want)
    assert load_native(tmp_path / "stream").fingerprint() == graph.fingerprint()
    assert got["counts"]["num_relations"] == 7 and got["preprocessed"] and got["features"] == "dense"


def test_repeats_kept_once_both_directions_and_a_loop_dropped(mags, memory, tmp_path, monkeypatch):
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 512)
    folder = shutil.copytree(mags[2e-4], tmp_path / mags[2e-4].name)  # the same name: the same meta.json
    cites, writes = _lines(_rel(folder, CITES) / "edge.csv.gz"), _lines(_rel(folder, WRITES) / "edge.csv.gz")
    u, v = cites[1].split(",")
    _set_edges(folder, CITES, cites + [cites[0], f"{v},{u}", "5,5", cites[0]], 2)
    _set_edges(folder, WRITES, writes + [writes[3], writes[0]], 1)
    graph, want = memory[2e-4]  # every added row a repeat or a loop: the graph stays the same
    assert load_path(folder).fingerprint() == graph.fingerprint()  # the in-memory road (preprocess drops the loop)
    _same(convert_ogb_hetero(folder, tmp_path / "stream", block_bytes=1 << 14), want)
    out = tmp_path / "cli"
    assert main(["convert", "--dataset", str(folder), "--out", str(out)]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert "heterogeneous layout" in meta["source"] and _files(meta) == _files(want)  # the bounded road


def test_bare_edges_and_a_featureless_folder(mags, memory, tmp_path):
    folder = shutil.copytree(mags[2e-4], tmp_path / "mag")
    want = write_native(memory[2e-4][0].without_edge_data(), tmp_path / "memory", preprocessed=True)
    assert main(["convert", "--dataset", str(folder), "--out", str(tmp_path / "bare"), "--no-edge-data"]) == 0
    meta = json.loads((tmp_path / "bare" / "meta.json").read_text())
    assert _files(meta) == _files(want) and meta["node_types"] == want["node_types"] and meta["version"] == 1
    shutil.rmtree(folder / "raw" / "node-feat")
    graph = load_path(folder)
    got = convert_ogb_hetero(folder, tmp_path / "stream", block_bytes=1 << 14)
    _same(got, write_native(graph, tmp_path / "memory-none", preprocessed=True))
    assert got["counts"]["num_features"] == 1 and graph.node_types.widths == (0, 0, 0, 0)


def test_a_pair_in_two_relations_is_two_edges_by_both_roads(mags, tmp_path):
    """An author who writes and reads one paper: two edges (and two reverses), the same files by the
    streamed and the in-memory roads (issue 60: an edge is ``(src, dst, relation)``)."""
    folder = shutil.copytree(mags[2e-4], tmp_path / "mag")
    _write_lines(folder / "raw" / "triplet-type-list.csv.gz",
                 _lines(folder / "raw" / "triplet-type-list.csv.gz") + ["author,reads,paper"])
    _set_edges(folder, ("author", "reads", "paper"), _lines(_rel(folder, WRITES) / "edge.csv.gz")[:3], 4)
    graph = load_ogb_hetero(folder)
    got = convert_ogb_hetero(folder, tmp_path / "stream", block_bytes=1 << 12)
    _same(got, write_native(preprocess(graph), tmp_path / "memory", preprocessed=True))
    types = graph.node_types
    reads, writes = types.relations.index(("author", "reads", "paper")), types.relations.index(WRITES)
    src, dst = graph.edges()
    key = src * graph.num_nodes + dst
    assert int((graph.edge_type == reads).sum()) == 3
    assert bool(torch.isin(key[graph.edge_type == reads], key[graph.edge_type == writes]).all())
    rev = types.relations.index(("paper", "rev_reads", "author"))
    assert int((graph.edge_type == rev).sum()) == 3


def test_several_featured_types_take_the_in_memory_road(mags, tmp_path):
    folder = shutil.copytree(mags[2e-4], tmp_path / "mag")
    authors = int(_lines(folder / "raw" / "num-node-dict.csv.gz")[1].split(",")[0])
    _write_lines(folder / "raw" / "node-feat" / "author" / "node-feat.csv.gz",
                 [f"{i % 3},0,{i / 7:.2f}" for i in range(authors)])
    assert not streamable(folder)
    with pytest.raises(InputError, match="at most one node type"):
        convert_ogb_hetero(folder, tmp_path / "out")
    assert main(["convert", "--dataset", str(folder), "--out", str(tmp_path / "cli")]) == 0
    meta = json.loads((tmp_path / "cli" / "meta.json").read_text())
    assert meta["features"] == "sparse_csr" and "--split 0" in meta["source"]  # the in-memory road, as before
