"""``fullgraph plan --machines M`` (issue 36 §4): P ranks spread over M machines, those of one machine
sharing its cores and talking over shared memory, the others over the network; one machine unless a
network flag says otherwise. The model's checks are analytic (fixed rates, made-up volumes): no timing."""

import json

import pytest

from fullgraph.cli import main
from fullgraph.models import build_model
from fullgraph.plan.epoch_time import Kernels, LayerCalls, Network, RankWork, Traffic, estimate_epoch, estimate_layout
from fullgraph.plan.machines import SHARED_CORE_WAIT_US, SHARED_MEMORY, Machines, split

CORA = ("--dataset", "cora", "--layers", "2", "--hidden", "16", "--layout", "graph")


def _lines(capsys, *flags) -> list[str]:
    assert main(["plan", *flags]) == 0
    return capsys.readouterr().out.splitlines()


def test_one_machine_is_the_default_and_the_first_line_says_so(shared_data, capsys):
    out = _lines(capsys, *CORA, "--root", str(shared_data), "--nprocs", "2")
    assert out[0].startswith("planning for one machine (its ") and "shared memory" in out[0]
    assert "give --machines/--bandwidth-gbps for a cluster" in out[0]
    assert "2 processes on 1 machine;" in out[1]
    got = json.loads("\n".join(_lines(capsys, *CORA, "--root", str(shared_data), "--nprocs", "2", "--json")))
    assert got["setting"] == out[0] and got["machines"]["count"] == 1 and got["machines"]["ranks_each"] == 2
    assert "on one machine" in got["recommendation"]
    # a network flag alone: a machine per rank, on that network
    apart = _lines(capsys, *CORA, "--root", str(shared_data), "--nprocs", "2", "--latency-us", "20")
    assert apart[0].startswith("planning for 2 machines") and "one rank each" in apart[0] and "20 us" in apart[0]
    # --machines 1 with a network flag: one machine, and the flag does not apply
    one = _lines(capsys, *CORA, "--root", str(shared_data), "--nprocs", "2", "--machines", "1",
                 "--bandwidth-gbps", "1")
    assert one[0].startswith("planning for one machine") and one[0].endswith("do not apply to one machine)")


@pytest.mark.parametrize("machines, expected", [("0", "expected 1 <= --machines <= --nprocs (4) (got 0)"),
                                                ("5", "expected 1 <= --machines <= --nprocs (4) (got 5)"),
                                                ("3", "expected --machines to divide --nprocs (4)")])
def test_machines_out_of_range_is_refused_in_one_line(capsys, machines, expected):
    assert main(["plan", "--nprocs", "4", "--machines", machines]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err


def test_torchrun_places_the_ranks_in_blocks_and_the_traffic_splits_by_peer():
    m = Machines(2, 4, cores=8)
    assert m.placement() == [0, 0, 1, 1] and m.per_machine == 2 and m.threads == 4
    assert m.local_share(0, range(4)) == pytest.approx(1 / 3)  # of peers 1, 2, 3 only 1 is on machine 0
    assert m.local_share(0, [2]) == 0.0 and m.local_share(3, [2]) == 1.0
    assert m.spans([0, 1]) is False and m.spans([1, 2]) is True
    net, local = split([(Traffic(stream=300.0, messages=3), 1 / 3), (Traffic(exchange=10.0, overlapped=0), 1.0)])
    assert (local.stream, local.messages, local.exchange) == pytest.approx((100.0, 1.0, 10.0))
    assert (net.stream, net.messages, net.exchange) == pytest.approx((200.0, 2.0, 0.0))


def test_same_machine_traffic_is_priced_at_shared_memory_and_the_rest_at_the_network():
    model = build_model("gcn", 16, 16, layers=2, hidden=16, dropout=0.0)
    k = Kernels(spmm_s=0.0, gemm_s=0.0)  # no compute: the epoch is its communication
    network = Network(bandwidth_gbps=8.0, latency_us=100.0)
    local = Network(bandwidth_gbps=80.0, latency_us=10.0, exchange_gbps=40.0)
    none = LayerCalls((0, 1), rows=0, src_rows=0, nnz=0)
    work = RankWork(0, (none,), (none,), train_traffic=Traffic(stream=1e9, exchange=1e9, messages=10),
                    train_local=Traffic(stream=1e9, exchange=1e9, messages=10))
    # 1 GB point to point and 1 GB all-to-all each tier: 1 + 1 s on the network, 0.1 + 0.2 s on the machine
    assert estimate_epoch(work, model, k, network, local=local).comm_s == pytest.approx(2.0 + 1e-3 + 0.3 + 1e-4)
    assert estimate_epoch(work, model, k, network).comm_s == pytest.approx(2 * (2.0 + 1e-3))  # no local tier given
    # the evaluation's hand-over too, through estimate_layout
    handing = [RankWork(s, (none,), (none,), stages=2, eval_local=Traffic(stream=8e9 if s == 0 else 0))
               for s in (0, 1)]
    assert estimate_layout(handing, model, k, network, local=local).eval_s == pytest.approx(0.8)


def test_rank_works_send_a_ranks_halo_to_its_own_machine_in_proportion_to_its_peers_there(shared_data):
    from fullgraph.cli.plan import _bounds, _partition_stats, _shape, build_planned_model, run_volume
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph
    from fullgraph.parallel.registry import rank_works

    cfg = TrainConfig.of(dataset="cora", root=str(shared_data), layers=2, hidden=16, nprocs=4, parallel="graph")
    graph = load_graph(cfg)
    model = build_planned_model(cfg, graph)
    parts = _partition_stats(cfg, graph, 4, None)
    shape = _shape(cfg, graph, model)
    volume = run_volume(cfg, graph, sum(p["halo"] for p in parts), shape=shape)

    def works(m):
        return rank_works(cfg, graph, model, shape, _bounds(cfg, graph), parts, volume, None,
                          None if m is None else Machines(m, 4, cores=2))

    apart, one, two = works(None), works(1), works(2)
    for a, o, t in zip(apart, one, two):
        assert a.train_local == Traffic() and o.train_traffic.bytes == 0.0  # all network / all shared memory
        assert o.train_local.exchange == pytest.approx(a.train_traffic.exchange)
        assert t.train_local.exchange == pytest.approx(a.train_traffic.exchange / 3)  # 1 of 3 peers at home
        assert t.train_traffic.stream == pytest.approx(a.train_traffic.stream)  # the ring spans both machines


def test_ranks_sharing_a_machine_compute_at_the_cores_efficiency():
    model = build_model("gcn", 16, 16, layers=2, hidden=16, dropout=0.0)
    k, net = Kernels(spmm_s=1e-9, gemm_s=1e-10), Network()
    one = LayerCalls((0, 1), rows=1000, src_rows=1000, nnz=10_000)
    alone = estimate_epoch(RankWork(0, (one,), (one,)), model, k, net).compute_s
    two = [RankWork(0, (one,), (one,))] * 2

    def busy(e):
        return e.compute_s + e.contention_s

    apart = estimate_layout(two, model, k, net, cores=2, core_efficiency=0.8, machines=[0, 1])
    together = estimate_layout(two, model, k, net, cores=2, core_efficiency=0.8, machines=[0, 0])
    assert busy(apart) == pytest.approx(alone)  # a machine each: no sharing
    assert busy(together) == pytest.approx(alone / 0.8)  # two ranks, two cores, each at 0.8 of its solo speed
    four = estimate_layout([RankWork(0, (one,), (one,))] * 4, model, k, net, cores=2, core_efficiency=0.8,
                           machines=[0, 0, 1, 1])
    assert busy(four) == pytest.approx(alone / 0.8)  # two machines of two
    crowded = estimate_layout([RankWork(0, (one,), (one,))] * 4, model, k, net, cores=2, core_efficiency=0.8,
                              machines=[0, 0, 0, 0])
    assert busy(crowded) == pytest.approx(2 * alone / 0.8)  # four ranks on two cores: half a core each


def test_plan_layout_shares_a_machines_cores_and_waits_where_ranks_outnumber_them(shared_data, monkeypatch):
    """Through ``plan_layout``: one machine's ranks compute at ``SHARED_CORE_EFFICIENCY``, and where they
    outnumber the cores each message waits ``SHARED_CORE_WAIT_US`` more."""
    import argparse

    import fullgraph.plan.machines as machines_module
    from fullgraph.cli.plan import build_planned_model, plan_layout
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph

    base = dict(dataset="cora", root=str(shared_data), layers=2, hidden=16)
    graph = load_graph(TrainConfig.of(**base))

    class Fixed(Kernels):  # fixed rates, slow enough that compute is the epoch
        pass

    timer = Fixed(spmm_s=1e-6, gemm_s=1e-7)
    object.__setattr__(timer, "model", build_planned_model(TrainConfig.of(**base), graph))
    object.__setattr__(timer, "threads", 1)
    args = argparse.Namespace(nprocs=2, chunks=0, partition_dir=None)

    def row(m: int, efficiency: float) -> dict:
        monkeypatch.setattr(machines_module, "SHARED_CORE_EFFICIENCY", efficiency)
        return plan_layout(graph, base, dict(parallel="graph"), args, timer, Network(), machines=Machines(m, 2, 2))

    apart, full, half = row(2, 1.0), row(1, 1.0), row(1, 0.5)
    assert half["compute_s"] > 1.9 * full["compute_s"] and full["compute_s"] == pytest.approx(apart["compute_s"],
                                                                                               rel=0.05)
    assert Machines(1, 4, 2).links(Network(), 1)[1].latency_us == SHARED_MEMORY.latency_us + SHARED_CORE_WAIT_US
    assert Machines(1, 2, 2).links(Network(), 1)[1] == SHARED_MEMORY  # a core each: no wait
