"""Process memory as the operating system sees it (what a user's machine must have)."""

from __future__ import annotations

import resource
import sys

__all__ = ["peak_rss_bytes", "current_rss_bytes"]


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far, in bytes."""
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
