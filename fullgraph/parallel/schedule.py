"""The pipeline's schedule: which graph layers each stage runs, and the order in which an epoch
sends the chunks through the stages (a seeded shuffle keyed by (seed, epoch), the same on every
rank, so that every stage and every graph way processes chunk k at the same turn).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ChunkSchedule", "chunk_order", "stage_bounds", "bubble_summary"]


@dataclass(frozen=True)
class ChunkSchedule:
    """What every rank of a chunked run agrees on: K chunks, every stage's ``(first, last)`` layers,
    this rank's stage, and the epoch's chunk order (``shuffle``d by ``seed``); ``induced``: edges
    between chunks are cut (GPipe's micro-batching) instead of read from history."""

    chunks: int
    bounds: tuple[tuple[int, int], ...]
    stage: int = 0
    shuffle: bool = True
    seed: int = 0
    induced: bool = False

    @classmethod
    def of(cls, cfg, layers: int, stage: int = 0, chunks: int | None = None) -> ChunkSchedule:
        """The schedule a configuration asks for, for a model of ``layers`` graph layers (``chunks``:
        K, default the configuration's)."""
        p = cfg.parallel
        return cls(chunks or p.num_chunks, tuple(stage_bounds(layers, p.mesh.stages, p.stage_layer_list)), stage,
                   p.shuffle, cfg.optimization.seed, p.chunk_edges == "induced")

    def order(self, epoch: int) -> list[int]:
        return chunk_order(self.seed, epoch, self.chunks, self.shuffle)


def chunk_order(seed: int, epoch: int, chunks: int, shuffle: bool) -> list[int]:
    """The epoch's processing order: a seeded permutation keyed by (seed, epoch), or ``0..K-1``."""
    if not shuffle:
        return list(range(chunks))
    rng = np.random.default_rng(np.random.SeedSequence([seed, epoch, 0xC4A]))
    return [int(k) for k in rng.permutation(chunks)]


def stage_bounds(layers: int, stages: int, stage_layers: list[int] | None = None) -> list[tuple[int, int]]:
    """``[(first, last), ...]`` graph layers of each stage: as given, or balanced by layer count."""
    sizes = stage_layers or [layers // stages + (1 if i < layers % stages else 0) for i in range(stages)]
    out, start = [], 0
    for n in sizes:
        out.append((start, start + n))
        start += n
    return out


def bubble_summary(rows: list[list[float]], stages: int) -> dict:
    """From every rank's ``[step, wait, compute]`` seconds (ranks ``s·W ..`` in stage s; each stage's
    first rank speaks for it): per-stage compute, neighbour-wait and bubble seconds, and the bubble
    fraction, idle time over busy-plus-idle time."""
    W = len(rows) // stages
    per_stage = [rows[s * W] for s in range(stages)]
    total = sum(r[0] for r in rows)
    idle = sum(r[0] - r[2] for r in rows)
    return {"stage_compute_s": [round(r[2], 6) for r in per_stage],
            "stage_wait_s": [round(r[1], 6) for r in per_stage],
            "stage_bubble_s": [round(r[0] - r[2], 6) for r in per_stage],
            "bubble_fraction": idle / total if total > 0 else 0.0}
