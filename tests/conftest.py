"""Shared test fixtures."""

import os
from pathlib import Path

import pytest

# The suite's equalities (and its bit-for-bit checks) are the CPU's on every machine: --device auto
# means the CPU here, and tests/test_gpu.py names CUDA where it wants it. Ranks inherit this.
os.environ.setdefault("FULLGRAPH_DEVICE", "cpu")


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
