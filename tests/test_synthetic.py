"""Synthetic generators: deterministic by seed, the sizes asked for, valid graphs."""

import torch

from fullgraph.data.preprocess import to_scipy

from fullgraph.data.synthetic import planted_partition, rmat


def same(a, b):
    return all(torch.equal(getattr(a, f), getattr(b, f))
               for f in ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask"))


def test_planted_partition_is_deterministic_and_homophilous():
    a, b, c = planted_partition(seed=5), planted_partition(seed=5), planted_partition(seed=6)
    assert same(a, b) and not same(a, c)
    src, dst = a.edges()
    same_class = (a.y[src] == a.y[dst]).float().mean().item()
    assert 0.65 < same_class < 0.85  # homophily 0.7 plus chance agreement of the random partners
    assert a.num_nodes == 5000 and abs(a.num_edges / a.num_nodes - 10) < 1.0


def test_rmat_sizes_and_power_law():
    g = rmat(14, 100_000, num_features=8, seed=1)
    assert same(g, rmat(14, 100_000, num_features=8, seed=1))
    assert g.num_nodes == 2**14
    assert 150_000 < g.num_edges <= 200_000  # symmetrized, minus duplicates and self loops
    deg = g.in_degrees().float()
    assert deg.max() > 20 * deg.mean()  # heavy tail
    a = to_scipy(g.indptr, g.indices)
    assert (a != a.T).nnz == 0
