"""Every layout's builder reads and checks its inputs before it opens a process group (issue 41 §1).

A rank given the wrong folder must say so at once, in one line, rather than first join a process
group (where its peers would wait on it until the timeout) and fail after. Each builder runs here as
rank 0 of 2 with ``Comm`` replaced by a tripwire: a builder that opened the group before refusing its
input trips it, and the test fails with "opened a process group".
"""

import pytest
import torch

import fullgraph.comm.context as context
from fullgraph.config import TrainConfig
from fullgraph.data.synthetic import planted_partition
from fullgraph.errors import InputError
from fullgraph.parallel.registry import build_engine
from fullgraph.partition import PartitionBook, save_partition


class Tripwire:
    def __init__(self, *args, **kwargs):
        raise AssertionError("opened a process group before checking the inputs")


@pytest.fixture
def rank_0_of_2(monkeypatch):
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "2")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(context, "Comm", Tripwire)


@pytest.fixture(scope="module")
def three_parts(tmp_path_factory):
    """A partition into three parts: wrong for every two-process layout."""
    graph = planted_partition(num_nodes=60, num_classes=3, num_features=8, avg_degree=4.0, seed=0)
    out = tmp_path_factory.mktemp("parts") / "p3"
    save_partition(PartitionBook.build(graph, torch.arange(graph.num_nodes) % 3), graph, out)
    return str(out)


@pytest.mark.parametrize("options", [dict(parallel="graph"), dict(parallel="pipeline", chunk_file="chunks.npy"),
                                     dict(parallel="spmm-1d"), dict(parallel="tensor")],
                         ids=lambda o: o["parallel"])
def test_a_wrong_partition_is_refused_before_any_process_group(rank_0_of_2, three_parts, options):
    cfg = TrainConfig.of(nprocs=2, partition_dir=three_parts, **options)
    with pytest.raises(InputError):
        build_engine(cfg, "gcn")


def test_the_tripwire_trips(rank_0_of_2):
    """The check itself: a builder that opens the group first is caught."""
    from fullgraph.parallel.engine import world_comm

    with pytest.raises(AssertionError, match="opened a process group"):
        world_comm(TrainConfig.of(parallel="graph", nprocs=2), "test")
