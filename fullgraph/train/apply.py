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
from fullgraph.train.model_file import check_graph, embedding_hook, load_model
from fullgraph.train.runs import read_run_config

log = logging.getLogger("fullgraph")

__all__ = ["evaluate_run", "predict_run"]


def _setup(run: str, dataset: str | None, root: str | None, device: str):
    from fullgraph.data.load import load_graph
    from fullgraph.device import resolve_device
    from fullgraph.models import MODELS
    from fullgraph.parallel.engine import SingleEngine

    dev = resolve_device(device)
    model, info = load_model(Path(run), dev)
    saved = read_run_config(run)
    opts = {k: saved[k] for k in ("dataset", "root", "split", "feature_norm", "metric", "select", "seed")}
    opts |= {k: v for k, v in (("dataset", dataset), ("root", root)) if v is not None}
    cfg = TrainConfig(**opts, model=info["model_args"]["name"])
    graph = load_graph(cfg)
    check_graph(info, graph.num_features, graph.num_classes, graph.name, run)
    engine = SingleEngine(graph, MODELS[cfg.model].norm, dev)
    return cfg, model, engine, info


def evaluate_run(run: str, dataset: str | None = None, root: str | None = None, device: str = "auto") -> dict:
    """The split metrics of the run's model on its graph (or ``dataset``)."""
    from fullgraph.train.trainer import Trainer

    cfg, model, engine, _ = _setup(run, dataset, root, device)
    trainer = Trainer(cfg, engine=engine)
    trainer.model = model
    return trainer.evaluate()


@torch.no_grad()
def predict_run(run: str, out: str, dataset: str | None = None, root: str | None = None, device: str = "auto",
                embeddings: bool = False) -> dict[str, Path]:
    """Write ``out/predictions.npy`` (a class per node; a 0/1 row per node for multi-label graphs),
    ``out/probabilities.npy`` (softmax, or sigmoid for multi-label) and, with ``embeddings``,
    ``out/embeddings.npy`` (the last hidden representation); returns the paths."""
    _, model, engine, _ = _setup(run, dataset, root, device)
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"expected --out to be a folder for the .npy files (got the file {folder})")
    store: list[torch.Tensor] = []
    hook = embedding_hook(model, store) if embeddings else None
    try:
        logits = engine.forward(model, 0, training=False).float()
    finally:
        if hook is not None:
            hook.remove()
    multilabel = engine.y.dim() == 2
    proba = torch.sigmoid(logits) if multilabel else torch.softmax(logits, dim=1)
    pred = (logits > 0).to(torch.int8) if multilabel else logits.argmax(1)
    arrays = {"predictions": pred, "probabilities": proba}
    if embeddings:
        arrays["embeddings"] = store[-1]
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, t in arrays.items():
        path = folder / f"{name}.npy"
        tmp = folder / f".{name}.npy.tmp"
        with open(tmp, "wb") as f:
            np.save(f, t.cpu().numpy())
        tmp.replace(path)
        paths[name] = path
    return paths
