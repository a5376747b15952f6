"""Decoders of link prediction: how the embeddings of a pair's two nodes make one score (a logit).

``dot``: their dot product, PyG's ``link_pred.py`` and OGB's GCN baselines' choice (no weights).
``mlp``: their Hadamard product through a two-layer MLP (OGB's ``LinkPredictor``: Linear, ReLU,
Linear to one score). A user's: ``FILE.py:build`` or ``module:build``, ``build(width)`` returning a module
whose ``forward(h_src, h_dst)`` maps two ``[n, width]`` tensors to ``[n]`` scores.

The decoder is a submodule of the trained model (``model.decoder``): its weights travel with the
encoder's through the optimizer, the gradient all-reduce, checkpoints and ``model.pt``.
"""

from __future__ import annotations

import torch
from torch import nn

from fullgraph.errors import InputError

__all__ = ["DotDecoder", "MLPDecoder", "build_decoder", "attach_decoder"]


class DotDecoder(nn.Module):
    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        return (h_src * h_dst).sum(-1)


class MLPDecoder(nn.Module):
    """``Linear(width, width) -> ReLU -> Linear(width, 1)`` over ``h_src * h_dst``."""

    def __init__(self, width: int):
        super().__init__()
        self.hidden = nn.Linear(width, width)
        self.out = nn.Linear(width, 1)

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(h_src * h_dst))).squeeze(-1)


def build_decoder(spec: str, width: int) -> nn.Module:
    """The decoder ``--decoder spec`` names, for embeddings of ``width`` columns."""
    if spec == "dot":
        return DotDecoder()
    if spec == "mlp":
        return MLPDecoder(width)
    from fullgraph.models.user import load_builder

    try:
        decoder = load_builder(spec)(width)
    except InputError as e:
        raise InputError(str(e).replace("--model", "--decoder")) from None
    except Exception as e:  # noqa: BLE001 - the user's builder: whatever it raises is reported in one line
        raise InputError(f"expected --decoder {spec} to build a decoder for width {width} (it raised "
                         f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})") from None
    if not isinstance(decoder, nn.Module):
        raise InputError(f"expected --decoder {spec} to return a torch.nn.Module (got {type(decoder).__name__})")
    return decoder


def attach_decoder(model: nn.Module, spec: str, width: int) -> nn.Module:
    """Give ``model`` its decoder as the submodule ``decoder`` (whose output the encoder never reads)."""
    model.add_module("decoder", build_decoder(spec, width))
    return model
