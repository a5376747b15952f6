"""A training step does no work whose result is fixed by the graph and the split: no conversion of a
sparse structure, no sort, no mask turned into positions (``nonzero``, a device sync on a GPU) and no
boolean indexing, whose backward on a GPU sorts the positions every step (the lent H200's profile
found one such sort a step). The operators are the dispatcher's, the same on the CPU as on a GPU."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from fullgraph.config import TrainConfig
from fullgraph.data.synthetic import rmat
from fullgraph.train.trainer import Trainer

PER_STEP_FORBIDDEN = ("sort", "argsort", "nonzero", "_index_put_impl_", "_convert_indices_from_csr_to_coo",
                      "_convert_indices_from_coo_to_csr", "to_sparse_csr", "to_sparse", "coalesce", "unique")


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_a_training_step_recomputes_nothing_constant(model):
    graph = rmat(scale=9, num_edges=4000, num_features=16, num_classes=4, seed=0)
    trainer = Trainer(TrainConfig.of(model=model, layers=2, hidden=16, epochs=1, threads=1, progress="none"), graph)
    try:
        trainer.build()
        trainer.train_step(1)  # set-up that happens once (the transpose, the training rows' positions)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            trainer.train_step(2)
            trainer.train_step(3)
    finally:
        trainer.close()
    ops = {e.key.removeprefix("aten::") for e in prof.key_averages()}
    assert "mm" in ops or "addmm" in ops  # the profile saw the step
    assert not ops & set(PER_STEP_FORBIDDEN), sorted(ops & set(PER_STEP_FORBIDDEN))
