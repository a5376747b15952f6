"""``fullgraph plan``: every layout that fits P, ranked, with a recommendation; layouts that do not fit
are named with the reason. (That its bytes equal every layout's ledger is checked where the layouts
run: tests/parallel/, through ``tests.distributed.planned_bytes``.)"""

import json

import pytest

from fullgraph.cli import main
from fullgraph.cli.plan import candidates
from fullgraph.comm.mesh import Mesh
from fullgraph.models import build_model
from fullgraph.plan.epoch_time import (
    EpochEstimate, Kernels, LayerCalls, Network, RankWork, Traffic, estimate_epoch, estimate_layout,
)
from fullgraph.plan.layer_timer import LayerTimer
from fullgraph.parallel.registry import layout_volume
from fullgraph.plan.volumes import ModelShape


def _plan(capsys, *flags) -> dict:
    assert main(["plan", *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_lists_every_layout_that_fits_ranked_by_estimated_time(shared_data, capsys, monkeypatch):
    """Every layout of P = 4 among the rows (those of P = 1 and 2 beside them: tests/plan/
    test_plan_single_and_ties.py), ranked, the pick named first in the recommendation. The kernels'
    timings are fixed (1 ms a call): what is checked is the ranking, not this machine's speed."""
    import fullgraph.machine_load
    from fullgraph.plan.ranking import pick

    monkeypatch.setattr(LayerTimer, "_timed", lambda self, fn: 1e-3)
    monkeypatch.setattr(fullgraph.machine_load, "busy_cores", lambda *a, **k: 0.0)
    got = _plan(capsys, "--dataset", "cora", "--root", str(shared_data), "--nprocs", "4", "--layers", "4",
                "--hidden", "16")
    names = [r["layout"] for r in got["layouts"] if r["nprocs"] == 4]
    assert sorted(names) == sorted(["graph", "pipeline", "hybrid 2x2", "spmm-1d", "spmm-1.5d c=2", "spmm-2d", "tensor"])
    assert [r["epoch_s"] for r in got["layouts"]] == sorted(r["epoch_s"] for r in got["layouts"])
    assert got["recommendation"].startswith(pick(got["layouts"])["layout"] + " with ")
    assert any(line.startswith("P=4 spmm-3d: expected a perfect cube") for line in got["refused"])
    four = [r for r in got["layouts"] if r["nprocs"] == 4]
    for r in four:
        assert r["bytes_per_epoch"] == sum(r["by_category"].values()) > 0
        assert r["peak_bytes_per_rank"] > 0 and r["epoch_s"] == pytest.approx(
            r["compute_s"] + r["comm_s"] + r["bubble_s"] + r["eval_s"])
    by = {r["layout"]: r["by_category"] for r in four}
    assert set(by["pipeline"]) >= {"pipe/fwd", "pipe/bwd"} and "halo/fwd" not in by["pipeline"]
    assert "spmm/bcast" in by["spmm-1d"] and "spmm/reduce" in by["spmm-1.5d c=2"]
    assert set(by["tensor"]) >= {"tp/fwd", "tp/bwd"} and not any(k.startswith(("halo", "spmm")) for k in by["tensor"])


def test_a_slower_network_favours_the_layouts_that_move_less(shared_data, capsys, monkeypatch):
    """The same layout on a slower network: the same bytes, more time on the wire (kernel timings fixed
    at 1 ms a call, so that a busy machine's slow compute cannot hide the wire behind the overlap)."""
    monkeypatch.setattr(LayerTimer, "_timed", lambda self, fn: 1e-3)
    common = ("--dataset", "cora", "--root", str(shared_data), "--nprocs", "4", "--layers", "4", "--hidden", "16",
              "--layout", "spmm-1d")
    fast = _plan(capsys, *common, "--bandwidth-gbps", "100")["layouts"][0]
    slow = _plan(capsys, *common, "--bandwidth-gbps", "0.01")["layouts"][0]
    assert slow["by_category"] == fast["by_category"]  # bytes do not depend on the network
    assert slow["comm_s"] > 100 * fast["comm_s"] and slow["epoch_s"] > fast["epoch_s"]


def test_plan_refuses_a_layout_that_does_not_fit_with_one_line(capsys):
    assert main(["plan", "--nprocs", "6", "--layout", "spmm-2d"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "expected a perfect square --nprocs" in err[0] and "got 6" in err[0]
    assert main(["plan", "--nprocs", "0"]) == 2
    assert "expected --nprocs >= 1" in capsys.readouterr().err
    assert main(["plan", "--nprocs", "1", "--layout", "graph"]) == 2  # one process is --layout single
    assert "expected --nprocs >= 2 with --layout graph" in capsys.readouterr().err


def test_candidates_follow_the_factors_of_p():
    fits, refused = candidates(8, 4, "gcn")
    shapes = {(o["parallel"], o.get("stages"), o.get("replication")) for o in fits}
    assert ("hybrid", 2, None) in shapes and ("hybrid", 4, None) in shapes and ("spmm-3d", None, None) in shapes
    assert ("spmm-1.5d", None, 2) in shapes and not any(p == "spmm-2d" for p, _, _ in shapes)
    assert any(line.startswith("pipeline: expected at most one stage per layer") for line in refused)
    fits, _ = candidates(4, 4, "gat")  # attention is no fixed matrix: no SpMM layout
    assert not any(o["parallel"].startswith("spmm") for o in fits)


def test_layout_volume_by_hand():
    """A 3-layer model of widths 10 -> 8 -> 8 -> 3, 100 nodes, 40 halo rows over 4 parts."""
    shape = ModelShape(input_widths=(10, 8, 8), params=1000)
    graph = layout_volume(Mesh.for_mode("graph", 4), shape, nodes=100, halo_rows=40, evaluate=False)
    assert graph["halo/fwd"] == graph["halo/bwd"] == 40 * 4 * (8 + 8)  # layers 2 and 3 read halo rows
    assert graph["grad/allreduce"] == 4 * 1000 * 4
    pipe = layout_volume(Mesh.for_mode("pipeline", 3), shape, nodes=100, stage_starts=[1, 2])
    assert pipe["pipe/fwd"] == pipe["eval/pipe/fwd"] == 100 * 4 * (8 + 8) and "grad/allreduce" not in pipe
    h0 = layout_volume(Mesh.for_mode("pipeline", 3), ModelShape((8, 8, 8), 1000, h0_width=8), nodes=100,
                       stage_starts=[1, 2])
    assert h0["pipe/fwd"] == 2 * pipe["pipe/fwd"]  # H0 rides along with every row
    with pytest.raises(ValueError, match="first layer of each of stages 2..3"):
        layout_volume(Mesh.for_mode("pipeline", 3), shape, nodes=100, stage_starts=[1])


def test_the_epoch_model_adds_the_bubble_the_unhidden_communication_and_the_staged_evaluation():
    model = build_model("gcn", 16, 16, layers=2, hidden=16, dropout=0.0)
    k, net = Kernels(spmm_s=1e-9, gemm_s=1e-10), Network(bandwidth_gbps=8.0, latency_us=0.0, exchange_gbps=4.0)
    one = LayerCalls((0, 1), rows=1000, src_rows=1000, nnz=10_000)
    per_layer = 10_000 * 16 * 1e-9 + 1000 * 16 * 16 * 1e-10
    flat = estimate_epoch(RankWork(0, (one,), (one,)), model, k, net)
    assert flat.compute_s == pytest.approx(3 * 2 * per_layer) and flat.eval_s == 0.0
    chunked = LayerCalls((0, 1), 1000, 1000, 10_000, calls=8)
    piped = estimate_epoch(RankWork(0, (chunked,), (one,), stages=4, chunks=8), model, k, net)
    assert piped.bubble_s == pytest.approx(flat.compute_s * 3 / 8)  # nothing streamed: no transfer in it
    # Adam's step over the rank's parameters: compute, after the last chunk (not in the bubble)
    stepped = estimate_epoch(RankWork(0, (chunked,), (one,), stages=4, chunks=8, params=1000), model,
                             Kernels(spmm_s=1e-9, gemm_s=1e-10, step_s=1e-6), net)
    assert stepped.compute_s == pytest.approx(piped.compute_s + 1e-3) and stepped.bubble_s == piped.bubble_s
    sent = estimate_epoch(RankWork(0, (one,), (one,), train_traffic=Traffic(stream=1e9, exchange=1e9)), model, k, net)
    assert sent.comm_s == pytest.approx(1.0 + 2.0)  # 1 GB point to point at 8 Gbit/s, 1 GB all-to-all at 4
    hidden = estimate_epoch(RankWork(0, (one,), (one,), train_traffic=Traffic(stream=1e3, overlapped=1e3)),
                            model, k, net)
    assert hidden.comm_s == 0.0 and isinstance(hidden, EpochEstimate)  # overlapped with longer compute
    # the evaluation goes through the stages in turn, each handing its rows on: stage times add up
    stages = [RankWork(s, (one,), (one,), stages=2, eval_traffic=Traffic(stream=1e9 if s == 0 else 0)) for s in (0, 1)]
    staged = estimate_layout(stages, model, k, net)
    assert staged.eval_s == pytest.approx(2 * 2 * per_layer + 1.0)
    # ranks that share cores wait for each other's compute
    four = [RankWork(0, (one,), (one,))] * 4
    assert estimate_layout(four, model, k, net).contention_s == 0.0
    shared = estimate_layout(four, model, k, net, cores=2)
    assert shared.contention_s == pytest.approx(flat.compute_s) and shared.eval_s == pytest.approx(4 * 2 * per_layer / 2)
    # ranks of several threads each: the bound counts the cores their threads hold (compute timed on 2 threads
    # uses 2 cores), so 4 ranks x 2 threads on 2 cores wait twice as long as 4 ranks x 1 thread
    doubled = estimate_layout(four, model, k, net, cores=2, threads=2)
    assert doubled.contention_s == pytest.approx(3 * flat.compute_s) and doubled.eval_s == pytest.approx(
        4 * 2 * per_layer)
    # while a rank waits for the network its core serves the others: the bound is compute alone
    waiting = [RankWork(0, (one,), (one,), train_traffic=Traffic(stream=1e6))] * 4  # 1 ms at 8 Gbit/s
    bound = estimate_layout(waiting, model, k, net, cores=2)
    assert bound.comm_s == pytest.approx(1e-3) and bound.contention_s == pytest.approx(flat.compute_s - 1e-3)
    # cores shared at half their solo speed: the bound doubles, the training step's and the evaluation's
    slow = estimate_layout(four, model, k, net, cores=2, core_efficiency=0.5)
    assert slow.contention_s == pytest.approx(3 * flat.compute_s) and slow.eval_s == pytest.approx(4 * 2 * per_layer)
    # moving a byte takes the shared cores' time too (an emulated link): 4 ranks × 1 MB at 1 ns each
    costly = Network(bandwidth_gbps=8.0, latency_us=0.0, exchange_gbps=4.0, cpu_ns_per_byte=1.0)
    emulated = estimate_layout(waiting, model, k, costly, cores=2)
    assert emulated.contention_s == pytest.approx(flat.compute_s - 1e-3 + 4 * 1e6 * 1e-9 / 2)
    own = estimate_layout(waiting, model, k, costly)  # a core each: no contention, each pays for its own bytes
    assert own.contention_s == 0.0 and own.compute_s == pytest.approx(flat.compute_s + 1e6 * 1e-9)
    assert estimate_layout(waiting, model, k, costly, node_speed=0.5).compute_s == pytest.approx(2 * own.compute_s)
    with pytest.raises(ValueError, match="core_efficiency"):
        estimate_layout(four, model, k, net, cores=2, core_efficiency=1.5)
    # each rank on a machine of its own at half this core's speed: compute, bubble and evaluation double,
    # the bytes' time does not
    halves = [RankWork(s, (chunked,), (one,), stages=2, chunks=8, train_traffic=Traffic(stream=1e9)) for s in (0, 1)]
    full, half = estimate_layout(halves, model, k, net), estimate_layout(halves, model, k, net, node_speed=0.5)
    assert (half.compute_s, half.bubble_s, half.eval_s) == pytest.approx((2 * full.compute_s, 2 * full.bubble_s,
                                                                         2 * full.eval_s))
    assert half.comm_s == pytest.approx(full.comm_s) == pytest.approx(1.0) and half.contention_s == 0.0
    with pytest.raises(ValueError, match="node_speed"):
        estimate_layout(four, model, k, net, node_speed=0.0)


def test_the_layer_timer_times_the_models_own_layers_and_scales_with_rows(shared_data):
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    graph = load_graph(TrainConfig.of(dataset="cora", root=str(shared_data)))
    model = build_model("gcn", graph.num_features, graph.num_classes, layers=3, hidden=64, dropout=0.5)
    timer = LayerTimer(model, graph.x, threads=1, max_entries=1 << 16)
    whole = LayerCalls((0, 1, 2), 2000, 2000, 20_000)
    train, evaluate = timer.seconds(model, whole, True), timer.seconds(model, whole, False)
    assert 0 < evaluate < train
    # past the sample (1 << 16 entries: 1000 rows of width 64), time grows with the rows it stands for
    assert timer.seconds(model, LayerCalls((1,), 4000, 4000, 40_000), True) == pytest.approx(
        2 * timer.seconds(model, LayerCalls((1,), 2000, 2000, 20_000), True))
    # a chunked pass is its calls, each timed at the chunk's size (as the chunked engines run a call:
    # with the history-table copies around the layer, ``chunk_step``)
    assert timer.seconds(model, LayerCalls((1,), 2000, 3000, 20_000, calls=4), True) == pytest.approx(
        2 * timer.seconds(model, LayerCalls((1,), 1000, 1500, 10_000, calls=2), True))
    chunked = [key[-1] for key in timer._samples if key[0] != "post"]  # layer timings: chunked or not
    assert any(chunked) and not all(chunked)
    # Adam's step: timed on at most the sample's entries (one timing serves both), scaled to the parameters
    assert timer.step_seconds(0) == 0.0 < timer.step_seconds(1 << 16)
    assert timer.step_seconds(1 << 18) == pytest.approx(4 * timer.step_seconds(1 << 16))


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("layout", [dict(parallel="graph"), dict(parallel="pipeline"),
                                    dict(parallel="hybrid", stages=2, graph_ways=2)])
def test_each_ranks_traffic_adds_up_to_the_layouts_volume(shared_data, layout, precision):
    """Apportioned to the ranks, the training step's halo and chunk-stream bytes add up to the
    volume's (each byte leaves one rank and reaches another: the busier direction of each link), at
    the run's communication precision."""
    from fullgraph.cli.plan import _bounds, _partition_stats, _shape, build_planned_model, run_volume
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph
    from fullgraph.parallel.registry import rank_works

    cfg = TrainConfig.of(dataset="cora", root=str(shared_data), layers=4, hidden=16, nprocs=4,
                         comm_precision=precision, **layout)
    graph = load_graph(cfg)
    model = build_planned_model(cfg, graph)
    parts = _partition_stats(cfg, graph, cfg.parallel.mesh.graph_ways, None)
    shape = _shape(cfg, graph, model)
    volume = run_volume(cfg, graph, sum(p["halo"] for p in parts), shape=shape)
    works = rank_works(cfg, graph, model, shape, _bounds(cfg, graph), parts, volume)
    assert len(works) == 4 and {w.stage for w in works} == set(range(cfg.parallel.mesh.stages))
    halo = volume.get("halo/fwd", 0) + volume.get("halo/bwd", 0)
    assert sum(w.train_traffic.exchange for w in works) == pytest.approx(halo)
    pipe = volume.get("pipe/fwd", 0) + volume.get("pipe/bwd", 0)
    assert sum(w.train_traffic.overlapped for w in works) == pytest.approx(pipe)
    assert sum(w.eval_traffic.stream for w in works) == pytest.approx(volume.get("eval/pipe/fwd", 0))
    # each stage's ranks step its parameters: the stages' shares add up to the model's
    params = sum(p.numel() for p in model.parameters())
    assert sum(w.params for w in works) == params * cfg.parallel.mesh.graph_ways


@pytest.mark.parametrize("run_s, calls", [(1e-4, 200), (0.01, 20), (0.3, 4), (2.0, 1)])
def test_the_layer_timer_samples_small_calls_over_a_span(monkeypatch, run_s, calls):
    """How many runs a timing takes, on a fake clock: seven at least; a fast call until its runs span
    0.2 s (at most 200), so that one busy moment cannot fill every sample; a slow one until 1 s has
    passed (at least three); one that alone exceeds the budget, once."""
    from fullgraph.plan import layer_timer

    clock = {"t": 0.0, "runs": 0}

    def run():
        clock["t"] += run_s
        clock["runs"] += 1

    monkeypatch.setattr(layer_timer.time, "perf_counter", lambda: clock["t"])
    timer = LayerTimer.__new__(LayerTimer)
    timer.threads, timer.seed = 1, 0
    assert timer._timed(run) == pytest.approx(run_s)
    assert clock["runs"] == 1 + calls  # the warm-up, then the timed runs


def test_the_layer_timer_settles_on_the_median_of_timings_taken_in_rounds(shared_data, monkeypatch):
    """A kind is timed once when first asked for; ``settle`` times every kind again, one round over
    all of them at a time, and the kind then costs the median: one unlucky timing (the first, here)
    no longer scales every layer of its kind."""
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    graph = load_graph(TrainConfig.of(dataset="cora", root=str(shared_data)))
    model = build_model("gcn", graph.num_features, graph.num_classes, layers=3, hidden=16, dropout=0.5)
    timer = LayerTimer(model, graph.x, threads=1, rounds=3)
    # seconds per run, in the order the timings are taken: small, large, then the rounds
    runs = iter([9.0, 4.0, 1.0, 5.0, 2.0, 3.0, 0.1, 0.2])
    monkeypatch.setattr(LayerTimer, "_timed", lambda self, fn: next(runs))
    small, large = LayerCalls((1,), 1000, 1000, 5000), LayerCalls((1,), 2000, 2000, 10_000)
    assert timer.seconds(model, small, True) == pytest.approx(9.0)  # one timing: taken as it is
    assert timer.seconds(model, large, True) == pytest.approx(4.0)
    timer.settle()
    # by rounds over all the kinds (small 9, 1, 2; large 4, 5, 3), not one kind thrice and then the
    # other (small 9, 1, 5; large 4, 2, 3)
    assert timer.seconds(model, small, True) == pytest.approx(2.0)
    assert timer.seconds(model, large, True) == pytest.approx(4.0)
    timer.settle()  # every kind has its rounds: nothing is timed again
    assert timer.seconds(model, small, True) == pytest.approx(2.0)
    timer.sample()  # one more timing of every kind, in the order they were met
    assert timer.seconds(model, small, True) == pytest.approx(1.5)  # 9, 1, 2, 0.1
    assert timer.seconds(model, large, True) == pytest.approx(3.5)  # 4, 5, 3, 0.2


def test_plan_times_and_sizes_runs_as_train_will_run_them(shared_data, capsys, monkeypatch):
    """The plan keeps glibc's own allocation threshold, as ``fullgraph train`` does (a fixed 1 MiB one
    page-faults every large tensor in afresh and timed wide layers 40 % slower than training runs
    them), and estimates the ranks' peak for that threshold; ``--release-memory`` plans such runs."""
    import fullgraph.memory

    fixed = []
    monkeypatch.setattr(fullgraph.memory, "return_freed_memory", lambda: fixed.append(True) or True)
    common = ("--dataset", "cora", "--root", str(shared_data), "--nprocs", "2", "--layers", "2", "--hidden", "256",
              "--layout", "graph")  # a rank's activations (1354 x 256 floats) pass 1 MiB
    default = _plan(capsys, *common)["layouts"][0]
    assert fixed == []
    lean = _plan(capsys, *common, "--release-memory")["layouts"][0]
    assert fixed == [True]
    assert lean["by_category"] == default["by_category"]
    assert lean["peak_bytes_per_rank"] < default["peak_bytes_per_rank"]  # mmapped activations: less overhead
    # the largest part's own estimate, as its rank will check it: sparse features counted sparse
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph
    from fullgraph.parallel.setup import prepare_partition_dir
    from fullgraph.partition.store import load_meta
    from fullgraph.plan import estimate_peak_bytes, partition_memory_stats
    from fullgraph.memory import MMAP_THRESHOLD_BYTES

    cfg = TrainConfig.of(dataset="cora", root=str(shared_data), layers=2, hidden=256)
    meta = load_meta(prepare_partition_dir(cfg, 2, graph=load_graph(cfg)))
    own = max(estimate_peak_bytes(**s, model="gcn", layers=2, hidden=256, mmap_threshold=MMAP_THRESHOLD_BYTES)
              for s in partition_memory_stats(meta))
    assert lean["peak_bytes_per_rank"] == pytest.approx(own, rel=0.002), lean["peak_bytes_per_rank"] / own


def test_plan_takes_a_users_model_and_says_its_memory_is_measured(shared_data, capsys):
    from pathlib import Path

    model = f"{Path(__file__).resolve().parents[2]}/examples/gated_sage.py:build"
    got = _plan(capsys, "--dataset", "cora", "--root", str(shared_data), "--nprocs", "2", "--model", model,
                "--model-arg", "layers=3", "--model-arg", "hidden=16", "--layout", "graph")
    assert (got["layers"], got["hidden"]) == (3, 16)  # the builder's model, not --layers' default
    assert got["memory_model"].startswith("measured") and [r["layout"] for r in got["layouts"]] == ["graph"]
    assert got["layouts"][0]["peak_bytes_per_rank"] > 0 and got["layouts"][0]["by_category"]["halo/fwd"] > 0
    fits, refused = candidates(4, 2, model)  # a pipeline of four stages for the builder's two layers
    assert "pipeline" not in [o["parallel"] for o in fits]
    assert any(line.startswith("pipeline: expected at most one stage per layer") for line in refused)
    assert any("spmm-1d: expected a model whose aggregation is one sparse product" in line for line in refused)
