"""The faults a run survives and the input it refuses (issue 49): a folder a fault left behind still
resumes; a full disk is one line with a status of its own; one run folder holds one run; a refused
run leaves its folder as it found it; a diverged loss stops the run; a hand-edited ``config.json``
is refused naming the field.

Full disks are real where the test may mount a small tmpfs in a private mount namespace
(``unshare``, as root); the judgement of a failed write is also tested with made-up failures,
which run everywhere.
"""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fullgraph.errors import EXIT_STATUS
from fullgraph.train.checkpoint import complete_checkpoints

from tests.train.test_checkpoint import cli, losses, train

@pytest.fixture
def cora(shared_data):
    """Cora, by its name and root."""
    return ["--dataset", "cora", "--root", str(shared_data)]


@pytest.fixture
def cora_args(cora):
    """A small GCN on Cora."""
    return [*cora, "--hidden", "16"]


def one_error_line(text: str) -> str:
    lines = [x for x in text.splitlines() if x.startswith("fullgraph: error:")]
    assert len(lines) == 1, text
    assert "Traceback" not in text, text
    return lines[0]


# ---------------------------------------------------------------------------------- a torn log
def test_a_torn_metrics_line_is_dropped_and_the_run_resumes_bit_for_bit(tmp_path, cora_args):
    train(*cora_args, "--epochs", "4", "--out", str(tmp_path / "whole"))
    cut = tmp_path / "cut"
    train(*cora_args, "--epochs", "2", "--checkpoint-every", "2", "--out", str(cut))
    with open(cut / "metrics.jsonl", "a") as f:  # a full disk cut the third epoch's line short
        f.write('{"epoch": 3, "loss": 1.9')
    res = train("--resume", str(cut), "--epochs", "4")
    assert "dropped 1 damaged line" in res.text
    assert losses(cut) == losses(tmp_path / "whole")


# ---------------------------------------------------------------------------------- full disks
def test_a_failed_write_is_judged_by_its_errno_or_by_the_space_left(tmp_path, monkeypatch):
    from fullgraph.train import disk

    enospc = OSError(errno.ENOSPC, "No space left on device")
    assert disk.out_of_space(enospc, tmp_path)
    wrapped = RuntimeError("unexpected pos 704 vs 598")  # torch's zip writer: the errno is lost
    assert not disk.out_of_space(wrapped, tmp_path)  # this disk has room: another failure
    monkeypatch.setattr(disk.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(3 << 20, 3 << 20, 4096))
    assert disk.out_of_space(wrapped, tmp_path)

    class CheckpointFailure(BaseException):  # torch.distributed.checkpoint's shape: per rank (error, traceback)
        failures = {0: (RuntimeError("write failed"), None), 1: (OSError(errno.ENOSPC, "full"), None)}

    monkeypatch.undo()
    assert disk.out_of_space(CheckpointFailure(), tmp_path)


def test_a_full_disk_while_logging_leaves_no_half_line(tmp_path):
    from fullgraph.errors import NoSpaceError
    from fullgraph.train.report import RunWriter

    writer = RunWriter(str(tmp_path))
    writer.epoch({"epoch": 1, "loss": 1.0})
    real = writer._f

    class Filling:  # writes half of what it is given, then the disk is full
        name = real.name

        def write(self, text):
            real.write(text[: len(text) // 2])
            real.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def tell(self):
            return real.tell()

        def close(self):
            real.close()

    writer._f = Filling()
    with pytest.raises(NoSpaceError, match="no space left on the device while writing .*metrics.jsonl"):
        writer.epoch({"epoch": 2, "loss": 0.5})
    writer.close()
    assert [json.loads(x)["epoch"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1]


def _can_mount() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


needs_mount = pytest.mark.skipif(not _can_mount(), reason="needs unshare -m (root) to mount a small tmpfs")


def on_tmpfs(tmp_path: Path, kib: int, args: list[str], fill_kib: int = 0):
    """``fullgraph train ARGS`` with ``--out`` on a ``kib`` KiB tmpfs (``fill_kib`` of it taken by
    another file) mounted for it alone; the run folder is copied to ``tmp_path/copy`` before the
    mount goes."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = (f"mount -t tmpfs -o size={kib}k tmpfs {mnt} && "
              + (f"head -c {fill_kib * 1024} /dev/zero > {mnt}/fill && " if fill_kib else "")
              + f"{sys.executable} -m fullgraph train --progress none --out {mnt}/run {' '.join(args)}; "
              + f"rc=$?; ls -a {mnt}/run > {tmp_path}/listing 2>&1; ls -aR {mnt}/run/checkpoint > {tmp_path}/ckpts 2>&1; "
              + f"cp -r {mnt}/run {tmp_path}/copy; exit $rc")
    run = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True,
                         text=True, timeout=300)
    return run


@needs_mount
@pytest.mark.parametrize("layout", [[], ["--parallel", "graph", "--nprocs", "2"]], ids=["single", "graph-2"])
def test_a_full_disk_while_checkpointing_names_the_last_good_one_and_resumes(tmp_path, cora, layout):
    args = [*cora, "--epochs", "20", *layout]
    run = on_tmpfs(tmp_path, 3072, [*args, "--checkpoint-every", "5"])  # 1.5 MiB each: the third does not fit
    assert run.returncode == EXIT_STATUS["no_space"], run.stderr
    line = one_error_line(run.stderr)
    assert "no space left" in line and ".tmp-epoch-000015" in line and "epoch-000010" in line, line
    assert ".tmp-" not in (tmp_path / "ckpts").read_text()  # the partial checkpoint is gone
    copy = tmp_path / "copy"
    cli("train", "--progress", "none", "--resume", str(copy))  # fresh processes, as the run on the tmpfs
    cli("train", "--progress", "none", *args, "--out", str(tmp_path / "whole"))
    assert losses(copy) == losses(tmp_path / "whole")


@needs_mount
def test_a_full_disk_while_saving_the_model_leaves_no_temporary(tmp_path, cora):
    run = on_tmpfs(tmp_path, 1024, [*cora, "--epochs", "2"], fill_kib=800)  # model.pt: 370 KiB
    assert run.returncode == EXIT_STATUS["no_space"], run.stderr
    line = one_error_line(run.stderr)
    assert "model.pt" in line and "no checkpoint" in line, line
    assert "model.pt" not in (tmp_path / "listing").read_text()  # neither model.pt nor model.pt.tmp


@needs_mount
def test_a_full_disk_while_logging_is_one_line_and_whole_lines(tmp_path, cora_args):
    run = on_tmpfs(tmp_path, 12, [*cora_args, "--epochs", "200"])
    assert run.returncode == EXIT_STATUS["no_space"], run.stderr
    assert "metrics.jsonl" in one_error_line(run.stderr)
    lines = (tmp_path / "copy" / "metrics.jsonl").read_text().splitlines()
    assert lines and [json.loads(x)["epoch"] for x in lines] == list(range(1, len(lines) + 1))


# ---------------------------------------------------------------------------------- one folder, one run
def _start_holder(out: Path, args: list[str]) -> subprocess.Popen:
    """A long run in ``out``, returned once it holds the folder (its lock file names it) and has a
    checkpoint (which a resume needs)."""
    proc = subprocess.Popen([sys.executable, "-m", "fullgraph", "train", "--progress", "none", "--out", str(out),
                             *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / ".fullgraph.lock").exists() or not complete_checkpoints(out):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.2)
    return proc


def test_a_second_writer_is_refused_naming_the_holder_until_the_holder_dies(tmp_path, cora_args):
    out = tmp_path / "run"
    holder = _start_holder(out, [*cora_args, "--epochs", "100000", "--checkpoint-every", "1"])
    try:
        for extra in (["--overwrite", *cora_args, "--epochs", "2", "--out", str(out)], ["--resume", str(out)]):
            res = train(*extra, ok=False)
            assert res.returncode == 2, res.text
            line = one_error_line(res.text)
            assert f"pid {holder.pid}" in line and "another fullgraph run is using" in line, line
        assert json.loads((out / "config.json").read_text())["epochs"] == 100000  # the holder's, untouched
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    res = train("--overwrite", *cora_args, "--epochs", "2", "--out", str(out), ok=False)
    assert res.returncode == 2 and "holds checkpoints" in res.text  # the lock is gone; the checkpoints stay
    shutil.rmtree(out / "checkpoint")
    train("--overwrite", *cora_args, "--epochs", "2", "--out", str(out))  # a dead holder holds nothing


LINEAR = "import torch\n\ndef build(in_dim, out_dim):\n    return torch.nn.Linear(in_dim, out_dim)\n"


@pytest.mark.parametrize("nprocs", [1, 2])
def test_a_refused_run_leaves_the_folder_as_it_found_it(tmp_path, cora, cora_args, nprocs):
    (tmp_path / "linear.py").write_text(LINEAR)
    layout = ["--parallel", "graph", "--nprocs", "2"] if nprocs == 2 else []
    refused = ["--model", f"{tmp_path}/linear.py:build", "--epochs", "2", *layout]
    fresh = tmp_path / "fresh" / "run"
    res = train(*cora, *refused, "--out", str(fresh), ok=False)
    assert res.returncode == 2, res.text
    assert not (tmp_path / "fresh").exists()  # made for the run, removed with it
    earlier = tmp_path / "earlier"
    train(*cora_args, "--epochs", "2", "--out", str(earlier))
    before = {p.name: p.read_bytes() for p in earlier.iterdir()}
    res = train(*cora, *refused, "--out", str(earlier), "--overwrite", ok=False)
    assert res.returncode == 2, res.text
    assert {p.name: p.read_bytes() for p in earlier.iterdir()} == before  # the earlier run, whole
    train(*cora_args, "--epochs", "2", "--out", str(fresh))  # the corrected rerun needs no --overwrite


# ---------------------------------------------------------------------------------- resuming
def test_resume_takes_new_timeouts_threads_memory_and_device_and_records_them(tmp_path, cora_args):
    run = tmp_path / "run"
    train(*cora_args, "--epochs", "2", "--checkpoint-every", "2", "--out", str(run))
    train("--resume", str(run), "--epochs", "3", "--comm-timeout", "120", "--threads", "1", "--memory-limit", "8",
          "--device", "cpu")
    saved = json.loads((run / "config.json").read_text())
    assert (saved["epochs"], saved["comm_timeout"], saved["threads"], saved["memory_limit"], saved["device"]) == \
        (3, 120.0, 1, 8.0, "cpu")
    assert len(losses(run)) == 3


@pytest.mark.parametrize("field,value", [("hidden", 32), ("layers", 3), ("model", "sage"), ("lr", 0.5),
                                         ("seed", 7), ("dropout", 0.1)])
def test_a_config_edited_since_the_checkpoint_is_refused_naming_the_field(tmp_path, cora_args, field, value):
    run = tmp_path / "run"
    train(*cora_args, "--epochs", "2", "--checkpoint-every", "2", "--out", str(run))
    saved = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps(saved | {field: value}))
    res = train("--resume", str(run), "--epochs", "3", ok=False)
    assert res.returncode == 2
    line = one_error_line(res.text)
    assert f"{field} " in line and "in the checkpoint" in line, line


def test_a_config_with_a_mistyped_value_is_refused_in_one_line(tmp_path, cora_args):
    run = tmp_path / "run"
    train(*cora_args, "--epochs", "2", "--checkpoint-every", "2", "--out", str(run))
    saved = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps(saved | {"epochs": "30"}))
    res = train("--resume", str(run), ok=False)
    assert res.returncode == 2 and "epochs" in one_error_line(res.text) and "config.json" in res.text


# ---------------------------------------------------------------------------------- numbers
def test_a_diverged_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, cora_args):
    run = tmp_path / "run"
    res = train(*cora_args, "--epochs", "5", "--lr", "1e30", "--checkpoint-every", "1", "--out", str(run), ok=False)
    assert res.returncode == EXIT_STATUS["non_finite"], res.text
    line = one_error_line(res.text)
    assert "the loss is nan at epoch 2" in line and "epoch-000001" in line, line
    assert [p.name for p in complete_checkpoints(run)] == ["epoch-000001"]
    assert not (run / "model.pt").exists() and not (run / "summary.json").exists()
    res = train(*cora_args, "--epochs", "3", "--lr", "1e30", "--no-stop-on-nonfinite", "--out", str(tmp_path / "on"))
    assert res.returncode == 0


def test_a_loss_that_grows_a_thousandfold_is_said_once_naming_lr(tmp_path, cora_args):
    """Issue 63 §4: ``--lr 1e10`` took the loss from 2.6 to 6e22, finite, and the run ended with no word."""
    res = train(*cora_args, "--epochs", "6", "--lr", "1e10", "--out", str(tmp_path / "run"))
    said = [line for line in res.text.splitlines() if "training is diverging" in line]
    assert res.returncode == 0 and len(said) == 1, res.text
    assert "more than 1000 times the first epoch's" in said[0] and "lower --lr (now 1e+10)" in said[0], said[0]
    res = train(*cora_args, "--epochs", "6", "--out", str(tmp_path / "calm"))
    assert "diverging" not in res.text


def test_weights_that_are_not_finite_are_never_checkpointed(tmp_path, cora_args, monkeypatch):
    import torch

    from fullgraph.optim.update import WeightUpdate

    step = WeightUpdate.step

    def poisoned(self):  # the first step leaves a NaN weight behind; the loss that reveals it comes later
        out = step(self)
        with torch.no_grad():
            next(iter(self.model.parameters())).view(-1)[0] = float("nan")
        return out

    monkeypatch.setattr(WeightUpdate, "step", poisoned)
    run = tmp_path / "run"
    res = train(*cora_args, "--epochs", "3", "--checkpoint-every", "1", "--out", str(run), ok=False)
    assert res.returncode == EXIT_STATUS["non_finite"]
    assert "the weights after epoch 1 are not finite" in one_error_line(res.text)
    assert not complete_checkpoints(run)


@pytest.mark.parametrize("args,says", [
    (["--threads", "100000"], "expected threads in [0, 1024]"),
    (["--lr", "inf"], "expected lr to be a finite number"),
    (["--weight-decay", "inf"], "expected weight_decay to be a finite number"),
    (["--lr", "1e39"], "expected lr > 0 and within float32"),
    (["--config", "{toml}", "memory-limit = inf\n"], "expected memory_limit to be a finite number"),
    (["--config", "{toml}", "seed = 18446744073709551616\n"], "expected seed to fit in 64 bits"),
    (["--seed", "9223372036854775808"], "expected seed to fit in 64 bits"),
])
def test_values_that_would_crash_or_train_garbage_are_refused(tmp_path, args, says):
    if "--config" in args:
        (tmp_path / "run.toml").write_text("[run]\n" + args[2] if "memory" in args[2] else args[2])
        args = ["--config", str(tmp_path / "run.toml")]
    res = train("--epochs", "1", *args, ok=False)
    assert res.returncode == 2 and says in one_error_line(res.text), res.text


def test_a_builder_that_exits_is_refused_not_taken_for_success(tmp_path):
    (tmp_path / "exits.py").write_text("import sys\n\ndef build(in_dim, out_dim):\n    sys.exit(0)\n")
    res = train("--model", f"{tmp_path}/exits.py:build", "--epochs", "1", "--out", str(tmp_path / "run"), ok=False)
    assert res.returncode == 2 and "sys.exit(0)" in one_error_line(res.text)
    assert not (tmp_path / "run").exists()
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    res = cli("train", "--model", f"{tmp_path}/exits_on_import.py:build", "--epochs", "1", ok=False)
    assert res.returncode == 2 and "sys.exit(0)" in res.stderr


# ---------------------------------------------------------------------------------- folders that cannot be written
def test_an_unwritable_output_folder_is_one_line_exit_3_for_every_command(tmp_path, cora_args, monkeypatch, capsys):
    """Issue 63 §1: ``train --out``, ``--resume``, ``predict --out`` and ``convert --out`` on a read-only mount
    ended in 17-line tracebacks. The check judges the nearest existing folder, as a read-only mount (or a
    folder without write permission, which root never meets) answers ``os.access``; it creates nothing."""
    from fullgraph.cli import main
    from fullgraph.train import disk

    run = tmp_path / "run"
    assert train(*cora_args, "--epochs", "2", "--checkpoint-every", "1", "--out", str(run)).returncode == 0
    locked = tmp_path / "locked"
    (locked / "old").mkdir(parents=True)
    real = os.access
    monkeypatch.setattr(disk.os, "access", lambda p, mode, **kw: (not str(p).startswith((str(locked), str(run)))
                                                                   and real(p, mode, **kw)))
    cases = {"train": ["train", *cora_args, "--epochs", "1", "--progress", "none", "--out", str(locked / "new")],
             "resume": ["train", "--resume", str(run), "--epochs", "3", "--progress", "none"],
             "predict": ["predict", "--run", str(run), "--out", str(locked / "old")],
             "convert": ["convert", *cora_args[:4], "--out", str(locked / "cora")]}
    capsys.readouterr()
    for name, argv in cases.items():
        code, err = main(argv), capsys.readouterr().err
        assert code == EXIT_STATUS["cannot_write"] == 3, (name, err)
        line = one_error_line(err)
        assert "could not write the folder" in line and "cannot be written by this process" in line, (name, line)
    assert sorted(p.name for p in locked.iterdir()) == ["old"] and not any((locked / "old").iterdir())
