"""Edge data through the data layer (issue 51): preprocessing passes, the edge-list reader, PyG
``Data`` both ways and the native folder carry ``edge_weight``, ``edge_attr`` and ``edge_type`` with
their edges; bad edge data is one ``InputError`` line naming the file. Tiny graphs only."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from fullgraph.data.datasets import preprocess
from fullgraph.data.formats.edgelist import load_edgelist, read_edge_list, read_edges
from fullgraph.data.formats.native import write_native
from fullgraph.data.formats.native_read import load_native
from fullgraph.data.formats.native_stream import CSRStream
from fullgraph.data.graph import Graph
from fullgraph.data.preprocess import add_self_loops, dedupe, remove_self_loops, row_normalize_features, symmetrize
from fullgraph.errors import InputError

N = 5
NODES = dict(x=torch.eye(N), y=torch.tensor([0, 1, 0, 1, 0]), train_mask=torch.tensor([1, 1, 0, 0, 0]).bool(),
             val_mask=torch.tensor([0, 0, 1, 0, 0]).bool(), test_mask=torch.tensor([0, 0, 0, 1, 1]).bool())
# 0 -> 1 and 1 -> 0 both listed (each keeps its own data); 2 -> 2 a self loop; 3 -> 4, 4 -> 2 one way
SRC, DST = [0, 1, 2, 3, 4, 1], [1, 0, 2, 4, 2, 2]
WEIGHT = [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]


def typed_graph(**kw) -> Graph:
    attr = torch.tensor([[float(i), -float(i)] for i in range(len(SRC))])
    return Graph.from_edges(torch.tensor(SRC), torch.tensor(DST), N, edge_weight=torch.tensor(WEIGHT), edge_attr=attr,
                            edge_type=torch.tensor([0, 1, 1, 0, 1, 0]), **kw, **NODES)


def by_edge(graph: Graph) -> dict:
    """``(src, dst) -> (weight, attr, type)`` of every CSR entry."""
    src, dst = graph.edges()
    out = {}
    for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
        out[(s, d)] = tuple(None if t is None else t[i].tolist()
                            for t in (graph.edge_weight, graph.edge_attr, graph.edge_type))
    return out


def one_line(e) -> str:
    message = str(e.value)
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------------- preprocessing
def by_triple(graph: Graph) -> dict:
    """``(src, dst, type) -> (weight, attr)`` of every CSR entry (a typed edge's key)."""
    src, dst = graph.edges()
    return {(s, d, t): (w, a) for s, d, t, w, a in zip(src.tolist(), dst.tolist(), graph.edge_type.tolist(),
                                                       graph.edge_weight.tolist(), graph.edge_attr.tolist())}


def test_symmetrize_copies_data_to_reverse_edges_and_gives_them_relations_of_their_own():
    """An edge is ``(src, dst, relation)``: 0 -> 1 (type 0) and 1 -> 0 (type 1) each get a reverse in
    their reverse relation (1 -> 0 of type 2 beside 1 -> 0 of type 1); the loop is its own reverse."""
    g = typed_graph()
    before = by_triple(g)
    s = symmetrize(g)
    after = by_triple(s)
    assert s.num_relations == 4  # R = 2 doubled: reverse relations t + R
    reverses = {(v, u, t + 2): data for (u, v, t), data in before.items() if u != v}
    assert after == before | reverses and s.num_edges == 11  # every edge keeps its own data; a reverse copies it
    assert symmetrize(s).fingerprint() == s.fingerprint()  # symmetric already: unchanged, R not doubled again
    same = symmetrize(g, reverse_relations=False)
    assert same.num_relations == 2 and by_triple(same)[(4, 3, 0)] == before[(3, 4, 0)]
    assert by_triple(same)[(1, 0, 1)] == before[(1, 0, 1)] and by_triple(same)[(1, 0, 0)] == before[(0, 1, 0)]


def test_remove_add_loops_and_dedupe_carry_data():
    g = typed_graph()
    r = remove_self_loops(preprocess(g))
    assert (2, 2) not in by_edge(r) and r.num_edges == 10 and r.num_relations == 4
    assert by_edge(preprocess(g)) == by_edge(r)
    a = add_self_loops(g)
    got = by_edge(a)
    assert got[(2, 2)] == by_edge(g)[(2, 2)]  # an existing loop keeps its data
    # node 0's only in-edge is 1 -> 0 (attr [1, -1]); node 3 has none: zeros; added loops weigh 1, type R
    assert got[(0, 0)] == (1.0, [1.0, -1.0], 2) and got[(3, 3)] == (1.0, [0.0, 0.0], 2) and a.num_relations == 3
    assert dedupe(g).fingerprint() == g.fingerprint()
    assert row_normalize_features(g).edge_kinds == g.edge_kinds


def test_the_passes_make_the_same_structure_with_and_without_edge_data():
    """Untyped edge data changes no structure; typed edges change it only where a pair stands in two
    relations (after symmetrizing here: 1 -> 0 of types 1 and 2), which keeps the pairs' set."""
    plain, typed = Graph.from_edges(torch.tensor(SRC), torch.tensor(DST), N, **NODES), typed_graph()
    weighted = Graph.from_edges(torch.tensor(SRC), torch.tensor(DST), N, edge_weight=torch.tensor(WEIGHT),
                                edge_attr=torch.ones(len(SRC), 2), **NODES)
    for f in (preprocess, symmetrize, remove_self_loops, add_self_loops, dedupe):
        a, b, c = f(plain), f(typed), f(weighted)
        assert not a.edge_kinds and b.edge_kinds == ("weight", "attr", "type") and c.edge_kinds == ("weight", "attr")
        assert torch.equal(a.indptr, c.indptr) and torch.equal(a.indices, c.indices)
        pairs = lambda g: set(zip(*[t.tolist() for t in g.edges()]))  # noqa: E731
        assert pairs(a) == pairs(b)
    assert add_self_loops(plain).num_edges == 10


# --------------------------------------------------------------------------------- edge lists
def write_folder(d, edges: str):
    d.mkdir(exist_ok=True)
    (d / "e.txt").write_text(edges)
    np.save(d / "x.npy", np.eye(N, dtype=np.float32))
    np.save(d / "y.npy", np.array([0, 1, 0, 1, 0]))
    for name, ids in (("train", [0, 1]), ("val", [2]), ("test", [3, 4])):
        (d / f"{name}.txt").write_text("".join(f"{i}\n" for i in ids))


def load(d, **kw) -> Graph:
    return load_edgelist(d / "e.txt", d / "x.npy", d / "y.npy", train=d / "train.txt", val=d / "val.txt",
                         test=d / "test.txt", **kw)


def test_weight_column_to_graph_to_native_folder_and_back(tmp_path):
    lines = [f"{s} {d} {w}" for s, d, w in zip(SRC, DST, WEIGHT)]
    write_folder(tmp_path, "# src dst weight\n" + "\n".join(reversed(lines)) + "\n")  # any order
    g = load(tmp_path)
    written = {(s, d): w for s, d, w in zip(SRC, DST, WEIGHT)}
    src, dst = g.edges()
    assert [written[(s, d)] for s, d in zip(src.tolist(), dst.tolist())] == g.edge_weight.tolist()
    meta = write_native(g, tmp_path / "native")
    assert meta["version"] == 3 and meta["counts"]["edge_data"] == ["weight"] and "edge_weight.npy" in meta["files"]
    h = load_native(tmp_path / "native", verify=True)
    assert h.fingerprint() == g.fingerprint() and torch.equal(h.edge_weight, g.edge_weight)
    src, dst = h.edges()  # aligned with the CSR as read back
    assert [written[(s, d)] for s, d in zip(src.tolist(), dst.tolist())] == h.edge_weight.tolist()


def test_header_names_say_which_columns_are_weight_type_and_features(tmp_path):
    write_folder(tmp_path, "src,dst,f1,type,f2\n0,1,1,2,10\n1,0,2,0,20\n3,4,3,1,30\n")  # features without a weight
    g = load(tmp_path)
    assert g.edge_kinds == ("attr", "type") and g.num_relations == 3
    assert by_edge(g) == {(1, 0): (None, [2.0, 20.0], 0), (0, 1): (None, [1.0, 10.0], 2),
                          (3, 4): (None, [3.0, 30.0], 1)}
    (tmp_path / "e.txt").write_text("0 1 0.5 7 8\n1 0 1 9 10\n")  # no header: src dst weight f1 .. fk
    edges, data = read_edge_list(tmp_path / "e.txt")
    assert edges.tolist() == [[0, 1], [1, 0]] and data["edge_weight"].tolist() == [0.5, 1.0]
    assert data["edge_attr"].tolist() == [[7, 8], [9, 10]]
    with pytest.raises(InputError, match=r"got edge data: edge_weight, edge_attr\); read it with read_edge_list"):
        read_edges(tmp_path / "e.txt")  # never cut silently
    np.save(tmp_path / "e.npy", np.array([[0, 1, 0.25], [1, 0, 2.0]]))
    assert read_edge_list(tmp_path / "e.npy")[1]["edge_weight"].tolist() == [0.25, 2.0]


def test_a_commented_header_names_the_columns_and_the_reading_is_said(tmp_path, caplog):
    """Issue 63 §16: ``# src dst type`` was a comment, so the types were read as weights without a word."""
    (tmp_path / "e.txt").write_text("# Directed graph\n# Nodes: 4 Edges: 3\n# src dst type\n0 1 0\n1 2 1\n2 3 0\n")
    with caplog.at_level("INFO", logger="fullgraph"):
        _, data = read_edge_list(tmp_path / "e.txt")
    assert list(data) == ["edge_type"] and data["edge_type"].tolist() == [0, 1, 0]
    said = [r.getMessage() for r in caplog.records if "taken as" in r.getMessage()]
    assert said == ["e.txt: columns 1-2 taken as the edge's ends, 3 'type' as the relation type (by the commented "
                    "header line)"], said
    (tmp_path / "s.txt").write_text("# FromNodeId\tToNodeId\n0 1\n1 2\n")  # SNAP's: two names, no edge data
    assert read_edge_list(tmp_path / "s.txt")[1] == {}
    (tmp_path / "w.txt").write_text("# a b\n# 7 8 9\n0 1 0.5\n")  # a numbered comment, or too few words: no header
    assert list(read_edge_list(tmp_path / "w.txt")[1]) == ["edge_weight"]


def test_repeated_weighted_edges_are_summed_repeated_featured_edges_refused(tmp_path):
    write_folder(tmp_path, "0 1 0.5\n1 0 1\n0 1 0.25\n")
    assert by_edge(load(tmp_path))[(0, 1)] == (0.75, None, None)
    write_folder(tmp_path, "0 1 0.5 1\n1 0 1 1\n0 1 0.25 1\n")
    with pytest.raises(InputError) as e:
        load(tmp_path)
    assert "expected each edge once" in one_line(e) and "e.txt" in str(e.value)


@pytest.mark.parametrize("text, match", [
    ("0 1 0.5\n1 0 heavy\n", r"expected a number in the edge list .*e\.txt \(got 'heavy' on line 2\)"),
    ("# w\n0 1 0.5\n\n1 0 nan\n", r"expected finite edge weights within float32's range in .*e\.txt \(got \[nan\] "
                                 r"on line 4\)"),
    ("src dst f\n0 1 inf\n", r"expected finite edge features within .* in .*e\.txt \(got \[inf\] on line 2\)"),
    ("0 1 0.5\n1 0 1e39\n", r"expected finite edge weights within float32's range in .*e\.txt \(got \[1e\+39\] on "
                           r"line 2\)"),  # issue 63 §9: numpy's overflow warning, then no file and no line
    ("s d type\n0 1 1.5\n", r"expected integer edge types >= 0 in the column 'type' of .*e\.txt "
                            r"\(got 1\.5 on line 2\)"),
    ("s d type\n0 1 -1\n", r"expected integer edge types >= 0 .*got -1 on line 2"),
    ("s d type\n0 1 0\n1 2 1000000000000\n2 0 1\n",  # issue 63 §3: once sized a 582 TiB table
     r"expected edge types numbered from 0, each below the edge count 3, in the column 'type' of .*e\.txt "
     r"\(got 1000000000000 on line 3\): number the relations 0\.\.R-1"),
    ("s d w weight\n0 1 1 1\n", r"expected one weight column in the header of .*e\.txt"),
    ("0 1 0.5\n1 0\n", r"expected 3 value\(s\) per line in the edge list .*e\.txt \(got 2 on line 2"),
])
def test_bad_edge_data_in_a_file_is_one_line_naming_file_and_line(tmp_path, text, match):
    import warnings

    write_folder(tmp_path, text)
    with pytest.raises(InputError, match=match) as e, warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's cast warnings never reach the user first
        load(tmp_path)
    one_line(e)


MASKS3 = {k: torch.tensor([i == j for j in range(3)]) for i, k in enumerate(("train_mask", "val_mask", "test_mask"))}


# --------------------------------------------------------------------------------- PyG
def test_a_graph_refuses_an_inferred_relation_count_past_its_edges():
    """A relation id far past the edge count is a typo, not 10^12 relations: refused before anything is
    sized by it (given ``num_relations``, the ids are checked against it as before)."""
    from fullgraph.data.graph import Graph

    src, dst = torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])
    with pytest.raises(InputError, match=r"each below the edge count 3 \(got a type 1000000000000\)"):
        Graph.from_edges(src, dst, 3, edge_type=torch.tensor([0, 10**12, 1]), x=torch.ones(3, 1),
                         y=torch.tensor([0, 1, 0]), **MASKS3)
    g = Graph.from_edges(src, dst, 3, edge_type=torch.tensor([0, 2, 1]), x=torch.ones(3, 1),
                         y=torch.tensor([0, 1, 0]), **MASKS3)
    assert g.num_relations == 3


def test_pyg_data_both_ways():
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Data

    from fullgraph.data.pyg import from_pyg, to_pyg

    g = typed_graph(num_relations=5)
    data = to_pyg(g)
    assert data.edge_weight.tolist() == g.edge_weight.tolist() and data.num_relations == 5
    assert from_pyg(data).fingerprint() == g.fingerprint()
    # listed in edge_index order, each row with its edge; a 1-D edge_attr is one feature per edge
    data = Data(x=torch.eye(N), edge_index=torch.tensor([SRC, DST]), y=NODES["y"], num_nodes=N,
                edge_weight=torch.tensor(WEIGHT, dtype=torch.float64), edge_attr=torch.arange(6),
                **{k: v for k, v in NODES.items() if k.endswith("mask")})
    h = from_pyg(data)
    assert h.edge_attr.shape == (6, 1) and h.edge_attr.dtype == torch.float32
    assert {k: (w, a) for k, (w, a, _) in by_edge(h).items()} == {
        (s, d): (w, [float(i)]) for i, (s, d, w) in enumerate(zip(SRC, DST, WEIGHT))}


@pytest.mark.parametrize("key, value, match", [
    ("edge_attr", torch.rand(5, 3), r"expected data\.edge_attr to have one row per column of edge_index, 6 rows "
                                    r"\(got shape \[5, 3\]\)"),
    ("edge_weight", torch.rand(6, 2), r"expected data\.edge_weight of shape \[6\]"),
    ("edge_type", torch.rand(6), r"expected data\.edge_type to be integer relation ids"),
    ("edge_time", torch.rand(6), r"expected no edge data on the PyG Data but edge_weight, edge_attr, edge_type "
                                 r"\(got edge_time\).*data\.edge_time = None"),
])
def test_bad_pyg_edge_data_is_one_line(key, value, match, tmp_path):
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import Data

    from fullgraph.data.pyg import from_pyg, write_pyg

    data = Data(x=torch.eye(N), edge_index=torch.tensor([SRC, DST]), y=NODES["y"], num_nodes=N,
                **{k: v for k, v in NODES.items() if k.endswith("mask")})
    data[key] = value
    for read in (lambda: from_pyg(data), lambda: write_pyg(data, tmp_path / "out")):
        with pytest.raises(InputError, match=match) as e:
            read()
        one_line(e)
    assert not (tmp_path / "out").exists()


def test_write_pyg_stores_the_preprocessed_edge_data(tmp_path):
    pytest.importorskip("torch_geometric")
    from fullgraph.data.pyg import to_pyg, write_pyg

    g = typed_graph()
    write_pyg(to_pyg(g), tmp_path / "out")
    h = load_native(tmp_path / "out")
    assert h.fingerprint() == preprocess(g).fingerprint() and h.num_relations == 4


# --------------------------------------------------------------------------------- native folder
def test_native_folder_with_edge_data_is_checked_and_streamed_with_it(tmp_path):
    g = typed_graph()
    write_native(g, tmp_path / "n")
    h = load_native(tmp_path / "n", verify=True)
    assert h.fingerprint() == g.fingerprint() and h.num_relations == 2
    assert CSRStream.of_folder(tmp_path / "n").edge_kinds == ("weight", "attr", "type")  # streamed with its data
    assert CSRStream.of_folder(tmp_path / "n", structure_only=True).num_edges == g.num_edges
    np.save(tmp_path / "n" / "edge_weight.npy", np.zeros(g.num_edges, dtype=np.float32))
    with pytest.raises(InputError, match=r"edge_weight\.npy to have sha256"):
        load_native(tmp_path / "n", verify=True)
    meta = json.loads((tmp_path / "n" / "meta.json").read_text())
    meta["version"] = 2
    (tmp_path / "n" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"counts\.edge_data only in version 3"):
        load_native(tmp_path / "n")


def test_convert_keeps_edge_data_unless_told_not_to(tmp_path):
    from fullgraph.cli import main

    folder = tmp_path / "g"
    folder.mkdir()
    (folder / "edges.txt").write_text("".join(f"{i} {(i + 1) % 6} {0.5 + i}\n" for i in range(6)))
    (folder / "labels.txt").write_text("0\n1\n0\n1\n0\n1\n")
    np.save(folder / "features.npy", np.eye(6, dtype=np.float32))
    for flag, kinds in (([], ["weight"]), (["--no-edge-data"], [])):
        out = tmp_path / f"out{len(flag)}"
        assert main(["convert", "--dataset", str(folder), "--out", str(out), *flag]) == 0
        back = load_native(out)
        assert list(back.edge_kinds) == kinds
