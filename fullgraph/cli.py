"""The ``fullgraph`` command: ``train`` and ``datasets``.

Options come from defaults, then a TOML file (``--config``), then flags, later ones winning; the
merged set is validated once by ``TrainConfig``. Input errors end with one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from fullgraph.config import MODEL_NAMES, TrainConfig, load_toml
from fullgraph.errors import InputError

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit 2), like every other input error."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        raise InputError(f"{self.prog}: {message}")


_TRAIN_FLAGS = [
    # flag, type, help
    ("--dataset", str, "dataset name ('fullgraph datasets' lists them); default: the built-in synthetic graph"),
    ("--root", str, "data root (default: $FULLGRAPH_DATA, then ./data)"),
    ("--split", int, "which fixed split of a dataset, or the seed of a made one (default 0)"),
    ("--model", str, f"one of {', '.join(MODEL_NAMES)} (default gcn)"),
    ("--layers", int, "graph layers, 2..128 (default 2)"),
    ("--hidden", int, "hidden width (default 64)"),
    ("--heads", int, "GAT attention heads (default 8)"),
    ("--lr", float, "Adam learning rate (default 0.01)"),
    ("--weight-decay", float, "weight decay (GCNII: of its dense layers) (default 5e-4)"),
    ("--conv-weight-decay", float, "GCNII: weight decay of its graph layers (default 0.01)"),
    ("--dropout", float, "dropout rate (default 0.5)"),
    ("--epochs", int, "maximum epochs (default 200)"),
    ("--patience", int, "stop after this many evaluations without a better val accuracy (default 0: never)"),
    ("--select", str, "pick the epoch by val 'acc' (highest) or 'loss' (lowest) (default acc)"),
    ("--seed", int, "seed (default 0)"),
    ("--eval-every", int, "evaluate every this many epochs (default 1)"),
    ("--threads", int, "CPU threads (default 0: all cores)"),
    ("--out", str, "folder for metrics.jsonl and summary.json"),
    ("--gcnii-alpha", float, "GCNII initial residual alpha (default 0.1)"),
    ("--gcnii-lambda", float, "GCNII identity mapping lambda (default 0.5)"),
    ("--feature-norm", str, "row | none | auto (row for Planetoid graphs) (default auto)"),
    ("--parallel", str, "how the work is split (default single)"),
    ("--nprocs", int, "number of processes (default 1)"),
    ("--progress", str, "bar | lines | none | auto (default auto: a bar on a terminal)"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fullgraph", description="Full-graph GNN training across many processes.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = sub.add_parser("train", help="train a model on a graph", description="Train a GNN on the whole graph.")
    train.add_argument("--config", help="TOML file of options (flags override it)")
    for flag, typ, help_ in _TRAIN_FLAGS:
        train.add_argument(flag, type=typ, default=argparse.SUPPRESS, help=help_)
    ds = sub.add_parser("datasets", help="list known datasets and which are present")
    ds.add_argument("--root", default=None, help="data root (default: $FULLGRAPH_DATA, then ./data)")
    ds.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    options = load_toml(args.config) if args.config else {}
    for name in TrainConfig.field_names():
        if hasattr(args, name):
            options[name] = getattr(args, name)
    return TrainConfig(**options)


def cmd_train(args: argparse.Namespace) -> int:
    from fullgraph.train.trainer import Trainer

    cfg = config_from_args(args)
    trainer = Trainer(cfg)
    try:
        result = trainer.build().train()
    finally:
        trainer.close()
    print(
        f"{result.dataset} {result.model} x{result.layers}: test accuracy {result.test_acc:.4f} "
        f"(val {result.val_acc:.4f} at epoch {result.best_epoch}; {result.epochs_run} epochs, "
        f"{result.epoch_time_s * 1000:.1f} ms/epoch, peak RSS {result.peak_rss_bytes / 2**20:.0f} MiB)"
    )
    if cfg.out:
        print(f"wrote {cfg.out}/metrics.jsonl and {cfg.out}/summary.json")
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    from fullgraph.data.datasets import dataset_status, resolve_root

    root = resolve_root(args.root)
    rows = dataset_status(root)
    if args.json:
        out = [{"name": r.name, "present": r.present, "paths": [str(p) for p in r.paths]} for r in rows]
        print(json.dumps({"root": str(root), "datasets": out}, indent=2))
        return 0
    print(f"data root: {root}  (--root, or ${'{'}FULLGRAPH_DATA{'}'})")
    width = max(len(r.name) for r in rows)
    print(f"  {'synthetic':<{width}}  {'built-in':<9}  (the default: a planted-partition graph, no files)")
    for r in rows:
        mark = "present" if r.present else "missing"
        where = str(r.paths[0].parent) if len(r.paths) > 1 else str(r.paths[0])
        print(f"  {r.name:<{width}}  {mark:<9}  {where}")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    try:
        args = build_parser().parse_args(argv)
        if args.command == "train":
            return cmd_train(args)
        return cmd_datasets(args)
    except InputError as e:
        print(f"fullgraph: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fullgraph: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
