"""Decoders of link prediction: how the embeddings of a pair's two nodes make one score (a logit).

``dot``: their dot product, PyG's ``link_pred.py`` and OGB's GCN baselines' choice (no weights).
``mlp``: their Hadamard product through a two-layer MLP (OGB's ``LinkPredictor``: Linear, ReLU,
Linear to one score). A user's: ``FILE.py:build`` or ``module:build``, ``build(width)`` returning a module
whose ``forward(h_src, h_dst)`` maps two ``[n, width]`` tensors to ``[n]`` scores.

Typed links (a knowledge graph's triples ``(head, relation, tail)``) score each pair by its relation:
every decoder's ``forward`` then takes the pairs' relations as a third argument, and the relation-aware
ones keep a learned vector per relation of the graph (Schlichtkrull et al. pair R-GCN with DistMult;
GraphStorm offers all three):

* ``distmult`` (Yang et al. 2015): ``sum(h_u * r * h_v)``, a diagonal bilinear map per relation;
* ``transe`` (Bordes et al. 2013): ``b - ||h_u + r - h_v||``, a translation per relation;
* ``rotate`` (Sun et al. 2019): ``b - sum |h_u o e^{i theta_r} - h_v|``, the embedding's two halves the real and
  imaginary parts of ``width/2`` complex numbers, rotated by a phase per relation (an even ``--hidden``).

The distance models' scores are logits for the binary cross-entropy, so the margin ``b`` (the
distance at which a pair is even odds) is learned, from 1 (PyG's and DGL-KE's fix it, with their
margin losses). ``dot`` and ``mlp`` ignore the relation; a user's ``build(width, num_relations)``
gets the relation count where links are typed. A relation vector is drawn as PyG's ``kge`` models
draw theirs (Glorot for DistMult, ``U(±6/√width)`` normalized for TransE, ``U(0, 2π)`` phases for RotatE).

The decoder is a submodule of the trained model (``model.decoder``): its weights travel with the
encoder's through the optimizer, the gradient all-reduce, checkpoints and ``model.pt``.
"""

from __future__ import annotations

import inspect
import math

import torch
from torch import nn

from fullgraph.errors import InputError
from fullgraph.ops.edge_hidden import edge_hidden

__all__ = ["DotDecoder", "MLPDecoder", "EdgeMLPDecoder", "build_edge_decoder", "DistMultDecoder", "TransEDecoder", "RotatEDecoder", "RELATIONAL",
           "build_decoder", "attach_decoder"]


class DotDecoder(nn.Module):
    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        return (h_src * h_dst).sum(-1)


class MLPDecoder(nn.Module):
    """``Linear(width, width) -> ReLU -> Linear(width, 1)`` over ``h_src * h_dst``."""

    def __init__(self, width: int):
        super().__init__()
        self.hidden = nn.Linear(width, width)
        self.out = nn.Linear(width, 1)

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(h_src * h_dst))).squeeze(-1)


class EdgeMLPDecoder(nn.Module):
    """An edge task's decoder (``--decoder mlp``, or ``auto``): ``Linear(2·width + edge_dim, width) -> ReLU ->
    Linear(width, outputs)`` over the two ends' embeddings concatenated (source first: a listed edge's
    direction counts), then the edge's own ``edge_dim`` features where it has some: a logit per class, or
    one number."""

    def __init__(self, width: int, outputs: int, edge_dim: int = 0):
        super().__init__()
        self.width, self.edge_dim = width, edge_dim
        self.hidden = nn.Linear(2 * width + edge_dim, width)
        self.out = nn.Linear(width, outputs)

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(torch.cat([h_src, h_dst, *(() if x is None else (x,))], -1))))

    def project(self, h: torch.Tensor) -> torch.Tensor:
        """Each node's two shares of the hidden layer, ``[h W_src^T, h W_dst^T]`` (``[n, 2·width]``): the
        hidden layer of an edge is ``W [h_u, h_v, x] + b = (h_u W_src^T) + (h_v W_dst^T) + x W_x^T + b``, so
        projecting the n nodes once and gathering the projections costs ``n`` products where ``forward`` pays
        one per edge (a graph's edges outnumber its nodes ten to a hundred times)."""
        w = self.hidden.weight
        return torch.cat([h @ w[:, :self.width].T, h @ w[:, self.width:2 * self.width].T], 1)

    def finish(self, p_src: torch.Tensor, src: torch.Tensor, p_dst: torch.Tensor, dst: torch.Tensor,
               x: torch.Tensor | None = None) -> torch.Tensor:
        """The outputs of the edges ``(src, dst)`` from their ends' projections (:meth:`project`): the sources'
        first halves ``p_src`` and the destinations' second ``p_dst``, as tables not yet gathered
        (``parallel.pairs.take_ends``), with the edges' features ``x``; gathered, summed and rectified in one
        pass (``ops.edge_hidden``)."""
        w = self.hidden.weight
        extra = x.to(p_src.dtype) @ w[:, 2 * self.width:].T if self.edge_dim else None
        return self.out(edge_hidden(p_src, p_dst, self.hidden.bias, src, dst, extra))


class _Relational(nn.Module):
    """A decoder with a learned vector per relation (``relation [R, d]``)."""

    def __init__(self, num_relations: int, width: int):
        super().__init__()
        self.relation = nn.Parameter(torch.empty(num_relations, width))

    def _rel(self, rel: torch.Tensor | None) -> torch.Tensor:
        if rel is None:
            raise InputError(f"expected typed links for the {type(self).__name__} (each pair's relation: "
                             f"--target-relation) (got untyped pairs): use --decoder dot or mlp")
        return self.relation[rel.to(self.relation.device)]


class DistMultDecoder(_Relational):
    """``sum(h_u * r * h_v)`` (module doc)."""

    def __init__(self, width: int, num_relations: int):
        super().__init__(num_relations, width)
        nn.init.xavier_uniform_(self.relation)

    def forward(self, h_src, h_dst, rel=None):
        return (h_src * self._rel(rel) * h_dst).sum(-1)


class TransEDecoder(_Relational):
    """``b - ||h_u + r - h_v||_2`` (module doc)."""

    def __init__(self, width: int, num_relations: int):
        super().__init__(num_relations, width)
        bound = 6.0 / math.sqrt(width)
        nn.init.uniform_(self.relation, -bound, bound)
        with torch.no_grad():
            self.relation.copy_(nn.functional.normalize(self.relation, dim=-1))
        self.margin = nn.Parameter(torch.ones(()))

    def forward(self, h_src, h_dst, rel=None):
        return self.margin - (h_src + self._rel(rel) - h_dst).norm(dim=-1)


class RotatEDecoder(_Relational):
    """``b - sum_k |h_u[k] e^{i theta_r[k]} - h_v[k]|`` over ``width/2`` complex numbers (module doc)."""

    def __init__(self, width: int, num_relations: int):
        if width % 2:
            raise InputError(f"expected an even embedding width for --decoder rotate (its halves are the real and "
                             f"imaginary parts) (got --hidden {width})")
        super().__init__(num_relations, width // 2)
        nn.init.uniform_(self.relation, 0, 2 * math.pi)
        self.margin = nn.Parameter(torch.ones(()))

    def forward(self, h_src, h_dst, rel=None):
        theta = self._rel(rel)
        re_s, im_s = h_src.chunk(2, dim=-1)
        re_d, im_d = h_dst.chunk(2, dim=-1)
        cos, sin = torch.cos(theta), torch.sin(theta)
        re, im = re_s * cos - im_s * sin - re_d, re_s * sin + im_s * cos - im_d
        return self.margin - torch.sqrt(re * re + im * im + 1e-12).sum(-1)


RELATIONAL = {"distmult": DistMultDecoder, "transe": TransEDecoder, "rotate": RotatEDecoder}
"""The built-in decoders that score by relation (typed links only)."""


def build_decoder(spec: str, width: int, num_relations: int | None = None) -> nn.Module:
    """The decoder ``--decoder spec`` names, for embeddings of ``width`` columns; ``num_relations``: the
    graph's relation count where links are typed (``None``: untyped links)."""
    if spec in ("dot", "auto"):
        return DotDecoder()
    if spec == "mlp":
        return MLPDecoder(width)
    if spec in RELATIONAL:
        if num_relations is None:
            raise InputError(f"expected typed links (--target-relation on a typed graph) with --decoder {spec}, which "
                             f"scores each pair by its relation (got untyped links): use --decoder dot or mlp")
        return RELATIONAL[spec](width, num_relations)
    return _users(spec, lambda build: build(width) if num_relations is None else
                  _with_relations(build, width, num_relations), f"a decoder for width {width}")


def _users(spec: str, call, what: str) -> nn.Module:
    """A user's decoder: ``call(build)`` of the builder ``spec`` names, whatever it raises reported in one
    line naming ``what`` it was to build, and its result checked to be a module."""
    from fullgraph.models.user import load_builder

    try:
        decoder = call(load_builder(spec))
    except InputError as e:
        raise InputError(str(e).replace("--model", "--decoder")) from None
    except Exception as e:  # noqa: BLE001 - the user's builder: whatever it raises is reported in one line
        raise InputError(f"expected --decoder {spec} to build {what} (it raised {type(e).__name__}: "
                         f"{str(e).splitlines()[0][:200] if str(e) else ''})") from None
    if not isinstance(decoder, nn.Module):
        raise InputError(f"expected --decoder {spec} to return a torch.nn.Module (got {type(decoder).__name__})")
    return decoder


def _with_relations(build, width: int, num_relations: int):
    """A user's builder for typed links: ``build(width, num_relations)``, or ``build(width)`` where it
    takes one argument (a decoder that ignores relations)."""
    return build(width, num_relations) if _positional(build) >= 2 else build(width)


def _positional(build) -> int:
    """How many positional arguments a user's builder takes (many: ``*args``, or a signature unknown)."""
    try:
        params = inspect.signature(build).parameters.values()
    except (TypeError, ValueError):
        return 1 << 30
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 1 << 30
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def build_edge_decoder(spec: str, width: int, outputs: int, edge_dim: int = 0) -> nn.Module:
    """An edge task's decoder: ``mlp`` (``auto``), or a user's builder returning a module that maps two ``[n,
    width]`` tensors to ``[n, outputs]`` (a logit per class, or one number). Where edges have ``edge_dim``
    features, a builder of three parameters is called ``build(width, outputs, edge_dim)`` and its module's
    ``forward`` gets the edges' features ``[n, edge_dim]`` third; one of two builds a decoder without them."""
    if spec in ("mlp", "auto"):
        return EdgeMLPDecoder(width, outputs, edge_dim)
    if ":" not in spec:
        raise InputError(f"expected --decoder mlp or a user's FILE.py:build with an edge task (got --decoder {spec}, "
                         f"which scores a pair with one number): an edge's label needs a logit per class")
    what = f"an edge decoder for width {width} and {outputs} outputs"
    if not edge_dim:
        return _users(spec, lambda build: build(width, outputs), what)
    takes = []

    def call(build):
        takes.append(_positional(build) >= 3)
        return build(width, outputs, edge_dim) if takes[0] else build(width, outputs)

    decoder = _users(spec, call, what)
    if not hasattr(decoder, "edge_dim"):  # what tasks.edge reads to pass the features, or not
        decoder.edge_dim = edge_dim if takes[0] else 0
    return decoder


def attach_decoder(model: nn.Module, spec: str, width: int, num_relations: int | None = None,
                   edge_outputs: int | None = None, edge_dim: int = 0) -> nn.Module:
    """Give ``model`` its decoder as the submodule ``decoder`` (whose output the encoder never reads): a link's,
    or with ``edge_outputs`` an edge task's (:func:`build_edge_decoder`; ``edge_dim``: its edges' features)."""
    if hasattr(model, "decoder"):  # (the built-in models name their own output maps otherwise)
        raise InputError(f"expected a model without an attribute named 'decoder' with --task link, which attaches "
                         f"its pair decoder under that name (got a {type(model).__name__} that has one): rename it")
    model.add_module("decoder", build_decoder(spec, width, num_relations) if edge_outputs is None
                     else build_edge_decoder(spec, width, edge_outputs, edge_dim))
    return model
