"""The default thread count against the machine's load (``fullgraph.machine_load``): a process takes the
cores other processes leave free, not all of them, and says once when it and they still ask for more
cores than there are. Every reading of the machine is injected: nothing here depends on this machine's
load or its speed (``benchmarks/threads_under_load.py`` measures that)."""

import logging
from types import SimpleNamespace

import pytest

from fullgraph import machine_load
from fullgraph.machine_load import (
    busy_cores, busy_note, cpu_jiffies, default_threads, process_threads, warn_if_busy,
)
from fullgraph.plan.sizes import threads_for


def test_proc_stat_counts_idle_and_io_wait_as_not_busy():
    #          user nice system idle iowait irq softirq steal guest guest_nice
    line = "cpu  100 5 20 300 10 1 2 3 0 0"
    assert cpu_jiffies(line) == (100 + 5 + 20 + 1 + 2 + 3, 441)
    assert cpu_jiffies("intr 1 2 3") is None


def test_busy_cores_leave_out_this_processes_own_cpu(monkeypatch):
    """Over the sample, the cores' busy share times the cores, less what this process itself used."""
    readings = iter([(1000, 4000), (1000 + 150, 4000 + 200)])  # 150 of 200 jiffies busy: 0.75 of 4 cores = 3
    own = iter([10.0, 10.1])  # this process: 0.1 s of CPU in the 0.1 s sample, one core
    clock = iter([0.0, 0.1])
    monkeypatch.setattr(machine_load, "cpu_jiffies", lambda: next(readings))
    monkeypatch.setattr(machine_load, "_own_cpu_s", lambda: next(own))
    monkeypatch.setattr(machine_load, "time", SimpleNamespace(monotonic=lambda: next(clock), sleep=lambda s: None))
    assert busy_cores(0.1, cores=4) == pytest.approx(2.0)
    monkeypatch.setattr(machine_load, "cpu_jiffies", lambda: None)  # no /proc/stat: unknown
    monkeypatch.setattr(machine_load, "_own_cpu_s", lambda: 0.0)
    monkeypatch.setattr(machine_load, "time", SimpleNamespace(monotonic=lambda: 0.0, sleep=lambda s: None))
    assert busy_cores(0.1, cores=4) is None


@pytest.mark.parametrize("procs, cores, expected", [(1, 2, 2), (2, 2, 1), (1, 16, 16), (4, 16, 4), (3, 2, 1)])
def test_the_default_is_the_cores_over_the_ranks_whatever_the_load(monkeypatch, procs, cores, expected):
    """The same command takes the same thread count, and so computes the same bits, however busy the
    machine is: the default never looks at the load (a busy machine gets a warning instead)."""
    monkeypatch.setattr(machine_load, "busy_cores", lambda *a, **k: pytest.fail("the default read the load"))
    assert default_threads(procs, cores=cores) == expected
    assert default_threads(procs, 3, cores=cores) == 3  # --threads is the user's word


def test_the_busy_note_names_the_competition_and_the_threads_that_fit():
    assert busy_note(2, cores=2, busy=0.0, load=0.1) is None  # fits
    assert busy_note(1, cores=2, busy=1.0, load=1.0) is None
    note = busy_note(2, cores=2, busy=1.2, load=3.5)
    assert note.startswith("the machine is busy: other processes keep 1.2 of its 2 cores busy (load average 3.5)")
    assert "--threads 1 may be faster" in note
    crowded = busy_note(1, 2, cores=2, busy=2.0, load=4.0)  # already one thread each: nothing smaller to suggest
    assert "2 processes ask for 2 more threads" in crowded and "--threads" not in crowded


def test_the_warning_is_given_once_per_process(monkeypatch, caplog):
    monkeypatch.setattr(machine_load, "_WARNED", False)
    with caplog.at_level(logging.WARNING, logger="fullgraph"):
        assert warn_if_busy(2, cores=2, busy=2.0, load=5.0) is not None
        assert warn_if_busy(2, cores=2, busy=2.0, load=5.0) is None
    assert [r.getMessage().startswith("the machine is busy") for r in caplog.records] == [True]
    monkeypatch.setattr(machine_load, "_WARNED", False)
    assert warn_if_busy(1, cores=2, busy=0.0, load=0.0) is None and machine_load._WARNED is False


def test_a_training_process_sets_its_threads_and_warns_from_one_look(monkeypatch, caplog):
    """``process_threads``, what the trainer calls: the default (or ``--threads``), with a warning where
    it oversubscribes the cores; a rank's running peers are its own run, not the competition."""
    looks = []
    monkeypatch.setattr(machine_load, "busy_cores", lambda *a, **k: looks.append(1) or 1.0)
    monkeypatch.setattr(machine_load, "_WARNED", False)
    with caplog.at_level(logging.WARNING, logger="fullgraph"):
        assert process_threads(0, 2, peers_running=True, cores=4) == 2 and not caplog.records  # its peer's core
        assert process_threads(cores=2) == 2 and "--threads 1 may be faster" in caplog.records[0].getMessage()
    assert len(looks) == 2  # one look each


def test_the_plan_times_each_size_on_the_threads_train_would_take():
    """Each machine's cores over its ranks, as train takes them; ``--threads`` where given."""
    assert threads_for(0, 1, 2) == 2 and threads_for(0, 2, 16) == 8 and threads_for(0, 3, 2) == 1
    assert threads_for(3, 4, 2) == 3
