"""Repeated structure: groups whose cost tables are equal, found so that they are built once
(a transformer's blocks, an unrolled RNN's steps).

    signature(g) = its configurations, and per member (in group order) what the cost model reads
                   about it: its analysis key (kind, attributes, shapes, weights, sample dims);
                   per input and output, the tensor's dtype, role, whether it needs a gradient,
                   whether some op keeps it, whether another consumer keeps it, how many read it,
                   where it comes from (a member of the group by position, the data loader, a
                   weight it owns or not, an op outside); what it saves (also as captured, when
                   its block recomputes), which input its output views, whether it is recomputed or offloaded;
                   and the group's flagged tensors (search.flags) by position
    twin(g)      = the first group with g's signature

Two groups with one signature read equal facts through equal positions, so every table
`search.space` builds for them (node memory and time, transient terms, flag memory) is equal.
`tests/search/test_repeats.py` checks it: tables built with twins equal tables built group by
group, on the zoo's tiny variants (one per family of sizes; also with sharded states and
recomputed blocks) and on gpt-125m. Tofu's steps use the signature too (`search.tofu.choices`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stratagem.cost.memory import saved_tensors
from stratagem.cost.recompute import as_captured
from stratagem.ir import Graph
from stratagem.ir.ownership import PARAMETER_ROLES, weight_owner
from stratagem.search.coarsen import Group
from stratagem.tdl.graphops import analysis_key


def twins(model, groups: Sequence[Group], configs: Sequence[tuple], flags: Sequence[tuple]) -> tuple[int, ...]:
    """Per group, the first group whose tables equal its own (itself when none does)."""
    first: dict[tuple, int] = {}
    return tuple(first.setdefault(signature(model, group, configs[g], flags[g]), g)
                 for g, group in enumerate(groups))


def renamed(found: Mapping[str, Any], twin: Group, group: Group) -> dict[str, Any]:
    """What `twin`'s members have (by name), given to `group`'s members at the same positions."""
    return {name: found[other] for name, other in zip(group.members, twin.members)}


def signature(model, group: Group, configs: tuple, flags: tuple) -> tuple:
    graph = model.graph
    position = {name: i for i, name in enumerate(group.members)}
    members = tuple(_member(model, graph, graph.op(name), position) for name in group.members)
    flagged = tuple((position[s.producer], graph.op(s.producer).outputs.index(s.tensor),
                     tuple(sorted(position.get(q, -1) for q in s.keepers))) for s in flags)
    return group.rule, tuple(configs), members, flagged


def _member(model, graph: Graph, op, position: Mapping[str, int]) -> tuple:
    captured = as_captured(graph, op)
    saved, saved_captured = set(saved_tensors(graph, op)), set(saved_tensors(graph, captured))
    viewed = model.viewed_inputs[op.name]
    inputs = tuple(_tensor(model, graph, t, op, position) + (t in saved, t in saved_captured)
                   for t in op.inputs)
    outputs = tuple(_tensor(model, graph, t, op, position) + (t in saved, t in saved_captured)
                    for t in op.outputs)
    return (analysis_key(graph, op), inputs, outputs, op.name in model.recomputed, op.name in model.offloaded,
            None if viewed is None else op.inputs.index(viewed))


def _tensor(model, graph: Graph, tensor: str, reader, position: Mapping[str, int]) -> tuple:
    spec = graph.tensors[tensor]
    producer = graph.producer.get(tensor)
    if producer is not None:
        source = ("member", position[producer.name], producer.outputs.index(tensor)) \
            if producer.name in position else ("outside", analysis_key(graph, producer))
    elif spec.role in PARAMETER_ROLES:
        owner = weight_owner(graph, tensor)
        source = ("weight", owner == reader.name, position.get(owner, -1))
    else:
        source = ("loader",)
    consumers = graph.consumers.get(tensor, ())
    keepers = tuple(sorted(position.get(q.name, -1) for q in consumers
                           if q.name != reader.name and tensor in saved_tensors(graph, q)))
    return (spec.shape, spec.dtype, spec.role, spec.sample_dim, tensor in graph.requires_grad,
            tensor in model.kept_tensors, len(consumers), keepers, source)


__all__ = ["renamed", "signature", "twins"]
