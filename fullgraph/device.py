"""Which device a process computes on (``--device``), and how much of it a run used.

``auto`` means CUDA when this process can have a GPU of its own, the CPU otherwise. One process
takes GPU 0; a rank takes the GPU of its local rank, so a machine needs a GPU per local rank (NCCL
refuses two ranks on one GPU). ``cpu`` keeps a run on the host even where GPUs exist (distributed
runs then use gloo); ``cuda`` insists, and is refused with one line where no GPU can be had.
"""

from __future__ import annotations

import platform

import torch

import fullgraph.environ as environ
from fullgraph.errors import InputError

__all__ = ["DEVICES", "resolve_device", "synchronize", "reset_peak", "peak_device_bytes", "environment"]


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
        raise InputError(f"expected a GPU for each of the {local_world_size} process(es) on this machine with "
                         f"--device cuda (torch sees {gpus}); use --device cpu or auto")
    return torch.device("cpu")


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
