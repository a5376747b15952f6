"""The memory of a model without a memory model of its own (a user's builder) is measured on probe
blocks (``fullgraph.plan.measured``). The check: for the built-in models, whose kept bytes are
derived layer by layer (and checked against autograd in test_memory.py), the measured rates give the
same bytes within 15 % on shapes far from the probes', one process and a part; and a user's model
trained from the command line gets an estimate within 30 % of its measured peak, as the built-in
ones (test_memory.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fullgraph.models import MODELS
from fullgraph.plan import kept_activation_bytes
from fullgraph.plan.measured import measured_rates

OPTIONS = {"gcn": dict(layers=3, hidden=32), "sage": dict(layers=3, hidden=32), "gcnii": dict(layers=4, hidden=32),
           "gat": dict(layers=2, hidden=32, heads=4), "resgcn+": dict(layers=3, hidden=32)}


@pytest.mark.parametrize("model", [m for m, s in MODELS.items() if s.memory is not None])
@pytest.mark.parametrize("nodes, halo, nnz", [(3000, 0, 30000), (1500, 400, 16000)], ids=["one-process", "part"])
def test_measured_rates_match_the_derived_count(model, nodes, halo, nnz):
    opts = OPTIONS[model] | {"dropout": 0.5}
    per_row, per_halo, per_edge, _, _ = measured_rates(model, json.dumps(opts, sort_keys=True), 48, 5, False, halo > 0)
    derived = kept_activation_bytes(model, nodes=nodes, halo=halo, block_nnz=nnz, features=48, classes=5,
                                    layers=opts["layers"], hidden=32, heads=opts.get("heads", 8))
    assert 0.9 <= (per_row * nodes + per_halo * halo + per_edge * nnz) / derived <= 1.15


MEASURE = """
import json, sys
from fullgraph.config import TrainConfig
from fullgraph.data.synthetic import planted_partition
from fullgraph.memory import return_freed_memory
from fullgraph.train.trainer import Trainer
assert return_freed_memory()  # as the command line does
g = planted_partition(num_nodes=int(sys.argv[1]), num_features=32, seed=0)
r = Trainer(TrainConfig.of(epochs=2, eval_every=2, threads=1, progress="none", **json.loads(sys.argv[2])), g).build().train()
print(json.dumps([r.peak_rss_bytes, r.estimated_peak_bytes]))
"""


def test_a_user_model_gets_an_estimate_within_30_percent_of_its_peak():
    model = f"{Path(__file__).resolve().parents[2]}/examples/gated_sage.py:build"
    kw = dict(model=model, model_args={"hidden": 128, "layers": 4})
    proc = subprocess.run([sys.executable, "-c", MEASURE, "30000", json.dumps(kw)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    peak, est = json.loads(proc.stdout.strip().splitlines()[-1])
    assert est is not None and 0.7 <= est / peak <= 1.3, (peak / 2**20, est / 2**20)
