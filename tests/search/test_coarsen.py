"""Coarsening (Tofu §5.1): which op a follower follows when its inputs broadcast."""

from __future__ import annotations

from stratagem.ir import Graph, Op, Role, TensorSpec
from stratagem.search.coarsen import coarsen


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
