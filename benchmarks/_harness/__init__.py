"""What the benchmark scripts share, one job to a module: the machine header
(:mod:`.environment`), running ``fullgraph train`` and reading back what it wrote (:mod:`.runs`),
the JSON result and its verdicts (:mod:`.results`), this process's memory high-water mark
(:mod:`.memory`), and every process's CPU and memory from ``/proc`` (:mod:`.processes`).

A script run as ``python benchmarks/NAME.py`` has ``benchmarks/`` on ``sys.path``, and so do the
worker processes the scripts start with ``sys.executable __file__``: ``from _harness import ...``
finds this package. Only the standard library is imported at the top of every module here, because
some scripts measure their own process's memory (single_process.py, prep_memory.py) and one must
not hold torch at all (scale.py's driver); torch and the others are imported inside the functions
that report on them.
"""

from .environment import environment, machine, print_header, start_report, versions
from .memory import hwm_bytes, reset_hwm, rss_bytes
from .paths import GIB, REPO
from .processes import CLK_TCK, Sampler, process_table, process_tree
from .results import finish, write_json
from .runs import read_metrics, read_summary, run_and_read, train

__all__ = ("CLK_TCK", "GIB", "REPO", "Sampler", "environment", "finish", "hwm_bytes", "machine", "print_header",
           "process_table", "process_tree", "read_metrics", "read_summary", "reset_hwm", "rss_bytes", "run_and_read",
           "start_report", "train", "versions", "write_json")
