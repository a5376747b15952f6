"""``Mesh``: every layout's axes from its flags, one clear refusal per impossible layout, and the groups
along each axis checked against coordinates enumerated here, independently of the mesh's own formula."""

import itertools

import pytest

from fullgraph.comm.mesh import Mesh
from fullgraph.config import TrainConfig
from fullgraph.errors import InputError

SIZES = [  # parallel, P, flags, (stages, graph ways), grid
    ("single", 1, {}, (1, 1), (1, 1, 1)),
    ("graph", 4, {}, (1, 4), (1, 1, 1)),
    ("pipeline", 4, {}, (4, 1), (1, 1, 1)),
    ("hybrid", 8, {"stages": 2}, (2, 4), (1, 1, 1)),
    ("hybrid", 8, {"graph_ways": 2}, (4, 2), (1, 1, 1)),
    ("spmm-1d", 4, {}, (1, 4), (4, 1, 1)),
    ("spmm-1.5d", 8, {"replication": 2}, (1, 8), (4, 2, 1)),
    ("spmm-2d", 9, {}, (1, 9), (3, 3, 1)),
    ("spmm-3d", 8, {}, (1, 8), (2, 2, 2)),
    ("spmm-3d", 27, {}, (1, 27), (3, 3, 3)),
]


@pytest.mark.parametrize("parallel,P,flags,axes,grid", SIZES)
def test_every_layout_gets_its_axes_from_its_flags(parallel, P, flags, axes, grid):
    mesh = Mesh.for_mode(parallel, P, **flags)
    assert (mesh.stages, mesh.graph_ways, mesh.grid) == (*axes, grid)
    cfg = TrainConfig.of(parallel=parallel, nprocs=P, layers=4, **flags)
    assert cfg.parallel.mesh == mesh  # the configuration validates through the same object


REFUSED = [
    ("spmm-2d", 8, {}, "perfect square --nprocs"),
    ("spmm-3d", 9, {}, "perfect cube --nprocs"),
    ("spmm-1.5d", 8, {"replication": 3}, "c dividing --nprocs 8"),
    ("spmm-1.5d", 8, {"replication": 4}, "c² <= 8"),
    ("graph", 4, {"replication": 2}, "--replication only with --parallel spmm-1.5d"),
    ("hybrid", 8, {"stages": 3}, "--stages to divide --nprocs 8"),
    ("hybrid", 8, {"stages": 2, "graph_ways": 2}, "2 × 2 = 4, nprocs = 8"),
    ("hybrid", 8, {}, "got neither"),
    ("pipeline", 4, {"stages": 2}, "--stages 4 (= --nprocs)"),
    ("single", 2, {}, "--nprocs 1 with --parallel single"),
    ("ring", 2, {}, "to be one of single, graph"),
]


@pytest.mark.parametrize("parallel,P,flags,words", REFUSED)
def test_an_impossible_layout_is_refused_naming_its_factors(parallel, P, flags, words):
    with pytest.raises(InputError, match=None) as err:
        Mesh.for_mode(parallel, P, **flags)
    assert words in str(err.value)


def _spmm_coords(R, C, D):
    """Rank → (i, j, l), enumerated in the order the ranks are numbered: i slowest, l fastest."""
    return dict(enumerate(itertools.product(range(R), range(C), range(D))))


@pytest.mark.parametrize("parallel,P,flags", [("spmm-1d", 4, {}), ("spmm-1.5d", 8, {"replication": 2}),
                                               ("spmm-2d", 9, {}), ("spmm-3d", 8, {}), ("spmm-3d", 27, {})])
def test_spmm_groups_are_the_processes_that_share_all_other_coordinates(parallel, P, flags):
    mesh = Mesh.for_mode(parallel, P, **flags)
    coords = _spmm_coords(*mesh.grid)
    assert all(mesh.coords(r) == c for r, c in coords.items())
    assert all(mesh.block_row_of(r) == coords[r][0] for r in range(P))
    varying = {"row": 1, "col": 0, "fiber": 2}  # the coordinate each axis's groups run along
    for axis in ("row", "col", "fiber"):
        groups = mesh.groups(axis)
        assert sorted(r for g in groups for r in g) == list(range(P))  # every rank in exactly one group
        for g in groups:
            fixed = {tuple(c for k, c in enumerate(coords[r]) if k != varying[axis]) for r in g}
            assert len(fixed) == 1 and len(g) == mesh.grid[varying[axis]]
            assert [coords[r][varying[axis]] for r in g] == list(range(len(g)))  # ordered along the axis
    expected_axes = {"spmm-1d": ("col",), "spmm-1.5d": ("col", "row"), "spmm-2d": ("col", "row"),
                     "spmm-3d": ("col", "row", "fiber")}[parallel]
    assert mesh.axes() == expected_axes


def test_hybrid_graph_groups_are_the_processes_of_one_stage():
    mesh = Mesh.for_mode("hybrid", 6, stages=3)
    assert mesh.groups("graph") == [[0, 1], [2, 3], [4, 5]]  # rank s·W + w: part w of stage s
    assert mesh.groups("stage") == [[0, 2, 4], [1, 3, 5]]
    assert mesh.axes() == ("graph",)
    assert Mesh.for_mode("pipeline", 4).axes() == () and Mesh.for_mode("graph", 4).axes() == ()


def test_block_rows_are_refused_beyond_one_per_node():
    with pytest.raises(InputError, match="at most one block row per node"):
        Mesh.for_mode("spmm-1d", 8).check_graph(5)
    with pytest.raises(InputError, match="at most one part per node"):
        Mesh.for_mode("graph", 8).check_graph(5)
