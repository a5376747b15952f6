"""``fullgraph plan``: every layout that fits P processes, what each would move, hold and take per
epoch on a given network, ranked, with the one to pick and why.

Each layout's bytes, works and memory come from its record (``parallel.registry.Layout``). The bytes
are its volume over the real partition (the same partitions ``fullgraph train`` would cut and cache,
so planning first makes training start sooner): the numbers the run's ledger reports. The memory per
rank is ``fullgraph.plan.rank_memory``'s estimate; the time, ``fullgraph.plan.epoch_time``'s model with
this machine's kernels timed in rounds (``LayerTimer.settle``).
"""

from __future__ import annotations

import argparse
import json
import math
import os

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError

__all__ = ["cmd_plan", "candidates", "run_volume"]


def candidates(nprocs: int, layers: int, model: str, model_args: dict | None = None) -> tuple[list[dict], list[str]]:
    """The layouts of ``nprocs`` processes (``TrainConfig`` options each), and one line per layout
    that does not fit, saying why (the configuration's own refusal). ``layers``: the model's depth
    (a user's builder decides it: it is checked against the stages, not given as an option)."""
    from fullgraph.comm.mesh import Mesh
    from fullgraph.models import is_reference, model_spec

    opts = Mesh.layouts_of(nprocs)
    user = is_reference(model)
    if not user and model_spec(model).separable:  # its propagation runs on column slices throughout
        opts += [dict(o, tensor_decoupled=True) for o in opts if Mesh.for_mode(o["parallel"], nprocs).tensor]
    fits, refused = [], []
    for o in opts:
        try:
            cfg = TrainConfig.of(model=model, model_args=model_args or {}, nprocs=nprocs, **o,
                                 **({} if user else {"layers": layers}))
            if user and cfg.parallel.mesh.stages > 1:
                cfg.check_depth(layers)
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
    from fullgraph.data.load import load_graph
    from fullgraph.plan.layer_timer import LayerTimer

    if args.nprocs < 2:
        raise InputError(f"expected --nprocs >= 2 to plan a layout (got {args.nprocs})")
    machines, network = where(args)
    base = dict(dataset=args.dataset, root=args.root, split=args.split, feature_norm=args.feature_norm,
                model=args.model, model_args=dict(args.model_args),
                layers=args.layers, hidden=args.hidden, heads=args.heads, partitioner=args.partitioner)
    TrainConfig.of(**base)  # the model's options, checked before anything is read
    graph = load_graph(TrainConfig.of(**base))
    depth = _depth(TrainConfig.of(**base), graph)
    fits, refused = candidates(args.nprocs, depth, args.model, base["model_args"])
    if args.layout is not None:
        cfg = TrainConfig.of(**base, parallel=args.layout, nprocs=args.nprocs)  # refuses with the reason
        if cfg.parallel.mesh.stages > 1:
            cfg.check_depth(depth)
        fits = [o for o in fits if o["parallel"] == args.layout]
    timer = LayerTimer(build_planned_model(TrainConfig.of(**base), graph), graph.x,
                       threads=args.threads or machines.threads)
    rows = [plan_layout(graph, base, o, args, timer, network, machines=machines) for o in fits]  # each kind once
    timer.settle()  # ... and again, in rounds over all of them
    rows = [plan_layout(graph, base, o, args, timer, network, machines=machines) for o in fits]
    rows.sort(key=lambda r: r["epoch_s"])
    from fullgraph.models import model_spec

    from fullgraph.plan.pruned import minibatch_outlook, pruned_counts

    needed = pruned_counts(graph, timer.model.norm, depth).total_rows()
    measured = model_spec(args.model).memory is None
    given = args.bandwidth_gbps is not None or args.latency_us is not None
    result = {"setting": machines.describe(network, given),
              "graph": graph.name, "nodes": graph.num_nodes, "edges": graph.num_edges, "model": args.model,
              "layers": depth, "hidden": max(timer.model.layer_input_widths()[1:], default=args.hidden),
              "nprocs": args.nprocs,
              "memory_model": "measured on probe blocks (fullgraph.plan.measured)" if measured else "derived (its spec)",
              "machines": _machines_json(machines, network, timer.threads),
              "network": {"bandwidth_gbps": network.bandwidth_gbps, "latency_us": network.latency_us},
              "layouts": rows, "refused": refused, "recommendation": recommend(rows, network, machines),
              "rows_needed_per_layer": needed,
              "minibatch": minibatch_outlook(int(graph.train_mask.sum()), graph.num_nodes, needed)}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print("\n".join(render(result)))
    return 0


def _machines_json(machines, network, threads: int) -> dict:
    """The machines as the plan priced them: their ranks, threads, and both tiers' links as the ranks see
    them (a message's wait for a core included where the ranks outnumber the cores)."""
    remote, local = machines.links(network, threads)
    return {"count": machines.count, "cores": machines.cores, "ranks_each": machines.per_machine,
            "threads_per_rank": threads, "oversubscribed": machines.oversubscribed(threads),
            "links": {"network": vars(remote), "shared_memory": vars(local)}}


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
    """One layout's bytes by category, memory per rank and epoch-time estimate (``timer``: a
    ``LayerTimer`` of the planned model; ``cores``: the cores all ranks share, when they share them,
    each doing ``core_efficiency`` of a solo core's work; ``node_speed``: each rank's machine's speed
    as a fraction of this one's core). ``machines`` (``plan.machines.Machines``, in place of ``cores``
    and ``core_efficiency``): the ranks of each machine share its cores at ``SHARED_CORE_EFFICIENCY`` and
    talk over ``SHARED_MEMORY``, those of different machines over ``network``."""
    from fullgraph.plan.epoch_time import estimate_layout
    from fullgraph.plan.machines import SHARED_CORE_EFFICIENCY
    from fullgraph.parallel.registry import peak_per_rank, rank_works

    cfg = TrainConfig.of(**base, nprocs=args.nprocs, chunks=args.chunks, **o)
    prune = getattr(args, "prune", False) and cfg.parallel.mesh.prunable  # graph: the one layout of P >= 2 that does
    cfg = cfg.with_options(prune=prune)
    mesh, shape = cfg.parallel.mesh, _shape(cfg, graph, timer.model)
    parts = _partition_stats(cfg, graph, mesh.graph_ways, args.partition_dir) if not mesh.operator_layout else None
    pruned = _pruned_counts(cfg, graph, timer.model, args.partition_dir) if prune else None
    volume = run_volume(cfg, graph, sum(p["halo"] for p in parts) if parts else 0, shape=shape, pruned=pruned)
    chunk_src = _chunk_sources(cfg, graph, args.partition_dir) if mesh.stages > 1 else None
    works = rank_works(cfg, graph, timer.model, shape, _bounds(cfg, graph), parts, volume, chunk_src, machines,
                       pruned=pruned)
    shared = {}
    if machines is not None:
        network, local = machines.links(network, timer.threads)
        shared = dict(cores=machines.cores, core_efficiency=SHARED_CORE_EFFICIENCY, local=local,
                      machines=machines.placement())
    est = estimate_layout(works, timer.model, timer, network, threads=timer.threads, node_speed=node_speed,
                          **(shared or dict(cores=cores, core_efficiency=core_efficiency)))
    return {"layout": label(o) + (" --prune" if prune else ""), "options": o | ({"prune": True} if prune else {}),
            "bytes_per_epoch": sum(volume.values()), "by_category": volume,
            "rows_per_layer": pruned.total_rows() if pruned else [graph.num_nodes] * len(timer.model.layers),
            "peak_bytes_per_rank": peak_per_rank(cfg, graph, parts, _bounds(cfg, graph),
                                                 getattr(args, "release_memory", False)),
            "epoch_s": est.total_s,
            "compute_s": est.compute_s + est.contention_s, "comm_s": est.comm_s, "bubble_s": est.bubble_s,
            "eval_s": est.eval_s}


def build_planned_model(cfg, graph):
    """The model ``cfg`` trains, built from the trainer's own arguments (what the plan times and counts)."""
    from fullgraph.models import build_model
    from fullgraph.train.model_file import model_args

    args = model_args(cfg, graph.num_features, graph.num_classes)
    return build_model(args.pop("name"), args.pop("in_dim"), args.pop("out_dim"), **args)


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
                          lambda: (graph.num_features, graph.num_classes))[1]


def _bounds(cfg, graph) -> list[tuple[int, int]]:
    from fullgraph.parallel.schedule import stage_bounds

    return stage_bounds(_depth(cfg, graph), cfg.parallel.mesh.stages, cfg.parallel.stage_layer_list)


def _shape(cfg, graph, model=None):
    from fullgraph.plan.volumes import ModelShape

    model = build_planned_model(cfg, graph) if model is None else model
    return ModelShape.of(cfg.model.name, model, graph.num_features, graph.num_classes, graph.x.layout != _strided())


def _strided():
    import torch

    return torch.strided


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
    from fullgraph.parallel.setup import node_parts, prepare_partition_dir
    from fullgraph.plan.pruned import pruned_counts

    ways = cfg.parallel.mesh.graph_ways
    pdir = partition_dir if partition_dir is not None else prepare_partition_dir(cfg, ways, graph=graph)
    return pruned_counts(graph, model.norm, len(model.layers), node_parts(pdir, graph.num_nodes), ways)


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


def recommend(rows: list[dict], network, machines=None) -> str:
    if not rows:
        return "no layout fits"
    best = rows[0]
    fewest = min(rows, key=lambda r: r["bytes_per_epoch"])
    on = ("on one machine" if machines is not None and machines.count == 1
          else f"at {network.bandwidth_gbps:g} Gbit/s")
    why = (f"communication is most of an epoch {on}" if best["comm_s"] > best["compute_s"]
           else f"computation dominates {on}, and it divides its work most evenly")
    text = (f"{best['layout']}: an estimated {best['epoch_s']:.3g} s per epoch {on}, "
            f"moving {_mb(best['bytes_per_epoch'])} per epoch")
    if fewest is not best:
        text += f" ({fewest['layout']} moves least, {_mb(fewest['bytes_per_epoch'])}, but takes {fewest['epoch_s']:.3g} s)"
    return text + f"; {why}."


def _mb(b: float) -> str:
    return f"{b / 2**20:.1f} MiB"


def render(result: dict) -> list[str]:
    net, machines = result["network"], result["machines"]
    link = (f", {net['bandwidth_gbps']:g} Gbit/s, {net['latency_us']:g} us" if machines["count"] > 1 else "")
    out = [result["setting"],
           f"# plan: {result['graph']} ({result['nodes']} nodes, {result['edges']} edges), {result['model']} "
           f"{result['layers']} x {result['hidden']}, {result['nprocs']} processes on {machines['count']} "
           f"machine{'s' if machines['count'] > 1 else ''}{link}; memory model {result['memory_model']}", "",
           "| rank | layout | MiB/epoch | peak MiB/rank | epoch s | train: compute s | comm s | bubble s | eval s |",
           "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for i, r in enumerate(result["layouts"], 1):
        out.append(f"| {i} | {r['layout']} | {r['bytes_per_epoch'] / 2**20:.2f} | {r['peak_bytes_per_rank'] / 2**20:.0f} "
                   f"| {r['epoch_s']:.3g} | {r['compute_s']:.3g} | {r['comm_s']:.3g} | {r['bubble_s']:.3g} "
                   f"| {r['eval_s']:.3g} |")
    out += ["", "bytes per epoch by category:"]
    for r in result["layouts"]:
        out.append(f"  {r['layout']}: " + ", ".join(f"{k} {v}" for k, v in r["by_category"].items()))
    out += [f"does not fit: {line}" for line in result["refused"]]
    return out + ["", "recommended: " + result["recommendation"], "against mini-batch: " + result["minibatch"] + "."]
