"""The process counts ``fullgraph plan`` compares, where each one's ranks run, and on how many threads.

``fullgraph plan --nprocs P`` answers "how should I run on what I have?", and one answer is not to
split at all: on a 2-core machine four ranks time-slice two cores, and one process may be fastest. So
the plan weighs every process count from one (``--parallel single``) up to P, not P alone.

Which counts: 1, the powers of two below P, and P (:func:`plan_sizes`). A layout's time changes
smoothly with its process count (compute over P, communication growing with it), so doubling steps
find the region of the best count, and the powers of two are the counts with the most layouts (every
hybrid S × W, square and cube SpMM grids) while an odd count has few. Every count of its own costs a
partition (cut and cached) and a planning of its layouts, so all of 1 .. P would cost P of them, the
doubling steps log2 P.

Where: with ``--machines M``, P' ranks go on the largest divisor of P' that is at most M machines
(torchrun starts as many ranks on each), so a smaller run spreads as far as the machines allow; with a
network flag alone, one machine per rank as before; else one machine (:func:`machines_for`).

Threads: ``--threads`` where given; else, as ``fullgraph train`` sets them
(``fullgraph.machine_load.default_threads``), each machine's cores over its ranks (:func:`threads_for`).
"""

from __future__ import annotations

__all__ = ["plan_sizes", "machines_for", "threads_for", "train_flags"]


def plan_sizes(nprocs: int) -> list[int]:
    """The process counts planned for ``--nprocs`` (see the module docstring): 1, the powers of two below
    ``nprocs``, and ``nprocs``."""
    if nprocs < 1:
        raise ValueError(f"expected nprocs >= 1, got {nprocs}")
    sizes, p = [], 1
    while p < nprocs:
        sizes.append(p)
        p *= 2
    return sizes + [nprocs]


def machines_for(nprocs: int, machines: int | None, network_given: bool) -> int:
    """The machines a run of ``nprocs`` ranks is planned on: at most ``machines`` (``--machines``), as
    many as divide the ranks evenly; one per rank with a network flag alone; else one."""
    if machines is not None:
        return max(m for m in range(1, min(machines, nprocs) + 1) if nprocs % m == 0)
    return nprocs if network_given else 1


def threads_for(requested: int, per_machine: int, cores: int) -> int:
    """Each rank's threads, as ``fullgraph train`` sets them (``machine_load.default_threads``):
    ``requested`` (``--threads``) where given, else the machine's cores over its ranks."""
    from fullgraph.machine_load import default_threads

    return default_threads(per_machine, requested, cores=cores)


def train_flags(nprocs: int, options: dict) -> str:
    """The ``fullgraph train`` flags that run a planned layout (its process count and its options)."""
    flags = [f"--nprocs {nprocs}"] if nprocs > 1 else []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        flags.append(flag if value is True else f"{flag} {value}")
    return " ".join(flags)
