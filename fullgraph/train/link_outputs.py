"""What ``fullgraph predict`` writes for a link-prediction run: the scores of the pairs the user gives
(``--pairs FILE``: ``scores.npy``, the decoder's logits, and ``probabilities.npy``, their sigmoid) and,
with ``--embeddings``, every node's embedding (the encoder's output rows, in node order). An edge task's
run: each given pair's class (``predictions.npy``) and ``probabilities.npy`` (softmax), or its number."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import torch

from fullgraph.errors import InputError

__all__ = ["read_pairs", "link_outputs", "link_embeddings"]


def read_pairs(path: str, num_nodes: int, relations: tuple[str, ...] | None = None, node_types=None,
               edge_dim: int = 0):
    """``--pairs``: a ``.npy`` of integers ``[n, 2]`` (read without pickles) or a text file of one pair per
    line; every id checked against the graph's nodes. Typed links (``relations``: the graph's relation
    names by id) take a third column, each pair's relation: its id, or in a text file its name
    ``SRC___REL___DST``; with the graph's ``node_types``, each triple's ends must be of its relation's
    types. Returns ``(pairs [n, 2], relations [n] or None)``; an edge task whose decoder reads the edges'
    ``edge_dim`` features takes them after the two ids and gets ``(pairs, features [n, edge_dim])``."""
    p = Path(path)
    cols = (2 if relations is None else 3) + edge_dim
    what = ("'src dst relation'" if relations is not None else
            f"'src dst' and the edge's {edge_dim} features" if edge_dim else "'src dst'")
    if not p.is_file():
        raise InputError(f"expected --pairs to be a file of node pairs (got no file at {p})")
    try:
        if p.suffix == ".npy":
            a = np.load(p, allow_pickle=False)
        else:  # commas or white space between the ids; a relation may be named
            text = p.read_text().replace(",", " ")
            if relations is not None:
                index = {name: str(i) for i, name in enumerate(relations)}
                text = "\n".join(" ".join(index.get(w, w) for w in line.split()) for line in text.splitlines())
            with warnings.catch_warnings():  # an empty file: numpy's warning, then the one line below
                warnings.simplefilter("ignore", UserWarning)
                a = np.loadtxt(io.StringIO(text), ndmin=2, comments="#")
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise InputError(f"expected --pairs {p} to hold integer pairs {what} ({str(e).splitlines()[0][:160]})") from None
    if a.size == 0:
        raise InputError(f"expected --pairs {p} to hold at least one pair {what} (got none)")
    if a.ndim != 2 or a.shape[1] != cols:
        shape = ("[n, 3] (src, dst, relation: the run's links are typed)" if relations is not None else
                 f"[n, {cols}] (src, dst, then the edge's {edge_dim} features: the decoder reads them)" if edge_dim
                 else "[n, 2]")
        raise InputError(f"expected --pairs {p} to hold pairs {shape} (got an array of shape {list(a.shape)})")
    if edge_dim:
        x, a = a[:, 2:].astype(np.float32), a[:, :2]
        if not np.isfinite(x).all():
            raise InputError(f"expected finite edge features in --pairs {p} (got NaN or infinity)")
    if not np.issubdtype(a.dtype, np.integer):
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise InputError(f"expected --pairs {p} to hold integer node ids (got other numbers)")
    a = a.astype(np.int64)
    ends = a[:, :2]
    if ends.min() < 0 or ends.max() >= num_nodes:
        bad = int(((ends < 0) | (ends >= num_nodes)).any(1).sum())
        raise InputError(f"expected the node ids of --pairs {p} in [0, {num_nodes}) (got {bad} pairs outside, e.g. "
                         f"ids {int(ends.min())}..{int(ends.max())})")
    if relations is None:
        return torch.from_numpy(a), torch.from_numpy(x) if edge_dim else None
    rel = a[:, 2]
    if rel.min() < 0 or rel.max() >= len(relations):
        raise InputError(f"expected the relations of --pairs {p} as ids in [0, {len(relations)}) or names "
                         f"SRC___REL___DST (got {int(rel.min())}..{int(rel.max())})")
    if node_types is not None:
        _check_end_types(p, ends, rel, relations, node_types)
    return torch.from_numpy(ends.copy()), torch.from_numpy(rel.copy())


def _check_end_types(p: Path, ends: np.ndarray, rel: np.ndarray, relations: tuple[str, ...], types) -> None:
    """Each triple's head of its relation's source type and tail of its destination type: a decoder scores
    a relation between those types only (its training never saw another pair), so a triple whose ends
    are of other types (an author offered as a paper) is refused, naming the first."""
    off = np.asarray(types.offsets)
    span = np.array([[off[types.index(t)], off[types.index(t) + 1]] for name in relations
                     for t in (name.split("___")[0], name.split("___")[-1])]).reshape(len(relations), 2, 2)
    lo, hi = span[rel, :, 0], span[rel, :, 1]
    bad = np.flatnonzero(((ends < lo) | (ends >= hi)).any(1))
    if bad.size:
        i = int(bad[0])
        kind = np.searchsorted(off, ends[i], side="right") - 1
        raise InputError(f"expected each triple of --pairs {p} to join its relation's types (got {bad.size} that do "
                         f"not, e.g. row {i + 1}: {types.names[kind[0]]} {ends[i, 0]} and {types.names[kind[1]]} "
                         f"{ends[i, 1]} for {relations[rel[i]]})")


@torch.no_grad()
def link_outputs(engine, model, pairs: str | None, embeddings: bool) -> dict[str, np.ndarray]:
    if pairs is None and not embeddings:
        raise InputError(f"expected --pairs FILE or --embeddings for a --task {engine.task.name} run (got neither): "
                         f"its model scores pairs of nodes, or gives their embeddings")
    task = engine.task
    names = task.split.relation_names if getattr(task, "typed", False) else None
    edge_dim = getattr(model.decoder, "edge_dim", 0)  # an edge task's decoder that reads the edges' features
    wanted, rel = (None, None) if pairs is None else read_pairs(pairs, engine.graph_nodes(), names, engine.node_types,
                                                                edge_dim)
    model.eval()
    out = engine.forward(model, 0, training=False).float()
    arrays = {}
    if wanted is not None and task.name != "link":  # an edge task: a class (and its probabilities) or a number
        scores = task.decode(engine, model, out, wanted, "eval/link", rel).double()
        arrays = {k: v.cpu().numpy() for k, v in task.pair_predictions(scores).items()}
    elif wanted is not None:
        h_src, h_dst = engine.pair_rows(out, wanted, "eval/link")
        scores = task.decode(model, h_src, h_dst, rel).float()
        arrays = {"scores": scores.cpu().numpy(), "probabilities": torch.sigmoid(scores).cpu().numpy()}
    if embeddings:
        arrays["embeddings"] = out.cpu().numpy()
    return arrays


@torch.no_grad()
def link_embeddings(engine, model, embeddings: bool) -> dict[str, torch.Tensor]:
    """The embeddings of the rows ``engine`` computes (``predict --parallel graph`` of a link run)."""
    if not embeddings:
        raise InputError("expected --embeddings with --parallel graph for a link-prediction run (got none): its pairs "
                         "(--pairs) are scored with --parallel single")
    model.eval()
    return {"embeddings": engine.forward(model, 0, training=False).float()}
