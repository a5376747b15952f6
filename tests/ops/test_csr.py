"""The CSR toolkit (``fullgraph.ops.csr``) and the one builder of Â (``fullgraph.ops.adjacency``),
each checked against a direct computation with SciPy or dense algebra."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fullgraph.errors import InputError
from fullgraph.ops.adjacency import NORMS, block_adjacency, normalized, normalized_data
from fullgraph.ops.csr import (
    canonical, csr_rows, indptr_from_counts, indptr_from_rows, row_ids, row_spans, take_rows,
)


UNTYPED_NORMS = [n for n in NORMS if n != "relation-mean"]  # R-GCN's reads edge types: test_relation_mean_...


def random_csr(n: int, m: int, seed: int, loops: bool = True) -> sp.csr_matrix:
    """A directed in-edge CSR with repeats and (optionally) self loops; rows as given, unsorted."""
    rng = np.random.default_rng(seed)
    dst, src = rng.integers(0, n, m), rng.integers(0, n, m)
    if loops:
        src[: m // 8] = dst[: m // 8]
    else:
        src[src == dst] = (src[src == dst] + 1) % n
    order = np.argsort(dst, kind="stable")  # rows grouped, columns left in draw order
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
    return sp.csr_matrix((np.ones(m, dtype=np.float32), src[order], indptr), shape=(n, n))


def tensors(a: sp.csr_matrix) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(a.indptr.astype(np.int64)), torch.from_numpy(a.indices.astype(np.int64))


def structure(a: sp.csr_matrix) -> sp.csr_matrix:
    """What ``canonical`` promises, the SciPy way: rows sorted, repeats merged, values 1."""
    a = a.copy()
    a.sum_duplicates()
    a.data[:] = 1
    return a


# ---------------------------------------------------------------- row pointers
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_row_pointer_from_counts_and_from_rows(kind):
    counts = np.array([3, 0, 0, 5, 1, 0, 2])
    rows = np.repeat(np.arange(counts.size), counts)
    entries = np.arange(rows.size)  # one column per entry: SciPy merges nothing
    want = sp.coo_matrix((np.ones(rows.size), (rows, entries)), shape=(counts.size, rows.size)).tocsr().indptr
    wrap = torch.from_numpy if kind == "torch" else np.asarray
    for got in (indptr_from_counts(wrap(counts)), indptr_from_rows(wrap(rows), counts.size)):
        assert type(got) is type(wrap(counts))
        got = np.asarray(got)
        assert got.dtype == np.int64 and np.array_equal(got, want)
    assert np.asarray(indptr_from_counts(wrap(np.zeros(0, dtype=np.int64)))).tolist() == [0]


def test_row_pointer_takes_a_dtype_and_counts_bools():
    assert indptr_from_counts(np.array([2, 1]), np.int32).dtype == np.int32
    assert indptr_from_counts(torch.tensor([True, False, True])).tolist() == [0, 1, 1, 2]


# ---------------------------------------------------------------- row slicers
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_row_ids_of_a_range_match_scipy(kind):
    a = random_csr(40, 300, seed=1)
    every = a.tocoo().row  # SciPy's row of every stored entry, in CSR order
    ip = a.indptr.astype(np.int64)
    ip = torch.from_numpy(ip) if kind == "torch" else ip
    assert np.array_equal(np.asarray(row_ids(ip)), every)
    for r0, r1 in [(0, 1), (3, 17), (17, 17), (39, 40)]:
        got = np.asarray(row_ids(ip, r0, r1))
        assert got.dtype == np.int64 and np.array_equal(got, every[a.indptr[r0] : a.indptr[r1]])


def test_row_spans_cover_every_row_within_the_budget():
    counts = np.array([1, 2, 0, 9, 1, 1, 0, 0, 3, 2])  # row 3 alone exceeds the budget of 4
    ip = indptr_from_counts(counts)
    spans = list(row_spans(ip, 4))
    assert spans[0][0] == 0 and spans[-1][1] == counts.size
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    for r0, r1 in spans:
        assert r1 > r0 and (ip[r1] - ip[r0] <= 4 or r1 == r0 + 1)
    assert (3, 4) in spans
    assert list(row_spans(ip, 10**9)) == [(0, counts.size)]


def test_rows_of_a_set_match_scipy_fancy_indexing():
    a = random_csr(50, 400, seed=2)
    a.data = np.random.default_rng(0).random(a.nnz).astype(np.float32)
    ip, ix = tensors(a)
    vals = torch.from_numpy(a.data)
    rows = torch.tensor([7, 3, 3, 49, 0, 12, 31])  # any order, repeats allowed
    sub, pos = csr_rows(ip, rows)
    want = a[rows.numpy()]
    assert sub.dtype == torch.int64 and np.array_equal(sub.numpy(), want.indptr)
    assert np.array_equal(ix[pos].numpy(), want.indices) and np.array_equal(vals[pos].numpy(), want.data)
    sub, pos = csr_rows(ip, torch.zeros(0, dtype=torch.int64))
    assert sub.tolist() == [0] and pos.numel() == 0


def test_take_rows_of_dense_and_sparse_features():
    rng = np.random.default_rng(3)
    dense = torch.from_numpy((rng.random((30, 8)) < 0.3) * rng.random((30, 8))).float()
    ids = torch.tensor([4, 4, 29, 0, 17])
    assert torch.equal(take_rows(dense, ids), dense[ids])
    got = take_rows(dense.to_sparse_csr(), ids)
    assert got.layout == torch.sparse_csr and got.shape == (5, 8)
    assert got.crow_indices().dtype == torch.int64 and got.col_indices().dtype == torch.int64
    assert torch.equal(got.to_dense(), dense[ids])


# ---------------------------------------------------------------- canonical structure
@pytest.mark.parametrize("drop_loops", [False, True])
def test_canonical_matches_scipy(drop_loops):
    a = random_csr(60, 700, seed=4)
    want = structure(a)
    if drop_loops:
        want.setdiag(0)
        want.eliminate_zeros()
    ip, ix = canonical(*tensors(a), drop_loops=drop_loops)
    assert ip.dtype == ix.dtype == torch.int64
    assert np.array_equal(ip.numpy(), want.indptr) and np.array_equal(ix.numpy(), want.indices)


def test_canonical_input_comes_back_without_a_copy():
    ip, ix = tensors(structure(random_csr(30, 200, seed=5, loops=False)))
    got = canonical(ip, ix, drop_loops=True)
    assert got[0] is ip and got[1] is ix


# ---------------------------------------------------------------- Â
def dense_a_hat(a: sp.csr_matrix, norm: str) -> np.ndarray:
    """Â by its definition, in float64 dense algebra."""
    s = structure(a).toarray().astype(np.float64)
    if norm == "mean":
        deg = s.sum(1, keepdims=True)
        return np.divide(s, deg, out=np.zeros_like(s), where=deg > 0)
    np.fill_diagonal(s, 1.0)  # A + I, an existing loop counted once
    if norm == "self-loops":
        return s
    dinv = 1.0 / np.sqrt(s.sum(1))  # in-degree of A + I: the row sums of the in-edge CSR
    return dinv[:, None] * s * dinv[None, :]


@pytest.mark.parametrize("norm", UNTYPED_NORMS)
def test_normalized_adjacency_is_its_definition(norm):
    a = random_csr(45, 500, seed=6)  # directed: in- and out-degrees differ, so D's side matters
    ip, ix, vals = normalized(*tensors(a), norm)
    assert (ip.dtype, ix.dtype, vals.dtype) == (torch.int64, torch.int64, torch.float32)
    got = sp.csr_matrix((vals.numpy(), ix.numpy(), ip.numpy()), shape=a.shape)
    assert got.has_sorted_indices
    want = dense_a_hat(a, norm)
    assert np.array_equal(got.toarray() != 0, want != 0)  # the structure, self loops included
    np.testing.assert_allclose(got.toarray(), want, rtol=1e-6, atol=0)


def test_gcn_normalization_by_hand():
    """A path 0 -> 1 -> 2 (in-edge CSR: row 1 holds 0, row 2 holds 1): degrees of A+I are 1, 2, 2."""
    ip, ix = torch.tensor([0, 0, 1, 2]), torch.tensor([0, 1])
    ip, ix, vals = normalized(ip, ix, "gcn")
    got = torch.sparse_csr_tensor(ip, ix, vals, size=(3, 3)).to_dense()
    want = torch.tensor([[1.0, 0, 0], [2**-0.5, 0.5, 0], [0, 0.5, 0.5]])
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("norm", UNTYPED_NORMS)
def test_a_block_of_rows_equals_those_rows_of_the_whole_graph_bit_for_bit(norm):
    """The partition's use: rows ``inner``, columns local (inner first, then the other nodes read),
    degrees global. Every value must be the whole graph's, exactly, for the layouts to agree."""
    a = structure(random_csr(70, 600, seed=7, loops=False))
    ip, ix = tensors(a)
    whole = sp.csr_matrix(tuple(t.numpy() for t in normalized(ip, ix, norm)[::-1]), shape=a.shape)
    inner = torch.tensor([2, 9, 10, 33, 51, 68])
    sub, pos = csr_rows(ip, inner)
    others = np.setdiff1d(np.unique(ix[pos].numpy()), inner.numpy())
    local_nodes = np.concatenate([inner.numpy(), others])
    colmap = np.full(a.shape[0], -1)
    colmap[local_nodes] = np.arange(local_nodes.size)
    local = sp.csr_matrix((np.ones(pos.numel()), colmap[ix[pos].numpy()], sub.numpy()),
                          shape=(inner.numel(), local_nodes.size))
    local.sort_indices()
    lip, lix = tensors(local)
    degree = ip.diff()[torch.from_numpy(local_nodes)]
    bip, bix, bvals = block_adjacency(lip, lix, norm, degree)
    got = sp.csr_matrix((bvals.numpy(), bix.numpy(), bip.numpy()), shape=local.shape).toarray()
    want = whole[inner.numpy()][:, local_nodes].toarray()
    assert got.dtype == want.dtype == np.float32 and np.array_equal(got, want)


def test_unknown_norm_is_refused():
    with pytest.raises(InputError, match="unknown normalization"):
        normalized(torch.tensor([0, 0]), torch.zeros(0, dtype=torch.int64), "sym")


@pytest.mark.parametrize("relations", [3, 100])
@pytest.mark.parametrize("weighted", [False, True])
def test_relation_mean_is_its_definition(weighted, relations):
    """R-GCN's ``1 / |N_r(v)|`` (a weighted entry: its weight over the sum of its row's weights of its
    relation), written out edge by edge; stored self loops are kept, as relation edges. With many
    relations (100 here, a knowledge graph's thousand) the sums are counted per (row, relation) present,
    not in a table of every row and relation (21 GB at ogbl-wikikg2's size)."""
    from fullgraph.ops.csr import row_ids
    from fullgraph.ops.edge_data import EdgeData

    a = random_csr(40, 300, seed=3)
    ip, ix = tensors(a)
    g = torch.Generator().manual_seed(0)
    rel = torch.randint(0, relations, (ix.numel(),), generator=g)
    w = torch.rand(ix.numel(), generator=g) + 0.5 if weighted else None
    data = EdgeData(torch.arange(ix.numel()), w, None, rel, relations)
    _, got_ix, vals, _ = normalized_data(ip, ix, "relation-mean", data)
    assert torch.equal(got_ix, ix)  # no loop added or removed
    rows = row_ids(ip)
    for e in range(ix.numel()):
        same = (rows == rows[e]) & (rel == rel[e])
        want = (w[e] / w[same].sum()) if weighted else 1.0 / int(same.sum())
        assert abs(float(vals[e]) - float(want)) <= 1e-6 * abs(float(want)), e


def test_relation_mean_counts_only_the_row_relation_pairs_present():
    """A million rows and 100,000 relations: a table of every (row, relation) would be 800 GB; the few
    entries' sums are what is counted."""
    from fullgraph.ops.edge_data import EdgeData

    n = 1_000_000
    ip = torch.zeros(n + 1, dtype=torch.int64)
    ip[-3:] = torch.tensor([2, 4, 5])  # rows n-3, n-2, n-1 hold 2, 2 and 1 entries
    ix = torch.tensor([0, 1, 0, 1, 7])
    rel = torch.tensor([99_999, 99_999, 5, 6, 5])
    _, _, vals, _ = normalized_data(ip, ix, "relation-mean", EdgeData(torch.arange(5), None, None, rel, 100_000))
    assert vals.tolist() == [0.5, 0.5, 1.0, 1.0, 1.0]
