"""Mixed-precision compute (``--precision``): which op runs in which precision, and fp16's loss scale.

``bf16`` and ``fp16`` run the forward (and so the backward) under ``torch.autocast``: the dense
products take the low precision, while the weights, Adam's state and the gradients stay fp32 (the
master weights). What runs where:
"""

from __future__ import annotations

import contextlib

import torch

from fullgraph.ops.loss import loss_scale

__all__ = ["COMPUTE_PRECISIONS", "OPS", "Precision"]

COMPUTE_PRECISIONS = ("fp32", "bf16", "fp16")
_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}

OPS = {
    "dense products (Linear, H·W, attention projections)": "the chosen precision (autocast's lower-precision list)",
    "sparse products Â·H (fullgraph.ops.sparse.csr_mm)": "fp32: PyTorch's CSR kernels take fp32 only, so "
                                                         "low-precision inputs are cast up first",
    "loss, softmax, normalization, reductions": "fp32 (autocast's fp32 list)",
    "weights, gradients, Adam's state": "fp32 (master weights)",
    "activations crossing processes": "as --comm-precision says (fp32 by default), whatever --precision",
}
"""Which op runs in which precision (listed in this module's docstring, which the README points to)."""

__doc__ += "".join(f"\n* {op}: {where}" for op, where in OPS.items()) + """

fp16's range is narrow, so its gradients are computed from the loss times a scale (2^16 to start;
``loss_sum`` multiplies only the gradient, so the losses reported stay true), divided by it before
clipping and the step (a power of two: the division is exact). An epoch whose gradient is not finite
on any rank is skipped on every rank and the scale halves; after ``GROWTH_EPOCHS`` good epochs it
doubles. The norm that decides is the global one (``Engine.grad_norm``), so every layout skips the
same epochs.
"""

GROWTH_EPOCHS = 200
"""fp16: good epochs before the loss scale doubles (full-graph training takes one step per epoch,
so far fewer than the 2000 steps of a mini-batch trainer)."""


class Precision:
    """The compute precision of a run on ``device``, with fp16's dynamic loss scale."""

    def __init__(self, name: str, device):
        self.name = name
        self.dtype = _DTYPES[name]
        self.device_type = torch.device(device).type
        self.scale = 2.0 ** 16 if name == "fp16" else 1.0
        self.good = 0

    @property
    def dynamic(self) -> bool:
        """Whether each step must check the gradient for overflow (fp16)."""
        return self.name == "fp16"

    @contextlib.contextmanager
    def compute(self):
        """The forward and backward of a training epoch, or an evaluation's forward."""
        if self.dtype is None:
            yield
            return
        with torch.autocast(self.device_type, dtype=self.dtype), loss_scale(self.scale):
            yield

    def unscale(self, params) -> None:
        if self.scale != 1.0:
            for p in params:
                p.grad.div_(self.scale)

    def update(self, finite: bool) -> bool:
        """After an epoch's global gradient norm is known: whether to take the step."""
        if not self.dynamic:
            return True
        if not finite:
            self.scale, self.good = self.scale / 2, 0
            return False
        self.good += 1
        if self.good == GROWTH_EPOCHS:
            self.scale, self.good = self.scale * 2, 0
        return True

    def state(self) -> dict:
        return {"scale": self.scale, "good": self.good}

    def load_state(self, state: dict) -> None:
        self.scale, self.good = float(state["scale"]), int(state["good"])
