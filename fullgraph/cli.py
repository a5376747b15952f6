"""The ``fullgraph`` command: the table of its subcommands (``COMMANDS``), ``main``, and ``train``,
``partition``, ``evaluate`` and ``predict``; the data commands are in :mod:`fullgraph.cli_data`, ``plan``
in :mod:`fullgraph.cli_plan`, ``report`` in :mod:`fullgraph.cli_report`. Each command's flags are
declared as options classes (:mod:`fullgraph.command_options`, ``TrainConfig`` for ``train``).

Options come from defaults, then a TOML file (``--config``), then flags, later ones winning; the
merged set is validated once by ``TrainConfig``. Input errors end with one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import traceback
from pathlib import Path

import fullgraph.environ as environ
from fullgraph.comm.launch import report_worker_error
from fullgraph.config import DataOptions, GraphSource, TaskOptions, TrainConfig, load_toml
from fullgraph.cli_data import cmd_convert, cmd_datasets, cmd_generate
from fullgraph.cli_plan import cmd_plan
from fullgraph.cli_report import cmd_report
from fullgraph.command_options import (ConvertOptions, DatasetsOptions, EvaluateOptions, GeneratedOutput,
                                       PartitionModel, PartitionOptions, PlanModel, PlanOptions, PlantedOptions,
                                       PredictOptions, ReportOptions, RmatOptions, TrainFiles, TypedOptions)
from fullgraph.commands import Command, Parser, add_command, flags_of
from fullgraph.errors import EXIT_STATUS, InputError, RunFault
from fullgraph.tasks.metrics import METRIC_NAMES

__all__ = ["main"]


def given_options(args: argparse.Namespace) -> dict:
    """The options of ``fullgraph train`` a user gave: the TOML file's, overridden by the flags (a
    ``--model-arg`` overrides the same key of ``[model.args]``)."""
    options = load_toml(args.config) if args.config else {}
    for name in TrainConfig.field_names():
        if hasattr(args, name):
            value = getattr(args, name)
            if isinstance(value, list):  # the pairs of a repeatable key=value flag
                value = dict(options.get(name) or {}) | dict(value)
            options[name] = value
    return options


def cmd_train(args: argparse.Namespace, argv: list[str]) -> int:
    from contextlib import nullcontext

    from fullgraph.comm.context import DistEnv
    from fullgraph.comm.launch import ERROR_FILE_ENV
    from fullgraph.parallel.setup import graph_of_inputs
    from fullgraph.train.runs import RunFolder, resume_config

    resume, given = getattr(args, "resume", None), given_options(args)
    cfg, resuming = resume_config(given, resume) if resume else (TrainConfig.of(**given), False)
    if not resume and cfg.parallel.mesh.distributed and "nprocs" not in given:
        raise InputError(f"expected --nprocs with --parallel {cfg.parallel.mode} (how many processes; got none, "
                         f"which would run the layout in one process)")
    env = DistEnv.from_env()
    owner = env is None or (env.rank == 0 and not environ.has(ERROR_FILE_ENV))  # not the launcher's ranks
    if not resuming and owner:  # as the user gave it: by this process, not by the launcher's ranks
        taken = graph_of_inputs(cfg, dataset_given="dataset" in given)  # the graph a given --partition-dir holds
        if taken is not cfg:  # the ranks record the run under it too
            cfg, argv = taken, [*argv, "--dataset", taken.data.dataset]
    with RunFolder(cfg, start=not resuming, replace=resume == "auto") if owner else nullcontext() as folder:
        return _train(cfg, argv, env, resuming, folder)


def _train(cfg: TrainConfig, argv: list[str], env, resuming: bool, folder) -> int:
    """``fullgraph train`` once its run folder is held: launch the ranks, or train this rank's share."""
    from fullgraph.device import resolve_device
    from fullgraph.train.trainer import Trainer

    local = env.local_world_size if env is not None else (cfg.parallel.nprocs if cfg.parallel.mesh.distributed else 1)
    resolve_device(cfg.run.device, 0, local)  # before any graph is read or process started
    if cfg.parallel.mesh.distributed and env is None:
        rc = launch(cfg, argv)
        return folder.ranks_ended(rc) if folder is not None else rc
    if env is not None and env.world_size != cfg.parallel.nprocs:
        from fullgraph.comm.context import stale_env_hint

        hint = stale_env_hint()  # RANK and WORLD_SIZE left in a shell from a torchrun, most likely
        raise InputError(f"expected --nprocs to match the torchrun world size (got --nprocs {cfg.parallel.nprocs}, "
                         f"WORLD_SIZE {env.world_size})" + (f". {hint}" if hint else ""))
    missing = cfg.parallel.partition_dir is None or (cfg.parallel.mesh.chunked and cfg.parallel.chunk_file is None)
    if env is not None and cfg.parallel.mesh.distributed and missing:
        shared_inputs(cfg, env)
    trainer = Trainer(cfg, resume=resuming)
    try:
        result = trainer.build().train()
    except Exception as e:  # report before closing: the peers fail on the closed connection at once
        report_worker_error(e, input_error=isinstance(e, InputError))
        raise
    finally:
        trainer.close()
    if env is not None and env.rank != 0:
        return 0
    print(
        f"{result.dataset} {result.model}, {result.layers} layers: test {METRIC_NAMES[result.metric]} "
        f"{result.test_metric:.4f} (val {result.val_metric:.4f} at epoch {result.best_epoch}; {result.epochs_run} epochs, "
        f"{result.epoch_time_s * 1000:.1f} ms/epoch, peak RSS {result.peak_rss_bytes / 2**20:.0f} MiB"
        + (f", {result.device} peak {result.peak_cuda_bytes / 2**20:.0f} MiB)" if result.peak_cuda_bytes else ")")
    )
    if cfg.run.out:
        print(f"wrote {cfg.run.out}/metrics.jsonl and {cfg.run.out}/summary.json")
    return 0


def launch(cfg: TrainConfig, argv: list[str]) -> int:
    """Partition first (so bad input is reported once, before any process starts), then start the
    ranks on this machine."""
    from fullgraph.comm.launch import launch_local
    from fullgraph.parallel.setup import prepare_run

    from fullgraph.progress import resolve_mode

    flags = prepare_run(cfg).flags()
    bar = resolve_mode(cfg.run.progress) == "bar"  # drawn here, on the terminal, from every rank's epoch
    return launch_local([*argv, *flags, *(["--progress", "none"] if bar else [])], cfg.parallel.nprocs,
                        threads=cfg.run.threads, progress=(cfg.optimization.epochs, 0) if bar else None)


def shared_inputs(cfg: TrainConfig, env) -> None:
    """Under torchrun without the launcher's folders: rank 0 partitions and chunks (cached), the
    others wait for it. Across machines, make the partition with 'fullgraph partition' on shared
    storage instead."""
    from fullgraph.comm.context import broadcast_object, init_world
    from fullgraph.parallel.setup import prepare_run

    init_world(env, cfg.run.device, setup_timeout_s=1800.0)  # the group Comm will use, NCCL included
    inputs = broadcast_object(prepare_run(cfg) if env.rank == 0 else None, src=0)
    inputs.apply(cfg)


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
    record = evaluate_run(args.run, args.dataset, args.root, args.device)
    if args.json:
        print(json.dumps(record))
        return 0
    name = METRIC_NAMES[record["metric"]]
    print(f"{args.run}: {name} train {record['train_metric']:.4f}  val {record['val_metric']:.4f}  "
          f"test {record['test_metric']:.4f}  (val loss {record['val_loss']:.4f})")
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
        if cfg.task.name == "link" and not args.embeddings:
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


COMMANDS = {c.name: c for c in (
    Command("train", "train a model on a graph", "Train a GNN on the whole graph.", (TrainFiles,), cmd_train,
            config=TrainConfig, times_kernels=True),
    Command("partition", "partition a graph and write one folder per part",
            "Partition a graph for --parallel graph and write it to disk: one folder per part, for 'fullgraph train "
            "--partition-dir' (on storage every machine of a torchrun reads).",
            (DataOptions, PartitionOptions, PartitionModel), cmd_partition),
    Command("generate", "write a synthetic graph as a native dataset folder",
            "Generate a synthetic graph and write it as a native dataset folder.", run=cmd_generate, kinds=(
                Command("rmat", "an R-MAT power-law graph (2**scale nodes)",
                        "An R-MAT graph: 2**scale nodes, about 2 x edges directed edges after symmetrizing, "
                        "class-centroid features.", (RmatOptions, GeneratedOutput)),
                Command("planted", "a planted-partition graph (the built-in synthetic kind)",
                        "A planted-partition graph whose classes a GCN separates.", (PlantedOptions, GeneratedOutput)),
                Command("typed", "a typed (heterogeneous) graph: R-MAT-like relations between node types",
                        "A typed graph for --model rgcn: --node-types types (ids contiguous per type), R-MAT edges over "
                        "--relations relations and their reverses, features on the even types, labels and splits on "
                        "type 0.", (TypedOptions, GeneratedOutput)))),
    Command("convert", "write any dataset as a native dataset folder",
            "Load a dataset (a known name or a path, as 'train --dataset' takes) and write it as a native dataset "
            "folder.", (GraphSource, ConvertOptions), cmd_convert),
    Command("datasets", "list known datasets and which are present",
            "List the datasets --dataset takes by name, the files each needs under the data root, and which are "
            "present there (a missing one is downloaded on first use where a direct public URL exists).",
            (DatasetsOptions,), cmd_datasets),
    Command("plan", "which layout to use: bytes, memory and time per epoch of every layout",
            "Estimate, for every layout that fits --nprocs processes, the bytes per epoch (by ledger category), the "
            "peak memory per rank and the epoch time, on one machine (the default) or on --machines machines linked "
            "by a network of --bandwidth-gbps and --latency-us; rank them and recommend one.",
            (DataOptions, PlanModel, TaskOptions, PlanOptions), cmd_plan, times_kernels=True),
    Command("report", "figures and a summary table of one or more training runs",
            "Draw loss, metric, epoch-time, traffic and memory figures of training runs (folders written by "
            "'fullgraph train --out') and a Markdown table comparing them.", (ReportOptions,), cmd_report),
    Command("evaluate", "the split metrics of a trained run's model, recomputed from RUN/model.pt",
            "The split metrics of a trained run's model, recomputed from RUN/model.pt.", (EvaluateOptions,),
            cmd_evaluate),
    Command("predict", "class predictions, probabilities and embeddings of a trained run's model",
            "Class predictions, probabilities and embeddings of a trained run's model.", (PredictOptions,),
            cmd_predict),
)}
"""Every command, in ``fullgraph --help``'s order: the one table ``main`` dispatches through."""

HIDDEN_FLAGS = {name: tuple(o.flag for o in flags_of(c) if o.hidden) for name, c in COMMANDS.items()}
"""Flags only the launcher passes to its ranks, by command: no user option, so their help is ``SUPPRESS``
(tests/test_cli_help.py allows just these)."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="fullgraph", description="Full-graph GNN training across many processes.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS.values():
        add_command(sub, command)
    return parser


def _negative_values(argv: list[str]) -> list[str]:
    """``--flag -0.1,0.6`` written as ``--flag=-0.1,0.6``: argparse takes a word that starts with ``-``
    for a flag unless it is one plain number, and would say "expected one argument" instead of what is
    wrong with the value."""
    out, i = [], 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--") and "=" not in word and i + 1 < len(argv) and re.match(r"-\.?\d", argv[i + 1]):
            out.append(f"{word}={argv[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    argv = _negative_values(sys.argv[1:] if argv is None else list(argv))
    rank = environ.get("RANK")
    launched = environ.has("FULLGRAPH_ERROR_FILE")  # a rank of our own launcher
    quiet = rank not in (None, "0")
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(message)s", stream=sys.stdout)
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "json", False):  # stdout is the JSON document alone: progress lines go to stderr
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
                    handler.setStream(sys.stderr)
        command = COMMANDS[args.command]
        if not command.times_kernels or getattr(args, "release_memory", False):
            from fullgraph.memory import return_freed_memory

            return_freed_memory()  # peak RSS then measures what a command needs, not glibc's cache
        return command.run(args, argv)
    except (InputError, RunFault) as e:  # bad input; a full disk, a diverged loss: one line, a status of its own
        report_worker_error(e, input_error=isinstance(e, InputError))
        if not launched:
            where = f"rank {rank}: " if rank is not None else ""
            print(f"fullgraph: error: {where}{e}", file=sys.stderr)
        return e.exit_status
    except KeyboardInterrupt:
        print("fullgraph: interrupted", file=sys.stderr)
        return EXIT_STATUS["interrupted"]
    except Exception as e:  # a rank's unexpected failure: tell the launcher, keep the traceback
        if rank is None:
            raise
        report_worker_error(e, input_error=False)
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
