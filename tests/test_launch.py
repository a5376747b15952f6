"""Launching P ranks from the command line: it works, a failed rank takes the run down, bad layouts
are refused before anything starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fullgraph.comm.ledger import CATEGORIES


def env(tmp_path) -> dict:
    return os.environ | {"FULLGRAPH_CACHE": str(tmp_path / "cache"), "PYTHONWARNINGS": "ignore"}


def fullgraph(tmp_path, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "fullgraph", *args], capture_output=True, text=True,
                          timeout=timeout, env=env(tmp_path))


def test_partition_then_train_from_the_folder(tmp_path):
    out = tmp_path / "parts"
    proc = fullgraph(tmp_path, "partition", "--parts", "3", "--partitioner", "metis", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "replication factor" in proc.stdout and (out / "partition.json").is_file()
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["part-0", "part-1", "part-2"]
    run = tmp_path / "run"
    proc = fullgraph(tmp_path, "train", "--parallel", "graph", "--nprocs", "3", "--partition-dir", str(out),
                     "--epochs", "10", "--eval-every", "5", "--boundary-rate", "0.5", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["parallel"] == "graph" and summary["nprocs"] == 3
    assert summary["test_acc"] > 0.5
    assert len(summary["peak_rss_bytes_per_rank"]) == 3
    assert summary["peak_rss_bytes"] == max(summary["peak_rss_bytes_per_rank"])
    assert summary["replication_factor"] == json.loads((out / "partition.json").read_text())["replication_factor"]
    per_epoch = summary["comm_bytes_per_epoch"]
    assert per_epoch["halo/fwd"] > 0 and per_epoch["grad/allreduce"] > 0 and per_epoch["sample/index"] > 0
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert all({"comm_bytes", "comm_time_s", "compute_time_s"} <= r.keys() for r in records)


def test_spmm_ranks_read_block_rows_the_launcher_cut(tmp_path):
    """The launcher cuts the block rows once into the cache; the ranks read only their own file."""
    run = tmp_path / "run"
    proc = fullgraph(tmp_path, "train", "--parallel", "spmm-1d", "--nprocs", "2", "--epochs", "3", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    [folder] = (tmp_path / "cache" / "blockrows").iterdir()
    meta = json.loads((folder / "blockrows.json").read_text())
    assert meta["blocks"] == 2 and sorted(f["path"] for f in meta["files"]) == ["row-0.pt", "row-1.pt"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["comm_bytes_per_epoch"]["spmm/bcast"] > 0 and summary["test_acc"] > 0.3
    # every epoch counts its own metrics all-reduce (the loss, a float64 per category, two times) on both
    # ranks: the first too, none carried into the next
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["comm_bytes"].get("meta/metrics") for r in records] == [2 * (len(CATEGORIES) + 3) * 8] * 3


def test_tensor_ranks_read_the_graph_the_launcher_wrote_once(tmp_path):
    """The launcher writes the whole graph once as one block row; every rank reads it, and the run moves
    exactly what ``fullgraph plan`` says (the built-in graph: 5000 nodes, 64 dense features, 5 classes)."""
    from fullgraph.config import TrainConfig
    from fullgraph.data.load import load_graph
    from tests.distributed import ledger, planned_bytes

    run = tmp_path / "run"
    flags = dict(parallel="tensor", nprocs=2, epochs=3, layers=3, hidden=32, model="sage")
    proc = fullgraph(tmp_path, "train", *[f"--{k}={v}" for k, v in flags.items()], "--eval-every", "3",
                     "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    [folder] = (tmp_path / "cache" / "blockrows").iterdir()
    meta = json.loads((folder / "blockrows.json").read_text())
    assert meta["blocks"] == 1 and not meta["permute"] and [f["path"] for f in meta["files"]] == ["row-0.pt"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["parallel"] == "tensor" and summary["test_acc"] > 0.3
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    graph = load_graph(TrainConfig.of())
    assert ledger(records[0]["comm_bytes"]) == planned_bytes(flags | {"eval_every": 3}, graph)  # no evaluation yet


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _rank_of(pid: int) -> int | None:
    try:
        env_vars = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for kv in env_vars:
        if kv.startswith(b"RANK="):
            return int(kv[5:])
    return None


def _start_training(tmp_path, *extra, mode: str = "graph"):
    """A long run on 2 ranks (graph parallel, or a 2-stage pipeline), returned once it is training:
    (launcher, pid of rank 1)."""
    run = tmp_path / "run"
    layers = ["--layers", "4"] if mode == "pipeline" else []
    launcher = subprocess.Popen(
        [sys.executable, "-m", "fullgraph", "train", "--parallel", mode, *layers, "--nprocs", "2", "--epochs", "1000000",
         "--eval-every", "1000", "--out", str(run), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env(tmp_path))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until training is under way
        lines = (run / "metrics.jsonl").read_text().splitlines() if (run / "metrics.jsonl").exists() else []
        if len(lines) >= 3:
            break
        assert launcher.poll() is None, launcher.stderr.read()
        time.sleep(0.2)
    return launcher, next(pid for pid in _children(launcher.pid) if _rank_of(pid) == 1)


def _wait(launcher, timeout: float = 60) -> tuple[int, float, str]:
    t0 = time.monotonic()
    try:
        rc = launcher.wait(timeout=timeout)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    return rc, time.monotonic() - t0, launcher.stderr.read()


@pytest.mark.parametrize("mode", ["graph", "pipeline"])
def test_a_killed_rank_takes_the_whole_run_down_within_60_s(tmp_path, mode):
    launcher, victim = _start_training(tmp_path, mode=mode)
    os.kill(victim, signal.SIGKILL)
    rc, elapsed, err = _wait(launcher)
    assert rc != 0 and elapsed < 60
    assert "rank 1 of 2 failed: killed by signal SIGKILL" in err, err
    assert not _children(launcher.pid)  # no rank left behind


def test_partition_with_metis_on_a_sample_of_the_edges_and_balanced_by_memory(tmp_path):
    out = tmp_path / "parts"
    proc = fullgraph(tmp_path, "partition", "--parts", "2", "--metis-sample", "0.5", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "partition.json").read_text())["metis_sample"] == 0.5
    proc = fullgraph(tmp_path, "partition", "--parts", "2", "--partitioner", "metis-memory", "--model", "sage",
                     "--layers", "3", "--hidden", "32", "--out", str(tmp_path / "pm"))
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "pm" / "partition.json").read_text())
    balanced_for = meta["meta"]["balanced_for"]
    assert meta["weight"] == "memory" and (balanced_for["model"], balanced_for["hidden"]) == ("sage", 32)
    assert proc.stdout.count("metis-memory round") == 3, proc.stdout
    proc = fullgraph(tmp_path, "partition", "--parts", "2", "--metis-sample", "0", "--out", str(tmp_path / "p0"))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "metis_sample in (0, 1] (got 0.0)" in lines[0], proc.stderr
    assert not (tmp_path / "p0").exists()


def test_bad_input_on_one_rank_names_that_rank(tmp_path):
    out = tmp_path / "parts"
    assert fullgraph(tmp_path, "partition", "--parts", "2", "--out", str(out)).returncode == 0
    (out / "part-1" / "part.pt").write_bytes(b"not a part")
    proc = fullgraph(tmp_path, "train", "--parallel", "graph", "--nprocs", "3", "--partition-dir", str(out))
    assert proc.returncode == 2 and "expected a partition into 3 parts, one per process (got 2" in proc.stderr
    proc = fullgraph(tmp_path, "train", "--parallel", "graph", "--nprocs", "2", "--partition-dir", str(out),
                     "--epochs", "3")
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("fullgraph: error:")]
    assert len(lines) == 1 and "rank 1 of 2 failed: InputError" in lines[0], proc.stderr


@pytest.mark.parametrize(
    "args,words",
    [
        (["--parallel", "graph", "--nprocs", "6000"], "at most one part per node (got 6000 parts for 5000 nodes)"),
        (["--parallel", "single", "--nprocs", "2"], "expected --nprocs 1 with --parallel single"),
        (["--parallel", "graph", "--nprocs", "0"], "expected --nprocs >= 1 (got 0)"),
        (["--parallel", "spmm-4d", "--nprocs", "2"], "expected parallel to be one of"),
        (["--parallel", "graph", "--nprocs", "2", "--boundary-rate", "1.5"], "expected boundary_rate in [0, 1]"),
    ],
    ids=["more parts than nodes", "single with 2", "zero processes", "unknown mode", "bad rate"],
)
def test_a_wrong_layout_is_one_error_before_any_process_starts(tmp_path, args, words):
    proc = fullgraph(tmp_path, "train", *args, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr
    assert "rank" not in lines[0]  # refused before launching


@pytest.mark.parametrize("mode", ["graph", "pipeline"])
def test_a_stalled_rank_times_out_instead_of_hanging(tmp_path, mode):
    """A rank that stops answering (SIGSTOP, as a hung machine would) is not a dead process, so only
    the communication timeout can notice it: the peers' next exchange (a collective, or in the
    pipeline a point-to-point receive from the next stage) fails after --comm-timeout. The launcher
    names the stopped rank, not the peer whose error it is, and kills it though it is stopped."""
    launcher, victim = _start_training(tmp_path, "--comm-timeout", "5", mode=mode)
    os.kill(victim, signal.SIGSTOP)
    rc, elapsed, err = _wait(launcher)
    assert rc != 0 and elapsed < 60, (rc, elapsed)
    assert "rank 1 of 2 stopped answering (state: stopped by a signal) — rank 0 timed out waiting for it" in err, err
    assert not _children(launcher.pid)


def test_the_first_failure_is_named_not_its_consequence(tmp_path):
    """Rank 1 fails on bad input; rank 0 then fails on the closed connection. When both are seen
    failed at once, the launcher names rank 1 (earliest error report), and a rank killed by a signal
    (it reports nothing) before either."""
    from types import SimpleNamespace

    from fullgraph.comm.launch import _first_failure, _Rank

    def rank(i: int, rc: int, mtime_ns: int | None) -> _Rank:
        f = tmp_path / f"rank-{i}.error.json"
        if mtime_ns is not None:
            f.write_text("{}")
            os.utime(f, ns=(mtime_ns, mtime_ns))
        return _Rank(i, SimpleNamespace(returncode=rc), f, tmp_path / f"rank-{i}.log")

    consequence, cause = rank(0, 1, 2_000_000_000), rank(1, 2, 1_000_000_000)
    assert _first_failure([consequence, cause]) is cause
    killed = rank(2, -signal.SIGKILL, None)
    assert _first_failure([consequence, cause, killed]) is killed


def test_a_closed_connection_is_not_named_though_reported_in_the_same_tick(tmp_path):
    """Ranks 0 and 1 wait for a stopped rank 2: rank 1 times out and leaves, and rank 0 then fails on the
    connection rank 1 closed, its report stamped with the same time (the file clock's tick): rank 1, whose
    timeout points at the silent rank, is the cause (the launcher once named rank 0 here)."""
    from types import SimpleNamespace

    from fullgraph.comm.launch import _first_failure, _Rank

    def rank(i: int, message: str) -> _Rank:
        f = tmp_path / f"rank-{i}.error.json"
        f.write_text(json.dumps({"type": "RuntimeError", "message": message, "input_error": False}))
        os.utime(f, ns=(1_000_000_000, 1_000_000_000))
        return _Rank(i, SimpleNamespace(returncode=1), f, tmp_path / f"rank-{i}.log")

    closed = rank(0, "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4321")
    timed_out = rank(1, "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 2000ms "
                        "for recv operation to complete")
    assert _first_failure([closed, timed_out]) is timed_out


def test_rank_logs_are_removed_after_success_and_kept_after_a_failure(tmp_path, monkeypatch, capsys):
    import tempfile

    from fullgraph.comm.launch import launch_local

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text("{}")
    bad.write_text("{")
    assert launch_local([str(good)], 2, module="json.tool", timeout_s=60) == 0
    assert not list(tmp_path.glob("fullgraph-ranks-*"))
    assert launch_local([str(bad)], 2, module="json.tool", timeout_s=60) == 1
    kept = list(tmp_path.glob("fullgraph-ranks-*"))
    assert len(kept) == 1 and str(kept[0]) in capsys.readouterr().err



def test_a_rank_killed_by_a_signal_leaves_its_python_stack_in_its_log(tmp_path, capsys, monkeypatch):
    from fullgraph.comm.launch import launch_local

    repo = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("PYTHONFAULTHANDLER", raising=False)
    assert launch_local([], 2, module="tests.abort_rank", log_dir=str(tmp_path), timeout_s=60) == 1
    assert "failed: killed by signal SIGABRT" in capsys.readouterr().err
    log = (tmp_path / "rank-1.log").read_text()
    assert "Fatal Python error: Aborted" in log and "die_in_native_code" in log, log

def test_fennel_streams_a_native_folder_and_trains_as_one_process(tmp_path):
    """`train --partitioner fennel` on a native folder: the launcher partitions it by streaming (no
    graph loaded) and the ranks train with the single process's losses (LOSSES_REORDERED: a part
    sums its rows' neighbours in another order)."""
    from tests._equality import assert_same_losses

    from fullgraph.data.formats.native import write_native
    from fullgraph.data.synthetic import planted_partition

    write_native(planted_partition(num_nodes=600, num_classes=3, avg_degree=6, num_features=8, seed=4),
                 tmp_path / "ds")
    losses = {}
    for mode, extra in (("single", []), ("graph", ["--nprocs", "2", "--partitioner", "fennel"])):
        run = tmp_path / mode
        proc = fullgraph(tmp_path, "train", "--dataset", str(tmp_path / "ds"), "--parallel", mode, *extra,
                         "--model", "sage", "--layers", "2", "--hidden", "16", "--epochs", "6", "--out", str(run))
        assert proc.returncode == 0, proc.stderr
        losses[mode] = [json.loads(x)["loss"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert "fennel, streamed from its files" in proc.stdout + proc.stderr
    assert_same_losses(losses["graph"], losses["single"])
