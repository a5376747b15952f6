"""The small checks every data-layer boundary shares: a tensor's description for an error message,
and a value taken as a tensor of an expected dtype."""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.errors import InputError

__all__ = ["describe", "as_tensor"]


def describe(t) -> str:
    if isinstance(t, torch.Tensor):
        layout = "" if t.layout == torch.strided else f" {t.layout}"
        return f"{t.dtype}{layout} tensor of shape {tuple(t.shape)}"
    return type(t).__name__


def as_tensor(name: str, value, dtype: torch.dtype | None = None) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(np.ascontiguousarray(value))
    if not isinstance(value, torch.Tensor):
        raise InputError(f"expected '{name}' to be a tensor or numpy array (got {type(value).__name__})")
    if dtype is not None and value.dtype != dtype:
        raise InputError(f"expected '{name}' to have dtype {dtype} (got {describe(value)})")
    return value
