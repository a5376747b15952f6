"""Using a trained model: ``fullgraph evaluate`` and ``fullgraph predict``.

Both rebuild the run's model from ``RUN/model.pt`` and load the graph the run named (its dataset,
root, split and feature normalization from ``RUN/config.json``), or another graph given with
``--dataset``, which must have the same feature width and classes. They run one exact full-graph
forward in one process, on ``--device``: the same path single-process training evaluates with, so
``evaluate`` reproduces the metrics summary.json reports for the selected epoch.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.options import PAIR_TASKS
from fullgraph.train.model_file import check_graph, embedding_hook, load_model
from fullgraph.train.runs import read_run_config

log = logging.getLogger("fullgraph")

__all__ = ["evaluate_run", "predict_run", "check_out"]


def _config(run: str, dataset: str | None, root: str | None, metric: str | None = None,
            **layout) -> tuple[TrainConfig, dict]:
    """The options to rebuild the run's graph (the run's own, or ``dataset``) and model (``metric``: the one
    to report instead of the run's, checked against its task)."""
    saved = read_run_config(run)
    opts = {k: saved[k] for k in ("dataset", "root", "split", "feature_norm", "metric", "select", "seed",
                                  "partitioner", "metis_sample")}
    opts |= {k: saved[k] for k in ("task", "link_split", "decoder", "target_relation", "corrupt", "edge_split",
                                  "edge_holdout")
             if k in saved}  # a pair run: its split, its decoder, its typed links
    opts |= {k: v for k, v in (("dataset", dataset), ("root", root), ("metric", metric)) if v is not None}
    keep = ("model", "model_args", "layers", "hidden", "heads", "norm", "gcn_kernel", "gcnii_alpha", "gcnii_lambda", "appnp_alpha",
            "rgcn_decomposition", "rgcn_bases", "featureless")
    return TrainConfig.of(**opts, **{k: saved[k] for k in keep if k in saved}, **layout), saved


def _setup(run: str, dataset: str | None, root: str | None, device: str, metric: str | None = None):
    from fullgraph.data.load import load_graph, load_link_graph
    from fullgraph.device import resolve_device
    from fullgraph.parallel.engine import SingleEngine
    from fullgraph.tasks import task_for

    dev = resolve_device(device)
    model, info = load_model(Path(run), dev)
    cfg, _ = _config(run, dataset, root, metric)
    split = None
    if cfg.task.name == "link":  # the encoder's graph and the pairs the run was judged on
        graph, split = load_link_graph(cfg)
    else:
        graph = load_graph(cfg)
    check_graph(info, graph.num_features, graph.num_classes, graph.name, run)
    if hasattr(model, "check_node_types"):  # a model built for a typed graph's types (R-GCN)
        model.check_node_types(graph.node_types)
    engine = SingleEngine(graph, model.norm, dev)
    engine.task = task_for(cfg, split)
    return cfg, model, engine, info


def evaluate_run(run: str, dataset: str | None = None, root: str | None = None, device: str = "auto",
                 metric: str | None = None) -> dict:
    """Every split metric of the run's model on its graph (or ``dataset``); ``*_metric``: the run's own
    metric, or ``metric`` (any its task reports)."""
    from fullgraph.train.trainer import Trainer

    cfg, model, engine, _ = _setup(run, dataset, root, device, metric)
    trainer = Trainer(cfg, engine=engine)
    trainer.model, trainer.task = model, engine.task
    return trainer.evaluate()


@torch.no_grad()
def _outputs(engine, model, embeddings: bool) -> dict[str, torch.Tensor]:
    """Predictions, probabilities (and embeddings) of the rows ``engine`` computes."""
    store: list[torch.Tensor] = []
    hook = embedding_hook(model, store) if embeddings else None
    try:
        logits = engine.forward(model, 0, training=False).float()
    finally:
        if hook is not None:
            hook.remove()
    arrays = engine.task.predictions(engine, logits)
    if embeddings:
        arrays["embeddings"] = store[-1][: logits.shape[0]]  # a layer's input leads with its dst rows
    return arrays


OUTPUTS = ("predictions", "probabilities", "embeddings", "scores")
"""The files a prediction writes (``NAME.npy``): one set per folder."""


def _typed(arrays: dict[str, np.ndarray], types) -> dict[str, np.ndarray]:
    """A typed graph's outputs: the predictions and probabilities of its labelled types' nodes only (in id
    order: one labelled type's are in its own ids), the embeddings of every node (ids contiguous per type,
    in the order of ``node_types`` in the run's ``config``/``model.pt``)."""
    if types is None:
        return arrays
    rows = np.concatenate([np.arange(types.offsets[t], types.offsets[t + 1])
                           for t in sorted(types.index(n) for n in types.labelled)])
    return {k: (v[rows] if k != "embeddings" else v) for k, v in arrays.items()}


def _write(folder: Path, arrays: dict[str, np.ndarray]) -> dict[str, Path]:
    """The prediction's arrays, each written atomically; an earlier prediction's files that this one
    does not write (its embeddings) are removed, so the folder holds one set."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        if name not in arrays:
            (folder / f"{name}.npy").unlink(missing_ok=True)
    paths = {}
    for name, a in arrays.items():
        path, tmp = folder / f"{name}.npy", folder / f".{name}.npy.tmp"
        with open(tmp, "wb") as f:
            np.save(f, a)
        tmp.replace(path)
        paths[name] = path
    return paths


def check_out(out: str, overwrite: bool = False) -> Path:
    """``--out``: a folder, holding no earlier prediction unless ``overwrite`` (as ``train`` refuses a
    folder with an earlier run)."""
    from fullgraph.train.disk import check_writable

    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"expected --out to be a folder for the .npy files (got the file {folder})")
    check_writable(folder)
    earlier = [f"{n}.npy" for n in OUTPUTS if (folder / f"{n}.npy").exists()]
    if earlier and not overwrite:
        raise InputError(f"expected --out without an earlier prediction (got {', '.join(earlier)} in {folder}: a "
                         f"folder holds one prediction's files, so this one would replace or remove them): pass "
                         f"--overwrite to replace them, or choose another folder")
    return folder


def predict_run(run: str, out: str, dataset: str | None = None, root: str | None = None, device: str = "auto",
                embeddings: bool = False, overwrite: bool = False, pairs: str | None = None) -> dict[str, Path]:
    """Write ``out/predictions.npy`` (a class per node; a 0/1 row per node for multi-label graphs; a
    typed graph's labelled nodes only), ``out/probabilities.npy`` (softmax, or sigmoid for multi-label)
    and, with ``embeddings``, ``out/embeddings.npy`` (the last hidden representation of every node);
    returns the paths. An earlier
    prediction in ``out`` is refused, or with ``overwrite`` replaced as a whole."""
    folder = check_out(out, overwrite)
    _, model, engine, _ = _setup(run, dataset, root, device)
    if engine.task.joins_rows:  # links, labelled edges: pairs of nodes
        from fullgraph.train.link_outputs import link_outputs

        return _write(folder, link_outputs(engine, model, pairs, embeddings))
    if pairs is not None:
        raise InputError(f"expected --pairs only for a link-prediction or edge run (got {run}, trained with "
                         f"--task {engine.task.name})")
    arrays = {k: v.cpu().numpy() for k, v in _outputs(engine, model, embeddings).items()}
    return _write(folder, _typed(arrays, engine.node_types))


def predict_layout(run: str, dataset: str | None, root: str | None, *, nprocs: int, device: str = "auto",
                   partition_dir: str | None = None, link_file: str | None = None) -> TrainConfig:
    """The graph-parallel configuration ``predict --parallel graph`` runs under."""
    cfg, _ = _config(run, dataset, root, parallel="graph", nprocs=nprocs, device=device, partition_dir=partition_dir,
                     link_file=link_file)
    return cfg


def predict_rank(cfg: TrainConfig, run: str, out: str, embeddings: bool = False,
                 overwrite: bool = False) -> dict[str, Path] | None:
    """One rank of ``predict --parallel graph``: the exact forward of its part, every part's rows
    gathered on rank 0 and put in node order there (the same numbers as one process, within the
    order of floating-point sums). Returns the paths on rank 0."""
    from fullgraph.parallel.graph import graph_engine

    folder = check_out(out, overwrite)
    model, info = load_model(Path(run))
    engine = graph_engine(cfg, model.norm)
    try:
        model.to(engine.device)
        check_graph(info, engine.in_dim, engine.num_classes, engine.name, run)
        if cfg.task.name in PAIR_TASKS:  # a pair run's output rows are its embeddings (its pairs: one process)
            from fullgraph.train.link_outputs import link_embeddings

            arrays = link_embeddings(engine, model, embeddings)
        else:
            from fullgraph.tasks import task_for

            engine.task = task_for(cfg)
            engine.task.bind(engine, model)  # (collective: a regression's scale)
            arrays = _outputs(engine, model, embeddings)
        ids = engine.gather_rows(engine.part.inner.to(engine.device, torch.float64)[:, None], "eval/reduce")
        ids = ids[:, 0].long().cpu()
        full = {}
        for name, rows in arrays.items():
            got = engine.gather_rows(rows, "eval/reduce").cpu()
            whole = got.new_zeros((int(engine.part.global_num_nodes),) + tuple(got.shape[1:]))
            whole[ids] = got
            full[name] = whole.numpy()
        return _write(folder, _typed(full, getattr(model, "types", None))) if engine.is_main else None
    finally:
        engine.close()
