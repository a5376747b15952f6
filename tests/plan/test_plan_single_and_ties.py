"""``fullgraph plan`` for the machine in front of the user (issue 50 §5): one process is a candidate, every
process count up to ``--nprocs`` is planned and each row says its P; and two layouts whose gap the
layer timings' own spread could reverse are reported as a tie, not picked silently.

Every timing here is injected (``LayerTimer._timed`` replaced), and so is the machine's load: the tests
check what the plan does with timings, never how fast this machine is."""

import json

import pytest

from fullgraph.cli import main
from fullgraph.models import build_model
from fullgraph.plan.epoch_time import LayerCalls, Network, RankWork, Traffic
from fullgraph.plan.layer_timer import LayerTimer
from fullgraph.plan.ranking import pick, tie_line, tied
from fullgraph.plan.sizes import machines_for, plan_sizes, train_flags


@pytest.fixture
def fixed_timings(monkeypatch):
    """Every kernel timing 1 ms per run, and no other work on the machine (all its cores free)."""
    import fullgraph.machine_load

    monkeypatch.setattr(LayerTimer, "_timed", lambda self, fn: 1e-3)
    monkeypatch.setattr(fullgraph.machine_load, "busy_cores", lambda *a, **k: 0.0)


def _plan(capsys, shared_data, *flags) -> dict:
    assert main(["plan", "--dataset", "cora", "--root", str(shared_data), *flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_sizes_planned_are_one_the_powers_of_two_and_p():
    assert [plan_sizes(p) for p in (1, 2, 3, 4, 6, 8)] == [[1], [1, 2], [1, 2, 3], [1, 2, 4], [1, 2, 4, 6],
                                                          [1, 2, 4, 8]]
    with pytest.raises(ValueError):
        plan_sizes(0)
    # a smaller run spreads over as many of the machines as divide its ranks evenly
    assert machines_for(4, 4, True) == 4 and machines_for(2, 4, True) == 2 and machines_for(4, 3, True) == 2
    assert machines_for(3, 2, True) == 1 and machines_for(1, 4, True) == 1
    assert machines_for(4, None, True) == 4 and machines_for(4, None, False) == 1
    assert train_flags(1, {"parallel": "single"}) == "--parallel single"
    assert train_flags(4, {"parallel": "hybrid", "stages": 2, "graph_ways": 2, "prune": True}) == \
        "--nprocs 4 --parallel hybrid --stages 2 --graph-ways 2 --prune"


def test_one_process_is_planned_and_can_be_the_answer(shared_data, capsys, fixed_timings):
    """``--nprocs 1`` plans one process; on a network slow enough, one process beats any split of four."""
    import os

    one = _plan(capsys, shared_data, "--nprocs", "1")
    assert [(r["layout"], r["nprocs"]) for r in one["layouts"]] == [("single", 1)]
    row = one["layouts"][0]
    assert row["bytes_per_epoch"] == 0 and row["peak_bytes_per_rank"] > 0 and row["comm_s"] == 0.0
    assert row["threads"] == (os.cpu_count() or 1)  # an idle machine: all its cores
    assert one["recommendation"].startswith("single with 1 process (fullgraph train --parallel single)")
    slow = _plan(capsys, shared_data, "--nprocs", "4", "--bandwidth-gbps", "0.001")
    assert slow["layouts"][0]["layout"] == "single" and slow["recommendation"].startswith("single with 1 process")
    assert "one process is fastest" in slow["recommendation"]


def test_every_size_up_to_p_is_planned_and_each_row_says_its_p(shared_data, capsys, fixed_timings):
    import os

    cores = os.cpu_count() or 1
    got = _plan(capsys, shared_data, "--nprocs", "4", "--layers", "4", "--hidden", "16")
    assert got["sizes"] == [1, 2, 4]
    by_p = {}
    for r in got["layouts"]:
        by_p.setdefault(r["nprocs"], set()).add(r["layout"])
        assert r["threads"] == max(1, cores // r["nprocs"])  # one machine, nothing else busy: cores over ranks
    assert by_p[1] == {"single"}
    assert by_p[2] == {"graph", "pipeline", "spmm-1d", "tensor"}
    assert by_p[4] == {"graph", "pipeline", "hybrid 2x2", "spmm-1d", "spmm-1.5d c=2", "spmm-2d", "tensor"}
    assert any(line.startswith("P=2 spmm-2d: expected a perfect square") for line in got["refused"])
    assert [r["epoch_s"] for r in got["layouts"]] == sorted(r["epoch_s"] for r in got["layouts"])
    # fixed timings: every round gives the same estimate, so only an exact equality could tie
    assert all(len(set(r["epoch_s_rounds"])) == 1 for r in got["layouts"])
    first, second = got["layouts"][:2]
    assert (got["tie"] is None) == (first["epoch_s"] < second["epoch_s"])
    # the table says each row's P and threads
    assert main(["plan", "--dataset", "cora", "--root", str(shared_data), "--nprocs", "2"]) == 0
    text = capsys.readouterr().out
    assert "| rank | P | layout | threads/rank |" in text and "| single |" in text


def _timer(monkeypatch, *kinds: list[float]):
    """A timer of a 3-layer GCN whose kinds (a 1000-row call, then a 2000-row call) take the given seconds
    per call in rounds 0, 1, 2, handed out in the order a plan takes them (each kind once as it is met,
    then one round over all of them at a time): a 1000-row layout's estimate in round k is ``kinds[0][k]``,
    a 2000-row one's ``kinds[1][k]``."""
    import torch

    model = build_model("gcn", 16, 4, layers=3, hidden=16, dropout=0.0)
    timer = LayerTimer(model, torch.zeros(4000, 16), threads=1, rounds=3)
    order = iter([kind[k] for k in range(3) for kind in kinds])
    monkeypatch.setattr(LayerTimer, "_timed", lambda self, fn: next(order))
    return timer


def _row(name: str, nprocs: int, rows: int, traffic: float = 0.0, *, timer) -> dict:
    """A layout of one rank whose one call covers ``rows`` rows (and ``traffic`` bytes on an 8 Gbit/s
    link), estimated as the plan estimates it: at the timings' medians and under each round."""
    from fullgraph.cli.plan import _estimates

    work = RankWork(0, (LayerCalls((1,), rows, rows, 5 * rows),), (), train_traffic=Traffic(stream=traffic))
    est, rounds = _estimates([work], timer, Network(bandwidth_gbps=8.0, latency_us=0.0), {})
    return {"layout": name, "nprocs": nprocs, "options": {"parallel": name}, "epoch_s": est.total_s,
            "epoch_s_rounds": rounds, "bytes_per_epoch": 0, "compute_s": est.compute_s, "comm_s": est.comm_s}


def _ranked(timer, specs) -> list[dict]:
    rows = [_row(*spec, timer=timer) for spec in specs]  # first pass: each kind timed once
    timer.settle()
    rows = [_row(*spec, timer=timer) for spec in specs]
    return sorted(rows, key=lambda r: r["epoch_s"])


def test_a_gap_within_the_timings_spread_is_a_tie(monkeypatch):
    """Graph at 1.00 s (0.90-1.10 over the rounds) and hybrid at 1.05 s (0.95-1.08): round 1 orders them
    the other way. The plan names both and the gap's range, and picks by the tie rule (fewer processes)."""
    timer = _timer(monkeypatch, [1.00, 1.10, 0.90], [1.05, 0.95, 1.08])
    rows = _ranked(timer, [("graph", 4, 1000), ("hybrid", 2, 2000)])
    assert [r["layout"] for r in rows] == ["graph", "hybrid"]
    assert rows[0]["epoch_s_rounds"] == pytest.approx([1.00, 1.10, 0.90])
    assert [r["layout"] for r in tied(rows)] == ["graph", "hybrid"]
    line = tie_line(rows)
    assert line.startswith("tie: graph (P=4) at 1 s (0.9-1.1 s) and hybrid (P=2) at 1.05 s (0.95-1.08 s)")
    assert "50 ms apart, while the gap moved from -150 to 180 ms over 3 rounds" in line
    assert pick(rows)["layout"] == "hybrid"  # tied: the fewer processes
    spread = timer.spread()
    assert spread["rounds"] == 3 and spread["relative"] == pytest.approx(0.2)  # the first kind: (1.1 - 0.9) / 1.0


def test_a_clear_gap_is_not_a_tie(monkeypatch):
    timer = _timer(monkeypatch, [1.00, 1.10, 0.90], [1.50, 1.62, 1.41])
    rows = _ranked(timer, [("graph", 4, 1000), ("hybrid", 2, 2000)])
    assert tie_line(rows) is None and tied(rows) == rows[:1] and pick(rows)["layout"] == "graph"


def test_luck_both_layouts_share_is_not_a_tie(monkeypatch):
    """Two layouts of the same kernels, one with 50 ms more traffic: each one's estimate moves by 0.8 s
    over the rounds, yet in every round the second is 50 ms slower, so the timings order them."""
    timer = _timer(monkeypatch, [1.0, 1.5, 0.7])
    fifty_ms = 0.05 * 8e9 / 8  # bytes that take 50 ms at 8 Gbit/s
    rows = _ranked(timer, [("graph", 4, 1000), ("spmm-1d", 2, 1000, fifty_ms)])
    assert [r["layout"] for r in rows] == ["graph", "spmm-1d"]
    assert rows[1]["epoch_s"] - rows[0]["epoch_s"] == pytest.approx(0.05)
    assert tie_line(rows) is None and pick(rows)["layout"] == "graph"
