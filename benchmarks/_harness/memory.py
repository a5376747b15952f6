"""This process's resident set and the kernel's high-water mark of it, read from ``/proc/self``:
what the scripts that measure their own memory (single_process.py, prep_memory.py) report."""

from __future__ import annotations


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"expected a {field} line in /proc/self/status")


def rss_bytes() -> int:
    """This process's resident set now (``VmRSS``)."""
    return _status_kib("VmRSS") * 1024


def hwm_bytes() -> int:
    """The kernel's RSS high-water mark (``VmHWM``) of this process."""
    return _status_kib("VmHWM") * 1024


def reset_hwm() -> bool:
    """Set the high-water mark to the current RSS (``clear_refs`` 5, Linux >= 4.0), so that a peak
    read later is the work's own; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
