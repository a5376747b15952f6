"""``fullgraph convert`` of a typed folder with its edge files streamed (``typed_folder_convert``).

The reference is the in-memory road the command took before: ``write_native(load_path(folder,
split=...), splits=fixed_splits(folder))``, i.e. ``preprocess(load_typed_folder(...))`` with every set
of split files. The streamed folder must hold the same files (every sha256 equal) and load to the same
graph, with text and sort blocks so small that every edge file is read in several blocks and the sort
makes several buckets: the small folder of ``test_typed_folder`` in each of its forms, HeCo's ACM with
two files renamed, a folder without split files, one whose counts come from the ids, one edited to
hold repeats, both directions and a self loop; and a damaged edge file is one line naming its line.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from fullgraph.cli import main
from fullgraph.data.detect import fixed_splits, load_path
from fullgraph.data.formats import _common, typed_folder_convert
from fullgraph.data.formats._common import read_table, read_table_blocks
from fullgraph.data.formats.native import write_native
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.formats.typed_folder_convert import convert_typed_folder
from fullgraph.data.preprocess import is_standard_structure
from fullgraph.errors import InputError
from tests.data.formats.test_ogb_hetero_convert import _files, _same
from tests.data.formats.test_typed_folder import _small, acm_renamed  # noqa: F401 (a fixture, used by name)


def _memory(folder, out, *, split: int = 0, edge_data: bool = True):
    """The in-memory road's graph and folder (``cli.data._convert`` before the streamed road)."""
    graph = load_path(folder, split=split)
    graph = graph if edge_data else graph.without_edge_data()
    return graph, write_native(graph, out, preprocessed=True, splits=fixed_splits(str(folder)))


def _one_dense_type(f):
    (f / "item_feat.npz").unlink()  # users' dense features only: written as row blocks of the memory map


def _two_dense_types(f):
    x = sp.load_npz(f / "item_feat.npz").toarray()
    (f / "item_feat.npz").unlink()
    np.save(f / "item_feat.npy", x)  # two dense types: typed_features makes the matrix sparse


def _featureless_counted_from_ids(f):
    for name in ("user_feat.npy", "item_feat.npz", "num_nodes.json"):
        (f / name).unlink()  # every count is the largest id + 1 (tags: 4, not the 6 num_nodes.json gave)


def _text_with_commas(f):
    pairs = np.load(f / "item__has__tag.npy")
    (f / "item__has__tag.npy").unlink()
    (f / "item__has__tag.csv").write_text("item,tag\n\n" + "".join(f"{i},{t}  # row\n" for i, t in pairs))


FORMS = {"as built": lambda f: None, "one dense type": _one_dense_type, "two dense types": _two_dense_types,
         "featureless, counted from ids": _featureless_counted_from_ids, "text with commas": _text_with_commas}


def _counting_blocks(monkeypatch) -> dict:
    """Blocks read per edge file by the streamed road (both passes)."""
    seen: dict = {}
    real = typed_folder_convert._relation_blocks

    def counting(path, rel, block_bytes):
        for block in real(path, rel, block_bytes):
            seen[path.name] = seen.get(path.name, 0) + 1
            yield block
    monkeypatch.setattr(typed_folder_convert, "_relation_blocks", counting)
    return seen


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_small_folder_in_every_form_is_the_in_memory_folder(tmp_path, monkeypatch, form):
    _small(tmp_path / "shop")
    FORMS[form](tmp_path / "shop")
    graph, want = _memory(tmp_path / "shop", tmp_path / "memory")
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 16)  # a line or two per text block
    seen = _counting_blocks(monkeypatch)
    got = convert_typed_folder(tmp_path / "shop", tmp_path / "stream", block_bytes=64)  # 4 rows per .npy block
    _same(got, want)
    assert load_native(tmp_path / "stream").fingerprint() == graph.fingerprint()
    assert min(seen.values()) >= 3 and len(seen) == 3 and got["counts"]["num_splits"] == 2
    assert got["features"] == ("dense" if form in ("one dense type", "featureless, counted from ids") else "sparse_csr")
    assert graph.node_types.counts == ((12, 9, 4) if form.startswith("featureless") else (12, 9, 6))


def test_heco_acm_renamed_keeps_every_split(acm_renamed, tmp_path, monkeypatch):  # noqa: F811
    graph, want = _memory(acm_renamed, tmp_path / "memory")
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 1 << 14)  # pa.txt in 8 blocks
    got = convert_typed_folder(acm_renamed, tmp_path / "stream", block_bytes=1 << 15)
    _same(got, want)
    assert got["counts"]["num_splits"] == 3 and got["counts"]["num_relations"] == 4
    stored, loaded = load_native(tmp_path / "stream", split=2), load_path(acm_renamed, split=2)
    assert stored.fingerprint() == loaded.fingerprint() and int(stored.train_mask.sum()) == 3 * 60


def test_without_split_files_split_seeds_the_same_drawn_split(tmp_path, monkeypatch):
    _small(tmp_path / "shop", splits=False)
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 32)
    graph, want = _memory(tmp_path / "shop", tmp_path / "memory", split=1)
    got = convert_typed_folder(tmp_path / "shop", tmp_path / "stream", split=1, block_bytes=128)
    _same(got, want)
    assert "--split 1" in got["source"] and "num_splits" not in got["counts"]
    zero = convert_typed_folder(tmp_path / "shop", tmp_path / "zero", block_bytes=128)
    assert _files(zero)["train_mask.npy"] != _files(got)["train_mask.npy"]  # the seed is honoured
    assert main(["convert", "--dataset", str(tmp_path / "shop"), "--out", str(tmp_path / "cli"), "--split", "1"]) == 0
    meta = json.loads((tmp_path / "cli" / "meta.json").read_text())
    assert _files(meta) == _files(want) and "edge files streamed; --split 1" in meta["source"]


def _append_npy(path, rows) -> None:
    e = np.load(path)
    e = e.T if e.shape[0] == 2 and e.shape[1] != 2 else e
    np.save(path, np.concatenate([e, np.array(rows)]))


def test_repeats_both_directions_and_a_loop_make_the_same_folder(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    _small(tmp_path / "a" / "shop")  # the same folder name: the same meta.json
    _, want = _memory(tmp_path / "a" / "shop", tmp_path / "memory")
    folder = shutil.copytree(tmp_path / "a" / "shop", tmp_path / "b" / "shop")
    with open(folder / "user__buys__item.txt", "a") as f:
        f.write("0 0\n# again\n3 3\n0 0\n")  # two repeats (users 0 and 3 buy items 0 and 3 already)
    _append_npy(folder / "user__follows__user.npy", [[1, 0], [4, 4], [5, 4], [0, 1]])  # both ways, a loop
    _append_npy(folder / "item__has__tag.npy", [[2, 2], [2, 2]])
    _, memory = _memory(folder, tmp_path / "memory-edited")
    assert _files(memory) == _files(want)  # the in-memory road: every added row a repeat, a reverse or a loop
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 24)
    _same(convert_typed_folder(folder, tmp_path / "stream", block_bytes=64), want)


def test_a_pair_in_two_relations_is_two_edges_by_both_roads(tmp_path, monkeypatch):
    _small(tmp_path / "shop")
    (tmp_path / "shop" / "user__likes__item.txt").write_text("0 0\n1 1\n2 5\n")  # two of them bought too
    graph, want = _memory(tmp_path / "shop", tmp_path / "memory")
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 16)
    _same(convert_typed_folder(tmp_path / "shop", tmp_path / "stream", block_bytes=64), want)
    assert graph.num_relations == 7 and graph.num_edges == 2 * (12 + 9 + 11 + 3)
    bare = convert_typed_folder(tmp_path / "shop", tmp_path / "bare", edge_data=False, block_bytes=64)
    assert bare["counts"]["num_edges"] == 2 * (12 + 9 + 11 + 1)  # bare: a pair in two relations is one edge
    stored = load_native(tmp_path / "bare")
    assert is_standard_structure(stored.indptr, stored.indices, None)
    _same(bare, _memory(tmp_path / "shop", tmp_path / "memory-bare", edge_data=False)[1])  # by both roads


def test_no_edge_data_through_the_command(tmp_path):
    _small(tmp_path / "shop")
    _, want = _memory(tmp_path / "shop", tmp_path / "memory", edge_data=False)
    assert main(["convert", "--dataset", str(tmp_path / "shop"), "--out", str(tmp_path / "bare"),
                 "--no-edge-data"]) == 0
    meta = json.loads((tmp_path / "bare" / "meta.json").read_text())
    _same(meta, want)
    assert meta["version"] == 2 and meta["node_types"]["relations"] == [] and "edge_type.npy" not in meta["files"]
    assert meta["source"] == (f"fullgraph convert --dataset {tmp_path / 'shop'} (typed folder, edge files "
                              f"streamed; all 2 fixed splits)")
    _, typed = _memory(tmp_path / "shop", tmp_path / "memory-typed")
    assert main(["convert", "--dataset", str(tmp_path / "shop"), "--out", str(tmp_path / "typed")]) == 0
    _same(json.loads((tmp_path / "typed" / "meta.json").read_text()), typed)


def _long_edges(folder, lines: int) -> list[str]:
    """``user__buys__item.txt`` of ``lines`` lines: a comment, a header, blanks and comments between pairs."""
    rows = ["# who bought what", "user item"]
    for i in range(len(rows), lines):
        rows.append("" if i % 17 == 0 else "# a note" if i % 23 == 0 else f"{i % 12} {i % 9}  # line {i + 1}")
    return rows


@pytest.mark.parametrize("line, text, needles", [
    (5, "4 9", ["column 2 of", "(got 9 at line 5)"]),  # in the block with the header and a comment
    (1537, "4 9", ["column 2 of", "user__buys__item.txt", "item ids in [0, 9)", "item_feat.npz",
                   "(got 9 at line 1537)"]),
    (1102, "-1 3", ["column 1 of", "user ids in [0, 12)", "(got -1 at line 1102)"]),
    (811, "4 x7", ["an integer", "user__buys__item.txt", "'x7' on line 811"]),
    (2001, "4 1 2", ["2 value(s) per line", "got 3 on line 2001"]),
])
def test_a_damaged_line_in_a_large_text_file_is_named(tmp_path, monkeypatch, capsys, line, text, needles):
    _small(tmp_path / "shop")
    rows = _long_edges(tmp_path / "shop", 3000)
    rows[line - 1] = text
    (tmp_path / "shop" / "user__buys__item.txt").write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(_common, "TEXT_BLOCK_BYTES", 512)  # the bad line in a block far from the first
    with pytest.raises(InputError) as err:
        convert_typed_folder(tmp_path / "shop", tmp_path / "stream", block_bytes=256)
    for needle in needles:
        assert needle in str(err.value), str(err.value)
    assert not (tmp_path / "stream").exists()
    code = main(["convert", "--dataset", str(tmp_path / "shop"), "--out", str(tmp_path / "new" / "out")])
    assert code == 2 and not (tmp_path / "new").exists()
    assert len([x for x in capsys.readouterr().err.splitlines() if x.strip()]) == 1


def test_a_bad_id_in_a_large_npy_file_names_its_row(tmp_path):
    _small(tmp_path / "shop")
    e = np.stack([np.arange(500) % 12, np.arange(500) % 12])  # [2, E]: transposed block by block
    e[1, 321] = 12
    np.save(tmp_path / "shop" / "user__follows__user.npy", e)
    with pytest.raises(InputError, match=r"column 2 of .*user__follows__user\.npy \(got 12 at row 322\)"):
        convert_typed_folder(tmp_path / "shop", tmp_path / "stream", block_bytes=160)


def test_the_block_reader_takes_the_header_on_the_first_non_blank_line_only(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("# a comment\n\n src dst\n0 1 # one\n\n2 3\n")
    for block_bytes in (4, 64):  # a line per block; the whole file in one
        blocks = list(read_table_blocks(path, dtype=np.int64, what="t", ncols=2, block_bytes=block_bytes,
                                        header=None, comments="#", lines=True))
        table = np.concatenate([b for b, _ in blocks]).tolist()
        assert table == read_table(path, dtype=np.int64, what="t", ncols=2, header=None).tolist() == [[0, 1], [2, 3]]
        assert [line_of(i) for b, line_of in blocks for i in range(len(b))] == [4, 6]
    path.write_text("0 1\nsrc dst\n")  # a second line that is no number is no header: it is line 2's error
    with pytest.raises(InputError, match=r"'src' on line 2"):
        list(read_table_blocks(path, dtype=np.int64, what="t", ncols=2, block_bytes=4, header=None))
    path.write_text("\n\nsrc dst\n0 1\n")  # nor is the first one where no header is asked for
    with pytest.raises(InputError, match=r"'src' on line 3"):
        list(read_table_blocks(path, dtype=np.int64, what="t", ncols=2, block_bytes=4))
