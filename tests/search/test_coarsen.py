"""Coarsening (Tofu §5.1): which op a follower follows when its inputs broadcast, and how a follower
of a partial sum is laid out (all-reduced, or reduce-scattered into a split)."""

from __future__ import annotations

from dataclasses import replace

from stratagem.cost.model import CostModel
from stratagem.ir import Graph, Op, Role, TensorSpec
from stratagem.search.coarsen import Group, coarsen
from stratagem.search.space import FT_SPACE, group_variants, member_configs
from stratagem.space import Configuration, Level, Partial, Shard
from tests.search.graphs import residual
from tests.search.oracle import (
    assert_ft_finds_the_exact_frontier, build_uncapped_space, checked_strategies, space_assignments,
)


def group_of(graph: Graph) -> dict[str, str]:
    return {member: group.anchor for group in coarsen(graph) for member in group.members}


def test_an_add_of_a_broadcast_table_follows_the_full_shaped_input():
    """x + pos[:T]: the positional table is produced later but broadcasts; following it would keep
    the add (and everything after it) from ever splitting the batch."""
    tensors = [TensorSpec("x", (8, 4, 6), role=Role.INPUT, sample_dim=0),
               TensorSpec("w", (6, 6), role=Role.WEIGHT),
               TensorSpec("h", (8, 4, 6), sample_dim=0),
               TensorSpec("pos", (4, 6), role=Role.INPUT),
               TensorSpec("p", (4, 6)),
               TensorSpec("y", (8, 4, 6), sample_dim=0)]
    ops = [Op("proj", "linear", ("x", "w"), ("h",)), Op("table", "neg", ("pos",), ("p",)),
           Op("add", "add", ("h", "p"), ("y",))]
    groups = group_of(Graph.build("pos", tensors, ops, ["y"]))
    assert groups["add"] == "proj" and groups["table"] == "table"


def test_an_op_whose_inputs_all_broadcast_leads_its_own_group():
    """T5's masked_fill(bias[1, H, L, S], mask[B, 1, L, S]) -> [B, H, L, S]: neither input has the
    output's partition, so the op chooses its own (it followed the mask's replicated group and held
    a full [B, H, L, S] copy on every device)."""
    tensors = [TensorSpec("b", (1, 2, 4, 4), role=Role.INPUT),
               TensorSpec("nb", (1, 2, 4, 4)),
               TensorSpec("m", (8, 1, 4, 4), "bool", Role.INPUT, 0),
               TensorSpec("nm", (8, 1, 4, 4), "bool", sample_dim=0),
               TensorSpec("out", (8, 2, 4, 4), sample_dim=0),
               TensorSpec("y", (8, 2, 4, 4), sample_dim=0)]
    ops = [Op("bias", "neg", ("b",), ("nb",)), Op("mask", "logical_not", ("m",), ("nm",)),
           Op("fill", "masked_fill", ("nb", "nm"), ("out",), {"value": -1.0}),
           Op("after", "relu", ("out",), ("y",))]
    groups = group_of(Graph.build("masks", tensors, ops, ["y"]))
    assert groups["fill"] == "fill" and groups["after"] == "fill"


def row_parallel(devices: int) -> tuple[CostModel, Group]:
    """A linear whose output a residual add and a relu follow (one group)."""
    tensors = [TensorSpec("x", (8, 4, 6), role=Role.INPUT, sample_dim=0),
               TensorSpec("r", (8, 4, 6), role=Role.INPUT, sample_dim=0),
               TensorSpec("w", (6, 6), role=Role.WEIGHT),
               TensorSpec("h", (8, 4, 6), sample_dim=0),
               TensorSpec("s", (8, 4, 6), sample_dim=0),
               TensorSpec("y", (8, 4, 6), sample_dim=0)]
    ops = [Op("proj", "linear", ("x", "w"), ("h",)), Op("add", "add", ("h", "r"), ("s",)),
           Op("act", "relu", ("s",), ("y",))]
    model = CostModel(Graph.build("row", tensors, ops, ["y"]), f"cpu-1x{devices}", num_devices=devices)
    (group,) = coarsen(model.graph, model.analyses)
    return model, group


def reduction(model: CostModel) -> str:
    return next(d.name for d in model.analyses["proj"].dims if d.is_reduction)


def test_a_partial_sum_is_all_reduced_or_reduce_scattered_into_the_outermost_free_index():
    model, group = row_parallel(4)
    k = reduction(model)
    split_k = Configuration((Level(k, 4),))
    plain = member_configs(model, group, [split_k])
    scattered = member_configs(model, group, [split_k], scatter=True)
    assert plain["add"] == (Configuration((Level(None, 4),)),)
    assert scattered["add"] == scattered["act"] == (Configuration((Level("d0", 4),)),)
    # the batch already split over the first axis: the partial axis takes the next index
    batch_then_k = Configuration((Level("b", 2), Level(k, 2)))
    (after,) = member_configs(model, group, [batch_then_k], scatter=True)["add"]
    assert after == Configuration((Level("d0", 2), Level("d1", 2)))
    assert model.layout("add", after).inputs[0] == (Shard(0), Shard(1))


def test_the_group_offers_both_only_where_a_follower_reads_a_partial_sum():
    model, group = row_parallel(4)
    anchors = (Configuration((Level("b", 4),)), Configuration((Level(reduction(model), 4),)))
    configs, members = group_variants(model, group, anchors, scatter=True)
    assert configs == (anchors[0], anchors[1], anchors[1])
    assert members["add"][1] != members["add"][2] and members["act"][2] == members["add"][2]


def scatters(model: CostModel, strategy) -> bool:
    """fcb's output is a partial sum and the add reading it splits."""
    return any(isinstance(p, Partial) for p in model.layout("fcb", strategy["fcb"]).outputs) \
        and bool(strategy["add"].degrees)


def test_ft_over_scattering_groups_is_exact():
    """FT's frontier over groups that also scatter their partial sums equals brute force over every
    strategy of that space (the cost model's exact peak and time), and the space is larger than the
    one without: x -> fca, x -> fcb, add(fca, fcb) follows fcb, fcc reads the sum."""
    model = CostModel(residual(64, 256), "v100-2x8", num_devices=2)
    plain = build_uncapped_space(model, options=FT_SPACE)
    space = build_uncapped_space(model, options=replace(FT_SPACE, scatter_partial_sums=True))
    assert sum(map(len, space.configs)) > sum(map(len, plain.configs))
    strategies = [strategy for strategy, _ in checked_strategies(model, space)]
    assert any(scatters(model, strategy) for strategy in strategies)
    assert_ft_finds_the_exact_frontier(model, space, (base for base, _ in space_assignments(space)))
