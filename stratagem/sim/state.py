"""What the pieces of one simulation share: the cost model, the strategy being simulated, the edges,
and which tasks each op and edge has in the task graph.

Task producers (`sim.producers`) fill `op_tasks` and `edge_tasks`; memory accounting
(`sim.lifetimes`) reads them to say when each buffer lives; the Simulation (`sim.builder`)
orchestrates both, full and delta. Every structural fact (views, what ops keep for backward,
positions) is computed once here.
"""

from __future__ import annotations

from collections.abc import Mapping

from stratagem.cost.edgecost import is_weight_edge
from stratagem.cost.memory import saved_tensors
from stratagem.sim.keys import structural_key
from stratagem.sim.taskgraph import TaskGraph
from stratagem.space import Configuration, Edge, check_reuse


class SimState:
    def __init__(self, model, strategy: Mapping[str, Configuration], reuse: Mapping[Edge, str]):
        self.model, self.graph = model, model.graph
        self.strategy = dict(strategy)          # per op; delta simulation edits it
        self.reuse = dict(reuse)
        self.position = {op.name: i for i, op in enumerate(self.graph.ops)}
        self.viewed = model.viewed_inputs
        self.saved = {op.name: frozenset(saved_tensors(self.graph, op)) for op in self.graph.ops}
        self.edges = model.edges()
        self._same_layout: dict[int, tuple] = {}
        check_reuse(self.edges, self.reuse)
        self.edges_of: dict[str, list[int]] = {}
        for k, e in enumerate(self.edges):
            for end in (e.src_op, e.dst_op):
                if end is not None:
                    self.edges_of.setdefault(end, []).append(k)
        self.tasks = TaskGraph(model.cluster)
        self.op_tasks: dict[str, dict[str, list[int]]] = {}     # op -> {"F", "B", "U", "sync"} -> tasks
        self.edge_tasks: dict[int, dict[str, list[int]]] = {}   # edge -> {"fwd", "bwd"} -> step tasks

    def previous_on(self, name: str, device: int) -> str | None:
        """The op before `name` in program order (graph order) that runs on `device`, or None."""
        ops = self.graph.ops
        for i in range(self.position[name] - 1, -1, -1):
            if device in self.strategy[ops[i].name].devices:
                return ops[i].name
        return None

    def next_on(self, name: str, device: int) -> str | None:
        """The op after `name` in program order that runs on `device`, or None."""
        ops = self.graph.ops
        for i in range(self.position[name] + 1, len(ops)):
            if device in self.strategy[ops[i].name].devices:
                return ops[i].name
        return None

    def neighbours(self, name: str, step: int) -> list[tuple[str, range]]:
        """The op before (step -1) or after (step +1) `name` in program order on each of its
        devices, as (that op, the devices of `name` on which it is the one) pieces; devices with
        none are left out. `previous_on` / `next_on` for all of name's devices at once."""
        ops, strategy = self.graph.ops, self.strategy
        left, found = [strategy[name].devices], []
        i = self.position[name] + step
        while left and 0 <= i < len(ops):
            other = strategy[ops[i].name].devices
            rest = []
            for piece in left:
                lo, hi = max(piece.start, other.start), min(piece.stop, other.stop)
                if lo >= hi:
                    rest.append(piece)
                    continue
                found.append((ops[i].name, range(lo, hi)))
                rest += [r for r in (range(piece.start, lo), range(hi, piece.stop)) if len(r)]
            left = rest
            i += step
        return found

    def turn_of(self, name: str) -> list[int]:
        """The tasks after which each device of `name`'s configuration reaches name's turn in
        forward: F(r, d) of the op r before it there (the runtime, a sequential interpreter, moves
        an op's inputs right before running it)."""
        found = []
        for before, devices in self.neighbours(name, -1):
            tasks, first = self.op_tasks[before]["F"], self.strategy[before].devices.start
            found += tasks[devices.start - first: devices.stop - first]
        return found

    def on_device(self, name: str, device: int) -> list[int]:
        """[i] when `device` is the i-th of `name`'s devices (its tasks' index there), else []."""
        devices = self.strategy[name].devices
        return [device - devices.start] if device in devices else []

    def key(self, phase: int, op: str, slot: int, sub: int) -> int:
        return structural_key(phase, self.position[op], len(self.graph.ops), slot, sub)

    def keys(self, phase: int, op: str, slot: int, subs: range) -> range:
        """`key` for each sub-key of `subs` (a device range), at once."""
        if not subs:
            return range(0)
        base = self.key(phase, op, slot, subs[0])
        self.key(phase, op, slot, subs[-1])          # refuses a sub-key past its bits
        return range(base, base + len(subs))

    def edge_cost(self, k: int):
        return self.model.edge_cost_in(self.edges[k], self.strategy, self.reuse)

    def is_weight_edge(self, k: int) -> bool:
        e = self.edges[k]
        return is_weight_edge(self.graph, e.tensor, e.src_op)

    def same_layout(self, k: int) -> bool:
        """The consumer reads the producer's shard as it is (no copy, no slice); kept per edge
        with the two configurations it was found for (delta simulation changes them)."""
        e = self.edges[k]
        configs = (self.strategy[e.src_op], self.strategy[e.dst_op])
        found = self._same_layout.get(k)
        if found is None or found[0] != configs:
            index = self.graph.op(e.dst_op).inputs.index(e.tensor)
            same = (self.model.layouts.output_layout(e.src_op, configs[0])
                    == self.model.input_layout(e.dst_op, configs[1], index))
            found = self._same_layout[k] = (configs, same)
        return found[1]
