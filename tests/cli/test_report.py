"""``fullgraph report``: figures and a summary table for one-process and multi-process runs."""

import pytest

from fullgraph.cli import main
from fullgraph.cli.report import FIGURES

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


def fake_run(name: str, first_s: float = 0.02, epoch_s: float = 0.01, epochs: int = 5, ranks: int = 2) -> dict:
    """A run as ``read_run`` returns it, of ``ranks`` processes (a ledger, per-rank memory), made up."""
    eps = [{"epoch": i + 1, "loss": 1.0 / (i + 1), "val_metric": 0.5 + i / 100, "test_metric": 0.4 + i / 100,
            "epoch_time_s": first_s if i == 0 else epoch_s, "eval_time_s": 0.0, "compute_time_s": epoch_s / 2,
            "comm_time_s": epoch_s / 2} for i in range(epochs)]
    summary = {"dataset": "synthetic", "model": "gcn", "layers": 2, "hidden": 8, "parallel": "graph", "nprocs": ranks,
               "epochs_run": epochs, "best_epoch": epochs, "val_metric": 0.5, "test_metric": 0.4, "metric": "acc",
               "epoch_time_s": epoch_s, "peak_rss_bytes": 2**27, "peak_rss_bytes_per_rank": [2**27] * ranks,
               "estimated_peak_bytes_per_rank": [2**26] * ranks,
               "comm_bytes_per_epoch": {"halo/fwd": 2**20, "halo/bwd": 2**20, "grad/allreduce": 2**19}}
    return {"name": name, "summary": summary, "epochs": eps}


def run_colors(fig) -> dict[str, set[str]]:
    """The colours a figure draws each run in: its tagged lines, bar outlines (or fills) and names."""
    from matplotlib.colors import to_hex

    out: dict[str, set[str]] = {}
    for artist in fig.findobj(lambda a: (a.get_gid() or "").startswith("run:")):
        if hasattr(artist, "get_edgecolor"):  # a bar: its outline is the run's
            color = artist.get_edgecolor()
        else:  # a line, or the run's name
            color = artist.get_color()
        out.setdefault(artist.get_gid()[4:], set()).add(to_hex(color))
    return out


def test_each_run_keeps_one_colour_in_every_figure():
    from fullgraph.cli.report import figures

    runs = [fake_run(n) for n in ("a", "b", "c")]
    seen = {}
    for name, fig in figures(runs).items():
        colors = run_colors(fig)
        assert set(colors) == {"a", "b", "c"}, name  # every run is drawn, and tagged, in every figure
        for run, cs in colors.items():
            assert len(cs) == 1, (name, run, cs)  # one colour per run within a figure
            seen.setdefault(run, set()).update(cs)
    assert all(len(cs) == 1 for cs in seen.values()), seen  # ... and the same one across the figures
    assert len({c for cs in seen.values() for c in cs}) == 3  # and no two runs share it


def test_legends_sit_outside_the_axes():
    from fullgraph.cli.report import figures

    for name, fig in figures([fake_run("a"), fake_run("b")]).items():
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
        assert legends, name
        for legend in legends:
            box = legend.get_window_extent(renderer)
            for ax in fig.axes:
                assert not box.overlaps(ax.get_window_extent(renderer)), f"{name}: a legend over the plot"


def test_the_first_epochs_start_up_does_not_stretch_the_time_axis():
    from fullgraph.cli.report import figures

    figs = figures([fake_run("slow start", first_s=100.0, epoch_s=0.01), fake_run("b")])
    for name in ("loss.png", "metric.png"):
        by_time = figs[name].axes[1]
        assert by_time.get_xlim()[1] < 1.0, name  # the later epochs' 0.04 s fill the axis, not 100 s
        assert "slow start 100 s" in by_time.get_title()  # the figure says what it left out


def test_times_below_a_microsecond_print_as_0():
    from fullgraph.cli.report import seconds, summary_table

    assert [seconds(t) for t in (4e-8, 0.0, -3e-9, 2.5e-6, 0.01234)] == ["0", "0", "0", "2.5e-06", "0.0123"]
    row = summary_table([fake_run("tiny", first_s=1e-8, epoch_s=3e-9)])[2]
    cells = [c.strip() for c in row.split("|")]
    assert cells[10] == "0" and cells[11] == "0 / 0 / 0", row
    assert "e-0" not in row  # no 3e-09 dressed up as a time
