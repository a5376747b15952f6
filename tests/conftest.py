"""Shared test fixtures."""

import os
from pathlib import Path

import pytest

# The suite's equalities (and its bit-for-bit checks) are the CPU's on every machine: --device auto
# means the CPU here, and tests/test_gpu.py names CUDA where it wants it. Ranks inherit this.
os.environ.setdefault("FULLGRAPH_DEVICE", "cpu")
# MKL's dense and sparse kernels give the same bits for the same inputs in every process only in its
# conditional-numerical-reproducibility mode; the kill-and-resume and by-path/by-module checks compare
# two processes bit for bit (read when MKL starts: set before torch is imported, inherited by the ranks)
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")


@pytest.fixture(autouse=True)
def _same_threads():
    """Each test starts at the process's own thread count: a run in this process with ``--threads``
    sets torch's count for the whole process, and a later in-process run compared bit for bit with
    one in a fresh process (the kill-and-resume tests) would otherwise compute with another count,
    whose dense products round differently."""
    import torch

    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The offline benchmark graphs: ``$FULLGRAPH_DATA``, else ``<repo>/../shared/data``.

    Missing data fails the tests that need it (never skips): a silent skip would hide that the real
    graphs were never checked.
    """
    root = Path(os.environ.get("FULLGRAPH_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    if not root.is_dir():
        pytest.fail(
            f"shared benchmark data not found at {root}; "
            f"set FULLGRAPH_DATA to the folder holding cora/, citeseer/, ..."
        )
    return root


@pytest.fixture(scope="session")
def cora(shared_data):
    """Cora as ``fullgraph train --dataset cora`` loads it (row-normalized features); read-only."""
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    return load_graph(TrainConfig.of(dataset="cora", root=str(shared_data)))


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` run only where torch sees a CUDA GPU; elsewhere they are skipped, with
    the reason in the summary (CI has no GPU; sessions lent one run them)."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


EDGE_FEATURES, RELATIONS = 3, 3


@pytest.fixture(scope="session")
def cora_edges(cora):
    """Cora whose edges carry data drawn once: weights in [0.1, 1.1), 3 features and 3 relation types
    per edge, each a function of the edge's (src, dst) through a seeded generator (and the same for an
    edge and its reverse, as a symmetrized graph's loader gives them); read-only."""
    import torch

    from fullgraph.data.graph import Graph

    src, dst = cora.edges()
    lo, hi = torch.minimum(src, dst), torch.maximum(src, dst)
    g = torch.Generator().manual_seed(51)
    n = cora.num_nodes
    table_w = torch.rand(n, generator=g)
    table_a = torch.randn(n, EDGE_FEATURES, generator=g)
    weight = (table_w[lo] * 0.5 + table_w[hi] * 0.5) + 0.1
    attr = table_a[lo] - table_a[hi].flip(1)
    etype = (lo + 2 * hi) % RELATIONS
    return Graph(indptr=cora.indptr, indices=cora.indices, x=cora.x, y=cora.y, train_mask=cora.train_mask,
                 val_mask=cora.val_mask, test_mask=cora.test_mask, name="cora-edges", num_classes=cora.num_classes,
                 edge_weight=weight.float(), edge_attr=attr.float(), edge_type=etype, num_relations=RELATIONS)
