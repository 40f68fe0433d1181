"""Tofu §7.3's heuristic partitioners, on stratagem's cost model (Tofu Fig. 10's baselines).

Every op splits over all workers without replication (Tofu's space). An op's choice is priced as
its own time plus the re-scheduling of the edges to the neighbours it is weighed against:

    AllRow-Greedy   every tensor is partitioned along its first dim; each op, in graph order, takes
                    the configuration that costs least given that its producers and consumers hold
                    their tensors split on dim 0 (each neighbour at its dim-0 configuration)
                                                                                   `allrow_greedy`
    Spartan-like    tensors largest first: the ops incident to the largest tensor choose first,
                    each given the choices already made (undecided neighbours cost nothing), then
                    those of the next largest tensor, and so on (Spartan, Huang et al. 2015)
                                                                                   `largest_first`
"""

from __future__ import annotations

from collections.abc import Mapping

from stratagem.space import Configuration, Level, SpaceOptions

TOFU_SPACE = SpaceOptions(allow_fewer_devices=False, allow_replicate=False, max_axes=3)


def _choices(model, op: str) -> tuple[Configuration, ...]:
    found = model.configurations(op, TOFU_SPACE)
    return found or model.configurations(op, SpaceOptions(allow_fewer_devices=False, max_axes=1))


def _edges_by_op(model) -> dict[str, list]:
    out: dict[str, list] = {}
    for edge in model.edges():
        for end in (edge.src_op, edge.dst_op):
            if end is not None:
                out.setdefault(end, []).append(edge)
    return out


def _price(model, op: str, config: Configuration, edges, neighbours: Mapping[str, Configuration]) -> float:
    total = model.op_cost(op, config).time_s
    for e in edges:
        if e.src_op == op and e.dst_op in neighbours:
            total += model.edge_cost(e.tensor, op, config, e.dst_op, neighbours[e.dst_op]).time_s
        elif e.dst_op == op and (e.src_op is None or e.src_op in neighbours):
            src = neighbours.get(e.src_op) if e.src_op else None
            total += model.edge_cost(e.tensor, e.src_op, src, op, config).time_s
    return total


def _best(model, op: str, edges, neighbours) -> Configuration:
    return min(_choices(model, op), key=lambda c: _price(model, op, c, edges, neighbours))


def dim0_config(model, op: str) -> Configuration:
    """The op split on its output's first dim over every device, if it can be; else its first choice."""
    analysis = model.analyses[op]
    for d in analysis.dims:
        if analysis.output_dim_index(d.name) == 0:
            config = Configuration((Level(d.name, model.num_devices),))
            if config in set(_choices(model, op)):
                return config
    return _choices(model, op)[0]


def allrow_greedy(model) -> dict[str, Configuration]:
    rows = {op.name: dim0_config(model, op.name) for op in model.graph.ops}
    edges = _edges_by_op(model)
    return {op.name: _best(model, op.name, edges.get(op.name, ()), rows) for op in model.graph.ops}


def largest_first(model) -> dict[str, Configuration]:
    graph = model.graph
    size = {name: spec.num_bytes for name, spec in graph.tensors.items()}
    incident: dict[str, list[str]] = {}
    for op in graph.ops:
        for t in (*op.inputs, *op.outputs):
            incident.setdefault(t, []).append(op.name)
    edges = _edges_by_op(model)
    decided: dict[str, Configuration] = {}
    for tensor in sorted(incident, key=lambda t: -size[t]):
        for op in incident[tensor]:
            if op not in decided:
                decided[op] = _best(model, op, edges.get(op, ()), decided)
    return decided

