"""Analytic volumes and estimates, before anything runs.

* :mod:`fullgraph.plan.volumes`: what each layout must move (bytes per epoch).
* :mod:`fullgraph.plan.rank_memory`: what each rank must hold (peak bytes), and the check that
  refuses a run that would not fit.
"""

from fullgraph.plan.rank_memory import (
    GIB, MIB, PROCESS_BYTES, check_memory, estimate_peak_bytes, graph_memory_stats, kept_activation_bytes,
    memory_breakdown, model_memory_options, part_memory_stats, partition_memory_stats, variable_bytes,
)
from fullgraph.plan.volumes import gcn_product_widths, spmm_volume

__all__ = ["gcn_product_widths", "spmm_volume", "estimate_peak_bytes", "memory_breakdown", "check_memory",
           "model_memory_options", "variable_bytes", "graph_memory_stats", "part_memory_stats",
           "partition_memory_stats", "kept_activation_bytes", "GIB", "MIB", "PROCESS_BYTES"]
