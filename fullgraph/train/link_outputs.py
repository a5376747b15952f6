"""What ``fullgraph predict`` writes for a link-prediction run: the scores of the pairs the user gives
(``--pairs FILE``: ``scores.npy``, the decoder's logits, and ``probabilities.npy``, their sigmoid) and,
with ``--embeddings``, every node's embedding (the encoder's output rows, in node order)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import torch

from fullgraph.errors import InputError

__all__ = ["read_pairs", "link_outputs", "link_embeddings"]


def read_pairs(path: str, num_nodes: int) -> torch.Tensor:
    """``--pairs``: a ``.npy`` of integers ``[n, 2]`` (read without pickles) or a text file of one pair per
    line; every id checked against the graph's nodes."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"expected --pairs to be a file of node pairs (got no file at {p})")
    try:
        if p.suffix == ".npy":
            a = np.load(p, allow_pickle=False)
        else:  # commas or white space between the two ids
            a = np.loadtxt(io.StringIO(p.read_text().replace(",", " ")), ndmin=2, comments="#")
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise InputError(f"expected --pairs {p} to hold integer pairs 'src dst' ({str(e).splitlines()[0][:160]})") from None
    if a.ndim != 2 or a.shape[1] != 2 or a.shape[0] == 0:
        raise InputError(f"expected --pairs {p} to hold pairs [n, 2] (got an array of shape {list(a.shape)})")
    if not np.issubdtype(a.dtype, np.integer):
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise InputError(f"expected --pairs {p} to hold integer node ids (got other numbers)")
    a = a.astype(np.int64)
    if a.min() < 0 or a.max() >= num_nodes:
        bad = int(((a < 0) | (a >= num_nodes)).any(1).sum())
        raise InputError(f"expected the node ids of --pairs {p} in [0, {num_nodes}) (got {bad} pairs outside, e.g. "
                         f"ids {int(a.min())}..{int(a.max())})")
    return torch.from_numpy(a)


@torch.no_grad()
def link_outputs(engine, model, pairs: str | None, embeddings: bool) -> dict[str, np.ndarray]:
    if pairs is None and not embeddings:
        raise InputError("expected --pairs FILE or --embeddings for a link-prediction run (got neither): a link "
                         "model scores pairs of nodes, or gives their embeddings")
    wanted = None if pairs is None else read_pairs(pairs, engine.graph_nodes())
    model.eval()
    out = engine.forward(model, 0, training=False).float()
    arrays = {}
    if wanted is not None:
        h_src, h_dst = engine.pair_rows(out, wanted, "eval/link")
        scores = model.decoder(h_src, h_dst).float()
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
