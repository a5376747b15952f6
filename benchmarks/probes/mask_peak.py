"""The memory a keyed dropout mask of 2^20 x 256 entries takes while it is made (issue 54: SAGE's peak on
the H200), eager as CUDA made it until the mask kernel was compiled, or compiled as it is made there
now; run on the CPU, each in a fresh process (big tensors returned to the system when freed, so the
growth of the peak RSS is the most that was alive at once):

    .venv/bin/python benchmarks/probes/mask_peak.py eager
    .venv/bin/python benchmarks/probes/mask_peak.py compiled
"""

from __future__ import annotations

import importlib
import resource
import sys

import torch

from fullgraph.memory import return_freed_memory


def main(how: str, rows: int = 1 << 20, cols: int = 256) -> int:
    return_freed_memory()
    d = importlib.import_module("fullgraph.ops.dropout")
    r, c = d._hashes(torch.arange(rows), cols, d.DropoutKey(0, 1), 2)
    thr = d._threshold(0.5)
    make = d._keep_bits if how == "eager" else torch.compile(d._keep_bits, dynamic=True, fullgraph=True)
    if how == "compiled":
        make(r[:1000], c, thr)  # compiled before the measured call
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    mask = make(r, c, thr)
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(f"{how}: mask {mask.numel() * mask.element_size() / 2**20:.0f} MiB, peak RSS grew {grew / 1024:.0f} MiB "
          f"while making it (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "eager"))
