"""``fullgraph plan``: every layout that fits each process count up to P (one process included:
``plan.sizes`` says which counts), what each would move, hold and take per epoch on a given network,
ranked, with the one to pick and why, or the tie the timings cannot break (``plan.ranking``).

Each layout's bytes, works and memory come from its record (``parallel.registry.Layout``). The bytes
are its volume over the real partition (the same partitions ``fullgraph train`` would cut and cache,
so planning first makes training start sooner): the numbers the run's ledger reports. The memory per
rank is ``fullgraph.plan.rank_memory``'s estimate; the time, ``fullgraph.plan.epoch_time``'s model with
this machine's kernels timed in rounds (``LayerTimer.settle``).
"""

from __future__ import annotations

import argparse
import json
import os

from fullgraph.cli.options import PLAN_MODEL_OPTIONS
from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.options import PAIR_TASKS
from fullgraph.tasks.options import LINK_ONLY
from fullgraph.train.run_model import build_planned_model  # (benchmarks and tests take it from here too)

__all__ = ["cmd_plan", "candidates", "run_volume"]


def candidates(nprocs: int, layers: int, model: str, model_args: dict | None = None,
               probe=None, edges=None, task: str = "node") -> tuple[list[dict], list[str]]:
    """The layouts of ``nprocs`` processes (``TrainConfig`` options each), and one line per layout
    that does not fit, saying why (the configuration's own refusal). ``layers``: the model's depth
    (a user's builder decides it: it is checked against the stages, not given as an option). One process
    has one layout, ``single``: graph parallelism or a pipeline of one rank would be it with more steps.
    ``probe``: a user's model as built, checked against each layout (jumping knowledge: not in a pipeline).
    ``edges``: what the graph's edges carry (``EdgeFacts``), against the edge data each layout hands a layer;
    ``task``: ``--task`` (link prediction runs under some layouts only)."""
    from fullgraph.comm.mesh import Mesh
    from fullgraph.models import is_reference, model_spec
    from fullgraph.ops.edge_data import EdgeFacts
    from fullgraph.parallel.registry import check_model_layout, edge_kinds_read, edge_layout_error

    if nprocs == 1:
        return [dict(parallel="single")], []
    opts = Mesh.layouts_of(nprocs)
    user = is_reference(model)
    if not user and model_spec(model).separable:  # its propagation runs on column slices throughout
        opts += [dict(o, tensor_decoupled=True) for o in opts if Mesh.for_mode(o["parallel"], nprocs).tensor]
    edges, reads = edges or EdgeFacts(), edge_kinds_read(model, probe)
    fits, refused = [], []
    for o in opts:
        try:
            cfg = TrainConfig.of(model=model, model_args=model_args or {}, nprocs=nprocs, task=task, **o,
                                 **({} if user else {"layers": layers}))
            if user and cfg.parallel.mesh.stages > 1:
                cfg.check_depth(layers)
            if user and probe is not None:
                check_model_layout(cfg, probe)
            error = edge_layout_error(o["parallel"], model, reads, edges)
            if error is not None:
                raise error
            fits.append(o)
        except InputError as e:
            refused.append(f"{label(o)}: {e}")
    return fits, refused


def label(o: dict) -> str:
    """A candidate's name in the table: the layout, and the axes or options that tell it apart."""
    name = o["parallel"]
    if o.get("stages"):
        return f"{name} {o['stages']}x{o['graph_ways']}"
    if o.get("replication"):
        return f"{name} c={o['replication']}"
    return f"{name} decoupled" if o.get("tensor_decoupled") else name


def cmd_plan(args: argparse.Namespace, argv: list[str] = ()) -> int:
    """Plan every process count of ``plan_sizes(--nprocs)`` (``--nprocs`` alone with ``--layout``), each
    layout that fits it, on the machines it would run on; rank them, say a tie, recommend one."""
    from fullgraph.comm.mesh import Mesh
    from fullgraph.data.load import load_graph
    from fullgraph.plan.ranking import recommend, render, tie_line
    from fullgraph.plan.sizes import plan_sizes

    if args.nprocs < 1:
        raise InputError(f"expected --nprocs >= 1 (got {args.nprocs})")
    if args.layout is not None and args.nprocs < 2 and Mesh(parallel=args.layout).distributed:
        raise InputError(f"expected --nprocs >= 2 with --layout {args.layout} (one process is --layout single)")
    machines, network = where(args)
    base = dict(dataset=args.dataset, root=args.root, split=args.split, feature_norm=args.feature_norm,
                model=args.model, model_args=dict(args.model_args), partitioner=args.partitioner,
                **{k: getattr(args, k) for k in PLAN_MODEL_OPTIONS + ("task",) + LINK_ONLY})
    TrainConfig.of(**base)  # the model's options, checked before anything is read
    graph = load_graph(TrainConfig.of(**base))
    depth = _depth(TrainConfig.of(**base), graph)
    sizes = [args.nprocs] if args.layout is not None else plan_sizes(args.nprocs)
    probe = build_planned_model(TrainConfig.of(**base), graph)
    plans, refused = _layouts(args, sizes, depth, base, probe, graph.edge_facts())
    timers = _Timers(probe, graph.x, args, machines)
    for P, o in plans:  # each kind timed once ...
        plan_layout(graph, base, o, args, timers.get(P), network, machines=timers.machines(P))
    timers.settle()  # ... and again, in rounds over all of them
    rows = [plan_layout(graph, base, o, args, timers.get(P), network, machines=timers.machines(P)) for P, o in plans]
    rows.sort(key=lambda r: r["epoch_s"])
    result = _result(args, graph, depth, timers, machines, network, rows, refused) | {"sizes": sizes}
    result |= {"tie": tie_line(rows), "recommendation": recommend(rows, network, machines)}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print("\n".join(render(result)))
    return 0


def _layouts(args, sizes: list[int], depth: int, base: dict, probe, edges=None) -> tuple[list[tuple[int, dict]], list[str]]:
    """(P, options) of every layout planned, and a line per layout that does not fit, with its P
    (``probe``: the model built, for what only a user's built model says; ``edges``: the graph's edge facts)."""
    plans, refused = [], []
    for P in sizes:
        fits, no = candidates(P, depth, args.model, base["model_args"], probe, edges, base["task"])
        if args.layout is not None:
            cfg = TrainConfig.of(**base, parallel=args.layout, nprocs=P)  # refuses with the reason
            if cfg.parallel.mesh.stages > 1:
                cfg.check_depth(depth)
            fits = [o for o in fits if o["parallel"] == args.layout]
        plans += [(P, o) for o in fits]
        refused += [f"P={P} {line}" for line in no]
    return plans, refused


class _Timers:
    """One ``LayerTimer`` per thread count the planned runs use (a run of P ranks on one machine takes its
    cores over P each: ``plan.sizes.threads_for``), and the machines each P runs on."""

    def __init__(self, model, features, args, machines):
        from fullgraph.machine_load import busy_cores

        self.model, self.features, self.args, self.top = model, features, args, machines
        one = machines.count == 1 and not args.threads
        self.busy = busy_cores() if one else None  # the cores other work keeps busy, once for the plan
        self.timers: dict = {}

    def machines(self, P: int):
        from fullgraph.plan.machines import Machines
        from fullgraph.plan.sizes import machines_for

        if P == self.top.nprocs:
            return self.top
        given = self.args.bandwidth_gbps is not None or self.args.latency_us is not None
        return Machines(machines_for(P, self.args.machines, given), P, self.top.cores)

    def threads(self, P: int) -> int:
        from fullgraph.plan.sizes import threads_for

        m = self.machines(P)
        return threads_for(self.args.threads, m.per_machine, m.cores)

    def get(self, P: int):
        from fullgraph.plan.layer_timer import LayerTimer

        t = self.threads(P)
        if t not in self.timers:
            self.timers[t] = LayerTimer(self.model, self.features, threads=t)
        return self.timers[t]

    def settle(self) -> None:
        """Every timer's rounds (``LayerTimer.settle``), one round over all the timers at a time, so that a
        round's timings of every kind lie close together (``plan.ranking`` compares layouts round by round)."""
        timers = list(self.timers.values())
        for r in range(max((t.rounds for t in timers), default=1) - 1):
            for timer in timers:
                timer.sample(fewer_than=min(timer.rounds, r + 2))


def _result(args, graph, depth, timers, machines, network, rows, refused) -> dict:
    """The plan as JSON (``--json``), less the tie and the recommendation."""
    from fullgraph.models import model_spec
    from fullgraph.plan.pruned import minibatch_outlook, pruned_counts

    model = timers.model
    needed = pruned_counts(graph, model.norm, depth).total_rows() if args.task not in PAIR_TASKS else None
    measured = model_spec(args.model).memory is None
    given = args.bandwidth_gbps is not None or args.latency_us is not None
    return {"setting": machines.describe(network, given), "graph": graph.name, "nodes": graph.num_nodes,
            "edges": graph.num_edges, "model": args.model, "layers": depth,
            "hidden": max(model.layer_input_widths()[1:], default=args.hidden), "nprocs": args.nprocs,
            "memory_model": "measured on probe blocks (fullgraph.plan.measured)" if measured else "derived (its spec)",
            "machines": machines.as_json(network, timers.threads(args.nprocs)),
            "network": {"bandwidth_gbps": network.bandwidth_gbps, "latency_us": network.latency_us},
            "busy_cores": timers.busy,
            "timing_spread": {str(t): timer.spread() for t, timer in timers.timers.items()},
            "layouts": rows, "refused": refused, "rows_needed_per_layer": needed,  # (node labels': no outlook for links)
            "minibatch": minibatch_outlook(int(graph.train_mask.sum()), graph.num_nodes, needed)
            if args.task not in PAIR_TASKS else None}


def where(args: argparse.Namespace):
    """The machines the ranks run on and the network between them, from the flags: one machine unless a
    network flag or ``--machines`` says otherwise; a network flag alone, one machine per rank (``Machines``
    refuses a count that does not fit ``--nprocs``)."""
    from fullgraph.plan.epoch_time import Network
    from fullgraph.plan.machines import Machines

    given = args.bandwidth_gbps is not None or args.latency_us is not None
    count = args.machines if args.machines is not None else (args.nprocs if given else 1)
    default = Network()  # 10 Gbit/s, 50 us
    network = Network(default.bandwidth_gbps if args.bandwidth_gbps is None else args.bandwidth_gbps,
                      default.latency_us if args.latency_us is None else args.latency_us)
    return Machines(count, args.nprocs, os.cpu_count() or 1), network


def plan_layout(graph, base: dict, o: dict, args, timer, network, cores: int | None = None,
                core_efficiency: float = 1.0, node_speed: float = 1.0, machines=None) -> dict:
    """One layout's bytes by category, memory per rank and epoch-time estimate (``timer``: a ``LayerTimer``
    of the planned model; ``cores``: the cores all ranks share, when they do, each doing ``core_efficiency``
    of a solo core's work; ``node_speed``: each rank's machine's speed as a fraction of this one's core).
    ``machines`` (``plan.machines.Machines``, for ``cores`` and ``core_efficiency``): the ranks of a machine
    share its cores at ``SHARED_CORE_EFFICIENCY`` and talk over ``SHARED_MEMORY``, those of different
    machines over ``network``; its ``nprocs`` is the run's P. ``epoch_s_rounds``: the estimate under each
    round of the kernels' timings, whose spread ``plan.ranking`` weighs against the gaps."""
    from fullgraph.plan.link import link_task
    from fullgraph.plan.machines import SHARED_CORE_EFFICIENCY

    nprocs = machines.nprocs if machines is not None else args.nprocs
    cfg = TrainConfig.of(**base, nprocs=nprocs, chunks=args.chunks, **o)
    prune = getattr(args, "prune", False) and cfg.parallel.mesh.prunable  # single and graph: the layouts that do
    cfg = cfg.with_options(prune=prune)
    mesh, shape = cfg.parallel.mesh, _shape(cfg, graph, timer.model)
    parts = _partition_stats(cfg, graph, mesh.graph_ways, args.partition_dir) if not mesh.operator_layout else None
    pruned = _pruned_counts(cfg, graph, timer.model, args.partition_dir) if prune else None
    volume = run_volume(cfg, graph, sum(p["halo"] for p in parts) if parts else 0, shape=shape, pruned=pruned)
    chunk_src = _chunk_sources(cfg, graph, args.partition_dir) if mesh.stages > 1 else None
    works = _works(cfg, graph, timer.model, shape, parts, volume, chunk_src, machines, pruned)
    shared, local = {}, None
    if machines is not None:
        network, local = machines.links(network, timer.threads)
        shared = dict(cores=machines.cores, core_efficiency=SHARED_CORE_EFFICIENCY, local=local,
                      machines=machines.placement())
    kw = dict(threads=timer.threads, node_speed=node_speed, **(shared or dict(cores=cores, core_efficiency=core_efficiency)))
    est, spread = _estimates(works, timer, network, kw)
    task = link_task(cfg) if cfg.task.name in PAIR_TASKS else None
    row = {"layout": label(o) + (" --prune" if prune else ""), "options": o | ({"prune": True} if prune else {}),
            "nprocs": nprocs, "threads": timer.threads,
            "bytes_per_epoch": sum(volume.values()), "by_category": volume,
            "rows_per_layer": pruned.total_rows() if pruned else [graph.num_nodes] * len(timer.model.layers),
            "peak_bytes_per_rank": _peak(cfg, graph, parts, getattr(args, "release_memory", False), task),
            "epoch_s": est.total_s, "epoch_s_rounds": spread,
            "compute_s": est.compute_s + est.contention_s, "comm_s": est.comm_s, "bubble_s": est.bubble_s,
            "eval_s": est.eval_s}
    if task is not None:  # an epoch of link prediction: its steps, and the pair exchange (plan.link)
        row = _link_row(row, cfg, graph, args, task, local if machines is not None and machines.count == 1 else network)
    return row


def _link_row(row: dict, cfg, graph, args, task, network) -> dict:
    """``row`` made a link epoch's (``plan.link.link_epoch_row``) over the owners ``train`` would use."""
    from fullgraph.parallel.pairs import planned_owners
    from fullgraph.plan.link import link_epoch_row

    mesh = cfg.parallel.mesh
    owners = planned_owners(mesh, graph.num_nodes, cfg.parallel.permute, cfg.optimization.seed)
    if owners is None and mesh.graph_ways > 1:
        owners = _node_part(cfg, graph, args.partition_dir)
    return link_epoch_row(row, cfg, owners, cfg.model.hidden, network, task)


def _works(cfg, graph, model, shape, parts, volume, chunk_src, machines, pruned) -> list:
    """Every rank's ``RankWork``: the layout's own (``parallel.registry``), or one process's, which is a
    partition of one part with nothing to send (``plan.rank_work.partition_works`` with W = 1)."""
    from fullgraph.parallel.registry import rank_works
    from fullgraph.plan.rank_work import partition_works

    works = rank_works if cfg.parallel.mesh.distributed else partition_works
    return works(cfg, graph, model, shape, _bounds(cfg, graph), parts, volume, chunk_src, machines, pruned=pruned)


def _peak(cfg, graph, parts, release_memory: bool, task=None) -> int:
    """The largest rank's estimated peak: the layout's (``parallel.registry``), or one process's; with a
    link ``task``, its split and a step's scored pairs on a rank too (as ``train`` estimates it)."""
    from fullgraph.parallel.registry import peak_per_rank
    from fullgraph.plan.rank_memory import single_peak

    held = None if task is None else task.memory(cfg.parallel.mesh.pair_group[0])  # (the ranks that score pairs)
    if not cfg.parallel.mesh.distributed:
        return single_peak(cfg, graph, release_memory, held)
    return peak_per_rank(cfg, graph, parts, _bounds(cfg, graph), release_memory, held)


def _estimates(works, timer, network, kw: dict):
    """The epoch estimate at the timings' medians, and the total under each round's timings
    (``LayerTimer.using``; fixed rates, ``Kernels``, give the one estimate)."""
    from fullgraph.plan.epoch_time import estimate_layout

    est = estimate_layout(works, timer.model, timer, network, **kw)
    using = getattr(timer, "using", None)
    if using is None:
        return est, [est.total_s]
    rounds = []
    for k in range(timer.rounds):
        with using(k):
            rounds.append(estimate_layout(works, timer.model, timer, network, **kw).total_s)
    return est, rounds


def run_volume(cfg: TrainConfig, graph, halo_rows: int, *, evaluate: bool = True, shape=None,
               pruned=None) -> dict[str, int]:
    """What a run of ``cfg`` on ``graph`` moves per epoch by ledger category (``layout_volume``), its
    W-way partition having ``halo_rows`` halo rows in all; ``evaluate``: with an evaluation; ``pruned``:
    the partition's ``plan.pruned.PrunedCounts``, for a run with ``--prune``."""
    from fullgraph.parallel.registry import layout_volume

    starts = [a for a, _ in _bounds(cfg, graph)[1:]]
    nnz = graph.num_edges + (graph.num_nodes if _aggregation(cfg) == "gcn" else 0)  # Â's self loops
    return layout_volume(cfg.parallel.mesh, shape or _shape(cfg, graph), nodes=graph.num_nodes, nnz=nnz,
                         halo_rows=halo_rows, stage_starts=starts, evaluate=evaluate,
                         permute=cfg.parallel.permute, seed=cfg.optimization.seed,
                         precision=cfg.parallel.comm_precision,
                         grad_norm=bool(cfg.optimization.clip_grad_norm) or cfg.optimization.precision == "fp16",
                         pruned_halo=_pruned_halo(cfg, pruned), decoupled=cfg.parallel.tensor_decoupled)


def _pruned_halo(cfg, pruned) -> list[int] | None:
    """The halo rows each layer 2..L of a pruned graph-parallel run reads (``None``: not pruned)."""
    if not cfg.parallel.prune or cfg.parallel.mesh.graph_ways == 1:
        return None
    if pruned is None:
        raise ValueError("a pruned run's volume needs the partition's PrunedCounts (plan.pruned.pruned_counts)")
    return pruned.halo_rows()


def _aggregation(cfg) -> str:
    from fullgraph.models import model_spec

    return model_spec(cfg.model.name).norm


def _depth(cfg, graph) -> int:
    """The model's number of graph layers: the option, or what a user's builder builds for ``graph``."""
    from fullgraph.models import norm_and_depth

    return norm_and_depth(cfg.model.name, cfg.model.layers, cfg.model.args,
                          lambda: (graph.num_features, graph.num_classes, graph.node_types))[1]


def _bounds(cfg, graph) -> list[tuple[int, int]]:
    from fullgraph.parallel.schedule import stage_bounds

    return stage_bounds(_depth(cfg, graph), cfg.parallel.mesh.stages, cfg.parallel.stage_layer_list)


def _shape(cfg, graph, model=None):
    from fullgraph.plan.volumes import ModelShape

    model = build_planned_model(cfg, graph) if model is None else model
    sparse = str(graph.x.layout) != "torch.strided"  # (torch is not imported here until a kernel is timed)
    return ModelShape.of(cfg.model.name, model, graph.num_features, graph.num_classes, sparse)


def _partition_stats(cfg, graph, ways: int, partition_dir: str | None) -> list[dict]:
    """Per part of the ``ways``-way partition: inner, halo and edge counts (``partition.json``)."""
    from fullgraph.parallel.setup import prepare_partition_dir
    from fullgraph.partition.store import load_meta

    if ways == 1:
        return [{"part": 0, "inner": graph.num_nodes, "halo": 0, "edges": graph.num_edges}]
    if partition_dir is not None and int(load_meta(partition_dir)["parts"]) == ways:
        return load_meta(partition_dir)["part_stats"]
    return load_meta(prepare_partition_dir(cfg, ways, graph=graph))["part_stats"]


def _pruned_counts(cfg, graph, model, partition_dir: str | None):
    """``plan.pruned.PrunedCounts`` of a pruned graph-parallel run, on the partition it would use."""
    from fullgraph.plan.pruned import pruned_counts

    ways = cfg.parallel.mesh.graph_ways
    parts = (_node_part(cfg, graph, partition_dir), ways) if ways > 1 else ()  # one process: the whole graph
    return pruned_counts(graph, model.norm, len(model.layers), *parts)


def _node_part(cfg, graph, partition_dir: str | None):
    """Each node's part in the partition a run would use (``--partition-dir``, else made and cached)."""
    from fullgraph.parallel.setup import node_parts, prepare_partition_dir

    pdir = partition_dir or prepare_partition_dir(cfg, cfg.parallel.mesh.graph_ways, graph=graph)
    return node_parts(pdir, graph.num_nodes)


def _chunk_sources(cfg, graph, partition_dir: str | None) -> list[int] | None:
    """Per part, the source rows of its chunks together (``plan.rank_work.chunk_sources``), from the
    chunk map ``fullgraph train`` would use (cut and cached like the partition)."""
    from fullgraph.parallel.setup import node_parts, prepare_chunk_file, prepare_partition_dir
    from fullgraph.partition.chunks import load_chunks
    from fullgraph.plan.rank_work import chunk_sources

    if cfg.parallel.chunk_edges == "induced":
        return None
    ways = cfg.parallel.mesh.graph_ways
    pdir = partition_dir if partition_dir is not None else prepare_partition_dir(cfg, ways, graph=graph)
    node_chunk = load_chunks(prepare_chunk_file(cfg, pdir, graph=graph), graph.num_nodes, cfg.parallel.num_chunks)
    return chunk_sources(graph.indptr, graph.indices, node_parts(pdir, graph.num_nodes), node_chunk, ways,
                         cfg.parallel.num_chunks)
