"""Where the ranks run: ``Machines`` spreads P ranks over M machines, as ``torchrun`` places them
(``--nproc-per-node`` P/M on each, rank = node rank × P/M + local rank, so machine m holds the ranks
``m·P/M .. (m+1)·P/M - 1``).

Ranks of one machine share its cores and talk over loopback; ranks of different machines talk over
the network. ``fullgraph plan`` prices the two tiers apart (``split``: each piece of a rank's traffic,
what stays on its machine and what leaves it), and the cores' sharing with the time-sliced model that
``benchmarks/cluster.py`` measured (``estimate_layout``'s floor: the ranks of a machine finish no sooner
than all their compute over its cores, each core doing ``SHARED_CORE_EFFICIENCY`` of its solo work).

Why one machine is not a fast network: gloo carries every message between two processes of one
machine through the kernel's TCP loopback, so a message costs tens of microseconds or more and an
all-to-all runs at a few Gbit/s, while the ranks' compute slows down as they share the cores. A plan
that took one machine for P machines of its size (each rank with all the cores, a 10 Gbit/s link)
estimated 14 ms for a run that took 58 ms (issue 36 §4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fullgraph.plan.epoch_time import Network, Traffic

__all__ = ["SHARED_MEMORY", "SHARED_CORE_EFFICIENCY", "SHARED_CORE_WAIT_US", "Machines", "split"]

SHARED_MEMORY = Network(bandwidth_gbps=35.0, latency_us=100.0, exchange_gbps=4.5, cpu_ns_per_byte=1.5)
"""What gloo achieves between two processes of this machine (loopback TCP), as
``benchmarks/probes/link.py`` measures it under ``torchrun --nproc-per-node 2`` on the 2-core VM of
benchmarks/README ("Planning for one machine"), 6 runs: 21-42 Gbit/s one way with a 64 MiB message,
2.2-5.9 Gbit/s per rank in an all-to-all (``Comm.all_to_all_rows``, both directions and both ranks'
copies on the same cores), a ping-pong's 59-200 µs per message, and 1.3-4.6 ns of the cores' time per
byte moved (the most with the most other work on the cores). Middle values, rounded; no lower latency
than a network's: every message goes through the kernel's TCP stack."""

SHARED_CORE_WAIT_US = 800.0
"""What each message costs, beyond its link's latency, where a machine's ranks outnumber its cores: its
partner is runnable but not running, and the exchange waits for the scheduler to give it a core.
``benchmarks/probes/sync.py`` under ``torchrun --nproc-per-node 4`` on the 2 cores (ranks computing in
1 ms bursts, then exchanging 16 KiB), 4 runs: 0.46-0.93 ms per exchange with one partner and 1.3-3.2 ms
per all-to-all with three, 0.4-1.1 ms a message, against 59-200 µs on idle cores (benchmarks/README,
"Planning for one machine"). It grows with the compute between exchanges (about 1-3 ms a pair exchange
and 6-17 ms an all-to-all at 16 ms bursts): on graphs larger than a rank's millisecond, a floor."""

SHARED_CORE_EFFICIENCY = 0.85
"""The share of their solo work that the cores of one machine do when its ranks run at once (time-slicing,
shared caches and memory bandwidth): ``benchmarks/probes/corun.py``'s all-at-once throughput over one
process alone times the cores, 0.80-0.90 for 4 ranks time-sliced on 2 cores (the time-sliced
grids of benchmarks/history/2026-11-24-cluster.md)."""


@dataclass(frozen=True)
class Machines:
    """``nprocs`` ranks on ``count`` machines of ``cores`` cores each, ``nprocs / count`` ranks a machine."""

    count: int
    nprocs: int
    cores: int

    def __post_init__(self):
        from fullgraph.errors import InputError

        if not 1 <= self.count <= self.nprocs:
            raise InputError(f"expected 1 <= --machines <= --nprocs ({self.nprocs}) (got {self.count})")
        if self.nprocs % self.count:
            raise InputError(f"expected --machines to divide --nprocs ({self.nprocs}): torchrun starts as many "
                             f"ranks on every machine (got {self.count})")

    @property
    def per_machine(self) -> int:
        """Ranks on each machine."""
        return self.nprocs // self.count

    @property
    def threads(self) -> int:
        """Each rank's threads, as ``fullgraph train`` sets them: the cores over the machine's ranks."""
        return max(1, self.cores // self.per_machine)

    def machine(self, rank: int) -> int:
        return rank // self.per_machine

    def placement(self) -> list[int]:
        """The machine of every rank, by rank."""
        return [self.machine(r) for r in range(self.nprocs)]

    def local_share(self, rank: int, peers) -> float:
        """The fraction of ``peers`` (ranks) on ``rank``'s machine (0 without peers)."""
        peers = [p for p in peers if p != rank]
        return sum(self.machine(p) == self.machine(rank) for p in peers) / len(peers) if peers else 0.0

    def spans(self, ranks) -> bool:
        """Whether ``ranks`` lie on more than one machine."""
        return len({self.machine(r) for r in ranks}) > 1

    def oversubscribed(self, threads: int) -> bool:
        """Whether a machine's ranks, of ``threads`` threads each, outnumber its cores."""
        return self.per_machine * threads > self.cores

    def links(self, network: Network, threads: int) -> tuple[Network, Network]:
        """The links as these ranks see them: ``network`` between machines and ``SHARED_MEMORY`` within one,
        each message ``SHARED_CORE_WAIT_US`` dearer where the ranks outnumber the cores."""
        wait = SHARED_CORE_WAIT_US if self.oversubscribed(threads) else 0.0
        return (replace(network, latency_us=network.latency_us + wait),
                replace(SHARED_MEMORY, latency_us=SHARED_MEMORY.latency_us + wait))

    def as_json(self, network: Network, threads: int) -> dict:
        """The machines as the plan priced them: their ranks, threads, and both tiers' links as the ranks
        see them (a message's wait for a core included where the ranks outnumber the cores)."""
        remote, local = self.links(network, threads)
        return {"count": self.count, "cores": self.cores, "ranks_each": self.per_machine,
                "threads_per_rank": threads, "oversubscribed": self.oversubscribed(threads),
                "links": {"network": vars(remote), "shared_memory": vars(local)}}

    def describe(self, network: Network, network_given: bool) -> str:
        """One line saying what the plan assumes (``fullgraph plan``'s first)."""
        if self.count == 1:
            line = (f"planning for one machine (its {self.cores} cores shared by the {self.nprocs} ranks, which "
                    f"talk over shared memory); give --machines/--bandwidth-gbps for a cluster")
            return line + (" (the network flags do not apply to one machine)" if network_given else "")
        on = ("one rank each" if self.per_machine == 1 else
              f"{self.per_machine} ranks each, sharing its cores and talking over shared memory")
        return (f"planning for {self.count} machines of {self.cores} cores ({on}), linked at "
                f"{network.bandwidth_gbps:g} Gbit/s and {network.latency_us:g} us per message")


def split(pieces: list[tuple[Traffic, float]]) -> tuple[Traffic, Traffic]:
    """A rank's traffic as (network, local): each piece ``(traffic, share)`` sends ``share`` of its bytes and
    messages to ranks of its own machine and the rest over the network."""
    net, local = Traffic(), Traffic()
    for t, share in pieces:
        net = _add(net, t, 1.0 - share)
        local = _add(local, t, share)
    return net, local


def _add(a: Traffic, b: Traffic, share: float) -> Traffic:
    return Traffic(stream=a.stream + share * b.stream, exchange=a.exchange + share * b.exchange,
                   messages=a.messages + share * b.messages, overlapped=a.overlapped + share * b.overlapped)
