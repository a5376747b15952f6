"""What one emulated link delivers (run by ``cluster.py`` in every namespace, as torchrun would start
a rank): rank 0 and rank 1 time a one-float ping-pong (the per-message latency, half the round trip)
and a large one-way send answered by one float (the bandwidth, the round trip taken off); the other
ranks only join the group. Then every rank sends the same amount to all others at once
(``Comm.all_to_all_rows``, a halo exchange as fullgraph runs it, each direction of a pair on a gloo
connection of its own), which a link carries more slowly; the machine's
busy CPU time over it (``/proc/stat``: every namespace shares the cores) per byte moved is what the
emulated link costs the cores the ranks compute on. Rank 0 prints ``{"gbps": .., "latency_us": ..,
"exchange_gbps": .., "cpu_ns_per_byte": ..}``.

    python benchmarks/probes/link.py NOMINAL_GBIT
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from fullgraph.comm.context import Comm, DistEnv


def busy_seconds() -> float:
    """CPU seconds this machine's cores have spent busy since boot (neither idle nor waiting on disk)."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    nominal = float(sys.argv[1])
    comm = Comm(DistEnv.from_env(), timeout_s=120, device="cpu")
    rank, one = dist.get_rank(), torch.zeros(1)
    big = torch.zeros(max(1 << 18, min(1 << 24, int(nominal * 1e9 / 8 / 4))))  # about 1 s at the nominal rate
    if rank == 0:
        for _ in range(5):  # connect and warm up
            dist.send(one, 1)
            dist.recv(one, 1)
        t0 = time.perf_counter()
        rounds = 50
        for _ in range(rounds):
            dist.send(one, 1)
            dist.recv(one, 1)
        rtt = (time.perf_counter() - t0) / rounds
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            dist.send(big, 1)
            dist.recv(one, 1)
            best = min(best, time.perf_counter() - t0 - rtt)
        link = {"gbps": big.numel() * 4 * 8 / best / 1e9, "latency_us": rtt / 2 * 1e6}
    elif rank == 1:
        for _ in range(5 + 50):
            dist.recv(one, 0)
            dist.send(one, 0)
        for _ in range(2):
            dist.recv(big, 0)
            dist.send(one, 0)
    P = dist.get_world_size()
    n, slowest = big.numel() // P * P, 0.0
    busy = busy_seconds()
    for _ in range(2):
        dist.barrier()
        t0 = time.perf_counter()
        comm.all_to_all_rows(big[:n].view(P, -1), [1] * P, [1] * P, "halo/fwd")
        dt = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        slowest = dt.item() if not slowest else min(slowest, dt.item())
    busy, sent = busy_seconds() - busy, n * 4 * (P - 1) / P  # bytes a rank sends per all-to-all
    if rank == 0:
        link["exchange_gbps"] = sent * 8 / slowest / 1e9
        link["cpu_ns_per_byte"] = busy / (2 * P * sent) * 1e9  # two all-to-alls, every rank sending
        print(json.dumps(link), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
