"""The layout registry: one record per layout, with everything the configuration, the ranks and the
planner ask of it (issue 41 §1)."""

import pytest

from fullgraph.comm.mesh import PARALLEL_MODES
from fullgraph.config import TrainConfig
from fullgraph.errors import InputError
from fullgraph.parallel.registry import LAYOUTS, layout_of


def test_every_distributed_layout_can_be_built_and_planned():
    """(That the records cover ``PARALLEL_MODES`` exactly, the registry asserts as it is imported.)"""
    for mode in PARALLEL_MODES:
        layout = layout_of(mode)
        assert callable(layout.build)
        if mode != "single":
            assert callable(layout.volume) and callable(layout.works) and callable(layout.peak), mode


@pytest.mark.parametrize("owner", [layout for layout in LAYOUTS if layout.options], ids=lambda lt: lt.modes[0])
def test_a_layouts_own_options_are_refused_elsewhere(owner):
    """Each option a record claims is refused under every other layout, naming the modes that take it."""
    values = {"stage_layers": "1,1", "chunks": 4, "tensor_chunks": 2, "tensor_decoupled": True}
    for option in owner.options:
        with pytest.raises(InputError, match="only with --parallel " + " or ".join(owner.modes)):
            TrainConfig.of(parallel="graph", nprocs=2, **{option: values[option]})
