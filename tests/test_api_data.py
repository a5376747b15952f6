"""``fullgraph.train_model(data=Data)``: a PyG ``Data`` trains as the folder ``write_pyg`` writes for it.

In one process it is converted here; across processes it is written once into the cache
(``FULLGRAPH_CACHE``), keyed by its content, and that folder is the run's ``dataset`` in
``config.json``, so ``evaluate`` finds the graph again. The ranks started from a plain script, and
those of ``torchrun`` running the script, train what one process trains."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import fullgraph
from fullgraph.cli import main
from fullgraph.data.pyg import to_pyg, write_pyg
from fullgraph.data.synthetic import planted_partition

from tests._equality import LOSSES_REORDERED, assert_same_losses

COMMON = dict(epochs=2, eval_every=2, progress="none")

SCRIPT = textwrap.dedent('''
    import json, sys
    import fullgraph
    from fullgraph.data.pyg import to_pyg
    from fullgraph.data.synthetic import planted_partition
    from fullgraph.models import from_pyg
    from torch_geometric.nn import GCNConv


    def build(in_dim, out_dim, hidden=8):
        return from_pyg([GCNConv(in_dim, hidden), GCNConv(hidden, out_dim)], dropout=0.5)


    if __name__ == "__main__":
        data = to_pyg(planted_partition(num_nodes=400, seed=1, name="tiny"))
        result = fullgraph.train_model(build, data=data, parallel="graph", nprocs=2, out=sys.argv[1],
                                       epochs=2, eval_every=2, progress="none")
        print("LOSSES " + json.dumps(result.losses), flush=True)  # one write: under torchrun every rank prints it
''')


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("FULLGRAPH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def tiny():
    return to_pyg(planted_partition(num_nodes=400, seed=1, name="tiny"))


def dataset_of(run: Path) -> str:
    return json.loads((run / "config.json").read_text())["dataset"]


def test_a_data_trains_bit_for_bit_as_its_write_pyg_folder_and_the_run_names_its_cached_folder(tmp_path, cache):
    data = tiny()
    write_pyg(data, tmp_path / "folder")
    folder = fullgraph.train_model("gcn", dataset=str(tmp_path / "folder"), out=str(tmp_path / "f"), **COMMON)
    given = fullgraph.train_model("gcn", data=data, out=str(tmp_path / "d"), **COMMON)
    assert given.losses == folder.losses  # bit for bit
    written = Path(dataset_of(tmp_path / "d"))
    assert written.parent == cache / "data" and (written / "meta.json").is_file()
    assert main(["evaluate", "--run", str(tmp_path / "d"), "--json"]) == 0  # the run folder finds its graph
    data.x = data.x * 2  # a changed Data is another folder; the same Data, the same one
    fullgraph.train_model("gcn", data=data, out=str(tmp_path / "d2"), **COMMON)
    fullgraph.train_model("gcn", data=tiny(), out=str(tmp_path / "d3"), **COMMON)
    assert dataset_of(tmp_path / "d2") != str(written) and dataset_of(tmp_path / "d3") == str(written)
    assert len(list((cache / "data").iterdir())) == 2  # nothing left half-written beside them


def test_data_and_dataset_together_are_refused_in_one_line(cache):
    with pytest.raises(fullgraph.InputError, match=r"expected data= or dataset=, not both \(got a Data and "
                                                   r"dataset='cora'\)"):
        fullgraph.train_model("gcn", data=tiny(), dataset="cora", **COMMON)


def test_a_data_with_edge_weights_trains_on_them_and_a_bad_one_is_refused_before_anything_is_written(tmp_path,
                                                                                                   cache):
    """PyG's ``Data.edge_weight`` reaches the graph (issue 51): the weighted run is not the unweighted
    one, its cached folder is another, and its run folder evaluates on the graph it trained on."""
    data = tiny()
    plain = fullgraph.train_model("gcn", data=data, out=str(tmp_path / "plain"), **COMMON)
    data.edge_weight = (data.edge_index[0] % 5 + 1).float()
    weighted = fullgraph.train_model("gcn", data=data, out=str(tmp_path / "w"), **COMMON)
    assert weighted.losses != plain.losses
    assert dataset_of(tmp_path / "w") != dataset_of(tmp_path / "plain")
    assert main(["evaluate", "--run", str(tmp_path / "w"), "--json"]) == 0
    before = sorted((cache / "data").iterdir())
    bad = tiny()
    bad.edge_attr = torch.ones(3, 2)  # rows that do not match edge_index
    with pytest.raises(fullgraph.InputError, match="edge_attr"):
        fullgraph.train_model("gcn", data=bad, out=str(tmp_path / "bad"), **COMMON)
    assert sorted((cache / "data").iterdir()) == before and not (tmp_path / "bad").exists()


def run_script(tmp_path, *launcher) -> tuple[list[float], list[float]]:
    """The losses of the script's run (two ranks, launched as ``launcher`` says), and of its builder on
    the same ``Data`` in this process."""
    script = tmp_path / "train_script.py"
    script.write_text(SCRIPT)
    env = os.environ | {"PYTHONWARNINGS": "ignore", "FULLGRAPH_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, *launcher, str(script), str(tmp_path / "run")], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, "\n".join(line for line in proc.stderr.splitlines() if "rror" in line)[-4000:]
    losses = json.loads(re.search(r"LOSSES (\[[^\]]*\])", proc.stdout).group(1))
    one = fullgraph.train_model(f"{script}:build", data=tiny(), out=str(tmp_path / "one"), **COMMON)
    return losses, one.losses


def test_a_data_from_a_plain_script_reaches_two_ranks_through_the_cache(tmp_path, cache):
    losses, one = run_script(tmp_path)
    assert_same_losses(losses, one, LOSSES_REORDERED, "train_model(data=...), graph P=2")
    assert Path(dataset_of(tmp_path / "run")).parent == tmp_path / "cache" / "data"


def test_a_data_under_torchrun_trains_as_one_process(tmp_path, cache):
    losses, one = run_script(tmp_path, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2")
    assert_same_losses(losses, one, LOSSES_REORDERED, "train_model(data=...) under torchrun")
    assert Path(dataset_of(tmp_path / "run")).parent == tmp_path / "cache" / "data"
