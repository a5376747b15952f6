"""Inverted dropout whose masks are a function of (seed, epoch, site, global node id, column).

Why keyed masks: no layout may change the numbers (docs/design.md, "Randomness keyed by node, not by
rank"). With masks drawn from each process's generator, a node read by two parts (a halo row), or by two
pipeline chunks, gets a different mask in each reader, and the masks change with the number of
processes. Here the mask of entry ``(v, j)`` at dropout site ``s`` (0 = the model's input, ``i`` = graph
layer ``i``, ``L+1`` = its output) in epoch ``e`` is a hash of ``(seed, e, s, v, j)``: every process
that holds row ``v`` drops the same entries, whatever the layout, so single-process, graph-parallel,
pipeline and SpMM runs train the same network on the same noise and can be compared entry for entry with
dropout on.

The hash is counter-based (like Philox or JAX's threefry, but in a few vectorized int32 passes):
one murmur3 finalizer per row id and per column, one more per entry over their sum. Integer
multiplication wraps modulo 2^32 in PyTorch on every device, and right shifts are masked to be
logical, so the bits are the same on CPU and CUDA. The trainer turns keying on for each training
step (:func:`keyed_dropout`); outside of it (a model used on its own) masks are drawn from the
process's generator, as ``torch.nn.Dropout`` would.

Why not ``torch.nn.functional.dropout`` for the unkeyed path either: on CPU its Bernoulli sampling
costs about twice as much as drawing uniforms and comparing, and autograd of ``x * mask * scale``
would keep a float mask (4 bytes per entry) where a bool (1 byte) is enough.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

import torch

from fullgraph.ops.sparse import SparseOp

__all__ = ["DropoutKey", "dropout", "keep_mask", "keyed_dropout", "keyed_rows", "keyed_uniform",
           "keyed_edge_keep", "current_key"]


class DropoutKey(NamedTuple):
    seed: int
    epoch: int


_KEY: ContextVar[DropoutKey | None] = ContextVar("fullgraph_dropout_key", default=None)


@contextmanager
def keyed_dropout(seed: int, epoch: int):
    """Within this block, dropout sites that name their rows draw masks keyed by ``(seed, epoch)``."""
    token = _KEY.set(DropoutKey(int(seed), int(epoch)))
    try:
        yield
    finally:
        _KEY.reset(token)


_M64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _int32(u: int) -> int:
    """An unsigned 32-bit value as the int32 with the same bits."""
    u &= 0xFFFFFFFF
    return u - (1 << 32) if u >= 1 << 31 else u


def _site_keys(key: DropoutKey, site: int) -> tuple[int, int]:
    """Two independent 32-bit keys (rows, columns) for one site of one epoch."""
    k = _splitmix64(_splitmix64(_splitmix64(key.seed & _M64) ^ (key.epoch & _M64)) ^ (site & _M64))
    return _int32(k), _int32(k >> 32)


_C1, _C2 = _int32(0x85EBCA6B), _int32(0xC2B2AE35)  # murmur3's finalizer constants
_K_ROW, _K_COL = _int32(0x27D4EB2F), _int32(0x165667B1)


def _fmix32(x: torch.Tensor) -> torch.Tensor:
    """murmur3's 32-bit finalizer on an int32 tensor (a bijection with full avalanche)."""
    x = x ^ ((x >> 16) & 0xFFFF)
    x = x * _C1
    x = x ^ ((x >> 13) & 0x7FFFF)
    x = x * _C2
    return x ^ ((x >> 16) & 0xFFFF)


def _threshold(p: float) -> int:
    """Keep an entry iff its int32 bits are ``>=`` this: probability ``1 - p`` (to 2^-32)."""
    return min(int(round(p * 4294967296.0)) - (1 << 31), (1 << 31) - 1)


def _row_hash(rows: torch.Tensor, k: int) -> torch.Tensor:
    return _fmix32(rows.to(torch.int32) * _K_ROW ^ k)


def _col_hash(cols: torch.Tensor, k: int) -> torch.Tensor:
    return _fmix32(cols.to(torch.int32) * _K_COL + k)


_CPU_BLOCK_ENTRIES = 1 << 16
"""On CPU the hash runs over blocks of rows of this many entries (256 KiB of int32): its dozen
passes then stay in cache, which makes it several times faster than one pass over the whole mask,
and faster than ``torch.rand`` (34k x 256, one thread: 21 ms against 65 ms)."""


def _hashes(rows: torch.Tensor, num_cols: int, key: DropoutKey, site: int, col0: int = 0):
    """The row and column hashes of site ``site`` (entry ``(i, j)``'s bits: ``_fmix32(r[i] + c[j])``)."""
    kr, kc = _site_keys(key, site)
    c = _col_hash(torch.arange(col0, col0 + num_cols, dtype=torch.int32, device=rows.device), kc)
    return _row_hash(rows, kr), c


def _keyed_fill(rows: torch.Tensor, num_cols: int, key: DropoutKey, site: int, out: torch.Tensor,
                emit, col0: int = 0) -> torch.Tensor:
    """``out[i, j] = emit(hash of (key, site, rows[i], col0 + j))``, over blocks of rows on CPU (see
    ``_CPU_BLOCK_ENTRIES``), in one pass elsewhere; ``emit(bits, out_block)`` writes a block."""
    r, c = _hashes(rows, num_cols, key, site, col0)
    step = max(1, rows.numel() if rows.device.type != "cpu" else _CPU_BLOCK_ENTRIES // max(1, num_cols))
    for start in range(0, rows.numel(), step):
        emit(_fmix32(r[start:start + step, None] + c[None, :]), out[start:start + step])
    return out


COMPILED_MASK_DEVICES = ("cuda",)
"""Devices on which a keep mask is one compiled kernel (``torch.compile`` fuses the hash's dozen integer
passes into one that writes the bool mask). On the H200 the eager passes, ~5 µs a launch and each a
full pass over ``[rows, columns]`` int32, took ~40 % of a SAGE step's device time on a 10^7-edge graph
(benchmarks/README.md, "The lent GPU"). The CPU keeps the eager passes over cache-sized blocks:
compiling costs ~20 s a process, more than a CPU run of the sizes it trains saves. The bits are the
same either way (integer arithmetic wraps alike; tests/test_gpu.py compares them)."""


def _keep_bits(r: torch.Tensor, c: torch.Tensor, thr: int) -> torch.Tensor:
    return _fmix32(r[:, None] + c[None, :]) >= thr


_compiled_keep = None  # torch.compile(_keep_bits), made at first use; False once compiling it failed


def _fused_keep(r: torch.Tensor, c: torch.Tensor, thr: int) -> torch.Tensor:
    """``_keep_bits`` compiled, or eager (with one warning) where ``torch.compile`` cannot build it."""
    global _compiled_keep
    if _compiled_keep is None:
        _compiled_keep = torch.compile(_keep_bits, dynamic=True, fullgraph=True)
    if _compiled_keep is not False:
        try:
            return _compiled_keep(r, c, thr)
        except torch.OutOfMemoryError:
            raise
        except Exception as e:  # noqa: BLE001 - no compiler for this device: the eager passes, same bits
            warnings.warn(f"keyed dropout: torch.compile could not build the mask kernel ({type(e).__name__}: "
                          f"{str(e)[:200]}); computing masks eagerly (same masks, slower)", stacklevel=2)
            _compiled_keep = False
    return _keep_bits(r, c, thr)


def keyed_keep(rows: torch.Tensor, num_cols: int, p: float, key: DropoutKey, site: int) -> torch.Tensor:
    """The bool keep mask ``[len(rows), num_cols]`` of site ``site`` for the given global row ids."""
    thr = _threshold(p)
    if rows.device.type in COMPILED_MASK_DEVICES:
        return _fused_keep(*_hashes(rows, num_cols, key, site), thr)
    out = torch.empty((rows.numel(), num_cols), dtype=torch.bool, device=rows.device)
    return _keyed_fill(rows, num_cols, key, site, out, lambda bits, o: torch.ge(bits, thr, out=o))


def keyed_uniform(rows: torch.Tensor, num_cols: int, key: DropoutKey, site: int, col0: int = 0) -> torch.Tensor:
    """Float32 draws in [0, 1) ``[len(rows), num_cols]`` keyed as the masks are (the top 24 bits of
    the same hash): the uniforms of stochastic rounding (``fullgraph.comm.precision``). ``col0``: the
    first column's index, for a column slice of wider rows (the SpMM layouts send such slices)."""
    out = torch.empty((rows.numel(), num_cols), dtype=torch.float32, device=rows.device)
    return _keyed_fill(rows, num_cols, key, site, out,
                       lambda bits, o: torch.mul((bits >> 8) & 0xFFFFFF, 2.0 ** -24, out=o), col0)


_EDGE_SITES, _EDGE_COLS = 1 << 40, 1 << 41
"""Offsets of the sites whose keys hash edges: apart from the row masks' sites (small integers), so
an edge's mask and a row's at the same layer are drawn from unrelated keys."""
_K_HIGH, _K_DST = _int32(0x9E3779B1), _int32(0x61C88647)


def _id_hash(ids: torch.Tensor, k: int, mult: int) -> torch.Tensor:
    """A well-mixed int32 hash of int64 ids, all 64 bits of them (the low word, then the high one)."""
    ids = ids.to(torch.int64)
    h = _fmix32(ids.to(torch.int32) * mult ^ k)  # .to(int32) keeps the low 32 bits
    return _fmix32(h + (ids >> 32).to(torch.int32) * _K_HIGH)


def keyed_edge_keep(src: torch.Tensor, dst: torch.Tensor, num_cols: int, p: float, key: DropoutKey,
                    site: int) -> torch.Tensor:
    """The bool keep mask ``[E, num_cols]`` of the edges ``src[e] -> dst[e]`` (global node ids) at
    dropout site ``site``: a hash of ``(seed, epoch, site, src, dst, column)``, so an edge is dropped
    alike wherever it is held (attention dropout, ``models.pyg_layer``). The two ends are hashed
    apart, each over its 64 bits with a key of its own (``u -> v`` and ``v -> u`` differ), then
    together, then with the column as a row mask's entries are."""
    ks, kd = _site_keys(key, site + _EDGE_SITES)
    kc = _site_keys(key, site + _EDGE_COLS)[0]
    e = _fmix32(_id_hash(src, ks, _K_ROW) ^ _id_hash(dst, kd, _K_DST))
    c = _col_hash(torch.arange(num_cols, dtype=torch.int32, device=e.device), kc)
    return _fmix32(e[:, None] + c[None, :]) >= _threshold(p)


def _keyed_sparse_keep(x: SparseOp, rows: torch.Tensor, p: float, key: DropoutKey, site: int) -> torch.Tensor:
    """The keep mask of the stored entries of ``x``: the dense mask at their positions."""
    kr, kc = _site_keys(key, site)
    entry_row = torch.repeat_interleave(rows.to(x.indptr.device), x.indptr.diff().long())
    bits = _fmix32(_row_hash(entry_row, kr) + _col_hash(x.indices, kc))
    return bits >= _threshold(p)


def current_key() -> DropoutKey | None:
    """The ``(seed, epoch)`` of the keyed step running now, if any (an autograd backward on another
    thread does not see it: functions that draw in their backward take it in their forward)."""
    return _KEY.get()


def keyed_rows(site: int | None, rows: torch.Tensor | None, n: int, device) -> tuple | None:
    """``(row ids, key)`` when the mask of this site over ``n`` rows is keyed, else ``None``.

    It is keyed when a key is active and the caller names its ``site``; ``rows`` are the global ids
    of the mask's rows (default: ``0..n-1``, the single-process case).
    """
    key = _KEY.get()
    if key is None or site is None:
        return None
    if rows is None:
        return torch.arange(n, device=device), key
    if rows.numel() != n:
        raise ValueError(f"dropout site got {n} rows but {rows.numel()} row ids")
    return rows, key


def keep_mask(shape, p: float, generator: torch.Generator | None = None, device=None, *,
              rows: torch.Tensor | None = None, site: int | None = None) -> torch.Tensor:
    """A bool mask, each entry True with probability ``1 - p``; keyed as :func:`keyed_rows` says."""
    keyed = keyed_rows(site, rows, shape[0], device)
    if keyed is not None:
        return keyed_keep(keyed[0], shape[1], p, keyed[1], site)
    return torch.rand(shape, generator=generator, device=device) >= p


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x * keep * scale

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return g * keep * ctx.scale, None, None


class _BlockDropout(torch.autograd.Function):
    """Keyed dropout of a dense ``[n, F]`` tensor on the CPU, block by block of rows (``_CPU_BLOCK_ENTRIES``):
    each block's mask is hashed and applied while it is in cache, where a mask of the whole tensor and then a
    product with it read and write the tensor's size three more times. On this VM's memory (~4 GB/s a
    thread) that took Amazon-Computers' input dropout, ``[13752, 767]``, from ~95 to ~55 ms. The same
    masks and the same products (``x · keep``, then ``· scale``) as :class:`_Dropout`: the same bits. The
    mask is kept for backward only where ``x`` needs a gradient (the input features do not)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, rows: torch.Tensor, key: DropoutKey, site: int, p: float, scale: float):
        r, c = _hashes(rows, x.shape[1], key, site)
        thr, out = _threshold(p), torch.empty_like(x)
        keep = torch.empty(x.shape, dtype=torch.bool) if ctx.needs_input_grad[0] else None
        step = max(1, _CPU_BLOCK_ENTRIES // max(1, x.shape[1]))
        for start in range(0, x.shape[0], step):
            block = torch.ge(_fmix32(r[start:start + step, None] + c[None, :]), thr)
            torch.mul(x[start:start + step], block, out=out[start:start + step]).mul_(scale)
            if keep is not None:
                keep[start:start + step] = block
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return g * keep * ctx.scale, None, None, None, None, None


def dropout(x: torch.Tensor | SparseOp, p: float, training: bool, generator: torch.Generator | None = None, *,
            rows: torch.Tensor | None = None, site: int | None = None):
    """Inverted dropout of rate ``p``; for sparse input it drops stored entries only (zeros stay zeros).

    ``rows`` (global node ids of ``x``'s rows) and ``site`` key the mask (see :func:`keep_mask`).
    """
    if not training or p == 0.0:
        return x
    scale = 1.0 / (1.0 - p)
    if isinstance(x, SparseOp):
        keyed = keyed_rows(site, rows, x.shape[0], x.values.device)
        if keyed is not None:
            keep = _keyed_sparse_keep(x, keyed[0], p, keyed[1], site)
        else:
            keep = keep_mask(x.values.shape, p, generator, x.values.device)
        return x.with_values(x.values * keep * scale)
    if x.device.type == "cpu" and x.dim() == 2 and x.dtype == torch.float32:
        keyed = keyed_rows(site, rows, x.shape[0], x.device)
        if keyed is not None:
            return _BlockDropout.apply(x, keyed[0], keyed[1], site, p, scale)
    return _Dropout.apply(x, keep_mask(x.shape, p, generator, x.device, rows=rows, site=site), scale)
