"""Link prediction's metrics on hand-made cases, against the formulas OGB's evaluator states: Hits@K
counts a positive that scores *above* the K-th best negative (a tie does not count), MRR ranks each
positive against its own negatives with ties averaged, ROC-AUC is the share of (positive, negative)
pairs in the right order."""

from __future__ import annotations

import math

import pytest
import torch

from fullgraph.tasks.link_metrics import hits_at, link_metric, mrr, rank_of


def t(*values):
    return torch.tensor(values, dtype=torch.float64)


def test_hits_counts_positives_above_the_kth_negative():
    pos, neg = t(3.0, 1.0, 0.5), t(2.0, 0.7, 0.1)
    assert hits_at(pos, neg, 1) == pytest.approx(1 / 3)  # above 2.0: only 3.0
    assert hits_at(pos, neg, 2) == pytest.approx(2 / 3)  # above 0.7: 3.0 and 1.0
    assert hits_at(pos, neg, 3) == pytest.approx(1.0)  # above 0.1: all
    assert hits_at(t(0.7), neg, 2) == 0.0  # a tie with the K-th is no hit
    assert hits_at(pos, neg, 50) == 1.0  # fewer negatives than K: OGB counts every positive


def test_mrr_ranks_each_positive_against_its_own_negatives_ties_averaged():
    pos = t(1.0, 0.2)
    neg = t(0.5, 2.0, 0.1, 0.2)  # positive 0's negatives, then positive 1's
    assert rank_of(pos, neg.view(2, 2)).tolist() == [2.0, 1.5]  # one above; one tie: (0 + 1) / 2 + 1
    assert mrr(pos, neg, per_positive=2) == pytest.approx((1 / 2 + 1 / 1.5) / 2)
    assert hits_at(pos, neg, 1, per_positive=2) == 0.0  # ranks 2 and 1.5: neither is <= 1
    assert hits_at(pos, neg, 2, per_positive=2) == 1.0
    # shared negatives: every positive against all four
    assert mrr(pos, neg) == pytest.approx((1 / 2 + 1 / (0.5 * (2 + 3) + 1)) / 2)


def test_roc_auc_is_the_share_of_ordered_pairs():
    assert link_metric("rocauc", t(0.9, 0.4), t(0.5, 0.1)) == pytest.approx(3 / 4)
    assert link_metric("rocauc", t(0.5), t(0.5)) == pytest.approx(0.5)  # a tie counts one half
    assert link_metric("hits@20", t(1.0), t(*range(30))) == pytest.approx(0.0)
    assert math.isclose(link_metric("mrr", t(5.0), t(1.0, 2.0)), 1.0)
