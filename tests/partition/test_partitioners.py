"""The partitioners: METIS (whole, weighted, on a sample of the edges), random and contiguous splits, and
their refusals."""

import warnings

import numpy as np
import pymetis
import pytest
import torch

from fullgraph.data.synthetic import planted_partition
from fullgraph.errors import InputError
from fullgraph.partition import METHODS, PartitionBook, cached_partition, partition_nodes


# ------------------------------------------------------------------------------ partitioners
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("parts", [1, 2, 3, 5])
def test_partitioners_are_seeded_balanced_and_cover_every_node(small, method, parts):
    n = small.num_nodes
    a = partition_nodes(small, parts, method, seed=7)
    b = partition_nodes(small, parts, method, seed=7)
    assert torch.equal(a, b)
    assert a.dtype == torch.int64 and a.shape == (n,)
    assert int(a.min()) >= 0 and int(a.max()) < parts
    sizes = torch.bincount(a, minlength=parts)
    assert bool((sizes > 0).all())
    if method == "metis":
        assert int(sizes.max()) <= 1.1 * -(-n // parts)  # METIS: 3% tolerance, a little slack on 300 nodes
    elif method == "fennel":
        from fullgraph.partition.fennel import SLACK

        assert int(sizes.max()) <= SLACK * n / parts + 1  # its capacity: the mean and 5%
    else:
        assert int(sizes.max()) - int(sizes.min()) <= 1
    if method == "contiguous":
        assert bool((a.diff() >= 0).all())
    if method in ("random", "permuted") and parts > 1:
        assert not torch.equal(a, partition_nodes(small, parts, method, seed=8))


def test_metis_degree_weight_balances_degree(small):
    part = partition_nodes(small, 4, "metis", weight="degree")
    load = torch.zeros(4, dtype=torch.int64).index_add_(0, part, small.in_degrees() + 1)
    assert bool((torch.bincount(part, minlength=4) > 0).all())
    assert float(load.max()) <= 1.1 * float(load.sum()) / 4


def test_metis_memory_balances_the_estimated_rank_memory_better_than_nodes_or_degree():
    """On a power-law graph, balancing node counts leaves the hubs' part with most edges and balancing
    degrees leaves the leaves' part with most rows; metis-memory weighs each node as its row and its
    edges cost the model, then charges edges the halo rows they bring, so its largest part estimate
    is the closest to the mean. A heavier model per row weighs rows more against edges."""
    from fullgraph.data.synthetic import rmat
    from fullgraph.partition.balance import memory_node_weights, metis_by_memory, part_costs
    from fullgraph.plan import variable_bytes

    g = rmat(12, 40_000, num_features=32)
    opts = dict(model="sage", layers=3, hidden=128, heads=8, recompute=False, gcn_kernel="fused")

    def cost_of(**change):
        return lambda stats: variable_bytes(stats, opts | change)

    def spread(node_part):
        est, _ = part_costs(g, node_part, 4, cost_of())
        return max(est) / (sum(est) / 4)

    by_memory = spread(metis_by_memory(g, 4, 0, 1.0, cost_of()))
    by_nodes, by_degree = (spread(partition_nodes(g, 4, "metis", weight=w)) for w in ("nodes", "degree"))
    print(f"\nlargest / mean estimate, R-MAT 4096 nodes, P = 4: nodes {by_nodes:.3f}, degree {by_degree:.3f}, "
          f"memory {by_memory:.3f}")
    assert by_memory < 1.1 < min(by_nodes, by_degree)
    weights, c = memory_node_weights(g, cost_of())
    assert torch.equal(torch.from_numpy(weights), g.in_degrees() + c)
    assert memory_node_weights(g, cost_of(), halo_per_edge=0.05)[1] < c  # an edge that brings halo rows weighs more
    assert memory_node_weights(g, cost_of(hidden=16))[1] < c < memory_node_weights(g, cost_of(hidden=512))[1]


def test_metis_empty_part_is_an_input_error(small, monkeypatch):
    def lopsided(nparts, *args, **kw):
        return pymetis.GraphPartition(0, [0] * small.num_nodes)

    monkeypatch.setattr(pymetis, "part_graph", lopsided)
    with pytest.raises(InputError, match="METIS left 2 of 3 parts empty"):
        partition_nodes(small, 3, "metis")


def test_is_standard_structure_is_exact(small, directed):
    from fullgraph.data.preprocess import is_standard_structure, symmetrize

    assert is_standard_structure(small.indptr, small.indices)
    assert not is_standard_structure(directed.indptr, directed.indices)  # not symmetric
    assert is_standard_structure(*(lambda g: (g.indptr, g.indices))(symmetrize(directed)))
    ip = torch.tensor([0, 2, 3, 4])
    cases = {
        "symmetric": (ip, torch.tensor([1, 2, 0, 0]), True),
        "reversed row": (ip, torch.tensor([2, 1, 0, 0]), False),
        "repeat": (torch.tensor([0, 2, 4, 4]), torch.tensor([1, 1, 0, 0]), False),
        "self loop": (torch.tensor([0, 1, 2, 3]), torch.tensor([0, 2, 1]), False),
        # same degrees in and out, yet not symmetric: 0->1, 1->2, 2->0
        "cycle": (torch.tensor([0, 1, 2, 3]), torch.tensor([2, 0, 1]), False),
    }
    for case, (indptr, indices, want) in cases.items():
        assert is_standard_structure(indptr, indices) == want, case


def test_metis_reads_a_standard_graph_as_it_is(small, directed, monkeypatch):
    from fullgraph.data.preprocess import symmetrize
    from fullgraph.partition.partitioners import metis_csr

    seen = []
    real = pymetis.part_graph

    def spy(nparts, adjacency=None, **kw):
        seen.append((adjacency.adj_starts, adjacency.adjacent))
        return real(nparts, adjacency, warn_on_copies=True, **kw)

    monkeypatch.setattr(pymetis, "part_graph", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BytesWarning)  # pymetis's word for "copied an array"
        checked = metis_csr(small.indptr, small.indices, 3, seed=1)
    xadj, adjncy = seen[-1]
    if np.dtype(pymetis.zero_copy_dtype()) == np.int64:  # the graph's own memory, no copy
        assert np.shares_memory(adjncy, small.indices.numpy()) and np.shares_memory(xadj, small.indptr.numpy())
    told = metis_csr(small.indptr, small.indices, 3, seed=1, simple=True)
    rebuilt = metis_csr(small.indptr, small.indices, 3, seed=1, simple=False)  # through A + Aᵀ with SciPy
    assert torch.equal(checked, told) and torch.equal(checked, rebuilt)
    # a directed graph is symmetrized first: the same parts as for its symmetric version
    sym = symmetrize(directed)
    assert torch.equal(metis_csr(directed.indptr, directed.indices, 3, seed=2),
                       metis_csr(sym.indptr, sym.indices, 3, seed=2))


def test_bad_partition_inputs(small):
    n = small.num_nodes
    with pytest.raises(InputError, match=rf"parts={n + 1} for a graph of {n} nodes"):
        partition_nodes(small, n + 1, "random")
    with pytest.raises(InputError, match="at least 1 part.*parts=0"):
        partition_nodes(small, 0)
    with pytest.raises(InputError, match="parts=-2"):
        partition_nodes(small, -2, "contiguous")
    with pytest.raises(InputError, match="unknown partition method 'kahip'.*metis, random, contiguous, permuted"):
        partition_nodes(small, 2, "kahip")
    with pytest.raises(InputError, match="unknown partition weight"):
        partition_nodes(small, 2, weight="edges")
    assert torch.equal(partition_nodes(small, n, "contiguous"), torch.arange(n))


def test_book_rejects_bad_node_part_and_graphs(small):
    n = small.num_nodes
    with pytest.raises(InputError, match="empty: part 1"):
        PartitionBook.build(small, torch.tensor([0] * (n - 1) + [2]))
    with pytest.raises(InputError, match=rf"shape \({n},\)"):
        PartitionBook.build(small, torch.zeros(n - 1, dtype=torch.int64))
    with pytest.raises(InputError, match=r"part ids in \[0, 2\)"):
        PartitionBook.build(small, torch.full((n,), 2), num_parts=2)
    loops = small.with_structure(torch.arange(n + 1), torch.arange(n))
    with pytest.raises(InputError, match=f"without self loops \\(got {n}"):
        PartitionBook.build(loops, torch.zeros(n, dtype=torch.int64))


def test_metis_cuts_far_fewer_halo_nodes_than_random_on_cora(cora):
    alphas = {}
    for parts in (2, 4, 8):
        for method in ("metis", "random"):
            alphas[method, parts] = PartitionBook.build(cora, partition_nodes(cora, parts, method)).replication_factor
    print("\nreplication factor on Cora: " + ", ".join(f"{m} P={p}: {a:.3f}" for (m, p), a in alphas.items()))
    for parts in (2, 4, 8):
        assert alphas["metis", parts] < 0.25 * alphas["random", parts]
        assert alphas["metis", parts] < 0.5


# ------------------------------------------------------------------------------ METIS on a sample of the edges
def _edge_set(indptr, indices) -> set:
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return set(zip(rows.tolist(), np.asarray(indices).tolist()))


def test_sampled_edges_are_a_symmetric_seeded_subset_of_the_right_size(monkeypatch):
    from fullgraph.partition import partitioners

    g = planted_partition(num_nodes=3000, num_classes=4, avg_degree=20, num_features=4, seed=3)
    ip, ix = g.indptr.numpy(), g.indices.numpy()
    full = _edge_set(ip, ix)
    monkeypatch.setattr(partitioners, "_SAMPLE_BLOCK", 997)  # many blocks, cut inside rows' runs
    for q in (0.1, 0.5):
        sp_ptr, sp_idx = partitioners.sample_edges(ip, ix, q, seed=7)
        got = _edge_set(sp_ptr, sp_idx)
        assert got <= full
        assert all((v, u) in got for u, v in got)  # both directions or neither
        assert all(np.all(np.diff(sp_idx[sp_ptr[i]:sp_ptr[i + 1]]) > 0) for i in range(0, g.num_nodes, 97))
        # binomial: |kept| ~ q E with sd sqrt(q (1 - q) E / 2) over the E / 2 undirected edges
        sd = np.sqrt(q * (1 - q) * len(full) / 2) * 2
        assert abs(len(got) - q * len(full)) < 5 * sd, (q, len(got), len(full))
        again = partitioners.sample_edges(ip, ix, q, seed=7)
        assert np.array_equal(again[0], sp_ptr) and np.array_equal(again[1], sp_idx)
        other = _edge_set(*partitioners.sample_edges(ip, ix, q, seed=8))
        assert other != got
    monkeypatch.setattr(partitioners, "_SAMPLE_BLOCK", 1 << 22)
    one_block = partitioners.sample_edges(ip, ix, 0.5, seed=7)
    assert _edge_set(*one_block) == _edge_set(*partitioners.sample_edges(ip, ix, 0.5, seed=7))
    assert _edge_set(*partitioners.sample_edges(ip, ix, 1.0)) == full


def test_metis_on_a_sample_keeps_the_communities_and_is_cached_apart(tmp_path):
    g = planted_partition(num_nodes=4000, num_classes=4, avg_degree=20, homophily=0.9, num_features=4, seed=3)
    alpha = {q: PartitionBook.build(g, partition_nodes(g, 4, "metis", sample=q)).replication_factor
             for q in (1.0, 0.3)}
    rand = PartitionBook.build(g, partition_nodes(g, 4, "random")).replication_factor
    print(f"\nreplication factor, planted 4000 nodes: metis {alpha[1.0]:.3f}, metis on 30% of the edges "
          f"{alpha[0.3]:.3f}, random {rand:.3f}")
    assert alpha[0.3] < 1.25 * alpha[1.0] and alpha[0.3] < 0.6 * rand
    a = cached_partition(g, 4, "metis", cache_dir=tmp_path, sample=0.3)
    b = cached_partition(g, 4, "metis", cache_dir=tmp_path)
    assert len(list(tmp_path.iterdir())) == 2
    assert torch.equal(a, partition_nodes(g, 4, "metis", sample=0.3)) and torch.equal(b, partition_nodes(g, 4, "metis"))
    with pytest.raises(InputError, match=r"sample rate in \(0, 1\]"):
        partition_nodes(g, 4, "metis", sample=0.0)


def test_metis_that_cannot_fit_is_refused_with_the_sample_that_would(small, monkeypatch):
    import fullgraph.memory
    from fullgraph.partition.partitioners import METIS_BYTES_PER_ENTRY

    entries = small.num_edges
    monkeypatch.setattr(fullgraph.memory, "available_memory_bytes", lambda: entries * 8 * METIS_BYTES_PER_ENTRY // 2)
    with pytest.raises(InputError, match=r"^expected METIS .* fit .*would fit: --metis-sample 0\.45 ") as err:
        partition_nodes(small, 2, "metis")
    assert "\n" not in str(err.value)
    partition_nodes(small, 2, "metis", sample=0.45)  # what the message proposes does fit
