"""Seeded train/val/test splits for graphs that ship without one.

Shchur et al. (2018, "Pitfalls of GNN evaluation") draw, per class, 20 labelled nodes for training
and 30 for validation and test on the rest; the Amazon/Coauthor files carry no split, so this is
how they get one. The draw depends only on the labels and the seed, never on the process layout.
"""

from __future__ import annotations

import numpy as np
import torch

from fullgraph.errors import InputError

__all__ = ["per_class_split", "random_split", "NUMBERS_SPLIT", "placeholder_labels"]

NUMBERS_SPLIT = (0.6, 0.2, 0.2)
"""The fractions of the labelled nodes a seeded split of numeric labels (node regression, which has no
classes to draw per) gives to training, validation and test."""


def per_class_split(y, train_per_class: int = 20, val_per_class: int = 30, seed: int = 0
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Boolean ``(train, val, test)`` masks: per class, ``train_per_class`` / ``val_per_class`` / the rest.

    Nodes labelled ``-1`` are in no split. Within each class the nodes are shuffled by a generator
    seeded with ``seed`` (classes in increasing order), so the same labels and seed give the same
    split on every machine.

    A class with more than ``train + val`` nodes gets exactly the quota (Shchur's rule). A smaller
    class never gives more than half its nodes to training nor more to validation than to test: it
    gets
    ``t = min(train, max(1, n // 2))`` training nodes, ``v = min(val, (n - t) // 2)`` validation nodes
    and the rest as test. So a tiny class is still seen in training and, from three nodes on, in
    validation and test as well, instead of being swallowed whole by the training set.
    """
    y = torch.as_tensor(y)
    if y.dim() != 1:
        raise InputError(f"expected single-label y of shape [N] for a per-class split (got shape {tuple(y.shape)})")
    if train_per_class < 1 or val_per_class < 0:
        raise InputError(
            f"expected train_per_class >= 1 and val_per_class >= 0 (got {train_per_class}, {val_per_class})"
        )
    labels = y.numpy().astype(np.int64)
    n = labels.size
    rng = np.random.default_rng(seed)
    train, val, test = (np.zeros(n, dtype=bool) for _ in range(3))
    for c in np.unique(labels[labels >= 0]):
        nodes = rng.permutation(np.flatnonzero(labels == c))
        k = nodes.size
        if k > train_per_class + val_per_class:
            t, v = train_per_class, val_per_class
        else:
            t = min(train_per_class, max(1, k // 2))
            v = min(val_per_class, (k - t) // 2)
        train[nodes[:t]] = True
        val[nodes[t:t + v]] = True
        test[nodes[t + v:]] = True
    return torch.from_numpy(train), torch.from_numpy(val), torch.from_numpy(test)


def random_split(y, seed: int = 0, fractions: tuple[float, float, float] = NUMBERS_SPLIT
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Boolean ``(train, val, test)`` masks over the nodes with a finite number in ``y`` (NaN: no label):
    shuffled by a generator seeded with ``seed``, cut by ``fractions`` (the test part takes the rest)."""
    known = np.flatnonzero(np.isfinite(torch.as_tensor(y).numpy()))
    if known.size < 3:
        raise InputError(f"expected at least 3 labelled nodes to split (got {known.size})")
    nodes = np.random.default_rng(seed).permutation(known)
    t = max(1, int(round(fractions[0] * nodes.size)))
    v = max(1, min(int(round(fractions[1] * nodes.size)), nodes.size - t - 1))
    masks = []
    for part in (nodes[:t], nodes[t:t + v], nodes[t + v:]):
        m = torch.zeros(len(y), dtype=torch.bool)
        m[torch.from_numpy(part)] = True
        masks.append(m)
    return masks[0], masks[1], masks[2]


def placeholder_labels(n: int) -> dict:
    """Node labels and splits for a graph that has none, trained only on its links: every label 0 of 2
    classes, train = every node but the last two, val = node ``n - 2``, test = node ``n - 1``. ``Graph``
    wants labels and three non-empty masks; no link task reads them, and a node task is refused such a
    graph where it is loaded (``data.load``), so that nobody trains on them."""
    if n < 3:
        raise InputError(f"expected at least 3 nodes (got {n}): the placeholder node splits need three")
    masks = {k: torch.zeros(n, dtype=torch.bool) for k in ("train_mask", "val_mask", "test_mask")}
    masks["train_mask"][:-2], masks["val_mask"][-2], masks["test_mask"][-1] = True, True, True
    return {"y": torch.zeros(n, dtype=torch.int64), "num_classes": 2, **masks}
