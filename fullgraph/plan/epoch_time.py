"""What an epoch costs in time: the model's own layers timed on this machine, a network of a given
bandwidth and latency, and the pipeline's bubble.

An epoch is a training step and an evaluation. The training step is its slowest rank's

    compute  (the forward and backward of the layers it owns over its rows: each distinct layer of
              the real model timed by ``LayerTimer`` on a block of the rank's shape: rows per call,
              source rows, non-zeros per row and input kind, so that the product order, sparse input
              features, dropout masks and per-call costs are all in it; a chunked engine's training
              call with the history-table copies around it; then Adam's step over the parameters it
              trains)
  + bubble   (a pipeline of S stages and K chunks idles S - 1 chunk-times and chunk transfers while
              it fills and drains, forward and backward)
  + exposed communication (the bytes over its link, the busier direction, over the bandwidth, plus
              its messages times the latency, less what the layout overlaps with compute: the
              pipeline's chunk stream runs while other chunks compute, the SpMM layouts broadcast the
              next block while multiplying this one; a halo exchange or an all-reduce waits in full).

The evaluation is one exact forward that goes through the stages one after the other (a pipeline
evaluates unchunked): the sum over stages of the stage's slowest rank, its halo exchanges and its
hand-over to the next stage.

Ranks that share one machine's cores (``cores``, and ``machines``: which machine each rank is on;
``fullgraph plan --machines``, and ``benchmarks/cluster.py``, which emulates a cluster on one machine)
cannot finish before the compute of all those running at once, divided by the cores, is done (a
rank's compute, timed on its ``threads``, holds that many cores: ranks × threads beyond the cores wait);
and cores shared that way deliver less than their solo speed (time-slicing, shared caches and memory
bandwidth): ``core_efficiency``, measured by the caller, divides that bound. Machines slower or faster
than this one (``node_speed``: the fraction of a solo core of this machine each rank computes at; on
one machine, a CPU quota per rank emulates them) take the compute of each rank over that speed. A rank
with a core of its own also spends it on its bytes (``Network.cpu_ns_per_byte``), overlapped or not.
What a rank sends to ranks of its own machine (``RankWork.train_local``, ``eval_local``) goes at the
``local`` link's rates (``plan.machines.SHARED_MEMORY``), the rest at the network's.

It is a model, not a measurement: ``benchmarks/cluster.py`` is where it meets measured epochs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Network", "Kernels", "LayerCalls", "Traffic", "RankWork", "EpochEstimate", "estimate_epoch",
           "estimate_layout", "out_width"]


@dataclass(frozen=True)
class Network:
    """Links between the processes: ``bandwidth_gbps`` Gbit/s each way, ``latency_us`` per message,
    and ``exchange_gbps`` what a link carries when every rank sends to every other at once (an
    all-to-all; the same as the bandwidth unless measured lower). ``cpu_ns_per_byte``: the CPU time
    moving a byte takes (its sender's and its receiver's together) from the cores the ranks compute
    on: on one machine emulating a cluster the kernel carries every byte through veths, a bridge and
    queues. Where ranks share cores (``estimate_layout``'s ``cores``) it loads them all; where each
    has its own, each pays for its own bytes. 0 (the default): a network whose cost is its links'."""

    bandwidth_gbps: float = 10.0
    latency_us: float = 50.0
    exchange_gbps: float | None = None
    cpu_ns_per_byte: float = 0.0

    def seconds(self, nbytes: float, messages: float, exchange_bytes: float = 0.0) -> float:
        """``nbytes`` point to point and ``exchange_bytes`` all-to-all, in ``messages`` transfers."""
        return (nbytes * 8 / (self.bandwidth_gbps * 1e9)
                + exchange_bytes * 8 / ((self.exchange_gbps or self.bandwidth_gbps) * 1e9)
                + messages * self.latency_us * 1e-6)

    def cpu_seconds(self, nbytes: float) -> float:
        """The cores' time ``nbytes`` take on the way (counted where ranks share cores)."""
        return nbytes * self.cpu_ns_per_byte * 1e-9


@dataclass(frozen=True)
class LayerCalls:
    """The calls a rank makes of one group of graph layers per pass: ``layers`` (model indices) each
    run ``calls`` times (chunks), in all over ``rows`` destination rows, ``src_rows`` source rows
    (its own and those it reads from others: halo or history) and ``nnz`` non-zeros of Â."""

    layers: tuple[int, ...]
    rows: int
    src_rows: int
    nnz: int
    calls: int = 1


@dataclass(frozen=True)
class Kernels:
    """Fixed rates, for reasoning and tests: seconds per (non-zero × column) of a sparse product and per
    multiply-add of a dense one. A training pass is a forward and a backward of twice its cost; the
    evaluation a forward. ``LayerTimer`` is what ``fullgraph plan`` uses."""

    spmm_s: float
    gemm_s: float
    step_s: float = 0.0

    def step_seconds(self, params: int) -> float:
        """The optimizer's step over ``params`` parameters."""
        return params * self.step_s

    def seconds(self, model, calls: LayerCalls, train: bool) -> float:
        widths = [*model.layer_input_widths(), out_width(model)]
        forward = sum(calls.nnz * min(widths[i], widths[i + 1]) * self.spmm_s
                      + calls.src_rows * widths[i] * widths[i + 1] * self.gemm_s for i in calls.layers)
        return forward * (3 if train else 1)

    def post_seconds(self, model, rows: int, train: bool) -> float:
        return 0.0


def out_width(model) -> int:
    """The width the last graph layer hands ``post``: its ``out_width`` where it says (R-GCN, HGT), else its
    first matrix's columns."""
    last = model.layers[-1]
    if getattr(last, "out_width", None):
        return int(last.out_width)
    return next(p.shape[-1] for p in last.parameters() if p.dim() == 2)


@dataclass(frozen=True)
class Traffic:
    """Bytes over a rank's link in its busier direction: ``stream`` point to point (the pipeline's
    chunks, a ring all-reduce, the SpMM broadcasts), of which ``overlapped`` runs while the rank
    computes, and ``exchange`` many-to-many (halo all-to-all, which a link carries more slowly:
    ``Network.exchange_gbps``); ``messages``: the separate transfers."""

    stream: float = 0.0
    exchange: float = 0.0
    messages: float = 0.0
    overlapped: float = 0.0

    @property
    def bytes(self) -> float:
        """All that crosses the link, point to point and many-to-many."""
        return self.stream + self.exchange


@dataclass(frozen=True)
class RankWork:
    """One rank's share of an epoch.

    Args:
        stage: its pipeline stage (0 without one).
        train, evaluate: its graph layers' calls (``LayerCalls``; the first layer's include ``pre``) in
            the training step (chunked in a pipeline) and in the evaluation (one exact pass).
        params: the parameters its optimizer steps (its stage's; all where the weights are replicated).
        post_rows: the rows it runs the node-wise output map over (the last stage's).
        stages, chunks: the pipeline's S and K (1, 1 without one).
        train_traffic, eval_traffic: what crosses its link; the evaluation's ``stream`` is what it
            hands the next stage, on the evaluation's path through the stages.
        train_local, eval_local: what it exchanges with ranks of its own machine (``plan.machines``),
            priced at the shared-memory rate instead of the network's (nothing without machines: each
            rank on one of its own).
    """

    stage: int
    train: tuple[LayerCalls, ...]
    evaluate: tuple[LayerCalls, ...]
    post_rows: int = 0
    stages: int = 1
    chunks: int = 1
    train_traffic: Traffic = Traffic()
    eval_traffic: Traffic = Traffic()
    params: int = 0
    train_local: Traffic = Traffic()
    eval_local: Traffic = Traffic()


@dataclass(frozen=True)
class EpochEstimate:
    """The training step's compute, exposed communication, bubble and core contention, and the
    evaluation's time (its compute and waits along the stages)."""

    compute_s: float
    comm_s: float
    bubble_s: float
    contention_s: float = 0.0
    eval_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.compute_s + self.comm_s + self.bubble_s + self.contention_s + self.eval_s


@dataclass(frozen=True)
class _AtSpeed:
    """``kernels`` on a machine that computes at ``speed`` of this one's (``estimate_layout``'s
    ``node_speed``)."""

    kernels: object
    speed: float

    def seconds(self, model, calls: LayerCalls, train: bool) -> float:
        return self.kernels.seconds(model, calls, train) / self.speed

    def post_seconds(self, model, rows: int, train: bool) -> float:
        return self.kernels.post_seconds(model, rows, train) / self.speed

    def step_seconds(self, params: int) -> float:
        return self.kernels.step_seconds(params) / self.speed


def _compute(work: RankWork, model, kernels, train: bool) -> float:
    calls = work.train if train else work.evaluate
    return sum(kernels.seconds(model, c, train) for c in calls) + kernels.post_seconds(model, work.post_rows, train)


def _tiers(remote: Traffic, local: Traffic, network: Network, shared: Network | None) -> list[tuple[Traffic, Network]]:
    """A rank's traffic on each tier: over the network, and to ranks of its own machine at ``shared``'s rates
    (the network's when not given)."""
    return [(remote, network), (local, shared or network)]


def estimate_epoch(work: RankWork, model, kernels, network: Network, byte_cpu: float = 0.0,
                   local: Network | None = None) -> EpochEstimate:
    """The training step of the rank doing ``work`` (see the module docstring), without evaluation.

    A pipeline's bubble: each of the forward and the backward idles ``S - 1`` chunk-times, and as
    many chunk transfers, while the stages fill and drain. ``byte_cpu``: how much of the CPU time its
    point-to-point bytes take (``Network.cpu_seconds``) the rank's own core spends, in its compute:
    overlapping a transfer hides its wire time, not the core's work on it. (A many-to-many exchange's
    rate is measured with that work in it.) ``local``: the links between ranks of one machine, which
    ``work.train_local`` crosses; a rank's two tiers take their times one after the other (its core
    drives both)."""
    tiers = _tiers(work.train_traffic, work.train_local, network, local)
    compute = _compute(work, model, kernels, True) + byte_cpu * sum(n.cpu_seconds(t.stream) for t, n in tiers)
    bubble = 0.0
    if work.stages > 1:
        per_chunk_hop = sum(n.seconds(t.overlapped / (2 * work.chunks), 0) for t, n in tiers)
        bubble = (work.stages - 1) * (compute / work.chunks + 2 * per_chunk_hop)
    compute += kernels.step_seconds(work.params)  # after the last chunk: not in the bubble
    waited = sum(n.seconds(t.stream - t.overlapped, t.messages, t.exchange) for t, n in tiers)
    hidden = sum(n.seconds(t.overlapped, 0) for t, n in tiers)
    return EpochEstimate(compute, waited + max(0.0, hidden - compute), bubble)


def _sharing(n: int, cores: int | None, machines: Sequence[int] | None) -> list[list[int]]:
    """The groups of ranks (indices) that share one machine's ``cores``: all ``n`` ranks on one machine
    (``machines`` not given) or each machine's; a machine with one rank shares nothing."""
    if cores is None:
        return []
    groups: dict[int, list[int]] = {}
    for i, m in enumerate(machines if machines is not None else [0] * n):
        groups.setdefault(m, []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def estimate_layout(works: list[RankWork], model, kernels, network: Network, *, evaluate: bool = True,
                    cores: int | None = None, threads: int = 1, core_efficiency: float = 1.0,
                    node_speed: float = 1.0, local: Network | None = None,
                    machines: Sequence[int] | None = None) -> EpochEstimate:
    """The layout's epoch: the slowest rank's training step, then the evaluation, stage after stage
    (each stage as slow as its slowest rank, plus the hand-over to the next).

    Ranks that share ``cores`` cores (``threads`` each): all of them, or, given ``machines`` (each rank's
    machine, by index into ``works``), those of each machine its own ``cores``. Those of a machine cannot
    be faster than their compute, and the CPU their bytes take (``Network.cpu_ns_per_byte``), divided by
    its cores (while one rank waits for the network, the others use its core), each core doing
    ``core_efficiency`` of a solo core's work: the difference is ``contention_s``. ``local``: the links
    between ranks of one machine (``RankWork.train_local``, ``eval_local``). ``node_speed``: every rank
    on a machine of its own that computes at that fraction of this machine's solo core (``kernels`` time
    the layers here)."""
    if not 0 < core_efficiency <= 1:
        raise ValueError(f"core_efficiency must be in (0, 1], got {core_efficiency}")
    if not node_speed > 0:
        raise ValueError(f"node_speed must be positive, got {node_speed}")
    if node_speed != 1.0:
        kernels = _AtSpeed(kernels, node_speed)
    groups = _sharing(len(works), cores, machines)
    sharing = {i for g in groups for i in g}
    byte_cpu = [0.0 if i in sharing else 1.0 / node_speed for i in range(len(works))]  # a core of its own moves them
    ests = [estimate_epoch(w, model, kernels, network, byte_cpu[i], local) for i, w in enumerate(works)]
    slowest = max(ests, key=lambda e: e.total_s)
    speed = (cores or 1) * core_efficiency / threads  # a machine's work per thread
    floor = max((sum(ests[i].compute_s + _moved(works[i], network, local, True) / threads for i in g) / speed
                 for g in groups), default=0.0)  # waits: the others' cores
    contention = max(0.0, floor - slowest.total_s)
    stages = range(max(w.stage for w in works) + 1 if evaluate else 0)
    eval_s = sum(_eval_stage(s, works, model, kernels, network, local, byte_cpu, groups, speed, threads)
                 for s in stages)
    return EpochEstimate(slowest.compute_s, slowest.comm_s, slowest.bubble_s, contention, eval_s)


def _moved(work: RankWork, network: Network, local: Network | None, train: bool) -> float:
    """The cores' time ``work``'s bytes take on both tiers (``Network.cpu_seconds``)."""
    remote, mine = (work.train_traffic, work.train_local) if train else (work.eval_traffic, work.eval_local)
    return sum(n.cpu_seconds(t.bytes) for t, n in _tiers(remote, mine, network, local))


def _eval_stage(s: int, works: list[RankWork], model, kernels, network: Network, local: Network | None,
                byte_cpu: list[float], groups: list[list[int]], speed: float, threads: int) -> float:
    """Stage ``s``'s part of the evaluation: its slowest rank's forward and waits, or, where its ranks
    share a machine's cores, their forwards over those cores (``speed``: the cores' work per thread)."""
    on = [i for i, w in enumerate(works) if w.stage == s]
    busy, waits = {}, {}
    for i in on:
        tiers = _tiers(works[i].eval_traffic, works[i].eval_local, network, local)
        busy[i] = _compute(works[i], model, kernels, False) + byte_cpu[i] * sum(n.cpu_seconds(t.stream)
                                                                               for t, n in tiers)
        waits[i] = sum(n.seconds(t.stream, t.messages, t.exchange) for t, n in tiers)
    step = max(busy[i] + waits[i] for i in on)
    for g in groups:
        together = [i for i in on if i in g]
        if len(together) > 1:
            step = max(step, sum(busy[i] + _moved(works[i], network, local, False) / threads
                                 for i in together) / speed)
    return step
