"""The process group: who we are (``DistEnv``) and collectives that go through the ledger (``Comm``).

Ranks find each other through the torchrun environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), whether torchrun or fullgraph's own
launcher (``fullgraph.comm.launch``) started them. Backend: NCCL when every local rank has a GPU,
gloo otherwise.

Nothing may hang: reaching the rendezvous store takes at most ``connect_timeout_s`` (60 s, or
``FULLGRAPH_CONNECT_TIMEOUT``), set-up then waits at most ``setup_timeout_s`` (rank 0 may be
partitioning a large graph), and every training collective runs on a group whose timeout is
``timeout_s``. Nothing waits silently either: a rank still waiting after a few seconds says on stderr
what for. A process left with RANK and WORLD_SIZE from a torchrun shell thus hears, within seconds,
that it waits for a rank 0 nobody started, and gives up with one line (``RendezvousError``).
"""

from __future__ import annotations

import gc
import math
import socket
import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

import fullgraph.environ as environ
from fullgraph.comm.ledger import Ledger
from fullgraph.comm.pending import Pending, host_buffer, host_copy
from fullgraph.errors import InputError

__all__ = ["DistEnv", "Comm", "Pending", "RendezvousError", "broadcast_object", "init_world", "stale_env_hint"]

EXCHANGE_TAG = 1 << 24
"""The tag of an all-to-all's transfers on gloo's lanes, above any a pipeline's chunk transfer uses."""

CONNECT_TIMEOUT_S = 60.0
"""How long a rank tries to reach the rendezvous store, and rank 0 (when it hosts it) waits for every
rank to connect, unless ``FULLGRAPH_CONNECT_TIMEOUT`` says otherwise. Ranks start together, so this
is short; the set-up timeout that follows is long, for rank 0's partitioning."""

NOTICE_S = 5.0
"""After this many seconds of waiting for its peers, a rank says on stderr what it waits for."""


class RendezvousError(InputError):
    """The ranks could not meet: the torchrun environment is incomplete, or names a rank 0 that is not
    there. Most often RANK and WORLD_SIZE were left in a shell, so it is input (exit status 2)."""


def stale_env_hint() -> str:
    """How to fix an environment that makes this process a rank, for messages about it; empty in a
    rank of fullgraph's launcher, whose environment the launcher wrote."""
    if environ.has("FULLGRAPH_ERROR_FILE"):
        return ""
    return (f"RANK and WORLD_SIZE are set (RANK={environ.get('RANK')}, WORLD_SIZE={environ.get('WORLD_SIZE')}), "
            f"as torchrun sets them: if this process was not started by torchrun, unset them "
            f"('unset RANK WORLD_SIZE')")


def _hinted(message: str, otherwise: str = "") -> str:
    """``message``, then the stale-environment hint and what to check if the environment is right."""
    hint = stale_env_hint()
    if not hint:
        return message + (f"; {otherwise}" if otherwise else "")
    return f"{message}. {hint}" + (f"; if it was, {otherwise}" if otherwise else "")


@contextmanager
def _notice(line, first_s: float = NOTICE_S):
    """While the body waits: after ``first_s`` seconds, then after twice as long each time, print
    ``line(seconds so far)`` on stderr, so that no wait for other processes is silent."""
    done = threading.Event()
    t0 = time.monotonic()

    def speak():
        wait = first_s
        while not done.wait(wait):
            print(f"fullgraph: {line(time.monotonic() - t0)}", file=sys.stderr, flush=True)
            wait *= 2

    threading.Thread(target=speak, name="fullgraph-notice", daemon=True).start()
    try:
        yield
    finally:
        done.set()


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int

    @classmethod
    def from_env(cls) -> "DistEnv | None":
        """The torchrun environment, or ``None`` when this process was not started as a rank."""
        if not environ.has("WORLD_SIZE") or not environ.has("RANK"):
            return None
        names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
        try:
            rank, ws = int(environ.get("RANK")), int(environ.get("WORLD_SIZE"))
            env = cls(rank=rank, world_size=ws, local_rank=int(environ.get("LOCAL_RANK", str(rank))),
                      local_world_size=int(environ.get("LOCAL_WORLD_SIZE", str(ws))))
        except ValueError:
            got = ", ".join(f"{n}={environ.get(n)!r}" for n in names if environ.has(n))
            raise RendezvousError(_hinted(f"expected whole numbers in {', '.join(names)} (got {got})")) from None
        if not 0 <= rank < ws:
            raise RendezvousError(_hinted(f"expected 0 <= RANK < WORLD_SIZE (got RANK={rank}, WORLD_SIZE={ws})"))
        return env


def _connect_seconds() -> float:
    """Seconds to reach the rendezvous store: ``FULLGRAPH_CONNECT_TIMEOUT``, else ``CONNECT_TIMEOUT_S``."""
    value = environ.get("FULLGRAPH_CONNECT_TIMEOUT")
    try:
        seconds = CONNECT_TIMEOUT_S if value is None else float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise RendezvousError(f"expected FULLGRAPH_CONNECT_TIMEOUT to be seconds > 0 (got {value!r})")
    return seconds


def _master_address() -> tuple[str, int]:
    """MASTER_ADDR and MASTER_PORT, checked: torch's own error for a missing one is a traceback that
    does not say that RANK and WORLD_SIZE are what made this process look for them."""
    addr, port = environ.get("MASTER_ADDR"), environ.get("MASTER_PORT")
    if not addr or not port:
        missing = " and ".join(n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if not v)
        raise RendezvousError(_hinted(f"expected MASTER_ADDR and MASTER_PORT (where the ranks meet) with RANK and "
                                      f"WORLD_SIZE (got no {missing})", "set MASTER_ADDR and MASTER_PORT"))
    if not port.isdigit() or not 0 < int(port) < 2**16:
        raise RendezvousError(f"expected MASTER_PORT to be a port number (got {port!r})")
    return addr, int(port)


def _reach(addr: str, port: int, seconds: float) -> None:
    """Wait until something listens at the store's address, trying with a plain socket: TCPStore's own
    retries print a C++ stack trace at every failed try, and a rank 0 that never comes deserves one
    line, not pages."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((addr, port), timeout=min(2.0, seconds)).close()
            return
        except OSError as e:  # refused, unreachable, unknown host: rank 0 may not be up yet
            last = e.strerror or str(e)
        if time.monotonic() >= deadline:
            raise RendezvousError(_hinted(
                f"no rank 0 answered at {addr}:{port} (MASTER_ADDR:MASTER_PORT) within {seconds:g} s ({last})",
                "check that rank 0 runs and that MASTER_ADDR and MASTER_PORT reach it "
                "(FULLGRAPH_CONNECT_TIMEOUT waits longer)"))
        time.sleep(0.2)


def _waiting(env: DistEnv, where: str, hosts: bool, seconds: float):
    """The notice of a rank that waits to meet the others."""
    them = (f"ranks 1 to {env.world_size - 1}" if env.world_size > 2 else "rank 1") + f" to connect to {where}"
    what = f"waiting for {them}" if hosts else f"waiting for rank 0 at {where}"
    return lambda s: _hinted(f"rank {env.rank} of {env.world_size}: {what} ({s:.0f} s so far; giving up after "
                             f"{seconds:g} s)")


def _store(env: DistEnv, connect_s: float, setup_s: float) -> dist.Store:
    """The store the ranks meet at, reached within ``connect_s``, then given ``setup_s`` for what
    follows. Rank 0 hosts it (torch's env:// rendezvous), unless torchrun's agent does
    (TORCHELASTIC_USE_AGENT_STORE, as fullgraph's launcher sets too)."""
    addr, port = _master_address()
    agent = environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    hosts, where = env.rank == 0 and not agent, f"{addr}:{port}"
    with _notice(_waiting(env, where, hosts, connect_s), min(NOTICE_S, connect_s / 2)):
        if not hosts:
            _reach(addr, port, connect_s)
        try:
            store = dist.TCPStore(addr, port, env.world_size, is_master=hosts, multi_tenant=hosts,
                                  timeout=timedelta(seconds=connect_s))
        except dist.DistError as e:
            problem = (f"not every rank connected to {where} within {connect_s:g} s" if "waiting for clients" in str(e)
                       else f"could not {'host' if hosts else 'find'} the rendezvous store at {where}")
            raise RendezvousError(_hinted(f"{problem} ({e})", "check MASTER_ADDR, MASTER_PORT and that every rank "
                                                              "starts")) from None
    store.set_timeout(timedelta(seconds=setup_s))
    restart = environ.get("TORCHELASTIC_RESTART_COUNT")
    if restart is not None and agent:
        # torchrun --max-restarts: the agent's store outlives a failed attempt, keys and all, so a
        # restarted rank would find the dead ranks' addresses there; each attempt gets its own keys
        return dist.PrefixStore(f"fullgraph/attempt-{restart}/", store)
    return dist.PrefixStore("default_pg", store)  # as env:// names its keys


def init_world(env: DistEnv, device: str = "auto", setup_timeout_s: float = 1800.0,
               connect_timeout_s: float | None = None) -> torch.device:
    """Join the world process group (once per process) and return this rank's device.

    With a GPU per local rank the group is made ``cpu:gloo,cuda:nccl``: CUDA tensors travel over NCCL,
    and the CPU objects of set-up (``broadcast_object_list`` of the launch flags, checkpoint metadata)
    over gloo. Whoever calls this first (the CLI, before it shares the partition; or ``Comm``), the
    group is the same, so NCCL is never left out by an earlier gloo-only set-up. Reaching the store
    has its own bound, ``connect_timeout_s`` (default: ``FULLGRAPH_CONNECT_TIMEOUT``, else 60 s): a
    rank 0 that never comes is reported then, not after ``setup_timeout_s``."""
    from fullgraph.device import resolve_device, shares_gpu

    dev = resolve_device(device, env.local_rank, env.local_world_size)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if not dist.is_initialized():  # NCCL takes one rank per GPU: ranks that share one use gloo
        backend = "cpu:gloo,cuda:nccl" if dev.type == "cuda" and not shares_gpu(dev, env.local_world_size) else "gloo"
        store = _store(env, min(setup_timeout_s, connect_timeout_s or _connect_seconds()), setup_timeout_s)
        with _notice(lambda s: f"rank {env.rank} of {env.world_size}: waiting for the other ranks to join the "
                               f"process group ({s:.0f} s so far; giving up after {setup_timeout_s:g} s)"):
            dist.init_process_group(backend, store=store, rank=env.rank, world_size=env.world_size,
                                    timeout=timedelta(seconds=setup_timeout_s))
    return dev


def broadcast_object(obj, src: int = 0):
    """A picklable set-up object from rank ``src`` to every rank of the world group (launch flags,
    before a ``Comm`` exists). It is no training traffic, so no ledger counts it. The others may wait
    long (rank ``src`` may be partitioning a large graph first): they say so after a few seconds."""
    box = [obj]
    rank, size = dist.get_rank(), dist.get_world_size()
    with nullcontext() if rank == src else _notice(
            lambda s: f"rank {rank} of {size}: waiting for rank {src} to finish its set-up (partitioning a large "
                      f"graph can take minutes; {s:.0f} s so far)", 2 * NOTICE_S):
        dist.broadcast_object_list(box, src=src)
    return box[0]


class Comm:
    """Collectives of one process group, each recorded in ``ledger`` under a category."""

    def __init__(self, env: DistEnv, *, timeout_s: float = 60.0, setup_timeout_s: float = 1800.0,
                 device: str = "auto"):
        self.env = env
        self.rank, self.world_size = env.rank, env.world_size
        self.device = init_world(env, device, setup_timeout_s)
        self.backend = "nccl" if self.device.type == "cuda" and "nccl" in str(dist.get_backend()) else "gloo"
        self.stage = self.device.type == "cuda" and self.backend == "gloo"  # ranks sharing a GPU: see comm.pending
        self.timeout_s = timeout_s
        self.ranks = list(range(env.world_size))
        self.group = self.world_group = dist.new_group(self.ranks, timeout=timedelta(seconds=timeout_s))
        self.ledger, self.is_view = Ledger(), False
        self.family = [self]  # this Comm and its views (``split``): ``close`` lets go of all their groups
        # gloo carries both directions between two ranks on one connection, mostly one direction at a
        # time: two ranks swapping 24 MB each over a 1 Gbit/s link took 0.37 s, where the link (a plain
        # TCP socket) does it in 0.20 s. Point-to-point traffic therefore goes over two more groups
        # ("lanes"), each direction of a pair on a connection of its own; NCCL needs none.
        self.lanes = None
        if self.backend == "gloo" and env.world_size > 1:
            self.lanes = tuple(dist.new_group(self.ranks, timeout=timedelta(seconds=timeout_s)) for _ in range(2))

    def split(self, groups: list[list[int]]) -> "Comm":
        """A view of this process group restricted to the group (one of ``groups``, which partition
        the ranks) that holds this rank; it shares the ledger and the timeout. Every rank must call
        it with the same ``groups`` (``new_group`` is collective), once, at set-up."""
        mine = None
        for ranks in groups:
            g = dist.new_group(list(ranks), timeout=timedelta(seconds=self.timeout_s))
            if self.rank in ranks:
                mine = (g, list(ranks))
        if mine is None:
            raise ValueError(f"rank {self.rank} is in none of the groups {groups}")
        view = object.__new__(Comm)
        view.__dict__.update(self.__dict__)
        view.group, view.ranks = mine
        view.rank, view.world_size = mine[1].index(self.rank), len(mine[1])
        view.is_view = True
        self.family.append(view)
        return view

    # ------------------------------------------------------------------ point to point
    def post(self, sends: list[tuple[torch.Tensor, int, int]], recvs: list[tuple[torch.Tensor, int, int]],
             category: str) -> "Pending":
        """Start sends and receives of whole tensors, each ``(tensor, global peer rank, tag)`` (NCCL: as
        one ``batch_isend_irecv``; gloo: on the lanes); returns the handles to wait on. The bytes sent are recorded now, the
        time spent waiting when ``Pending.wait`` is called."""
        self.ledger.record(category, sum(t.numel() * t.element_size() for t, _, _ in sends))
        return self._start(sends, recvs, category)

    def _start(self, sends: list[tuple[torch.Tensor, int, int]], recvs: list[tuple[torch.Tensor, int, int]],
               category: str) -> Pending:
        """Start ``(tensor, global peer rank, tag)`` sends and receives. On gloo, lane 0 carries what a
        lower rank sends a higher one, lane 1 the other direction (see ``__init__``); staged (``stage``),
        they move host copies, and what arrives is put on the GPU when the ``Pending`` is waited on."""
        keep, back = [t for t, _, _ in sends + recvs], []
        if self.stage:
            sends = [(host_copy(t), peer, tag) for t, peer, tag in sends]
            back = [(host_buffer(t), t) for t, _, _ in recvs]
            recvs = [(host, peer, tag) for (host, _), (_, peer, tag) in zip(back, recvs)]
            keep += [t for t, _, _ in sends]
        if self.lanes is None:
            ops = [dist.P2POp(dist.isend, t, peer, self.world_group, tag) for t, peer, tag in sends]
            ops += [dist.P2POp(dist.irecv, t, peer, self.world_group, tag) for t, peer, tag in recvs]
            return Pending(dist.batch_isend_irecv(ops) if ops else [], keep, self, category)
        me = self.env.rank
        works = ([dist.isend(t, peer, group=self.lanes[me > peer], tag=tag) for t, peer, tag in sends]
                 + [dist.irecv(t, peer, group=self.lanes[peer > me], tag=tag) for t, peer, tag in recvs])
        return Pending(works, keep, self, category, back)

    def _swap(self, send: list[torch.Tensor], recv: list[torch.Tensor], category: str, nbytes: int) -> None:
        """``send[r]`` to rank r of the group into ``recv[r]`` (contiguous) from it, as point-to-point
        transfers on the lanes: gloo's all-to-all would run each pair's two directions mostly in turn."""
        recv[self.rank].copy_(send[self.rank])
        peers = [(r, g) for r, g in enumerate(self.ranks) if r != self.rank]
        sends = [(send[r].contiguous(), g, EXCHANGE_TAG) for r, g in peers if send[r].numel()]
        recvs = [(recv[r], g, EXCHANGE_TAG) for r, g in peers if recv[r].numel()]  # as many as the peer sends
        self.ledger.record(category, nbytes)
        self._start(sends, recvs, category).wait()

    # ------------------------------------------------------------------ collectives
    def all_to_all_rows(self, send: torch.Tensor, send_counts: list[int], recv_counts: list[int],
                        category: str) -> torch.Tensor:
        """Rows ``send`` split by destination (``send_counts``) to every rank; returns the rows
        received, grouped by source rank (``recv_counts``)."""
        send = send.contiguous()
        row = math.prod(send.shape[1:])
        out = send.new_empty((sum(recv_counts),) + tuple(send.shape[1:]))
        nbytes = (sum(send_counts) - send_counts[self.rank]) * row * send.element_size()
        if self.lanes is not None:
            self._swap(list(send.split(list(send_counts))), list(out.split(list(recv_counts))), category, nbytes)
            return out
        with self.ledger.timed(category, nbytes):
            dist.all_to_all_single(out, send, output_split_sizes=list(recv_counts),
                                   input_split_sizes=list(send_counts), group=self.group)
        return out

    def all_to_all(self, send: list[torch.Tensor], recv: list[torch.Tensor], category: str) -> None:
        """Tensor ``send[r]`` to rank r of the group, into ``recv[r]`` from it (any shapes: they travel
        flattened, as one ``all_to_all_single``). The tensor a rank keeps for itself is not counted."""
        nbytes = sum(t.numel() * t.element_size() for r, t in enumerate(send) if r != self.rank)
        if self.lanes is not None:
            into = [t if t.is_contiguous() else torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in recv]
            self._swap([t.reshape(-1) for t in send], [t.view(-1) for t in into], category, nbytes)
            for t, got in zip(recv, into):
                if got is not t:
                    t.copy_(got)
            return
        flat_in = torch.cat([t.reshape(-1) for t in send])
        flat_out = flat_in.new_empty(sum(t.numel() for t in recv))
        with self.ledger.timed(category, nbytes):
            dist.all_to_all_single(flat_out, flat_in, output_split_sizes=[t.numel() for t in recv],
                                   input_split_sizes=[t.numel() for t in send], group=self.group)
        for t, piece in zip(recv, torch.split(flat_out, [t.numel() for t in recv])):
            t.copy_(piece.view_as(t))

    def broadcast(self, t: torch.Tensor, root: int, category: str, *, async_op: bool = False) -> "Pending | None":
        """``t`` from global rank ``root`` to the group, in place. The root records the bytes once per
        receiver (what leaves it: the payload times the others in the group). With ``async_op`` the
        transfer is started and its ``Pending`` returned; waiting on it records the time."""
        nbytes = t.numel() * t.element_size() * (self.world_size - 1) if root == self.env.rank else 0
        moved = host_copy(t) if self.stage else t
        if async_op:
            self.ledger.record(category, nbytes)
            work = dist.broadcast(moved, src=root, group=self.group, async_op=True)
            return Pending([work], [t, moved], self, category, [(moved, t)] if moved is not t else ())
        with self.ledger.timed(category, nbytes):
            dist.broadcast(moved, src=root, group=self.group)
        if moved is not t:
            t.copy_(moved)
        return None

    def barrier(self, category: str = "meta/metrics") -> None:
        """Wait until every rank of the group gets here (a one-element all-reduce on this rank's
        device, which NCCL and gloo both run). It carries no data, so it is recorded as 0 bytes: the
        per-epoch byte counts stay what the layout moved, checkpoints or not."""
        with self.ledger.timed(category, 0):
            dist.all_reduce(torch.zeros(1, device="cpu" if self.stage else self.device), group=self.group)

    def all_reduce_(self, t: torch.Tensor, category: str) -> torch.Tensor:
        """Sum ``t`` over ranks, in place."""
        moved = host_copy(t) if self.stage else t
        with self.ledger.timed(category, t.numel() * t.element_size()):
            dist.all_reduce(moved, op=dist.ReduceOp.SUM, group=self.group)
        return t if moved is t else t.copy_(moved)

    def all_gather(self, t: torch.Tensor, category: str) -> list[torch.Tensor]:
        moved = host_copy(t) if self.stage else t.contiguous()
        out = [torch.empty_like(moved) for _ in range(self.world_size)]
        with self.ledger.timed(category, t.numel() * t.element_size() * (self.world_size - 1)):
            dist.all_gather(out, moved, group=self.group)
        return [o.to(t.device) for o in out] if self.stage else out

    def close(self) -> None:
        """Destroy the process groups and let go of them: gloo's threads are joined now, not in the
        interpreter's teardown, where one asks for a dying GIL and the rank ends in SIGABRT (pytorch#179291)."""
        if self.is_view:
            return
        if dist.is_initialized():
            dist.destroy_process_group()
        for comm in self.family:
            comm.group = comm.world_group = comm.lanes = None
        gc.collect()  # a group caught in a reference cycle goes now too
