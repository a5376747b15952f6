"""``fullgraph train``: the options a user gave (a TOML file, then flags), the run folder, and either the
launch of the ranks on this machine (partitioned first, so that bad input is reported once) or this
rank's share of the training."""

from __future__ import annotations

import argparse

import fullgraph.environ as environ
from fullgraph.comm.launch import report_worker_error
from fullgraph.config import TrainConfig, load_toml
from fullgraph.errors import InputError
from fullgraph.tasks.metrics import METRIC_NAMES

__all__ = ["cmd_train", "given_options", "launch", "shared_inputs"]


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
