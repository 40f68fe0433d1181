"""Task graph of one training iteration under a strategy (FlexFlow §5.1), full and delta.

Resources: every device d is resource d; every link l of the cluster is resource N + l, so
computation and communication overlap where dependencies allow (FlexFlow: links are devices).

For an op o at topological position i, configuration c, costs oc = model.op_cost(o, c):
    F(o, d), B(o, d), U(o, d) for each device d of c: forward, backward, update (oc's times)
    sync steps (oc.sync): one task per step on the links its groups use, after every B(o, .),
        before U(o, .); also after the gradients of o's weights that other ops read came back
For each edge e = (tensor t, producer p or the data loader or the weight's owner, consumer q):
    forward steps (model.edge_cost(...).forward_steps): a chain of tasks after every F(p, .)
        (none for inputs and weights), before F(q, d); with no steps F(q, d) follows F(p, d)
    backward steps: a chain after every B(q, .), before B(p, d) (for a weight: before p's sync)
Structural keys (`_key`) increase along every dependency: phase (forward, backward, update),
then op position (backward reversed), then slot (steps before compute, sync after).

Memory buffers (`stratagem.sim.memory`): weights, gradients and optimizer state are resident; each
output shard lives from F(p, d) until its last use on d: its forward readers, and the backward of
p or of a consumer reading the same buffer if they keep it for backward (`saved_tensors`); a
re-scheduled copy lives from its first step until the consumer's forward, or its backward if the
consumer keeps it (unless the reuse option is keep_before); step scratch lives while steps run.
A view (`stratagem.sim.aliases`) has no buffer: the one it reads lives on for the view's users.
Gradients of activations are not counted (transient, at most a few layers' worth).

`Simulation.change(op, config)` replaces only that op's tasks and those of its edges and runs the
delta simulation (FlexFlow §5.3); `run()` simulates the whole graph. Both give the same timeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from stratagem.cost.memory import saved_tensors
from stratagem.ir import dtype_bytes
from stratagem.sim.aliases import viewed_input
from stratagem.sim.memory import Buffer, BufferSet, peak_memory
from stratagem.sim.store import TaskStore
from stratagem.sim.trace import TraceTask, chrome_trace
from stratagem.space import Configuration, Strategy, check_reuse, check_strategy, reuse_of

FORWARD, BACKWARD, UPDATE = 0, 1, 2
CATEGORIES = ("forward", "backward", "update", "sync", "reschedule")
COMPUTE = 3          # categories below this index run on devices
SLOT_STEPS, SLOT_COMPUTE, SLOT_BACKWARD_STEPS, SLOT_SYNC = 1, 2, 3, 4
_SUB = 1 << 20


@dataclass(frozen=True)
class SimulationResult:
    iteration_time_s: float
    peak_memory_bytes: float
    peak_memory_per_device: tuple[float, ...]
    compute_time_s: float                 # busiest device's compute
    communication_time_s: float           # sum of communication task durations
    communication_bytes: float            # bytes moved by all communication steps
    utilization: tuple[float, ...]        # per device: compute busy time / iteration time
    num_tasks: int
    trace_tasks: tuple[TraceTask, ...] = field(default=(), repr=False)
    resource_names: tuple[str, ...] = field(default=(), repr=False)
    resource_groups: tuple[str, ...] = field(default=(), repr=False)

    def chrome_trace(self) -> dict:
        return chrome_trace(self.trace_tasks, self.resource_names, self.resource_groups)


@dataclass
class _Meta:
    label: str
    category: str
    op: str
    num_bytes: float = 0.0


class Simulation:
    def __init__(self, model, strategy: Strategy | Mapping[str, Configuration]):
        self.model, self.graph, self.cluster = model, model.graph, model.cluster
        check_strategy(self.graph, strategy)
        self.strategy = dict(strategy)          # per op; change() edits it
        self.reuse = dict(reuse_of(strategy))
        self.num_devices = self.cluster.num_devices
        self.num_resources = self.num_devices + len(self.cluster.links)
        self.position = {op.name: i for i, op in enumerate(self.graph.ops)}
        self.viewed = {op.name: viewed_input(self.graph, op) for op in self.graph.ops}   # structural
        self.saved = {op.name: frozenset(saved_tensors(self.graph, op)) for op in self.graph.ops}
        self.edges = self.model.edges()
        check_reuse(self.edges, self.reuse)
        self.edges_of: dict[str, list[int]] = {}
        for k, e in enumerate(self.edges):
            for end in (e.src_op, e.dst_op):
                if end is not None:
                    self.edges_of.setdefault(end, []).append(k)
        self.store = TaskStore(self.num_resources)
        self.meta: dict[int, _Meta] = {}
        self.op_tasks: dict[str, dict[str, list[int]]] = {}
        self.edge_tasks: dict[int, dict[str, list[int]]] = {}
        self.op_buffers: dict[str, BufferSet] = {}
        self.edge_buffers: dict[int, BufferSet] = {}
        self._category = np.zeros(1024, dtype=np.int8)     # per task: index into CATEGORIES
        self._device = np.zeros(1024, dtype=np.int64)      # per task: its device (compute tasks)
        self._bytes = np.zeros(1024)                       # per task: bytes moved (communication)
        self._links: dict[tuple, tuple[int, ...]] = {}
        self._simulated = False
        for op in self.graph.ops:
            self._add_op(op.name)
        for k in range(len(self.edges)):
            self._add_edge(k)
        for op in self.graph.ops:
            self._add_buffers(op.name)
        for k in range(len(self.edges)):
            self._add_edge_buffers(k)

    # ---- keys and resources -------------------------------------------------------------------
    def _key(self, phase: int, op: str, slot: int, sub: int) -> float:
        n = len(self.graph.ops)
        pos = self.position[op]
        pos = n - 1 - pos if phase == BACKWARD else pos
        return float(((phase * (n + 1) + pos) * 8 + slot) * _SUB + sub)

    def step_resources(self, step) -> tuple[int, ...]:
        """The link resources a communication step's task holds (searches bound link busy time)."""
        return self._step_links(step)

    def _step_links(self, step) -> tuple[int, ...]:
        key = (step.kind, step.groups)
        if key not in self._links:
            links: set[int] = set()
            for group in step.groups:
                pairs = [group] if step.kind == "p2p" else \
                    [(group[i], group[(i + 1) % len(group)]) for i in range(len(group))] if len(group) > 1 else []
                for src, dst in pairs:
                    if src != dst:
                        links.update(self.cluster.route_ids(src, dst))
            self._links[key] = tuple(sorted(self.num_devices + link for link in links))
        return self._links[key]

    def _task(self, duration: float, resources, preds, key: float, meta: _Meta) -> int:
        t = self.store.add(float(duration), list(resources), sorted(set(preds)), key)
        self.meta[t] = meta
        if t >= len(self._category):
            grow = max(t + 1, 2 * len(self._category))
            self._category = np.resize(self._category, grow)
            self._device = np.resize(self._device, grow)
            self._bytes = np.resize(self._bytes, grow)
        self._category[t] = CATEGORIES.index(meta.category)
        self._device[t] = resources[0] if len(resources) else -1
        self._bytes[t] = meta.num_bytes
        return t

    # ---- ops ----------------------------------------------------------------------------------
    def _add_op(self, name: str) -> None:
        config = self.strategy[name]
        cost = self.model.op_cost(name, config)
        tasks: dict[str, list[int]] = {"F": [], "B": [], "U": [], "sync": []}
        for d in config.devices:
            tasks["F"].append(self._task(cost.forward_time_s, [d], [], self._key(FORWARD, name, SLOT_COMPUTE, d),
                                         _Meta(f"{name} fwd", "forward", name)))
        for d, f in zip(config.devices, tasks["F"]):
            tasks["B"].append(self._task(cost.backward_time_s, [d], [f],
                                         self._key(BACKWARD, name, SLOT_COMPUTE, d),
                                         _Meta(f"{name} bwd", "backward", name)))
        previous = list(tasks["B"])
        for j, step in enumerate(cost.sync):
            t = self._task(step.time_s, self._step_links(step), previous,
                           self._key(BACKWARD, name, SLOT_SYNC, j),
                           _Meta(f"{name} sync {step.kind}", "sync", name, step.num_bytes * len(step.groups)))
            tasks["sync"].append(t)
            previous = [t]
        if cost.update_time_s > 0:
            for d, b in zip(config.devices, tasks["B"]):
                preds = previous if tasks["sync"] else [b]
                tasks["U"].append(self._task(cost.update_time_s, [d], preds,
                                             self._key(UPDATE, name, SLOT_COMPUTE, d),
                                             _Meta(f"{name} update", "update", name)))
        self.op_tasks[name] = tasks

    def _add_buffers(self, name: str) -> None:
        """Resident state, and each output shard from F(name, d) until its last use on d (a view
        that aliases its input has no buffer of its own: `_output_users` keeps its source alive)."""
        config = self.strategy[name]
        memory = self.model.op_cost(name, config).memory
        tasks = self.op_tasks[name]
        op = self.graph.op(name)
        resident = memory.parameter_bytes + memory.gradient_bytes + memory.optimizer_bytes
        layout = self.model.layouts.output_layout(name, config)
        aliased = self._view_source(name) is not None
        buffers = []
        for i, d in enumerate(config.devices):
            if resident:
                buffers.append(Buffer(d, resident, None))
            for t in () if aliased else op.outputs:
                spec = self.graph.tensors[t]
                size = layout.local_num_elements(spec.shape) * dtype_bytes(spec.dtype)
                users = self._output_users(name, i, d, t)
                buffers.append(Buffer(d, size, tasks["F"][i], tuple(users) or (tasks["F"][i],)))
        self.op_buffers[name] = BufferSet.of(buffers)

    def _output_users(self, name: str, i: int, d: int, tensor: str) -> list[int]:
        """Tasks on device d (the i-th of `name`'s) that need `name`'s shard of `tensor`: forward
        readers, backward of whoever keeps it, and the users of every view that aliases it."""
        users = list(self._forward_readers(name, d, tensor))
        if tensor in self.saved[name] and not self._dropped_by_producer(name, tensor):
            users.append(self.op_tasks[name]["B"][i])
        users.extend(self._backward_sharers(name, tensor, d))
        for k in self.edges_of.get(name, ()):
            e = self.edges[k]
            if e.src_op == name and e.tensor == tensor and not self.edge_tasks[k]["fwd"] \
                    and self._view_source(e.dst_op) == k:
                users.extend(self._view_users(e.dst_op, d))
        return users

    def _view_users(self, view: str, device: int) -> list[int]:
        out = self.graph.op(view).outputs[0]
        return [u for i, d in enumerate(self.strategy[view].devices) if d == device
                for u in self._output_users(view, i, d, out)]

    def _view_source(self, name: str) -> int | None:
        """The edge whose buffer `name`'s output aliases: a view reading its input whole (the
        producer's shard in the same layout, or a re-scheduled copy); None otherwise."""
        tensor = self.viewed[name]
        if tensor is None:
            return None
        for k in self.edges_of.get(name, ()):
            e = self.edges[k]
            if e.dst_op == name and e.tensor == tensor and k in self.edge_tasks:
                return k if self.edge_tasks[k]["fwd"] or self._same_layout(k) else None
        return None

    def _dropped_by_producer(self, name: str, tensor: str) -> bool:
        """keep_after on an edge of `tensor`: the producer's copy goes after forward and is
        rebuilt from the consumer's in backward (TensorOpt's tensor reuse)."""
        for k in self.edges_of.get(name, ()):
            e = self.edges[k]
            if e.src_op == name and e.tensor == tensor and self.edge_tasks.get(k, {}).get("fwd"):
                if self._edge_cost(k).default_reuse == "keep_after":   # the option chosen
                    return True
        return False

    def _backward_sharers(self, name: str, tensor: str, device: int) -> list[int]:
        """B(q, device) of consumers that save `tensor` and read the producer's buffer itself
        (the same layout: a consumer that slices a replicated tensor keeps its own slice)."""
        found = []
        for k in self.edges_of.get(name, ()):
            edge = self.edges[k]
            if edge.src_op != name or edge.tensor != tensor or self.edge_tasks[k]["fwd"] \
                    or not self._same_layout(k):
                continue
            if tensor in self.saved[edge.dst_op]:
                dst = self.strategy[edge.dst_op]
                found.extend(self.op_tasks[edge.dst_op]["B"][i] for i, d in enumerate(dst.devices)
                             if d == device)
        return found

    def _forward_readers(self, name: str, device: int, tensor: str) -> tuple[int, ...]:
        """Tasks on `device` (or the first re-scheduling step) that read `tensor` forward."""
        readers = []
        for k in self.edges_of.get(name, ()):
            edge = self.edges[k]
            if edge.src_op != name or edge.tensor != tensor or k not in self.edge_tasks:
                continue
            steps = self.edge_tasks[k]["fwd"]
            if steps:
                readers.append(steps[0])
            else:
                dst = self.strategy[edge.dst_op]
                f = self.op_tasks[edge.dst_op]["F"]
                readers.extend(f[i] for i, d in enumerate(dst.devices) if d == device)
        return tuple(readers)

    # ---- edges --------------------------------------------------------------------------------
    def _edge_cost(self, k: int):
        return self.model.edge_cost_in(self.edges[k], self.strategy, self.reuse)

    def _is_weight_edge(self, k: int) -> bool:
        e = self.edges[k]
        return e.src_op is not None and self.graph.producer.get(e.tensor) is None

    def _add_edge(self, k: int) -> None:
        e = self.edges[k]
        cost = self._edge_cost(k)
        weight = self._is_weight_edge(k)
        dst_config = self.strategy[e.dst_op]
        fwd, bwd = [], []
        previous = [] if (e.src_op is None or weight) else list(self.op_tasks[e.src_op]["F"])
        for j, step in enumerate(cost.forward_steps):
            t = self._task(step.time_s, self._step_links(step), previous,
                           self._key(FORWARD, e.dst_op, SLOT_STEPS, k * 64 + j),
                           _Meta(f"{e.tensor} {step.kind}", "reschedule", e.dst_op, step.num_bytes * len(step.groups)))
            fwd.append(t)
            previous = [t]
        for i, d in enumerate(dst_config.devices):
            self.store.add_preds(self.op_tasks[e.dst_op]["F"][i], self._forward_sources(k, fwd, d))
        if e.src_op is not None:
            previous = list(self.op_tasks[e.dst_op]["B"])
            for j, step in enumerate(cost.backward_steps):
                t = self._task(step.time_s, self._step_links(step), previous,
                               self._key(BACKWARD, e.dst_op, SLOT_BACKWARD_STEPS, k * 64 + j),
                               _Meta(f"grad {e.tensor} {step.kind}", "reschedule", e.dst_op,
                                     step.num_bytes * len(step.groups)))
                bwd.append(t)
                previous = [t]
            self._wire_backward(k, bwd)
        self.edge_tasks[k] = {"fwd": fwd, "bwd": bwd}

    def _add_edge_buffers(self, k: int) -> None:
        """After every edge's tasks exist (a view's copy lives for the readers of the view)."""
        self.edge_buffers[k] = BufferSet.of(self._edge_buffer_list(k, self._edge_cost(k), self.edge_tasks[k]["fwd"]))

    def _forward_sources(self, k: int, fwd: list[int], device: int) -> list[int]:
        e = self.edges[k]
        if fwd:
            return [fwd[-1]]
        if e.src_op is None or self._is_weight_edge(k):
            return []
        src = self.strategy[e.src_op]
        f = self.op_tasks[e.src_op]["F"]
        same = [f[i] for i, d in enumerate(src.devices) if d == device]
        return same or list(f)

    def _wire_backward(self, k: int, bwd: list[int]) -> None:
        e = self.edges[k]
        owner = self.op_tasks[e.src_op]
        if self._is_weight_edge(k):
            targets = owner["sync"][:1] or owner["U"]
            sources = bwd[-1:] or list(self.op_tasks[e.dst_op]["B"])
            for t in targets:
                self.store.add_preds(t, sources)
            return
        src = self.strategy[e.src_op]
        dst = self.strategy[e.dst_op]
        consumer_b = self.op_tasks[e.dst_op]["B"]
        for i, d in enumerate(src.devices):
            if bwd:
                sources = [bwd[-1]]
            else:
                sources = [consumer_b[j] for j, dd in enumerate(dst.devices) if dd == d] or list(consumer_b)
            self.store.add_preds(owner["B"][i], sources)

    def _same_layout(self, k: int) -> bool:
        e = self.edges[k]
        index = self.graph.op(e.dst_op).inputs.index(e.tensor)
        return (self.model.layouts.output_layout(e.src_op, self.strategy[e.src_op])
                == self.model.input_layout(e.dst_op, self.strategy[e.dst_op], index))

    def _edge_buffer_list(self, k: int, cost, fwd: list[int]) -> list[Buffer]:
        """The consumer's re-scheduled (or locally sliced) copy, and scratch while steps run."""
        e = self.edges[k]
        if not fwd:
            return self._slice_buffers(k)
        dst = self.strategy[e.dst_op]
        tasks = self.op_tasks[e.dst_op]
        spec = self.graph.tensors[e.tensor]
        index = self.graph.op(e.dst_op).inputs.index(e.tensor)
        local = self.model.input_layout(e.dst_op, dst, index).local_num_elements(spec.shape)
        size = local * dtype_bytes(spec.dtype)
        option = cost.default_reuse                  # the option it is priced under
        kept = (self._is_weight_edge(k) or e.tensor in self.saved[e.dst_op]) \
            and option != "keep_before"
        viewed = self._view_source(e.dst_op) == k
        out = self.graph.op(e.dst_op).outputs[0]
        buffers = []
        for i, d in enumerate(dst.devices):
            until = [tasks["B"][i] if kept else tasks["F"][i]]
            if viewed:
                until.extend(self._output_users(e.dst_op, i, d, out))
            buffers.append(Buffer(d, size, fwd[0], tuple(until)))
            if cost.temporary_bytes:
                buffers.append(Buffer(d, cost.temporary_bytes, fwd[0], (fwd[-1],)))
        return buffers

    def _slice_buffers(self, k: int) -> list[Buffer]:
        """A consumer that keeps a local slice of its input (no communication) holds that slice."""
        e = self.edges[k]
        if e.src_op is None or self._is_weight_edge(k) or self._same_layout(k):
            return []
        if e.tensor not in self.saved[e.dst_op]:
            return []
        q = self.graph.op(e.dst_op)
        dst = self.strategy[e.dst_op]
        spec = self.graph.tensors[e.tensor]
        local = self.model.input_layout(e.dst_op, dst, q.inputs.index(e.tensor)).local_num_elements(spec.shape)
        tasks = self.op_tasks[e.dst_op]
        return [Buffer(d, local * dtype_bytes(spec.dtype), tasks["F"][i], (tasks["B"][i],))
                for i, d in enumerate(dst.devices)]

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
        sets = list(self.op_buffers.values()) + list(self.edge_buffers.values())
        n = self.store.n
        peaks = peak_memory(sets, self.store.start[:n], self.store.end[:n], self.num_devices)
        return self.store.makespan(), float(peaks.max())

    def edit(self, op: str, config: Configuration) -> None:
        """Replace `op`'s tasks and its edges' for a new configuration, without simulating;
        the next `store.update()` (or `change`) re-simulates every edit since the last one."""
        if not self._simulated:
            self.run()
        self.model.op_cost(op, config)      # validates the configuration before any edit
        for k in self.edges_of.get(op, ()):
            self._remove_edge(k)
        for t in (t for ts in self.op_tasks.pop(op).values() for t in ts):
            self.store.remove(t)
            self.meta.pop(t, None)
        self.strategy[op] = config
        self._add_op(op)
        for k in self.edges_of.get(op, ()):
            self._add_edge(k)
        neighbours = {op} | {end for k in self.edges_of.get(op, ()) for end in
                             (self.edges[k].src_op, self.edges[k].dst_op) if end}
        for name in self._alias_sources(neighbours) | neighbours:
            self._add_buffers(name)
        for k in set(self.edges_of.get(op, ())) | set(self._view_edges(neighbours)):
            self._add_edge_buffers(k)

    def _alias_sources(self, names) -> set[str]:
        """Producers up chains of views from `names`: their buffers' lives depend on the views'."""
        found, stack = set(), [n for n in names]
        while stack:
            tensor = self.viewed[stack.pop()]
            producer = self.graph.producer.get(tensor) if tensor else None
            if producer is not None and producer.name not in found:
                found.add(producer.name)
                stack.append(producer.name)
        return found

    def _view_edges(self, names) -> list[int]:
        """Edges into the views up those chains (a re-scheduled copy a view aliases)."""
        views = {n for n in self._alias_sources(names) | set(names)
                 if self.viewed[n] is not None}
        return [k for v in views for k in self.edges_of.get(v, ()) if self.edges[k].dst_op == v
                and k in self.edge_tasks and self.edges[k].tensor == self.viewed[v]]

    def _remove_edge(self, k: int) -> None:
        for t in (t for ts in self.edge_tasks.pop(k).values() for t in ts):
            self.store.remove(t)
            self.meta.pop(t, None)
        self.edge_buffers.pop(k, None)

    # ---- running ------------------------------------------------------------------------------
    def run(self) -> SimulationResult:
        self.store.simulate()
        self._simulated = True
        return self.result()

    def result(self, with_trace: bool = False) -> SimulationResult:
        store = self.store
        n = store.n
        live = store.live
        makespan = store.makespan()
        sets = list(self.op_buffers.values()) + list(self.edge_buffers.values())
        peaks = peak_memory(sets, store.start[:n], store.end[:n], self.num_devices)
        category = self._category[live]
        duration = store.duration[live]
        compute = category < COMPUTE
        busy = np.bincount(self._device[live][compute], weights=duration[compute], minlength=self.num_devices)
        comm_time = float(duration[~compute].sum())
        comm_bytes = float(self._bytes[live][~compute].sum())
        utilization = tuple(float(b / makespan) if makespan else 0.0 for b in busy)
        trace = tuple(self._trace_tasks()) if with_trace else ()
        return SimulationResult(makespan, float(peaks.max()), tuple(float(p) for p in peaks),
                                float(busy.max()), comm_time, comm_bytes, utilization, len(live),
                                trace, self._resource_names(), self._resource_groups())

    def _trace_tasks(self):
        store = self.store
        for t in store.live:
            meta = self.meta[int(t)]
            yield TraceTask(meta.label, meta.category, tuple(int(r) for r in store.resources_of(int(t))),
                            float(store.start[t]), float(store.end[t]),
                            (("op", meta.op), ("bytes", meta.num_bytes)))

    def _resource_names(self) -> tuple[str, ...]:
        names = [f"device {d} (node {self.cluster.node_of(d)})" for d in range(self.num_devices)]
        names += [f"link {link.name}" if hasattr(link, "name") else f"link {i}"
                  for i, link in enumerate(self.cluster.links)]
        return tuple(names)

    def _resource_groups(self) -> tuple[str, ...]:
        return ("devices",) * self.num_devices + ("links",) * len(self.cluster.links)


def simulate(model, strategy: Mapping[str, Configuration], with_trace: bool = False) -> SimulationResult:
    sim = Simulation(model, strategy)
    sim.run()
    return sim.result(with_trace)
