"""What a synchronisation costs when ranks share cores (run by ``cluster.py --sync-probe`` in every
namespace, as torchrun would start a rank).

Every rank computes in bursts (a fixed count of 256 × 256 matrix products, calibrated to ``B`` ms with
the rank alone on the machine) and, between bursts, either does nothing, exchanges a small payload with
its partner (``all_to_all_single`` over a group of two, the pattern of the hybrid's halo exchange), or
with every rank (the graph layout's). It calls gloo's all-to-all, not fullgraph's lanes: for its small
payload the two directions taking turns (``Comm.lanes``) costs next to nothing. The rounds' extra time over bursts alone is what one exchange between ranks busy
computing costs beyond its bytes: the link's latency, the wake-ups of processes and of the kernel's
network work on cores that are all busy, and any drift between the partners' bursts; with more ranks
than cores, also the wait for a partner that is runnable but not running. ``probes/link.py`` measures
latency with idle cores, which this is not. Rank 0 prints
``{B: {"round_ms": .., "pair_sync_ms": .., "world_sync_ms": ..}}`` for B = 1, 4 and 16 ms.

    python benchmarks/probes/sync.py [PAYLOAD_BYTES]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

BURSTS_MS = (1, 4, 16)


def main() -> int:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank, P = dist.get_rank(), dist.get_world_size()
    if P % 2:
        raise SystemExit(f"probes/sync.py pairs the ranks: expected an even number of them, got {P}")
    pairs = [dist.new_group([2 * i, 2 * i + 1]) for i in range(P // 2)]  # every rank creates every group
    a = torch.randn(256, 256)

    def burst(n: int) -> None:
        for _ in range(n):
            a.mm(a)

    products_per_ms = 0.0
    for r in range(P):  # each rank timed alone on the machine
        dist.barrier()
        if r == rank:
            burst(50)
            t0 = time.perf_counter()
            burst(200)
            products_per_ms = 200 / ((time.perf_counter() - t0) * 1e3)
    payload = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
    pair_out, world_out = torch.zeros(max(2, payload // 4 // 2 * 2)), torch.zeros(max(P, payload // 4 // P * P))
    pair_in, world_in = torch.empty_like(pair_out), torch.empty_like(world_out)
    out = {}
    for b_ms in BURSTS_MS:
        n, rounds = max(1, round(products_per_ms * b_ms)), max(20, 600 // b_ms)
        times: dict[str, list[float]] = {"none": [], "pair": [], "world": []}
        for _ in range(3):  # the three modes interleaved, three times: the machine's drift hits all alike
            for mode in times:
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(rounds):
                    burst(n)
                    if mode == "pair":
                        dist.all_to_all_single(pair_in, pair_out, group=pairs[rank // 2])
                    elif mode == "world":
                        dist.all_to_all_single(world_in, world_out)
                dist.barrier()
                times[mode].append((time.perf_counter() - t0) / rounds * 1e3)
        med = {mode: statistics.median(v) for mode, v in times.items()}
        out[b_ms] = {"round_ms": med, "pair_sync_ms": med["pair"] - med["none"],
                     "world_sync_ms": med["world"] - med["none"]}
    if rank == 0:
        print(json.dumps(out), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
