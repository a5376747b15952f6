"""Analytic volumes and estimates, before anything runs.

* :mod:`fullgraph.plan.volumes`: what each layout must move (bytes per epoch, by ledger category).
* :mod:`fullgraph.plan.rank_memory`: what each rank must hold (peak bytes), and the check that
  refuses a run that would not fit.
* :mod:`fullgraph.plan.epoch_time`: what an epoch takes on a given network (a model, calibrated by
  :mod:`fullgraph.plan.layer_timer`, which times the model's own layers on this machine);
  :mod:`fullgraph.plan.rank_work`: each rank's share of the work and of the traffic, which that model
  is applied to.
* :mod:`fullgraph.plan.sizes`: which process counts a plan weighs (one process included), where their
  ranks run and on how many threads; :mod:`fullgraph.plan.ranking`: the ranking, the ties the timings'
  spread cannot break, and the recommendation.

``fullgraph plan`` (:mod:`fullgraph.cli.plan`) puts them together for every layout of P processes.
"""

from fullgraph.plan.epoch_time import (
    EpochEstimate, Kernels, LayerCalls, Network, RankWork, estimate_epoch, estimate_layout,
)
from fullgraph.plan.layer_timer import LayerTimer
from fullgraph.plan.memory_check import check_memory
from fullgraph.plan.rank_memory import (
    GIB, MIB, PROCESS_BYTES, device_peak_bytes, estimate_peak_bytes, graph_memory_stats, kept_activation_bytes,
    memory_breakdown, model_memory_options, part_memory_stats, partition_memory_stats, variable_bytes,
)
from fullgraph.plan.volumes import ModelShape, epoch_volume, gcn_product_widths, spmm_volume

__all__ = ["gcn_product_widths", "spmm_volume", "ModelShape", "epoch_volume", "estimate_peak_bytes", "device_peak_bytes",
           "memory_breakdown", "check_memory", "model_memory_options", "variable_bytes", "graph_memory_stats",
           "part_memory_stats", "partition_memory_stats", "kept_activation_bytes", "GIB", "MIB", "PROCESS_BYTES",
           "Network", "Kernels", "LayerTimer", "LayerCalls", "RankWork", "EpochEstimate", "estimate_epoch",
           "estimate_layout"]
