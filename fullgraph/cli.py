"""The ``fullgraph`` command: ``train``, ``partition``, ``evaluate`` and ``predict`` here; ``datasets``,
``generate`` and ``convert`` in :mod:`fullgraph.cli_data`.

Options come from defaults, then a TOML file (``--config``), then flags, later ones winning; the
merged set is validated once by ``TrainConfig``. Input errors end with one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from pathlib import Path

import fullgraph.environ as environ
from fullgraph.comm.launch import report_worker_error
from fullgraph.config import ModelOptions, TrainConfig, load_toml
from fullgraph.options import key_value, options_of
from fullgraph.cli_data import add_data_commands, cmd_convert, cmd_datasets, cmd_generate
from fullgraph.cli_plan import add_plan_command, cmd_plan
from fullgraph.cli_report import add_report_command, cmd_report
from fullgraph.errors import InputError
from fullgraph.train.metrics import METRIC_NAMES

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit 2), like every other input error."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        raise InputError(f"{self.prog}: {message}")


def add_train_options(parser: argparse.ArgumentParser) -> None:
    """One flag per ``TrainConfig`` field, made from the field (``fullgraph.options``): its type, its
    docstring as the help, its choices from the registry that owns them, grouped by section. A flag
    left out keeps its value from ``--config`` or the default (``SUPPRESS``), so only what the user
    typed overrides the file."""
    groups = {}
    for opt in options_of(TrainConfig):
        group = groups.get(opt.section) or groups.setdefault(opt.section, parser.add_argument_group(opt.section))
        if opt.hidden:
            group.add_argument(opt.flag, type=opt.type, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
            continue
        shown = opt.type not in (bool, dict) and opt.default not in (None, "")
        help_ = (opt.doc + (f" (default {opt.default})" if shown else "")).replace("%", "%%")
        if opt.type is dict:  # one key=value per flag, repeatable
            group.add_argument(opt.flag, type=_key_value, action="append", dest=opt.name, default=argparse.SUPPRESS,
                               help=help_, metavar="KEY=VALUE")
        elif opt.type is bool:
            group.add_argument(opt.flag, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=help_)
        else:  # choices are checked by TrainConfig, with the same message as from a TOML file
            metavar = "{" + ",".join(opt.choices) + "}" if opt.choices else opt.name.upper()
            if opt.name == "model":  # a built-in name, or a user's builder
                from fullgraph.models import MODELS

                metavar = "{" + ",".join(MODELS) + "}|FILE.py:FUNCTION"
            group.add_argument(opt.flag, type=opt.type, default=argparse.SUPPRESS, help=help_, metavar=metavar)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fullgraph", description="Full-graph GNN training across many processes.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = sub.add_parser("train", help="train a model on a graph", description="Train a GNN on the whole graph.")
    train.add_argument("--config", help="TOML file of options, in tables named after the groups below, e.g. "
                                        "[model] hidden = 128 (flags override it)")
    train.add_argument("--resume", help="RUN: carry on from RUN's newest checkpoint with its saved options (only "
                                        "--epochs may be raised); auto: the same with --out, or start afresh when it "
                                        "has no checkpoint yet (for torchrun --max-restarts)")
    add_train_options(train)
    add_partition_command(sub)
    add_data_commands(sub, _Parser)
    add_plan_command(sub)
    add_report_command(sub)
    add_model_commands(sub)
    return parser


HIDDEN_FLAGS = {"predict": ("--partition-dir",)}
"""Flags outside ``fullgraph train`` that only the launcher passes to its ranks: no user option, so their
help is ``SUPPRESS`` (train's own are ``Option.hidden``; tests/test_cli_help.py allows just these)."""


def _as_train(opt) -> str:
    """The help ``fullgraph train`` shows for its option ``opt``: a flag another command shares with
    train means the same there, so it is described in the same words."""
    return (opt.doc + (f" (default {opt.default})" if opt.default not in (None, "") else "")).replace("%", "%%")


def add_partition_command(sub) -> None:
    """``fullgraph partition``: the options of train that decide a partition, with train's words."""
    from fullgraph.data.datasets import ROOT_HELP

    train = {o.name: o for o in options_of(TrainConfig)}
    part = sub.add_parser("partition", help="partition a graph and write one folder per part",
                          description="Partition a graph for --parallel graph and write it to disk: one folder "
                                      "per part, for 'fullgraph train --partition-dir' (on storage every machine "
                                      "of a torchrun reads).")
    part.add_argument("--dataset", default="synthetic", help=_as_train(train["dataset"]))
    part.add_argument("--root", default=None, help=ROOT_HELP)
    part.add_argument("--split", type=int, default=0, help=_as_train(train["split"]))
    part.add_argument("--parts", type=int, required=True,
                      help="number of parts: one per process of the run (its --nprocs)")
    part.add_argument("--partitioner", default="metis", help=_as_train(train["partitioner"]))
    part.add_argument("--metis-sample", type=float, default=1.0,
                      help="METIS sees each undirected edge with this probability, in (0, 1]: "
                           "~150 bytes per edge it sees (default 1: every edge)")
    part.add_argument("--seed", type=int, default=0,
                      help="seed of the partitioner (METIS's own, random's and permuted's draws, fennel's "
                           "ties; default 0)")
    part.add_argument("--feature-norm", default="auto", help=_as_train(train["feature_norm"]))
    for flag, kind, attr, what in (("--model", str, "name", "the model whose per-rank memory the parts balance"),
                                   ("--layers", int, "layers", "its graph layers"),
                                   ("--hidden", int, "hidden", "its hidden width"),
                                   ("--heads", int, "heads", "its attention heads (GAT)")):
        part.add_argument(flag, type=kind, default=getattr(ModelOptions, attr),
                          help=f"metis-memory and fennel only: {what} (default {getattr(ModelOptions, attr)})")
    part.add_argument("--out", required=True, help="a new folder, or one holding an earlier partition")


def add_model_commands(sub) -> None:
    """``fullgraph evaluate`` and ``fullgraph predict``: a trained run's model applied to a graph."""
    from fullgraph.data.datasets import ROOT_DEFAULT

    for name, what in (("evaluate", "the split metrics of a trained run's model, recomputed from RUN/model.pt"),
                       ("predict", "class predictions, probabilities and embeddings of a trained run's model")):
        use = sub.add_parser(name, help=what, description=what[0].upper() + what[1:] + ".")
        use.add_argument("--run", required=True, help="a run folder (fullgraph train --out) holding model.pt")
        use.add_argument("--dataset", default=None, help="another graph like the run's (default: the run's own)")
        use.add_argument("--root", default=None, help=f"data root of --dataset (default: the run's; where it gave "
                                                      f"none, {ROOT_DEFAULT})")
        use.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
        if name == "evaluate":
            use.add_argument("--json", action="store_true", help="print JSON instead of a table")
            continue
        use.add_argument("--out", required=True, help="folder for predictions.npy, probabilities.npy "
                                                      "(and embeddings.npy)")
        use.add_argument("--embeddings", action="store_true", help="also write the last hidden layer")
        use.add_argument("--overwrite", action="store_true",
                         help="replace an earlier prediction in --out (its whole set of files)")
        use.add_argument("--parallel", default="single", choices=("single", "graph"),
                         help="single (default) | graph: one part per process, for graphs too big for one")
        use.add_argument("--nprocs", type=int, default=1, help="processes with --parallel graph (default 1)")
        for flag in HIDDEN_FLAGS[name]:  # the partition the launcher made
            use.add_argument(flag, default=None, help=argparse.SUPPRESS)


def _key_value(text: str) -> tuple[str, object]:
    try:
        return key_value(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


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
    from fullgraph.comm.context import DistEnv
    from fullgraph.comm.launch import ERROR_FILE_ENV
    from fullgraph.device import resolve_device
    from fullgraph.parallel.setup import graph_of_inputs
    from fullgraph.train.runs import resume_config, write_run_config
    from fullgraph.train.trainer import Trainer

    resume, given = getattr(args, "resume", None), given_options(args)
    cfg, resuming = resume_config(given, resume) if resume else (TrainConfig.of(**given), False)
    if not resume and cfg.parallel.mesh.distributed and "nprocs" not in given:
        raise InputError(f"expected --nprocs with --parallel {cfg.parallel.mode} (how many processes; got none, "
                         f"which would run the layout in one process)")
    env = DistEnv.from_env()
    if not resuming and (env is None or (env.rank == 0 and not environ.has(ERROR_FILE_ENV))):
        # as the user gave it: by this process, not by the launcher's ranks
        taken = graph_of_inputs(cfg, dataset_given="dataset" in given)  # the graph a given --partition-dir holds
        if taken is not cfg:  # the ranks record the run under it too
            cfg, argv = taken, [*argv, "--dataset", taken.data.dataset]
        write_run_config(cfg, replace=resume == "auto")
    local = env.local_world_size if env is not None else (cfg.parallel.nprocs if cfg.parallel.mesh.distributed else 1)
    resolve_device(cfg.run.device, 0, local)  # before any graph is read or process started
    if cfg.parallel.mesh.distributed and env is None:
        return launch(cfg, argv)
    if env is not None and env.world_size != cfg.parallel.nprocs:
        raise InputError(f"expected --nprocs to match the torchrun world size (got --nprocs {cfg.parallel.nprocs}, "
                         f"WORLD_SIZE {env.world_size})")
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


def cmd_partition(args: argparse.Namespace) -> int:
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


def cmd_evaluate(args: argparse.Namespace) -> int:
    from fullgraph.train.apply import evaluate_run

    record = evaluate_run(args.run, args.dataset, args.root, args.device)
    if args.json:
        print(json.dumps(record))
        return 0
    name = METRIC_NAMES[record["metric"]]
    print(f"{args.run}: {name} train {record['train_metric']:.4f}  val {record['val_metric']:.4f}  "
          f"test {record['test_metric']:.4f}  (val loss {record['val_loss']:.4f})")
    return 0


def cmd_predict(args: argparse.Namespace, argv: list[str]) -> int:
    from fullgraph.comm.context import DistEnv
    from fullgraph.comm.mesh import Mesh
    from fullgraph.train.apply import predict_layout, predict_rank, predict_run

    if not Mesh.for_mode(args.parallel, args.nprocs).distributed:  # one process (refused with --nprocs > 1)
        paths = predict_run(args.run, args.out, args.dataset, args.root, args.device, args.embeddings, args.overwrite)
    else:
        cfg = predict_layout(args.run, args.dataset, args.root, nprocs=args.nprocs, device=args.device,
                             partition_dir=args.partition_dir)
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


KERNEL_TIMING_COMMANDS = ("train", "plan")
"""Commands whose speed is the point: training, and the plan, which times the layers as training runs them.
They keep glibc's own allocation threshold unless ``--release-memory`` asks otherwise: its fixed 1 MiB
threshold page-faults every large tensor in afresh, which would slow the very kernels they time."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    rank = environ.get("RANK")
    launched = environ.has("FULLGRAPH_ERROR_FILE")  # a rank of our own launcher
    quiet = rank not in (None, "0")
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(message)s", stream=sys.stdout)
    try:
        args = build_parser().parse_args(argv)
        if args.command not in KERNEL_TIMING_COMMANDS or getattr(args, "release_memory", False):
            from fullgraph.memory import return_freed_memory

            return_freed_memory()  # peak RSS then measures what a command needs, not glibc's cache
        if args.command == "train":
            return cmd_train(args, argv)
        if args.command == "partition":
            return cmd_partition(args)
        if args.command == "generate":
            return cmd_generate(args)
        if args.command == "convert":
            return cmd_convert(args)
        if args.command == "evaluate":
            return cmd_evaluate(args)
        if args.command == "plan":
            return cmd_plan(args)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "predict":
            return cmd_predict(args, argv)
        return cmd_datasets(args)
    except InputError as e:
        report_worker_error(e, input_error=True)
        if not launched:
            where = f"rank {rank}: " if rank is not None else ""
            print(f"fullgraph: error: {where}{e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fullgraph: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a rank's unexpected failure: tell the launcher, keep the traceback
        if rank is None:
            raise
        report_worker_error(e, input_error=False)
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
