"""Before a run starts: each rank's estimated peak against the memory it may use, and when the largest does
not fit, one line saying what would (``--recompute``, ``--recompute-segment``, more parts, a smaller
``--edge-batch`` or ``--hidden``), each option's estimate from :mod:`fullgraph.plan.rank_memory`."""

from __future__ import annotations

import math

from fullgraph.errors import InputError
from fullgraph.models import model_spec
from fullgraph.plan.rank_memory import GIB, estimate_peak_bytes, model_memory_options

__all__ = ["check_memory"]


def _gib(b: float) -> str:
    return f"{b / GIB:.2f} GiB"


def check_memory(cfg, stats: list[dict], *, available_bytes: int | None = None, local_ranks: int = 1,
                 mmap_threshold: int | None = None, edge_batch: int | None = None) -> list[int]:
    """Estimated peak bytes per rank (``stats``: one dict per rank, from :func:`graph_memory_stats`,
    :func:`part_memory_stats` or :func:`partition_memory_stats`); raises ``InputError`` (one line:
    the estimate, what is available, what would fit) when the largest exceeds the limit.

    The limit is ``cfg.run.memory_limit`` GiB when set; else ``available_bytes`` when given; else this
    machine's ``MemAvailable`` divided by ``local_ranks`` (the ranks that will share it).
    ``mmap_threshold``: as in :func:`estimate_peak_bytes` (default: this process's). ``edge_batch``: a
    link step's positives (``LinkTask.batch``), whose scored pairs (``pair_bytes`` of the stats) a smaller
    ``--edge-batch`` shrinks in proportion.
    """
    from fullgraph.memory import available_memory_bytes

    m, opts = cfg.model, model_memory_options(cfg) | dict(mmap_threshold=mmap_threshold)
    est = [estimate_peak_bytes(**(opts | s)) for s in stats]
    if cfg.run.memory_limit > 0:
        limit, where = int(cfg.run.memory_limit * GIB), "--memory-limit"
    elif available_bytes is not None:
        limit, where = int(available_bytes), "available"
    else:
        limit = available_memory_bytes() // max(1, local_ranks)
        where = "available" if local_ranks <= 1 else f"available per rank ({local_ranks} on this machine)"
    worst = max(range(len(est)), key=est.__getitem__)
    if est[worst] <= limit:
        return est
    s = stats[worst]

    def peak(**change) -> int:
        return max(estimate_peak_bytes(**(opts | st | change)) for st in stats)

    fits = []
    if not m.recompute and peak(recompute=True) <= limit:
        fits.append(f"--recompute (~{_gib(peak(recompute=True))})")
    k = max(2, round(math.sqrt(m.layers)))  # the segment that keeps the fewest activations, ~2√L
    one_process = not cfg.parallel.mesh.distributed
    if one_process and m.layers > 2 and not m.recompute_segment and peak(recompute_segment=k) <= limit:
        fits.append(f"--recompute-segment {k} (~{_gib(peak(recompute_segment=k))})")
    fits += _more_parts(opts, stats, s, limit)
    if edge_batch and stats[worst].get("pair_bytes"):
        fits += _smaller_batch(lambda f: max(estimate_peak_bytes(**(opts | st | {"pair_bytes": int(st["pair_bytes"] * f)}))
                                             for st in stats), edge_batch, limit)
    step = model_spec(m.name).hidden_step(m)
    h = m.hidden // 2
    while h >= step:
        h -= h % step
        if peak(hidden=h) <= limit:
            fits.append(f"--hidden {h} (~{_gib(peak(hidden=h))})")
            break
        h //= 2
    shape = (f"{s['nodes']} nodes" + (f" + {s['halo']} halo" if s.get("halo") else "") + f", {s['edges']} edges, "
             f"{m.name} {m.layers} layers x {m.hidden}" + (", --recompute" if m.recompute else ""))
    rank = f" for rank {worst}" if len(stats) > 1 else ""
    advice = "; would fit: " + ", ".join(fits) if fits else ("; nothing tried fits (--recompute, more parts, a smaller --hidden"
                                                            + (", a smaller --edge-batch)" if edge_batch else ")"))
    raise InputError(f"expected the estimated peak memory{rank} to fit in {_gib(limit)} ({where}) (got an estimate of "
                     f"{_gib(est[worst])}: {shape}){advice}")


def _more_parts(opts: dict, stats: list[dict], worst: dict, limit: int) -> list[str]:
    """``--parallel graph --nprocs P`` at the fewest parts (a power of two times the ranks now) whose ranks fit."""
    procs = len(stats)
    for more in (2, 4, 8, 16, 32, 64, 128, 256):
        p = procs * more
        if p > worst["nodes"] * procs:
            break
        # a finer partition: its rows and edges shrink with the part; its halo, at best, in proportion
        # (one process has no halo yet: assume as many halo rows as inner ones)
        guess = max(estimate_peak_bytes(**(opts | st | dict(
            nodes=max(1, st["nodes"] // more), edges=st["edges"] // more, distributed=True,
            halo=(st.get("halo", 0) // more) if procs > 1 else max(1, st["nodes"] // more),
            feature_nnz=None if st.get("feature_nnz") is None else st["feature_nnz"] // more))) for st in stats)
        if guess <= limit:
            return [f"--parallel graph --nprocs {p} (~{_gib(guess)} per rank, on machines with that much each)"]
    return []


def _smaller_batch(peak, batch: int, limit: int) -> list[str]:
    """``--edge-batch B`` at the largest halving of ``batch`` whose step fits (``peak(f)``: the estimate
    with a step's scored pairs scaled by ``f``), or nothing where even one positive a step would not."""
    b = batch // 2
    while b >= 1:
        size = peak(b / batch)
        if size <= limit:
            return [f"--edge-batch {b} (~{_gib(size)})"]
        b //= 2
    return []
