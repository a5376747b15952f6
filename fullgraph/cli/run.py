"""``fullgraph evaluate`` and ``fullgraph predict``: a trained run's model (``RUN/model.pt``) applied again,
its split metrics recomputed, or its predictions, probabilities and embeddings written."""

from __future__ import annotations

import argparse
import json

from fullgraph.errors import InputError
from fullgraph.options import PAIR_TASKS
from fullgraph.tasks.metrics import METRIC_NAMES

__all__ = ["cmd_evaluate", "cmd_predict"]


def _applied_threads(args: argparse.Namespace) -> None:
    """``evaluate`` and ``predict --threads N``: this process's CPU threads (0: torch's own, all cores)."""
    from fullgraph.config import MAX_THREADS

    if not 0 <= args.threads <= MAX_THREADS:
        raise InputError(f"expected --threads in [0, {MAX_THREADS}] (got {args.threads})")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)


def cmd_evaluate(args: argparse.Namespace, argv: list[str]) -> int:
    from fullgraph.train.apply import evaluate_run

    _applied_threads(args)
    record = evaluate_run(args.run, args.dataset, args.root, args.device, args.metric)
    if args.json:
        print(json.dumps(record))
        return 0
    name = METRIC_NAMES[record["metric"]]
    print(f"{args.run}: {name} train {record['train_metric']:.4f}  val {record['val_metric']:.4f}  "
          f"test {record['test_metric']:.4f}  (val loss {record['val_loss']:.4f})")
    others = [m for m in record.get("metrics", {}).get("test", {}) if m != record["metric"]]
    if others:  # the task's other metrics, on the test split
        print("  test " + "  ".join(f"{METRIC_NAMES[m]} {record['metrics']['test'][m]:.4f}" for m in others))
    for relation, got in record.get("by_relation", {}).items():  # typed links: each scored relation's own
        print(f"  {relation}: {name} val {got['val_' + record['metric']]:.4f}  test {got['test_' + record['metric']]:.4f}  "
              f"(MRR test {got['test_mrr']:.4f}, ROC-AUC test {got['test_rocauc']:.4f})")
    return 0


def cmd_predict(args: argparse.Namespace, argv: list[str]) -> int:
    from fullgraph.comm.context import DistEnv
    from fullgraph.comm.mesh import Mesh
    from fullgraph.train.apply import predict_layout, predict_rank, predict_run

    _applied_threads(args)
    if not Mesh.for_mode(args.parallel, args.nprocs).distributed:  # one process (refused with --nprocs > 1)
        paths = predict_run(args.run, args.out, args.dataset, args.root, args.device, args.embeddings, args.overwrite,
                            args.pairs)
    else:
        if args.pairs is not None:
            raise InputError("expected --pairs with --parallel single (got --parallel graph): the pairs of a "
                             "link-prediction run are scored in one process")
        cfg = predict_layout(args.run, args.dataset, args.root, nprocs=args.nprocs, device=args.device,
                             partition_dir=args.partition_dir, link_file=args.link_file)
        if cfg.task.name in PAIR_TASKS and not args.embeddings:
            raise InputError("expected --embeddings with --parallel graph for a link-prediction run (got none): its "
                             "pairs (--pairs) are scored with --parallel single")
        if DistEnv.from_env() is None:  # partition (cached), then start the ranks
            from fullgraph.comm.launch import launch_local
            from fullgraph.parallel.setup import prepare_run
            from fullgraph.train.apply import check_out

            check_out(args.out, args.overwrite)  # before any rank starts
            return launch_local([*argv, *prepare_run(cfg).flags()], cfg.parallel.nprocs)
        paths = predict_rank(cfg, args.run, args.out, args.embeddings, args.overwrite)
        if paths is None:
            return 0
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
