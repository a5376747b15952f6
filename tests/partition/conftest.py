"""Fixtures of the partition tests: two small graphs, and a private cache folder for every test."""

import numpy as np
import pytest
import torch

from fullgraph.data.graph import Graph
from fullgraph.data.preprocess import dedupe, remove_self_loops
from fullgraph.data.synthetic import planted_partition


@pytest.fixture(scope="module")
def small():
    return planted_partition(num_nodes=300, num_classes=4, avg_degree=6, num_features=8, seed=1)


@pytest.fixture(scope="module")
def directed():
    """A directed graph with sparse features (in-degrees differ from out-degrees)."""
    rng = np.random.default_rng(5)
    n = 120
    src, dst = rng.integers(0, n, 600), rng.integers(0, n, 600)
    x = torch.from_numpy((rng.random((n, 10)) < 0.2).astype(np.float32)).to_sparse_csr()
    y = torch.from_numpy(rng.integers(0, 3, n))
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    for i, m in enumerate(masks):
        m[i::3] = True
    g = Graph.from_edges(src, dst, n, x=x, y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2],
                         name="directed")
    return remove_self_loops(dedupe(g))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Never touch the user's real cache."""
    monkeypatch.setenv("FULLGRAPH_CACHE", str(tmp_path / "cache-root"))
