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
    comm.stage, comm.group = False, "world"
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


def test_ranks_sharing_a_gpu_move_host_copies_and_put_back_what_arrives(monkeypatch):
    """Staged (``Comm.stage``: GPU ranks over gloo, which moves host memory only), a send travels as a
    host copy, a receive lands in a host buffer that is copied into the tensor when the transfer is
    waited on, and a collective works on a host copy whose result is copied back. Forced here on the
    CPU, where the copies are still new tensors: dropping a copy-back leaves a tensor unchanged."""
    moved = []

    def isend(t, peer, group, tag):
        moved.append(t)
        return _Done()

    def irecv(t, peer, group, tag):
        moved.append(t)
        t.fill_(7.0)  # what the peer sent
        return _Done()

    monkeypatch.setattr(context.dist, "isend", isend)
    monkeypatch.setattr(context.dist, "irecv", irecv)
    monkeypatch.setattr(context.dist, "all_reduce", lambda t, op=None, group=None: moved.append(t) or t.add_(1.0))
    monkeypatch.setattr(context.dist, "broadcast", lambda t, src, group, async_op=False: (
        moved.append(t), t.fill_(5.0), _Done() if async_op else None)[-1])
    comm = _comm(0, 2)
    comm.stage = True
    x, into = torch.arange(4.0), torch.zeros(4)
    pending = comm.post([(x, 1, 3)], [(into, 1, 3)], "pipe/fwd")
    assert moved[0] is not x and torch.equal(moved[0], x) and moved[1] is not into
    assert torch.equal(into, torch.zeros(4))  # not before the wait
    pending.wait()
    assert torch.equal(into, torch.full((4,), 7.0))
    rows = comm.all_to_all_rows(torch.arange(6.0).view(3, 2), [1, 2], [1, 2], "halo/fwd")  # through the lanes
    assert torch.equal(rows[0], torch.tensor([0.0, 1.0])) and torch.equal(rows[1:], torch.full((2, 2), 7.0))
    t = torch.zeros(3)
    assert comm.all_reduce_(t, "grad/allreduce") is t and torch.equal(t, torch.ones(3)) and moved[-1] is not t
    comm.broadcast(t, 1, "spmm/bcast")
    assert torch.equal(t, torch.full((3,), 5.0)) and moved[-1] is not t
    u = torch.zeros(2)
    comm.broadcast(u, 1, "spmm/bcast", async_op=True).wait()
    assert torch.equal(u, torch.full((2,), 5.0))
