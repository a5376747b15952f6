"""gloo's point-to-point traffic goes over two lanes, one per direction of every pair of ranks, so that
two ranks sending to each other at once use two connections (one gloo connection carries the two
directions mostly in turn). The multi-process tests prove the transfers arrive; this checks the lanes."""

import torch

import fullgraph.comm.context as context
from fullgraph.comm.context import EXCHANGE_TAG, Comm, DistEnv
from fullgraph.comm.ledger import Ledger


def _comm(rank: int, world: int) -> Comm:
    comm = object.__new__(Comm)
    comm.env = DistEnv(rank=rank, world_size=world, local_rank=0, local_world_size=world)
    comm.rank, comm.world_size, comm.ranks, comm.timeout_s = rank, world, list(range(world)), 5.0
    comm.lanes, comm.ledger = ("up", "down"), Ledger()  # lane 0: lower rank to higher
    return comm


class _Done:
    def wait(self, timeout=None):
        return True


def test_each_direction_of_a_pair_has_its_own_lane(monkeypatch):
    calls = []

    def op(kind):
        return lambda t, peer, group, tag: calls.append((kind, peer, group)) or _Done()

    monkeypatch.setattr(context.dist, "isend", op("send"))
    monkeypatch.setattr(context.dist, "irecv", op("recv"))
    comm = _comm(1, 3)
    x = torch.arange(12.0).view(6, 2)
    got = comm.all_to_all_rows(x, [1, 2, 3], [2, 2, 0], "halo/fwd")
    # rank 1 sends to rank 2 (higher) on the way up and to rank 0 on the way down, and receives from
    # rank 0 on the way up; nothing from itself, nor from rank 2, which sends it no rows
    assert sorted(calls) == [("recv", 0, "up"), ("send", 0, "down"), ("send", 2, "up")]
    assert got.shape == (4, 2) and torch.equal(got[2:], x[1:3])  # its own rows, kept in place
    assert comm.ledger.bytes["halo/fwd"] == (1 + 3) * 2 * 4  # the rows sent to others, not the kept ones
    calls.clear()
    comm.post([(torch.zeros(3), 0, 7)], [(torch.zeros(3), 2, 7)], "pipe/fwd")
    assert calls == [("send", 0, "down"), ("recv", 2, "down")]
    assert EXCHANGE_TAG > 2 * 10_000  # above the pipeline's tags (2·chunk + i)
