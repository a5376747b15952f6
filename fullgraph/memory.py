"""Process memory as the operating system sees it (what a user's machine must have), and the live
bytes of the C heap (what the tensors of this process hold right now)."""

from __future__ import annotations

import resource
import sys

__all__ = ["peak_rss_bytes", "current_rss_bytes", "heap_bytes", "return_freed_memory", "mmap_threshold",
           "available_memory_bytes"]


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far, in bytes.

    On Linux this is ``VmHWM`` of /proc/self/status, the high-water mark of this program's own
    memory. ``getrusage``'s ``ru_maxrss`` is not: Linux carries the parent's peak over fork and exec,
    so a rank started by a launcher that had loaded a graph would report the launcher's peak (a test
    started from a large pytest process read 835 MiB for a 300 MiB run)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # Linux reports KiB


def current_rss_bytes() -> int:
    """Resident set size now, in bytes (Linux /proc; falls back to the peak elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        import os

        return pages * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return peak_rss_bytes()


_MALLINFO2 = None


def heap_bytes() -> int | None:
    """Bytes allocated through ``malloc`` and not yet freed (glibc's ``mallinfo2``: heap blocks in use
    plus mmapped blocks), or ``None`` where there is no glibc. CPU tensors live there, so the
    difference of two readings is what was allocated in between and is still alive, unlike the RSS,
    which also counts freed memory the allocator keeps."""
    global _MALLINFO2
    if _MALLINFO2 is None:
        try:
            import ctypes

            class _Info(ctypes.Structure):
                _fields_ = [(name, ctypes.c_size_t) for name in
                            ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                             "fordblks", "keepcost")]

            fn = ctypes.CDLL("libc.so.6").mallinfo2
            fn.restype = _Info
            _MALLINFO2 = fn
        except (OSError, AttributeError):
            _MALLINFO2 = False
    if not _MALLINFO2:
        return None
    info = _MALLINFO2()
    return int(info.uordblks + info.hblkhd)


MMAP_THRESHOLD_BYTES = 1 << 20
"""Allocations of at least this size are mapped and unmapped on their own (see below)."""


def return_freed_memory() -> bool:
    """Make glibc give large freed blocks back to the system at once; ``True`` if it applied.

    glibc serves big allocations with their own ``mmap`` only up to a threshold that it raises
    whenever such a block is freed (up to 32 MiB), after which tensors of a few MiB come from the
    heap and their memory stays in the process after they are freed. A training step allocates and
    frees many such tensors, so the peak RSS then measures glibc's cache rather than what the run
    needs: on a 5.5M-edge R-MAT graph (SAGE 3×128) one process peaked at 2.03 GB with the default and
    1.82 GB with a fixed 1 MiB threshold, and an almost empty graph-parallel part at 1.02 GB against
    0.57 GB. Setting the threshold (``mallopt(M_MMAP_THRESHOLD)``) also turns its raising off.
    Elsewhere than glibc this does nothing.

    The price is speed: every large tensor is then mapped afresh and its pages faulted in, which
    made epochs about 2x slower here (one thread, Coauthor-CS: GCN 4x128 0.50 -> 1.03 s, GCNII
    16x128 1.83 -> 4.55 s at 1507 -> 744 MiB; a 32 MiB threshold changes neither). So training applies
    it only when asked (``--release-memory``); the preparation commands (partition, generate,
    convert), which run no epochs, always do.
    """
    global _THRESHOLD_FIXED
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _THRESHOLD_FIXED = bool(libc.mallopt(-3, MMAP_THRESHOLD_BYTES))  # -3: M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        return False
    return _THRESHOLD_FIXED


_THRESHOLD_FIXED = False
GLIBC_MMAP_THRESHOLD_MAX = 32 << 20
"""The largest value glibc's dynamic threshold takes on 64-bit systems."""


def mmap_threshold() -> int:
    """Size from which this process's freed tensors leave it (they were mmapped): the fixed threshold
    once :func:`return_freed_memory` applied, else glibc's dynamic one at its ceiling, where a
    training run soon puts it."""
    return MMAP_THRESHOLD_BYTES if _THRESHOLD_FIXED else GLIBC_MMAP_THRESHOLD_MAX


def available_memory_bytes() -> int:
    """Memory this machine can still give processes (``MemAvailable`` of /proc/meminfo; elsewhere
    the physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os

    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
