"""The emulated cluster ``cluster.py`` measures on: ``n`` ranks, each in a network namespace of its own,
joined through veth pairs to a bridge, every link limited with ``tc tbf``, and each rank optionally in
a CPU cgroup capped at a share of a core. Needs root, ``ip`` and ``tc``; everything is removed on exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _harness import REPO

PREFIX, BRIDGE, SUBNET, PORT = "fgc", "fgcbr0", "10.77.0", 29533


class CpuQuota:
    """A CPU cgroup per rank, each capped at ``share`` of a core (cgroup v2's ``cpu.max`` or v1's CFS
    quota) over a short period, so that a throttled rank waits at most a few milliseconds; removed on
    exit. ``share`` 0: no cgroups, ranks time-sliced as the scheduler likes."""

    PERIOD_US = 10_000

    def __init__(self, n: int, share: float):
        self.n, self.share, self.dirs = n, share, []

    @staticmethod
    def root() -> tuple[Path, bool] | None:
        """The cgroup directory that controls CPU time and whether it is v2, or None."""
        v2, v1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpu")
        if (v2 / "cgroup.controllers").exists() and "cpu" in (v2 / "cgroup.controllers").read_text().split():
            return v2, True
        return (v1, False) if (v1 / "cpu.cfs_quota_us").exists() else None

    def lobby(self) -> str:
        """The ``cgroup.procs`` of the root group: a process that writes its pid there runs uncapped."""
        return str(self.dirs[0].parent / "cgroup.procs")

    def __enter__(self) -> "CpuQuota":
        found = self.root() if self.share else None
        if self.share and found is None:
            raise SystemExit("cluster.py: --cpu-share needs a CPU cgroup controller (v2 cpu.max or v1 cpu), "
                             "found none under /sys/fs/cgroup; run with --cpu-share 0")
        for i in range(self.n if self.share else 0):
            root, v2 = found
            d = root / f"{PREFIX}{i}"
            d.mkdir(exist_ok=True)
            self.dirs.append(d)
            quota = max(1000, int(self.share * self.PERIOD_US))
            if v2:
                (root / "cgroup.subtree_control").write_text("+cpu")
                (d / "cpu.max").write_text(f"{quota} {self.PERIOD_US}")
            else:
                (d / "cpu.cfs_period_us").write_text(str(self.PERIOD_US))
                (d / "cpu.cfs_quota_us").write_text(str(quota))
        return self

    def procs(self, i: int) -> str | None:
        """The file a process writes its pid to, to join rank ``i``'s cgroup (None: no cgroups)."""
        return str(self.dirs[i] / "cgroup.procs") if self.dirs else None

    def join(self, i: int):
        """A ``preexec_fn`` that puts the child in rank ``i``'s cgroup (None: no cgroups)."""
        procs = self.procs(i)
        return None if procs is None else (lambda: Path(procs).write_text(str(os.getpid())))

    def __exit__(self, *exc) -> None:
        for d in self.dirs:  # empty once its processes have exited; a straggler gets a moment
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


class Cluster:
    """``n`` namespaces on a bridge, every link limited to ``rate_gbit``; removed on exit."""

    def __init__(self, n: int, rate_gbit: float, quota: CpuQuota):
        self.n, self.rate, self.quota = n, rate_gbit, quota

    def __enter__(self) -> "Cluster":
        self.remove()  # leftovers of an interrupted run
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "link", "set", BRIDGE, "up")
        for i in range(self.n):
            ns, host, inner = f"{PREFIX}{i}", f"{PREFIX}h{i}", f"{PREFIX}n{i}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", inner)
            sh("ip", "link", "set", inner, "netns", ns)
            sh("ip", "link", "set", host, "master", BRIDGE)
            sh("ip", "link", "set", host, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{SUBNET}.{i + 1}/24", "dev", inner)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", inner, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            for prefix, dev in ((["ip", "netns", "exec", ns], inner), ([], host)):  # both directions
                sh(*prefix, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{self.rate}gbit",
                   "burst", f"{max(64, int(self.rate * 1e9 / 8 / 250 / 1024))}kb", "latency", "200ms")
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def remove(self) -> None:
        for i in range(self.n):
            sh("ip", "netns", "del", f"{PREFIX}{i}", check=False)
            sh("ip", "link", "del", f"{PREFIX}h{i}", check=False)
        sh("ip", "link", "del", BRIDGE, check=False)

    def run_ranks(self, argv: list[str], out: Path, timeout: float) -> dict:
        """``fullgraph train ARGV`` with one rank per namespace (torchrun's environment variables)."""
        outputs = self._run(["-m", "fullgraph", "train", *argv, "--out", str(out), "--overwrite"], timeout)
        return outputs if isinstance(outputs, dict) else json.loads((out / "summary.json").read_text())

    def probe(self) -> dict:
        """The link's measured bandwidth and per-message latency (``probes/link.py``)."""
        return self._probe("link.py", [str(self.rate)], 120)

    def sync_cost(self) -> dict:
        """What an exchange between computing ranks costs beyond its bytes (``probes/sync.py``)."""
        return self._probe("sync.py", [], 600)

    def _probe(self, script: str, args: list[str], timeout: float) -> dict:
        """A probe of ``benchmarks/probes`` run in every namespace: the JSON rank 0 prints last, or ``{"error": ..}``."""
        outputs = self._run([str(Path(__file__).parent / "probes" / script), *args], timeout)
        return outputs if isinstance(outputs, dict) else json.loads(outputs[0].strip().splitlines()[-1])

    def _run(self, args: list[str], timeout: float) -> list[str] | dict:
        """``python ARGS`` in every namespace at once: their outputs, or ``{"error": ..}``."""
        procs = []
        for i in range(self.n):
            env = dict(os.environ, RANK=str(i), WORLD_SIZE=str(self.n), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                       MASTER_ADDR=f"{SUBNET}.1", MASTER_PORT=str(PORT), GLOO_SOCKET_IFNAME=f"{PREFIX}n{i}",
                       OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen(["ip", "netns", "exec", f"{PREFIX}{i}", sys.executable, *args], env=env,
                                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                          preexec_fn=self.quota.join(i)))
        try:
            outputs = [p.communicate(timeout=timeout)[0] for p in procs]
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        finally:  # a timeout, a failed rank or Ctrl-C: no rank outlives the run
            for p in procs:
                if p.poll() is None:
                    p.kill()
        if any(p.returncode for p in procs):
            bad = next(i for i, p in enumerate(procs) if p.returncode)
            return {"error": f"rank {bad} exited {procs[bad].returncode}: {outputs[bad][-400:]}"}
        return outputs
