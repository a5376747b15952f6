"""The partition book, the on-disk layout and the partition cache."""

import json
import shutil

import numpy as np
import pymetis
import pytest
import scipy.sparse as sp
import torch
from torch.testing import assert_close

from fullgraph.errors import InputError
from fullgraph.ops.block import Block
from fullgraph.partition import (
    METHODS, NORMS, PartitionBook, cache_root, cached_partition, load_meta, load_part, partition_nodes,
    save_partition,
)


# ------------------------------------------------------------------------------ the book
def _reassemble(book: PartitionBook, norm: str, n: int) -> sp.csr_matrix:
    rows, cols, vals = [], [], []
    for part in book.parts:
        blk = part.block(norm)
        assert blk.num_dst == part.num_inner and blk.num_src == part.num_local
        src, dst = blk.edges()
        rows.append(part.inner[dst])
        cols.append(part.local_nodes[src])
        vals.append(blk.adj.values)
    m = sp.csr_matrix((torch.cat(vals).numpy(), (torch.cat(rows).numpy(), torch.cat(cols).numpy())), shape=(n, n))
    m.sort_indices()
    return m


UNTYPED_NORMS = [n for n in NORMS if n != "relation-mean"]  # that one reads edge types: test_typed_parts_reassemble


def _check_reconstruction(graph, book):
    for norm in NORMS if graph.edge_type is not None else UNTYPED_NORMS:
        ref = Block.from_graph(graph, norm).adj
        got = _reassemble(book, norm, graph.num_nodes)
        assert np.array_equal(got.indptr, ref.indptr.numpy()), norm
        assert np.array_equal(got.indices, ref.indices.numpy()), norm
        assert_close(torch.from_numpy(got.data), ref.values, rtol=1e-6, atol=0)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("parts", [1, 2, 3, 4])
def test_blocks_reassemble_to_the_full_graph_block(small, method, parts):
    _check_reconstruction(small, PartitionBook.build(small, partition_nodes(small, parts, method, seed=parts)))


@pytest.mark.parametrize("method", ["metis", "random"])
def test_blocks_reassemble_on_cora_and_a_directed_graph(cora, directed, method):
    _check_reconstruction(cora, PartitionBook.build(cora, partition_nodes(cora, 3, method)))
    _check_reconstruction(directed, PartitionBook.build(directed, partition_nodes(directed, 4, method)))


def _same_part(p, q) -> bool:
    a, b = p.state_dict(), q.state_dict()
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a)


@pytest.mark.parametrize("method", ["metis", "random"])
def test_the_book_does_not_depend_on_the_edge_block_size(small, directed, method, monkeypatch):
    import fullgraph.data.edge_list as graph_mod
    import fullgraph.partition.book as book_mod

    for g in (small, directed):
        node_part = partition_nodes(g, 3, method, seed=4)
        whole = PartitionBook.build(g, node_part)
        with monkeypatch.context() as m:
            m.setattr(graph_mod, "EDGE_BLOCK", 37)  # many blocks of rows
            m.setattr(book_mod, "EDGE_BLOCK", 37)  # and many merges of the halo keys
            blocked = PartitionBook.build(g, node_part)
            blocked_parts = blocked.parts
        assert blocked.stats() == whole.stats() and blocked.summary() == whole.summary()
        assert all(_same_part(p, q) for p, q in zip(blocked_parts, whole.parts))
        _check_reconstruction(g, blocked)


def _in_neighbours(graph, nodes):
    return torch.unique(torch.cat([graph.indices[graph.indptr[v] : graph.indptr[v + 1]] for v in nodes.tolist()]))


@pytest.mark.parametrize("method", ["metis", "random", "contiguous"])
def test_part_contents_and_send_recv_consistency(directed, method):
    g = directed
    node_part = partition_nodes(g, 4, method)
    book = PartitionBook.build(g, node_part)
    parts = book.parts
    assert torch.equal(torch.sort(torch.cat([p.inner for p in parts])).values, torch.arange(g.num_nodes))
    for p in parts:
        assert torch.equal(p.inner, torch.sort(p.inner).values)
        assert bool((node_part[p.inner] == p.part_id).all())
        nbrs = _in_neighbours(g, p.inner)
        expected_halo = nbrs[node_part[nbrs] != p.part_id]
        assert torch.equal(torch.sort(p.halo).values, expected_halo)
        assert torch.equal(p.halo_owner, node_part[p.halo])
        # grouped by owner ascending, ascending id within a group
        key = p.halo_owner * g.num_nodes + p.halo
        assert bool((key.diff() > 0).all())
        assert torch.equal(p.recv_counts, torch.bincount(p.halo_owner, minlength=4))
        assert int(p.recv_counts[p.part_id]) == 0 and int(p.send_counts[p.part_id]) == 0
        assert torch.equal(p.degree, g.in_degrees()[p.local_nodes])
        assert torch.equal(p.x.to_dense(), g.dense_x()[p.local_nodes])
        assert torch.equal(p.y, g.y[p.inner]) and torch.equal(p.train_mask, g.train_mask[p.inner])
        assert p.global_num_train == int(g.train_mask.sum()) and p.global_num_nodes == g.num_nodes
        p.check()
    for p in parts:
        for q in parts:
            sent = p.inner[p.send_nodes(q.part_id)]
            a, b = q.recv_range(p.part_id)
            assert torch.equal(sent, q.halo[a:b]), (p.part_id, q.part_id)
            assert int(p.send_counts[q.part_id]) == int(q.recv_counts[p.part_id])
    assert torch.equal(book.comm_matrix, torch.stack([p.recv_counts for p in parts]))


def test_stats_and_replication_factor(small):
    book = PartitionBook.build(small, partition_nodes(small, 3, "metis"))
    stats = book.stats()
    assert sum(r["inner"] for r in stats) == small.num_nodes
    assert sum(r["edges"] for r in stats) == small.num_edges
    halo = sum(r["halo"] for r in stats)
    assert book.replication_factor == pytest.approx(halo / small.num_nodes)
    assert [r["halo"] for r in stats] == [p.num_halo for p in book.parts]
    assert stats[0]["halo_ratio"] == pytest.approx(stats[0]["halo"] / stats[0]["inner"])
    assert book.summary()["halo_total"] == halo


def test_global_to_local(small):
    book = PartitionBook.build(small, partition_nodes(small, 3, "random"))
    p = book.part(1)
    ids = p.local_nodes
    assert torch.equal(p.global_to_local(ids), torch.arange(p.num_local))
    others = torch.tensor(sorted(set(range(small.num_nodes)) - set(ids.tolist())))
    assert bool((p.global_to_local(others) == -1).all())
    assert p.global_to_local([int(p.halo[0])]).tolist() == [p.num_inner]


def test_typed_parts_reassemble_the_relation_mean_block():
    """A typed graph's parts put back together give the whole graph's Â for every norm, R-GCN's too."""
    from tests.models.test_rgcn import small_typed

    graph = small_typed()
    _check_reconstruction(graph, PartitionBook.build(graph, partition_nodes(graph, 3, "random")))


@pytest.mark.parametrize("norm", UNTYPED_NORMS)
def test_boundary_sampling_block(small, norm):
    book = PartitionBook.build(small, partition_nodes(small, 3, "random"))
    p = book.part(0)
    assert p.block(norm) is p.block(norm)  # the unsampled block is kept
    full = p.block(norm).adj.to_dense()
    n = p.num_inner
    keep = torch.rand(p.num_halo, generator=torch.Generator().manual_seed(0)) < 0.5
    blk = p.block(norm, halo_keep=keep, scale=2.0)
    expected = torch.cat([full[:, :n], 2.0 * full[:, n:][:, keep]], dim=1)
    assert blk.num_dst == n and blk.num_src == n + int(keep.sum())
    assert torch.equal(blk.adj.to_dense(), expected)
    assert bool((blk.adj.indptr.diff() >= 0).all())
    # canonical CSR: sorted columns within each row
    src, dst = blk.edges()
    assert bool(((dst.diff() > 0) | (src.diff() > 0)).all())
    # keep everything at scale 1 = the unsampled block; keep nothing = inner columns only
    assert torch.equal(p.block(norm, torch.ones(p.num_halo, dtype=torch.bool)).adj.to_dense(), full)
    none = p.block(norm, torch.zeros(p.num_halo, dtype=torch.bool), scale=5.0)
    assert torch.equal(none.adj.to_dense(), full[:, :n])
    assert torch.equal(p.kept_recv_counts(keep), torch.bincount(p.halo_owner[keep], minlength=3))
    with pytest.raises(InputError, match=rf"shape \({p.num_halo},\)"):
        p.block(norm, torch.ones(p.num_halo + 1, dtype=torch.bool))
    with pytest.raises(InputError, match="unknown normalization"):
        p.block("sym")


# ------------------------------------------------------------------------------ on disk
def _assert_parts_equal(a, b):
    for k in a._TENSORS:
        assert torch.equal(getattr(a, k), getattr(b, k)), k
    for k in a._SCALARS:
        assert getattr(a, k) == getattr(b, k), k
    assert a.x.layout == b.x.layout
    assert torch.equal(a.x.to_dense(), b.x.to_dense())


def test_save_load_round_trip(cora, small, tmp_path):
    for graph, parts in ((cora, 2), (small, 3)):
        node_part = partition_nodes(graph, parts, "metis", seed=1)
        book = PartitionBook.build(graph, node_part)
        out = save_partition(book, graph, tmp_path / graph.name, {"method": "metis", "seed": 1, "weight": "nodes"})
        meta = load_meta(out)
        assert meta["parts"] == parts and meta["fingerprint"] == graph.fingerprint()
        assert meta["method"] == "metis" and meta["seed"] == 1 and meta["graph"] == graph.name
        assert meta["num_nodes"] == graph.num_nodes and meta["global_num_train"] == int(graph.train_mask.sum())
        assert meta["replication_factor"] == pytest.approx(book.replication_factor)
        assert [e["path"] for e in meta["files"]] == [f"part-{i}/part.pt" for i in range(parts)]
        assert meta["sparse_features"] == (graph.x.layout == torch.sparse_csr)
        for i in range(parts):
            loaded = load_part(out, i, fingerprint=graph.fingerprint())
            _assert_parts_equal(loaded, book.part(i))
            assert torch.equal(loaded.block("gcn").adj.to_dense(), book.part(i).block("gcn").adj.to_dense())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folders left


def test_bad_partition_folders_are_input_errors(small, tmp_path):
    book = PartitionBook.build(small, partition_nodes(small, 2, "random"))
    out = save_partition(book, small, tmp_path / "p", {"method": "random"})
    with pytest.raises(InputError, match=r"part index in \[0, 2\).*got 2"):
        load_part(out, 2)
    with pytest.raises(InputError, match="fingerprint"):
        load_part(out, 0, fingerprint="0" * 64)

    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    part_file = broken / "part-1" / "part.pt"
    part_file.write_bytes(part_file.read_bytes()[:100])
    load_part(broken, 0)  # the other part is still fine
    with pytest.raises(InputError, match="corrupt"):
        load_part(broken, 1)
    part_file.unlink()
    with pytest.raises(InputError, match="expected part file"):
        load_part(broken, 1)

    meta_file = broken / "partition.json"
    doc = json.loads(meta_file.read_text())
    doc["version"] = 99
    meta_file.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="version 1.*got 99"):
        load_part(broken, 0)
    meta_file.write_text("{not json")
    with pytest.raises(InputError, match="valid JSON"):
        load_meta(broken)
    meta_file.unlink()
    with pytest.raises(InputError, match="partition.json"):
        load_part(broken, 0)

    # a file whose checksum matches but holds something else (e.g. a pickle with code) is refused
    evil = tmp_path / "evil"
    shutil.copytree(out, evil)
    import hashlib
    import pickle

    payload = pickle.dumps(print, protocol=2)
    (evil / "part-0" / "part.pt").write_bytes(payload)
    doc = json.loads((evil / "partition.json").read_text())
    doc["files"][0].update(bytes=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    (evil / "partition.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="readable part file"):
        load_part(evil, 0)


def test_save_is_atomic_and_never_clobbers_other_folders(small, tmp_path, monkeypatch):
    book2 = PartitionBook.build(small, partition_nodes(small, 2, "random"))
    book3 = PartitionBook.build(small, partition_nodes(small, 3, "random"))
    out = save_partition(book2, small, tmp_path / "p", {})
    # replacing an existing partition works
    save_partition(book3, small, out, {})
    assert load_meta(out)["parts"] == 3 and (out / "part-2" / "part.pt").is_file()
    # a failure half way leaves the previous partition untouched and no temporary folder behind
    calls = {"n": 0}
    real_save = torch.save

    def failing_save(obj, f, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real_save(obj, f, *a, **kw)

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        save_partition(book2, small, out, {})
    monkeypatch.setattr(torch, "save", real_save)
    assert load_meta(out)["parts"] == 3
    load_part(out, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]
    # a folder that is not a partition is never overwritten
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="refusing to overwrite"):
        save_partition(book2, small, other, {})
    assert (other / "notes.txt").read_text() == "mine"
    with pytest.raises(InputError, match="JSON-serializable"):
        save_partition(book2, small, tmp_path / "q", {"bad": object()})


# ------------------------------------------------------------------------------ cache
def test_cache_avoids_a_second_metis_run(small, tmp_path, monkeypatch):
    calls = {"n": 0}
    real = pymetis.part_graph

    def counting(*a, **kw):
        calls["n"] += 1
        if calls["n"] > 1:
            raise AssertionError("METIS ran twice")
        return real(*a, **kw)

    monkeypatch.setattr(pymetis, "part_graph", counting)
    first = cached_partition(small, 3, "metis", seed=2)
    assert calls["n"] == 1
    files = list((cache_root() / "partitions").iterdir())
    assert len(files) == 1 and str(cache_root()).startswith(str(tmp_path))
    second = cached_partition(small, 3, "metis", seed=2)
    assert torch.equal(first, second) and calls["n"] == 1
    # another key (seed, parts, weight) runs METIS again, in an explicit cache folder
    monkeypatch.setattr(pymetis, "part_graph", real)
    other = cached_partition(small, 3, "metis", seed=3, cache_dir=tmp_path / "explicit")
    assert len(list((tmp_path / "explicit").iterdir())) == 1
    assert torch.equal(other, partition_nodes(small, 3, "metis", seed=3))
    # a corrupt cache entry is recomputed, not trusted
    files[0].write_bytes(b"garbage")
    assert torch.equal(cached_partition(small, 3, "metis", seed=2), first)
    # cheap methods are computed directly
    assert torch.equal(cached_partition(small, 3, "random", seed=1), partition_nodes(small, 3, "random", seed=1))


def test_a_part_read_without_features_maps_the_file_instead(small, tmp_path):
    """``load_part(..., features=False)`` (pipeline stages after the first) maps the part file, so the
    features it never touches are never read in; the default reads the file into memory. The same
    tensors either way."""
    from fullgraph.partition import PartitionBook, load_part, partition_nodes, save_partition

    out = save_partition(PartitionBook.build(small, partition_nodes(small, 2, "random", 0)), small, tmp_path / "p")
    path = str((out / "part-1" / "part.pt").resolve())

    def mapped() -> bool:
        with open("/proc/self/maps") as f:
            return any(line.rstrip().endswith(path) for line in f)

    read = load_part(out, 1)
    assert not mapped()
    lazy = load_part(out, 1, features=False)
    assert mapped()
    for name in ("inner", "halo", "indptr", "indices", "x", "y", "train_mask"):
        assert torch.equal(getattr(lazy, name), getattr(read, name)), name
