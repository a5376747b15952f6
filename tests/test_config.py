"""``TrainConfig``: six typed sections, options by their flag names, each rule checked where it belongs."""

import dataclasses

import pytest

from fullgraph.config import (DataOptions, ModelOptions, OptimizationOptions, ParallelOptions, RunOptions,
                              TaskOptions, TrainConfig)
from fullgraph.errors import InputError
from fullgraph.options import options_of


def test_sections_are_typed_objects_and_options_go_to_their_section():
    cfg = TrainConfig.of(dataset="cora", model="gat", layers=4, hidden=32, lr=0.05, parallel="graph", nprocs=2,
                         out="runs/x")
    assert [type(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)] == [
        DataOptions, ModelOptions, OptimizationOptions, ParallelOptions, RunOptions, TaskOptions]
    assert (cfg.data.dataset, cfg.model.name, cfg.model.layers, cfg.model.hidden) == ("cora", "gat", 4, 32)
    assert (cfg.optimization.lr, cfg.parallel.mode, cfg.parallel.nprocs, cfg.run.out) == (0.05, "graph", 2, "runs/x")
    assert cfg.parallel.mesh.graph_ways == 2
    assert TrainConfig() == TrainConfig.of()  # the defaults, either way


def test_options_round_trip_by_flag_name():
    cfg = TrainConfig.of(model="sage", parallel="pipeline", nprocs=2, layers=4, chunks=4, seed=3)
    flat = cfg.options()
    assert flat["model"] == "sage" and flat["parallel"] == "pipeline" and "name" not in flat and "mode" not in flat
    assert list(flat) == TrainConfig.field_names() == [o.name for o in options_of(TrainConfig)]
    assert TrainConfig.of(**flat) == cfg
    changed = cfg.with_options(seed=4)
    assert changed.optimization.seed == 4 and cfg.optimization.seed == 3  # a copy
    with pytest.raises(InputError, match=r"expected --chunks >= the number of stages 2"):
        cfg.with_options(chunks=1, nprocs=2)  # validated anew


def test_an_unknown_option_or_a_section_of_the_wrong_type_is_refused():
    with pytest.raises(InputError, match="unknown option 'name'.*expected one of .*model"):
        TrainConfig.of(name="gcn")  # the field's name is not an option: --model is
    with pytest.raises(InputError, match="expected the model section to be a ModelOptions .got DataOptions"):
        TrainConfig(model=DataOptions())


def test_each_section_checks_its_own_options():
    with pytest.raises(InputError, match=r"expected layers >= 2 \(got 1\)"):
        ModelOptions(layers=1)
    with pytest.raises(InputError, match=r"expected model to be one of appnp, gat, gcn, gcnii, gin, hgt, resgcn\+, rgcn, sage, or a builder"):
        ModelOptions(name="mlp")  # the option's name in the message, its choices from the model registry
    with pytest.raises(InputError, match="expected lr > 0"):
        OptimizationOptions(lr=0.0)
    with pytest.raises(InputError, match="expected parallel to be one of single, graph"):
        ParallelOptions(mode="data")
    with pytest.raises(InputError, match="expected checkpoint_every 0 without --out"):
        RunOptions(checkpoint_every=5)
    with pytest.raises(InputError, match="expected split to be a int .got str"):
        DataOptions(split="0")
    assert OptimizationOptions(lr=1).lr == 1.0 and isinstance(OptimizationOptions(lr=1).lr, float)


def test_rules_that_join_sections_are_checked_by_the_whole():
    model, parallel = ModelOptions(layers=2), ParallelOptions(mode="pipeline", nprocs=4)  # each fine alone
    with pytest.raises(InputError, match="expected at most one stage per layer .got 4 stages for 2 layers"):
        TrainConfig(model=model, parallel=parallel)
    with pytest.raises(InputError, match="expected a model whose aggregation is one sparse product"):
        TrainConfig(model=ModelOptions(name="gat"), parallel=ParallelOptions(mode="spmm-1d", nprocs=2))
    with pytest.raises(InputError, match="expected --norm layer .or none. with --parallel hybrid of 1 stage and"):
        TrainConfig(model=ModelOptions(norm="batch"), parallel=ParallelOptions(mode="hybrid", nprocs=2, stages=1))
    # a pipeline of two stages: one chunk is what batch statistics need, two what the stages need
    for chunks in (0, 1):
        with pytest.raises(InputError, match="expected --norm layer .or none. with --parallel pipeline of 2 stages"):
            TrainConfig(model=ModelOptions(norm="batch"), parallel=ParallelOptions(mode="pipeline", nprocs=2,
                                                                                   chunks=chunks))
    TrainConfig(model=ModelOptions(norm="batch"), parallel=ParallelOptions(mode="hybrid", nprocs=2, stages=1, chunks=1))


def test_the_options_the_launcher_sets_are_hidden_and_renamed_fields_keep_their_flags():
    by_name = {o.name: o for o in options_of(TrainConfig)}
    assert (by_name["model"].section, by_name["model"].attr) == ("model", "name")
    assert (by_name["parallel"].section, by_name["parallel"].attr) == ("parallel", "mode")
    assert by_name["chunk_file"].hidden and not by_name["partition_dir"].hidden
    assert by_name["model"].flag == "--model" and by_name["metis_sample"].flag == "--metis-sample"
