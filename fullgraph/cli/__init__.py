"""The ``fullgraph`` command: the table of its subcommands (``COMMANDS``) and ``main``, which parses a
command line and runs one. Each command is a module of this package: ``train`` (:mod:`.train`),
``partition`` (:mod:`.partition`), ``evaluate`` and ``predict`` (:mod:`.run`), ``generate``, ``convert`` and
``datasets`` (:mod:`.data`), ``plan`` (:mod:`.plan`), ``report`` (:mod:`.report`). Each command's flags are
declared as options classes (:mod:`.options`, ``TrainConfig`` for ``train``), and :mod:`.commands` builds
the parser from them.

Options come from defaults, then a TOML file (``--config``), then flags, later ones winning; the
merged set is validated once by ``TrainConfig``. Input errors end with one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import traceback

import fullgraph.environ as environ
from fullgraph.cli.commands import Command, Parser, add_command, flags_of
from fullgraph.cli.data import cmd_convert, cmd_datasets, cmd_generate
from fullgraph.cli.options import (ConvertOptions, DatasetsOptions, EvaluateOptions, GeneratedOutput, PartitionModel,
                                   PartitionOptions, PlanModel, PlanOptions, PlantedOptions, PredictOptions,
                                   ReportOptions, RmatOptions, TrainFiles, TypedOptions)
from fullgraph.cli.partition import cmd_partition
from fullgraph.cli.plan import cmd_plan
from fullgraph.cli.report import cmd_report
from fullgraph.cli.run import cmd_evaluate, cmd_predict
from fullgraph.cli.train import cmd_train
from fullgraph.comm.launch import report_worker_error
from fullgraph.config import DataOptions, GraphSource, TaskOptions, TrainConfig
from fullgraph.errors import EXIT_STATUS, InputError, RunFault

__all__ = ["main", "build_parser", "COMMANDS", "HIDDEN_FLAGS"]


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
(tests/cli/test_help.py allows just these)."""


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
