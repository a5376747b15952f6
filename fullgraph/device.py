"""Which device a process computes on (``--device``), and how much of it a run used.

``auto`` means CUDA when this process can have a GPU of its own, the CPU otherwise. One process
takes GPU 0; a rank takes the GPU of its local rank, and the ranks talk over NCCL. ``cpu`` keeps a run
on the host even where GPUs exist (distributed runs then use gloo). ``cuda`` insists: with fewer GPUs
than local ranks the ranks share them (rank ``r`` on GPU ``r mod count``) and talk over gloo, which
NCCL's one-rank-per-GPU rule leaves (``comm.context.Comm`` stages through host memory what gloo does not
move from a GPU); with none it is refused in one line.
"""

from __future__ import annotations

import platform

import torch

import fullgraph.environ as environ
from fullgraph.errors import InputError

__all__ = ["DEVICES", "resolve_device", "shares_gpu", "synchronize", "reset_peak", "peak_device_bytes", "environment"]


DEVICES = ("auto", "cpu", "cuda")  # --device


def resolve_device(choice: str, local_rank: int = 0, local_world_size: int = 1) -> torch.device:
    """The device of local rank ``local_rank`` of ``local_world_size`` processes on this machine.

    ``auto`` follows ``$FULLGRAPH_DEVICE`` where it is set (the test suite sets ``cpu``, so that its
    equalities and bit-for-bit checks are the CPU's on every machine; ``tests/test_gpu.py`` asks
    for CUDA by name)."""
    if choice == "auto":
        choice = (environ.get("FULLGRAPH_DEVICE") or "").strip() or "auto"
        if choice not in DEVICES:
            raise InputError(f"expected $FULLGRAPH_DEVICE to be one of {', '.join(DEVICES)} (got {choice!r})")
    if choice not in DEVICES:
        raise InputError(f"expected --device to be one of {', '.join(DEVICES)} (got {choice!r})")
    if choice == "cpu":
        return torch.device("cpu")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus >= local_world_size:
        return torch.device("cuda", local_rank)
    if choice == "cuda":
        if gpus:  # more ranks than GPUs: they share them, over gloo (shares_gpu)
            return torch.device("cuda", local_rank % gpus)
        raise InputError(f"expected a GPU with --device cuda (torch sees 0 on this machine, for "
                         f"{local_world_size} process(es)); use --device cpu or auto")
    return torch.device("cpu")


def shares_gpu(device: torch.device, local_world_size: int) -> bool:
    """Whether ``device`` is a GPU that other local ranks use too (fewer GPUs than local ranks): such
    ranks cannot talk over NCCL, which takes one rank per GPU."""
    return device.type == "cuda" and torch.cuda.device_count() < local_world_size


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a wall-clock time covers it (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_device_bytes(device: torch.device) -> int | None:
    """The most bytes PyTorch's allocator held on the GPU since ``reset_peak`` (None on the CPU, whose
    peak is the process's resident set instead)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return None


def environment() -> dict:
    """The machine and versions a run's numbers came from (``summary.json``'s ``environment``)."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
    }
