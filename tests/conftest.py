"""Shared test fixtures."""

import os
from pathlib import Path

import pytest


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

    return load_graph(TrainConfig(dataset="cora", root=str(shared_data)))
