"""``fullgraph partition``: a graph cut into parts and written one folder per part, for ``fullgraph train
--partition-dir`` on storage every machine of a torchrun reads."""

from __future__ import annotations

import argparse
from pathlib import Path

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError

__all__ = ["cmd_partition"]


def cmd_partition(args: argparse.Namespace, argv: list[str]) -> int:
    from fullgraph.parallel.setup import prepare_partition_dir
    from fullgraph.partition.store import load_meta

    cfg = TrainConfig.of(dataset=args.dataset, root=args.root, split=args.split, partitioner=args.partitioner,
                      seed=args.seed, feature_norm=args.feature_norm, metis_sample=args.metis_sample,
                      model=args.model, layers=args.layers, hidden=args.hidden, heads=args.heads)
    if args.parts < 1:
        raise InputError(f"expected --parts >= 1 (got {args.parts})")
    out = Path(args.out)
    prepare_partition_dir(cfg, args.parts, out=out)  # replaces only an earlier partition, atomically
    meta = load_meta(out)
    print(f"{meta.get('graph', args.dataset)}: {args.parts} parts by {args.partitioner}, "
          f"replication factor {meta['replication_factor']:.4f}")
    print(f"  {'part':>4}  {'inner':>9}  {'halo':>9}  {'halo/inner':>10}  {'local edges':>11}")
    for st in meta["part_stats"]:
        print(f"  {st['part']:>4}  {st['inner']:>9}  {st['halo']:>9}  {st['halo_ratio']:>10.3f}  {st['edges']:>11}")
    print(f"wrote {out}/partition.json and {args.parts} part folders")
    return 0
