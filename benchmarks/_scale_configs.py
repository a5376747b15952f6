"""What scale.py measures: the graph sizes, the training configurations and the targets they are
held to. Read-only: the tables, the steps and the driver all read them."""

from __future__ import annotations

from types import MappingProxyType

MIB = 2**20
MB = 1e6

# size label -> (R-MAT scale, edge draws)
SIZES = MappingProxyType({"1e5": (14, 52_000), "1e6": (17, 530_000), "1e7": (20, 5_150_000),
                          "1e8": (20, 65_000_000)})
FEATURES, CLASSES = 100, 16
PARTITION_BYTES_PER_EDGE = 60  # target: partition peak <= 60 B/edge + one copy of the features
RATIO_TARGETS = MappingProxyType({2: 0.6, 4: 0.35})  # largest graph-parallel rank peak / single peak, p = 1
FOREIGN_BUSY_CORES = 0.2

SAGE = ("--model", "sage", "--layers", "3", "--hidden", "128")
GCN8 = ("--model", "gcn", "--layers", "8", "--hidden", "128")
GCN3 = ("--model", "gcn", "--layers", "3", "--hidden", "128")
# name -> (label, processes, partition parts needed, flags)
CONFIGS = MappingProxyType({
    "single": ("single, SAGE 3x128", 1, None, (*SAGE,)),
    "graph2": ("graph P=2 p=1, SAGE 3x128", 2, 2, (*SAGE, "--parallel", "graph", "--nprocs", "2",
                                                   "--boundary-rate", "1")),
    "graph2-bns": ("graph P=2 p=0.1, SAGE 3x128", 2, 2, (*SAGE, "--parallel", "graph", "--nprocs", "2",
                                                         "--boundary-rate", "0.1")),
    "graph4": ("graph P=4 p=1, SAGE 3x128", 4, 4, (*SAGE, "--parallel", "graph", "--nprocs", "4",
                                                   "--boundary-rate", "1")),
    "graph4-bns": ("graph P=4 p=0.1, SAGE 3x128", 4, 4, (*SAGE, "--parallel", "graph", "--nprocs", "4",
                                                         "--boundary-rate", "0.1")),
    "pipeline": ("pipeline 4x1, GCN 8x128", 4, None, (*GCN8, "--parallel", "pipeline", "--nprocs", "4")),
    "hybrid": ("hybrid 2x2, GCN 8x128", 4, None, (*GCN8, "--parallel", "hybrid", "--nprocs", "4", "--stages", "2",
                                                  "--graph-ways", "2")),
    "spmm-1d": ("spmm-1d P=4, GCN 3x128", 4, None, (*GCN3, "--parallel", "spmm-1d", "--nprocs", "4")),
    # single-process references of the GCN runs (not in the default set)
    "single-gcn8": ("single, GCN 8x128", 1, None, (*GCN8,)),
    "single-gcn3": ("single, GCN 3x128", 1, None, (*GCN3,)),
})
EXTRA_CONFIGS = ("single-gcn8", "single-gcn3")
# the single-process run each layout is compared with (same model)
REFERENCE = MappingProxyType({"graph2": "single", "graph2-bns": "single", "graph4": "single", "graph4-bns": "single",
                              "pipeline": "single-gcn8", "hybrid": "single-gcn8", "spmm-1d": "single-gcn3"})
PREP = ("generate", "partition")
COMM_SHORT = MappingProxyType({"grad/allreduce": "grad", "sample/index": "index"})


def singles_first(names) -> list[str]:
    """The configurations in ``names``, single-process ones first (they are the references)."""
    return sorted(names, key=lambda c: CONFIGS[c][1] > 1)
