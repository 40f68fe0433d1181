"""One training iteration under a strategy, simulated (FlexFlow §5), full and delta.

The simulator in parts, each with a small interface:
    sim.taskgraph   the task graph (tasks, their resources and what reports need of them)
    sim.producers   the tasks of each op and edge (FlexFlow §5.1's task graph), added and removed
    sim.lifetimes   the buffers each op and edge holds and between which tasks (memory accounting)
    sim.keys        the structural keys that break ties in ready time
    sim.store, sim.engine  the task arrays and Algorithms 1 and 2 (full and delta simulation)
    sim.memory      the peak of the buffers over the timeline
    sim.ranks       classes of devices a strategy treats alike (one simulated rank each, exactly)
Simulation builds the state (`sim.state.SimState`), asks the producers for every op's and edge's
tasks, then the lifetimes for every buffer, and runs the engine.

`Simulation.change(op, config)` replaces only that op's tasks and those of its edges, asks again the
buffers whose lives that can move (`lifetimes.touched_by`), and runs the delta simulation (FlexFlow
§5.3); `run()` simulates the whole graph. Both give the same timeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from stratagem.collection import fewer_collections
from stratagem.heap import keep_freed_memory
from stratagem.errors import StratagemError
from stratagem.sim import lifetimes, producers
from stratagem.sim.memory import (
    BufferSet, live_bytes_by_set, merged_with_owners, peak_memory, peak_memory_and_instants, spliced,
)
from stratagem.sim.ranks import DeviceClasses, PartClass, classes_of
from stratagem.sim.state import SimState
from stratagem.sim.trace import TraceTask, chrome_trace
from stratagem.space import Configuration, Strategy, check_strategy, reuse_of


@dataclass(frozen=True)
class PeakBreakdown:
    """Where and when the peak memory is reached, and what is held then."""
    device: int
    peak_bytes: float
    time_s: float
    running: str                                  # the task on the device then (or next)
    holders: tuple[tuple[str, float], ...]        # (op or edge, bytes it holds there), largest first


@dataclass(frozen=True)
class SimulationResult:
    iteration_time_s: float
    peak_memory_bytes: float
    peak_memory_per_device: tuple[float, ...]
    compute_time_s: float                 # busiest device's compute
    communication_time_s: float           # sum of communication task durations
    communication_bytes: float            # bytes moved by all communication steps
    utilization: tuple[float, ...]        # per device: compute busy time / iteration time
    num_tasks: int                        # the iteration's tasks (a compute task per device)
    trace_tasks: tuple[TraceTask, ...] = field(default=(), repr=False)     # these three: with a trace only
    resource_names: tuple[str, ...] = field(default=(), repr=False)
    resource_groups: tuple[str, ...] = field(default=(), repr=False)
    simulated_tasks: int | None = None    # the tasks simulated: fewer with representative ranks (sim.ranks)

    def chrome_trace(self) -> dict:
        return chrome_trace(self.trace_tasks, self.resource_names, self.resource_groups)


class Simulation:
    """One iteration of `strategy`, simulated. `representative`: one rank per class of devices the
    strategy treats alike (sim.ranks; the same times, peaks and busy times, with a task per class
    instead of per device), falling back to every device where a step holds part of a class; such
    a simulation gives no per-device trace and takes no delta edits."""

    def __init__(self, model, strategy: Strategy | Mapping[str, Configuration], representative: bool = False):
        check_strategy(model.graph, strategy)
        keep_freed_memory()
        self.model, self.graph, self.cluster = model, model.graph, model.cluster
        self.num_devices = self.cluster.num_devices
        classes = classes_of((c.devices for c in strategy.values()), self.num_devices) if representative else None
        try:
            self._build(strategy, classes)
        except PartClass:
            self._build(strategy, None)
        self.representative = not self.state.classes.every

    def _build(self, strategy, classes: DeviceClasses | None) -> None:
        self.state = SimState(self.model, strategy, reuse_of(strategy), classes)
        self.op_buffers: dict[str, BufferSet] = {}
        self.edge_buffers: dict[int, BufferSet] = {}
        self._simulated = False
        with fewer_collections():
            for op in self.graph.ops:
                producers.add_op(self.state, op.name)
            for k in movers_first(self.state, range(len(self.state.edges))):
                producers.add_edge(self.state, k)
            for op in self.graph.ops:
                self.op_buffers[op.name] = lifetimes.op_buffers(self.state, op.name)
            for k in range(len(self.state.edges)):
                self.edge_buffers[k] = lifetimes.edge_buffers(self.state, k)
        self._merged: tuple[BufferSet, np.ndarray] | None = None    # every holder's buffers, and rows' holders
        self._dirty: set[int] = set()                                # holders whose buffers changed since

    @property
    def store(self):
        return self.state.tasks.store

    @property
    def strategy(self) -> dict[str, Configuration]:
        return self.state.strategy

    @property
    def op_tasks(self) -> dict[str, dict[str, list[int]]]:
        return self.state.op_tasks

    def step_resources(self, step) -> np.ndarray:
        """The resources a communication step's task holds (searches bound their busy time)."""
        return self.state.tasks.step_resources(step)

    # ---- delta --------------------------------------------------------------------------------
    def change(self, op: str, config: Configuration) -> SimulationResult:
        """Give `op` a new configuration and re-simulate incrementally (FlexFlow Algorithm 2)."""
        self.edit(op, config)
        self.store.update()
        return self.result()

    def change_many(self, changes: Mapping[str, Configuration], retime: str = "delta") -> tuple[float, float]:
        """Several ops at once, then one re-timing: (iteration time, peak memory), cheaply.
        retime "delta": Algorithm 2 from the previous timeline; "full": Algorithm 1 over the
        edited task graph (the same timeline; faster when a change moves most of it)."""
        for op, config in changes.items():
            self.edit(op, config)
        if retime == "full":
            self.store.simulate()
        else:
            self.store.update()
        return self.summary()

    def summary(self) -> tuple[float, float]:
        """(iteration_time_s, peak_memory_bytes) of the current timeline, without the rest of
        `result()` (utilization, communication totals): what a search needs per proposal."""
        return self.store.makespan(), float(self._peaks().max())

    def edit(self, op: str, config: Configuration) -> None:
        """Replace `op`'s tasks and its edges' for a new configuration, without simulating;
        the next `store.update()` (or `change`) re-simulates every edit since the last one."""
        if self.representative:
            raise StratagemError("a simulation with representative ranks takes no delta edits",
                                 expected="Simulation(model, strategy) (every device)", got="representative=True",
                                 hint="an edit can change which devices are alike; build it over every device")
        if not self._simulated:
            self.run()
        self.model.op_cost(op, config)      # validates the configuration before any edit
        state = self.state
        followers = {state.next_on(op, d) for d in set(state.strategy[op].devices) | set(config.devices)} - {None}
        rewired = list(dict.fromkeys(state.edges_of.get(op, ())))
        rewired += [k for q in followers for k in state.edges_of.get(q, ())   # their turn follows op's forward
                    if state.edges[k].dst_op == q and k not in rewired]
        rewired += [j for k in rewired for j in state.siblings.get(k, ())]   # who moves a shared tensor can change
        rewired = list(dict.fromkeys(rewired))
        edge_holder = len(self.graph.ops)
        for k in rewired:
            producers.remove_edge(state, k)
            self.edge_buffers.pop(k, None)
            self._dirty.add(edge_holder + k)
        left = set(state.strategy[op].devices) - set(config.devices)
        producers.remove_op(state, op)
        state.set_config(op, config)
        producers.add_op(state, op)
        for d in left:
            producers.bridge(state, op, d)
        for k in movers_first(state, rewired):
            producers.add_edge(state, k)
        ops, edges = lifetimes.touched_by(state, op)
        for q in followers:
            more_ops, more_edges = lifetimes.touched_by(state, q)
            ops, edges = ops | more_ops, edges | more_edges
        for name in ops:
            self.op_buffers[name] = lifetimes.op_buffers(state, name)
            self._dirty.add(state.position[name])
        for k in edges:
            self.edge_buffers[k] = lifetimes.edge_buffers(state, k)
            self._dirty.add(edge_holder + k)

    # ---- running ------------------------------------------------------------------------------
    def run(self) -> SimulationResult:
        self.store.simulate()
        self._simulated = True
        return self.result()

    def _peaks(self):
        """Peak bytes per device."""
        n = self.store.n
        classes = self.state.classes
        return classes.expand(peak_memory([self._merged_buffers()], self.store.start[:n], self.store.end[:n],
                                          classes.count))

    def _merged_buffers(self) -> BufferSet:
        """Every op's and edge's buffers as one set, ops in program order then edges (a holder's
        index: its op's position, else the number of ops plus its edge's); after delta edits,
        the changed holders' rows spliced in (`sim.memory.spliced`)."""
        edge_holder = len(self.graph.ops)
        if self._merged is None:
            holders = sorted([(self.state.position[name], found) for name, found in self.op_buffers.items()]
                             + [(edge_holder + k, found) for k, found in self.edge_buffers.items()],
                             key=lambda pair: pair[0])
            self._merged = merged_with_owners([h for h, _ in holders], [found for _, found in holders])
        elif self._dirty:
            ops = self.graph.ops
            self._merged = spliced(*self._merged, [
                (h, self.op_buffers.get(ops[h].name) if h < edge_holder else self.edge_buffers.get(h - edge_holder))
                for h in sorted(self._dirty)])
        self._dirty.clear()
        return self._merged[0]

    def peak_breakdown(self, top: int = 8) -> PeakBreakdown:
        """The busiest device's peak: its instant, the task running then, and the `top` ops and
        edges holding the most memory there (resident state included)."""
        if not self._simulated:
            self.run()
        n = self.store.n
        start, end = self.store.start[:n], self.store.end[:n]
        sets = list(self.op_buffers.values()) + list(self.edge_buffers.values())
        classes = self.state.classes
        peaks, instants = peak_memory_and_instants(sets, start, end, classes.count)
        simulated = int(np.argmax(peaks))                  # a class's first device: the first device at the peak
        instant = float(instants[simulated])
        holders = list(self.op_buffers) + list(self.edge_buffers)       # op names, then edge indices
        live = live_bytes_by_set(sets, start, end, simulated, instant)
        most = sorted(range(len(holders)), key=lambda i: -live[i])[:top]     # stable: ties in holder order
        return PeakBreakdown(classes.bounds[simulated], float(peaks[simulated]), instant,
                             self.state.tasks.running_at(simulated, instant),
                             tuple((self._holder_name(holders[i]), float(live[i])) for i in most if live[i] > 0))

    def _holder_name(self, holder: str | int) -> str:
        """An op's name, or an edge's (by its index)."""
        return holder if isinstance(holder, str) else str(self.state.edges[holder])

    def result(self, with_trace: bool = False) -> SimulationResult:
        if with_trace and self.representative:
            raise StratagemError("a simulation with representative ranks has no per-device trace",
                                 expected="Simulation(model, strategy) (every device) for a trace",
                                 got="representative=True")
        tasks = self.state.tasks
        makespan = self.store.makespan()
        peaks = self._peaks()
        busy, comm_time, comm_bytes = tasks.totals()
        busy = self.state.classes.expand(busy)
        utilization = tuple(float(b / makespan) if makespan else 0.0 for b in busy)
        trace = tuple(tasks.trace_tasks()) if with_trace else ()
        names, groups = (tasks.resource_names(), tasks.resource_groups()) if with_trace else ((), ())
        return SimulationResult(makespan, float(peaks.max()), tuple(float(p) for p in peaks),
                                float(busy.max()), comm_time, comm_bytes, utilization, tasks.represented(),
                                trace, names, groups, simulated_tasks=len(self.store.live))


def movers_first(state: SimState, edges) -> list[int]:
    """`edges` with those that move a tensor (`SimState.mover_of`) before those that read their copy."""
    edges = list(edges)
    moving = [state.mover_of(k) == k for k in edges]
    return [k for k, m in zip(edges, moving) if m] + [k for k, m in zip(edges, moving) if not m]


def simulate(model, strategy: Mapping[str, Configuration], with_trace: bool = False) -> SimulationResult:
    sim = Simulation(model, strategy, representative=not with_trace)
    sim.run()
    return sim.result(with_trace)
