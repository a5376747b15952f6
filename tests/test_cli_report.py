"""``fullgraph report``: figures and a summary table for one-process and multi-process runs."""

import pytest

from fullgraph.cli import main
from fullgraph.cli_report import FIGURES

pytest.importorskip("matplotlib", reason="matplotlib is part of the test extra")

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    common = ["train", "--epochs", "3", "--progress", "none", "--hidden", "8"]
    assert main([*common, "--out", str(root / "one")]) == 0
    assert main([*common, "--parallel", "graph", "--nprocs", "2", "--threads", "1", "--out", str(root / "two")]) == 0
    return root


def test_report_draws_every_figure_and_a_row_per_run(runs, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(runs / "one"), str(runs / "two"), "--out", str(out)]) == 0
    assert "summary.md" in capsys.readouterr().out
    for name in FIGURES:
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, name  # a drawn figure, not an empty canvas
    table = (out / "summary.md").read_text().splitlines()
    assert len(table) == 4 and table[2].startswith("| one | synthetic | gcn 2x8 | single |")
    two = table[3]
    assert two.startswith("| two | synthetic | gcn 2x8 | graph x2 |")
    assert float(two.split("|")[12]) > 0  # MiB per epoch: a multi-process run moved bytes


def test_report_of_one_run_and_bad_folders(runs, tmp_path, capsys):
    assert main(["report", str(runs / "one"), "--out", str(tmp_path / "r")]) == 0
    assert all((tmp_path / "r" / name).is_file() for name in FIGURES)
    capsys.readouterr()
    assert main(["report", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err
    assert "expected a run folder with summary.json and metrics.jsonl" in err and "nowhere" in err
    assert not (tmp_path / "r2").exists()  # nothing written for a bad input
