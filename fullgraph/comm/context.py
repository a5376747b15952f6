"""The process group: who we are (``DistEnv``) and collectives that go through the ledger (``Comm``).

Ranks find each other through the torchrun environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), whether torchrun or fullgraph's own
launcher (``fullgraph.comm.launch``) started them. Backend: NCCL when every local rank has a GPU,
gloo otherwise.

Nothing may hang: set-up waits at most ``setup_timeout_s`` (rank 0 may be partitioning a large
graph), and every training collective runs on a group whose timeout is ``timeout_s``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from fullgraph.comm.ledger import Ledger

__all__ = ["DistEnv", "Comm"]


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int

    @classmethod
    def from_env(cls) -> "DistEnv | None":
        """The torchrun environment, or ``None`` when this process was not started as a rank."""
        if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
            return None
        ws = int(os.environ["WORLD_SIZE"])
        return cls(
            rank=int(os.environ["RANK"]),
            world_size=ws,
            local_rank=int(os.environ.get("LOCAL_RANK", os.environ["RANK"])),
            local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", ws)),
        )


class Comm:
    """Collectives of one process group, each recorded in ``ledger`` under a category."""

    def __init__(self, env: DistEnv, *, timeout_s: float = 60.0, setup_timeout_s: float = 1800.0,
                 backend: str | None = None):
        self.env = env
        self.rank, self.world_size = env.rank, env.world_size
        use_cuda = torch.cuda.is_available() and torch.cuda.device_count() >= env.local_world_size
        self.backend = backend or ("nccl" if use_cuda else "gloo")
        self.device = torch.device(f"cuda:{env.local_rank}") if self.backend == "nccl" else torch.device("cpu")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        if not dist.is_initialized():
            dist.init_process_group(self.backend, init_method="env://", rank=env.rank, world_size=env.world_size,
                                    timeout=timedelta(seconds=setup_timeout_s))
        self.group = dist.new_group(list(range(env.world_size)), timeout=timedelta(seconds=timeout_s))
        self.ledger = Ledger()

    # ------------------------------------------------------------------ collectives
    def all_to_all_rows(self, send: torch.Tensor, send_counts: list[int], recv_counts: list[int],
                        category: str) -> torch.Tensor:
        """Rows ``send`` split by destination (``send_counts``) to every rank; returns the rows
        received, grouped by source rank (``recv_counts``)."""
        send = send.contiguous()
        row = math.prod(send.shape[1:])
        out = send.new_empty((sum(recv_counts),) + tuple(send.shape[1:]))
        nbytes = (sum(send_counts) - send_counts[self.rank]) * row * send.element_size()
        with self.ledger.timed(category, nbytes):
            dist.all_to_all_single(out, send, output_split_sizes=list(recv_counts),
                                   input_split_sizes=list(send_counts), group=self.group)
        return out

    def all_reduce_(self, t: torch.Tensor, category: str) -> torch.Tensor:
        """Sum ``t`` over ranks, in place."""
        with self.ledger.timed(category, t.numel() * t.element_size()):
            dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.group)
        return t

    def all_gather(self, t: torch.Tensor, category: str) -> list[torch.Tensor]:
        out = [torch.empty_like(t) for _ in range(self.world_size)]
        with self.ledger.timed(category, t.numel() * t.element_size() * (self.world_size - 1)):
            dist.all_gather(out, t.contiguous(), group=self.group)
        return out

    def barrier(self) -> None:
        dist.barrier(group=self.group)

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
