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
from stratagem.cost.shared_moves import families, mover, target_layout
from stratagem.sim.keys import structural_key
from stratagem.sim.ranks import DeviceClasses, every_device
from stratagem.sim.taskgraph import TaskGraph
from stratagem.space import Configuration, Edge, check_reuse, pipeline_of, stage_ops


class SimState:
    def __init__(self, model, strategy: Mapping[str, Configuration], reuse: Mapping[Edge, str],
                 classes: DeviceClasses | None = None):
        self.model, self.graph = model, model.graph
        self.strategy = dict(strategy)          # per op; delta simulation edits it
        # the simulated "devices": classes of devices (sim.ranks), by default every device its own
        self.classes = classes or every_device(model.cluster.num_devices)
        self._devices = {op: self.classes.of_range(config.devices) for op, config in self.strategy.items()}
        self.reuse = dict(reuse)
        self.position = {op.name: i for i, op in enumerate(self.graph.ops)}
        self.viewed = model.viewed_inputs
        self.saved = model.saved_by_op
        # offloaded blocks (cost.activation_offload): each op's last op of its block, what it sends
        self.offload_from: Mapping[str, str] = self.graph.meta.get("offload_from", {})
        self.offload_saved: Mapping[str, tuple[str, ...]] = self.graph.meta.get("offload_saved", {})
        self.offload_blocks: Mapping[str, tuple[str, ...]] = self.graph.meta.get("offload_blocks", {})   # by last op
        # with pipeline stages, an offloaded op's reload also waits for the backward of the next
        # stage's first op (its stage's gradients are there), and the reverse
        self.reloads_wait_for, self.waiting_reloads = _reloads_across_cuts(self.graph, strategy, self.offload_from)
        self.edges = model.edges()
        self._same_layout: dict[int, tuple] = {}
        self.siblings = families(model)       # edges of one tensor from one producer (cost.shared_moves)
        check_reuse(self.edges, self.reuse)
        self.edges_of = model.edges_of
        self.tasks = TaskGraph(model.cluster, self.classes)
        self.op_tasks: dict[str, dict[str, list[int]]] = {}     # op -> {"F", "B", "U", "sync"} -> tasks
        self.edge_tasks: dict[int, dict[str, list[int]]] = {}   # edge -> {"fwd", "bwd"} -> step tasks

    def devices_of(self, name: str) -> range:
        """The simulated devices of `name`'s configuration: its devices, or the classes of devices
        they are made of (sim.ranks)."""
        return self._devices[name]

    def set_config(self, name: str, config: Configuration) -> None:
        """Give `name` another configuration (delta simulation; its tasks are made again)."""
        self.strategy[name] = config
        self._devices[name] = self.classes.of_range(config.devices)

    def previous_on(self, name: str, device: int) -> str | None:
        """The op before `name` in program order (graph order) that runs on `device`, or None."""
        ops = self.graph.ops
        for i in range(self.position[name] - 1, -1, -1):
            if device in self.devices_of(ops[i].name):
                return ops[i].name
        return None

    def next_on(self, name: str, device: int) -> str | None:
        """The op after `name` in program order that runs on `device`, or None."""
        ops = self.graph.ops
        for i in range(self.position[name] + 1, len(ops)):
            if device in self.devices_of(ops[i].name):
                return ops[i].name
        return None

    def neighbours(self, name: str, step: int) -> list[tuple[str, range]]:
        """The op before (step -1) or after (step +1) `name` in program order on each of its
        devices, as (that op, the devices of `name` on which it is the one) pieces; devices with
        none are left out. `previous_on` / `next_on` for all of name's devices at once."""
        ops = self.graph.ops
        left, found = [self.devices_of(name)], []
        i = self.position[name] + step
        while left and 0 <= i < len(ops):
            other = self.devices_of(ops[i].name)
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
            tasks, first = self.op_tasks[before]["F"], self.devices_of(before).start
            found += tasks[devices.start - first: devices.stop - first]
        return found

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

    def mover_of(self, k: int) -> int:
        """The edge whose move edge k's consumer reads (cost.shared_moves: the runtime moves a
        tensor into a layout once, for its first reader): k itself, or an earlier reader's."""
        return mover(self.model, self.strategy, k, self.siblings.get(k), self.position,
                     lambda j: bool(self.edge_cost(j).forward_steps))

    def moved_with(self, k: int) -> list[int]:
        """The edges reading edge k's move (`mover_of`): k first, then the others by index."""
        return [k] + [j for j in self.siblings.get(k, ()) if self.mover_of(j) == k]

    def target_layout(self, k: int):
        """The layout edge k's consumer reads its tensor in."""
        return target_layout(self.model, self.edges[k], self.strategy)

    def same_layout(self, k: int) -> bool:
        """The consumer reads the producer's shard as it is (no copy, no slice); kept per edge
        with the two configurations it was found for (delta simulation changes them)."""
        e = self.edges[k]
        configs = (self.strategy[e.src_op], self.strategy[e.dst_op])
        found = self._same_layout.get(k)
        if found is None or found[0] != configs:
            same = self.model.layouts.output_layout(e.src_op, configs[0]) == self.target_layout(k)
            found = self._same_layout[k] = (configs, same)
        return found[1]


def _reloads_across_cuts(graph, strategy: Mapping[str, Configuration], offload_from: Mapping[str, str]
                         ) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """In a plan with stages, each offloaded op of stage s < p - 1 against the first op of stage
    s + 1: backward reaches the end of stage s when that op's backward is done (the gradients
    crossing the cut come from there), whatever runs after the block on the op's own devices
    (nothing, for a stage's last block). Both directions: op -> that first op, first op -> ops."""
    pipe = pipeline_of(strategy)
    if pipe is None or not offload_from:
        return {}, {}
    stages = stage_ops(graph, pipe)
    waits: dict[str, str] = {}
    for ops, after in zip(stages, stages[1:]):
        waits.update({op: after[0] for op in ops if op in offload_from})
    waiting: dict[str, list[str]] = {}
    for op, first in waits.items():
        waiting.setdefault(first, []).append(op)
    return waits, {first: tuple(ops) for first, ops in waiting.items()}
