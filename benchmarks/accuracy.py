"""Published accuracies, reproduced: Kipf & Welling's GCN and the GCNII paper's deep models.

    .venv/bin/python benchmarks/accuracy.py [--root ../shared/data] [--only cora-gcn,cora-gcnii64,...]

Prints, per run, the test accuracy at the selected epoch next to the paper's number and the
acceptance threshold, with the machine, versions and the full configuration. Long runs (GCNII at 64
layers for up to 1500 epochs) live here rather than in the test suite; the Cora GCN case is also a
test (``tests/train/test_trainer.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from types import MappingProxyType

from fullgraph.config import TrainConfig
from fullgraph.data.load import load_graph
from fullgraph.train.trainer import Trainer

from _harness import print_header

GCNII = MappingProxyType(dict(model="gcnii", lr=0.01, weight_decay=5e-4, conv_weight_decay=0.01, gcnii_alpha=0.1,
                              epochs=1500, patience=100, select="loss"))

# name: (dataset, config, seeds, paper's test accuracy, threshold)
RUNS = MappingProxyType({
    "cora-gcn": ("cora", dict(model="gcn", layers=2, hidden=16, lr=0.01, weight_decay=5e-4, dropout=0.5,
                              epochs=200), [0, 1, 2, 3, 4], 0.815, 0.805),
    "cora-gcnii64": ("cora", GCNII | dict(layers=64, hidden=64, gcnii_lambda=0.5, dropout=0.6), [0], 0.855, 0.845),
    "citeseer-gcnii32": ("citeseer", GCNII | dict(layers=32, hidden=256, gcnii_lambda=0.6, dropout=0.7), [0, 1, 2],
                         0.734, 0.72),
})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = os.environ.get("FULLGRAPH_DATA") or str(Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--root", default=default_root)
    parser.add_argument("--only", default=",".join(RUNS), help="comma-separated subset of " + ", ".join(RUNS))
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    print_header(threads=args.threads or None)
    failed = 0
    for name in args.only.split(","):
        dataset, kw, seeds, paper, threshold = RUNS[name]
        graph = load_graph(TrainConfig.of(dataset=dataset, root=args.root))
        for seed in seeds:
            cfg = TrainConfig.of(dataset=dataset, root=args.root, seed=seed, progress="none", threads=args.threads,
                                 **kw)
            t0 = time.perf_counter()
            trainer = Trainer(cfg, graph)
            result = trainer.build().train()
            trainer.close()
            ok = result.test_acc >= threshold
            failed += not ok
            print(f"{name:<18} seed {seed}: test {result.test_acc:.4f} (paper {paper:.3f}, need >= {threshold:.3f}) "
                  f"{'PASS' if ok else 'FAIL'}; best epoch {result.best_epoch}/{result.epochs_run}, "
                  f"{result.epoch_time_s * 1000:.1f} ms/epoch, {time.perf_counter() - t0:.0f} s", flush=True)
        print(f"  config: {kw}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
