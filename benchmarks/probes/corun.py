"""How fast processes compute while they share the cores (run by ``cluster.py``, ``n`` processes at
once): a middle layer of the model that ``OPTIONS`` (JSON: ``fullgraph train``'s options) builds,
forward and backward on ``ROWS`` rows of the graph's average degree (a rank's share), on one thread,
as ``fullgraph plan``'s ``LayerTimer`` times it.

From the wall-clock time ``START`` the processes alternate ``ROUNDS`` times between a window of
``SECONDS`` in which only process 0 computes (the others sleep) and one in which all compute.
Interleaving the two keeps a slow drift of the machine (another tenant, the clock) out of their ratio.
Given ``CGROUP`` and ``LOBBY`` (``cgroup.procs`` files: the process's own CPU cgroup, capped, and the
root group), process 0 computes alone uncapped, from the lobby, and with the others from its cgroup.
Prints ``{"alone": [steps/s per round], "together": [steps/s per round]}`` (``alone`` from process 0).

Processes time-sliced on fewer cores than they are, or running at once on cores that share caches and
memory bandwidth, do not each get a whole core's worth of work done: ``cluster.py`` divides the
throughput of all at once by that of one alone times the cores they use (the cores' efficiency, which
the plan's bound for ranks sharing cores takes).

    python benchmarks/probes/corun.py OPTIONS ROWS START SECONDS ROUNDS INDEX [CGROUP LOBBY]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

from fullgraph.cli.plan import build_planned_model
from fullgraph.config import TrainConfig
from fullgraph.data.load import load_graph
from fullgraph.plan.layer_timer import LayerTimer


def steps_until(end: float, step) -> float:
    """Steps per second of ``step`` run until the wall-clock time ``end``."""
    t0, steps = time.perf_counter(), 0
    while time.time() < end:
        step()
        steps += 1
    return steps / (time.perf_counter() - t0)


def main() -> int:
    options, rows, start, seconds = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    rounds, index = int(sys.argv[5]), int(sys.argv[6])
    cgroup, lobby = (sys.argv[7], sys.argv[8]) if len(sys.argv) > 8 else (None, None)

    def move(procs: str | None) -> None:  # into a cgroup (root can move itself between them)
        if procs is not None:
            Path(procs).write_text(str(os.getpid()))
    torch.set_num_threads(1)
    graph = load_graph(TrainConfig.of(**options))
    timer = LayerTimer(build_planned_model(TrainConfig.of(**options), graph), graph.x, seed=index)
    step = timer.layer_step(min(1, options["layers"] - 1), rows, 1.0, graph.num_edges / graph.num_nodes, True)
    step()  # warm-up
    out: dict[str, list[float]] = {"alone": [], "together": []}
    for r in range(rounds):
        solo_start = start + 2 * r * seconds
        time.sleep(max(0.0, solo_start - time.time()))
        if index == 0:
            move(lobby)
            out["alone"].append(steps_until(solo_start + seconds, step))
            move(cgroup)
        time.sleep(max(0.0, solo_start + seconds - time.time()))
        out["together"].append(steps_until(solo_start + 2 * seconds, step))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
