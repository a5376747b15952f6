"""Class labels that do not state their class count: how many classes they have, and when that
count is not to be trusted (:func:`check_inferred_classes`)."""

from __future__ import annotations

import logging

import numpy as np

from fullgraph.errors import InputError

__all__ = ["MIN_EMPTY_CLASSES", "used_classes", "check_inferred_classes"]

log = logging.getLogger("fullgraph")


MIN_EMPTY_CLASSES = 8
"""Labels that do not state their class count are refused when more than half of the classes
``0..max`` have no node, and at least this many (:func:`check_inferred_classes`)."""


def used_classes(labels: np.ndarray) -> np.ndarray:
    """The distinct class ids among ``labels >= 0``, sorted: one bincount (linear) while the largest
    id is within a few times the number of labels; past that most classes are empty anyway, and the
    sort that finds the used ones runs only on the way to a refusal."""
    labels = labels[labels >= 0]
    if labels.size and int(labels.max()) >= 4 * labels.size + 1024:
        return np.unique(labels)
    return np.flatnonzero(np.bincount(labels))


def check_inferred_classes(used: np.ndarray, where: str = "") -> int:
    """The class count ``C = max + 1`` of labels that do not state it, whose distinct ``used`` ids
    are given sorted; an ``InputError`` when more than half of the classes ``0..C-1``, and at least
    :data:`MIN_EMPTY_CLASSES`, have no node, and a one-line warning when fewer do (a label of 7 in a
    3-class file: 8 outputs, 4 of them for no node).

    Why: inferring ``C`` turns one typo (``1000`` in a 4-class file) or ids that are no class numbers
    (years, category codes) into a model with ~1,000 outputs of which all but a few never see a node,
    and the run would train silently. Real datasets use every class; a small labelled set may miss a
    few, which the threshold lets through. Data whose classes really are that sparse states the count
    (a native folder's ``meta.json``, one-hot label columns, ``Graph(num_classes=...)``): it is trusted.
    """
    c, k = int(used[-1]) + 1, int(used.size)
    empty = c - k
    if empty == 0:
        return c
    ids = [str(int(v)) for v in (used if k <= 8 else np.concatenate([used[:4], used[-2:]]))]
    shown = ", ".join(ids if k <= 8 else ids[:4] + ["..."] + ids[4:])
    widest = int(np.diff(used, prepend=-1).argmax())  # where the empty classes lie: after one label, or below all
    why = (f"a label of {c - 1} stands far beyond the next largest, {ids[-2]}: a typo?" if k > 1 and widest == k - 1
           else f"no label below {ids[0]}: ids rather than class numbers?" if widest == 0
           else "ids rather than class numbers?")
    if empty <= k or empty < MIN_EMPTY_CLASSES:  # a few classes no node has: trained, but said once
        log.warning("labels%s {%s} leave %d of %d classes without a node (%s); the model gets %d outputs: renumber "
                    "the classes 0..%d if that is not meant", where, shown, empty, c, why, c, k - 1)
        return c
    raise InputError(
        f"expected class labels 0..C-1 with most classes used{where} (got labels {{{shown}}}: {empty} of {c} "
        f"classes have no node; {why}); renumber the classes 0..{k - 1}, or state the class count where the "
        f"format has one (num_classes in a native folder's meta.json, Graph(num_classes=...))"
    )
