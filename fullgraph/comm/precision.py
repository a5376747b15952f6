"""The precision activations and activation gradients travel in between processes (issue 15).

A message of ``n`` rows of ``width`` floats goes on the wire as ``n`` rows of bytes, one wire format
for every collective and backend (gloo and NCCL both move ``uint8``):

* ``fp32``: the four bytes of each float, unchanged (the default; nothing is rounded).
* ``bf16`` / ``fp16``: each float rounded to nearest-even 16 bits (two bytes). bf16 keeps fp32's
  range with 8 bits of mantissa; fp16 keeps 11 bits but its range ends at 65504 and anything below
  6e-8 flushes to zero, which small gradients can be.
* ``int8``: each row scaled by its largest magnitude over 127 (the scale travels with the row as four
  bytes of fp32) and rounded to an integer in [-127, 127]. In a training step the rounding is
  stochastic (round up with probability equal to the fraction, so the rounded value is unbiased,
  as AdaQP does), with the uniform draw of entry ``(v, j)`` keyed like dropout by (seed, epoch, site,
  global node id ``v``, column ``j``): a row rounds the same way whichever process sends it and
  whatever the layout, and a resumed run repeats it bit for bit. Outside a keyed step (evaluation, a
  model used on its own) it rounds to nearest.

``row_bytes`` is the one formula for a row's size on the wire; the ledger counts the bytes of the
encoded rows, and the planner's volumes scale by it. ``round_rows`` is what the receiver sees (the
encoding and decoding in one step), for the single-process simulation that tests compare against.
"""

from __future__ import annotations

import math

import torch

from fullgraph.ops.dropout import DropoutKey, current_key, keyed_uniform

__all__ = ["PRECISIONS", "check_precision", "row_bytes", "encode_rows", "decode_rows", "round_rows", "wire_site"]

PRECISIONS = ("fp32", "bf16", "fp16", "int8")
"""The choices of ``--comm-precision``, full precision first."""

_FLOAT = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
_SCALE_BYTES = 4  # an int8 row's scale, fp32
_INT8_MAX = 127


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"expected a communication precision among {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def row_bytes(width: int, precision: str = "fp32") -> int:
    """Bytes one row of ``width`` float32 values occupies on the wire at ``precision``."""
    check_precision(precision)
    if precision == "int8":
        return width + _SCALE_BYTES
    return width * torch.finfo(_FLOAT[precision]).bits // 8


_PHASE = 1 << 24  # apart of the sites of one phase: more graph layers than any model has


def wire_site(layer: int, backward: bool, phase: int = 0) -> int:
    """The key site of the messages of graph layer ``layer`` (its input rows forward, their gradient
    backward): negative, so that it never meets a dropout site (those count up from 0). ``phase``
    tells apart the messages that carry the same rows more than once in one product (the SpMM
    layouts' broadcast, reduction and redistribution); halos and the pipeline use phase 0."""
    return -(2 * layer + int(backward) + 1) - phase * _PHASE


def encode_rows(x: torch.Tensor, precision: str, *, rows: torch.Tensor | None = None,
                site: int | None = None, key: DropoutKey | None = None, col0: int = 0) -> torch.Tensor:
    """``x`` (``[n, width]``, float32) as ``[n, row_bytes(width)]`` bytes. For int8, ``rows`` (the
    global node ids of ``x``'s rows, default ``0..n-1``), ``site`` and ``key`` (default: the keyed
    step running now) key the stochastic rounding; without a site or a key it rounds to nearest.
    ``col0``: the index of ``x``'s first column when it is a column slice of wider rows."""
    check_precision(precision)
    x = x.detach().to(torch.float32).reshape(x.shape[0], math.prod(x.shape[1:])).contiguous()
    if precision != "int8":
        return x.to(_FLOAT[precision]).view(torch.uint8)
    n, width = x.shape
    amax = x.abs().amax(dim=1) if width else x.new_zeros(n)
    scale = torch.where(amax > 0, amax / _INT8_MAX, torch.ones_like(amax))
    y = x / scale[:, None]
    key = key if key is not None else current_key()
    if key is not None and site is not None:
        ids = torch.arange(n, device=x.device) if rows is None else rows.to(x.device)
        if ids.numel() != n:
            raise ValueError(f"expected {n} row ids for {n} rows, got {ids.numel()}")
        y = torch.floor(y + keyed_uniform(ids, width, key, site, col0))
    else:
        y = torch.round(y)
    q = y.clamp_(-_INT8_MAX, _INT8_MAX).to(torch.int8)
    return torch.cat([q.view(torch.uint8), scale[:, None].view(torch.uint8)], dim=1)


def decode_rows(b: torch.Tensor, precision: str, width: int) -> torch.Tensor:
    """The float32 rows that ``encode_rows`` turned into the bytes ``b``."""
    check_precision(precision)
    if b.shape[1] != row_bytes(width, precision):
        raise ValueError(f"expected rows of {row_bytes(width, precision)} bytes for width {width} at "
                         f"{precision}, got {b.shape[1]}")
    b = b.contiguous()
    if precision != "int8":
        return b.view(_FLOAT[precision]).to(torch.float32)
    q = b[:, :width].contiguous().view(torch.int8)
    scale = b[:, width:].contiguous().view(torch.float32)
    return q.to(torch.float32) * scale


def round_rows(x: torch.Tensor, precision: str, *, rows: torch.Tensor | None = None,
               site: int | None = None, key: DropoutKey | None = None, col0: int = 0) -> torch.Tensor:
    """What a receiver gets of ``x``: encoded and decoded (``x`` itself at fp32)."""
    if precision == "fp32":
        return x
    sent = encode_rows(x, precision, rows=rows, site=site, key=key, col0=col0)
    return decode_rows(sent, precision, math.prod(x.shape[1:])).reshape(x.shape).to(x.dtype)
