"""One iteration of a plan with pipeline stages, simulated: the task graph of one micro-batch
(sim.builder, FlexFlow §5: every op on its stage's devices, the cuts crossed by point-to-point
re-scheduling), then the schedule over its stages (sim.schedule).

In the pipeline a stage sends its boundary activations once per micro-batch (space.pipeline:
boundary_tensors; one relayed through each cut it crosses), where the task graph would move a
tensor for each consumer at its turn. So the one micro-batch's timeline is taken with every
transfer between stages made instant, and the cuts are priced on their own:
    X_s   = sum over the tensors crossing cut s of one move into the next stage (the forward
            steps of its first consumer there: cost model's re-scheduling, point to point)
    Y_s   = the same for their gradients back (the backward steps)
and per stage s (its ops; an edge's tasks belong to its consumer), from that timeline:
    F_s   = (end of its last forward task: gathers, forward, re-scheduling inside s)
            - (end of stage s-1's last forward; 0 for s = 0)
    B_s   = (end of its last backward task, a sharded weight's gradient reduce-scatter included:
            the runtime scatters each micro-batch's) - (end of stage s+1's last backward; for the
            last stage, the end of its own forward)
    T_s   = its replicated weights' gradient all-reduces one after another, then the most any of
            its devices spends on optimizer updates: once per iteration, after the last
            micro-batch (the runtime's deferred sync, then the optimizer step); in the one
            micro-batch's timeline these take no time
The schedule then runs m micro-batches (`run_schedule`); with m = 1 it takes the one micro-batch's
timeline plus the cuts' moves and the tails.

Memory on device d of stage s: the one micro-batch's peak there, plus the activations one
micro-batch keeps there (cost model's memory by kind) for each further micro-batch the stage holds
at once (GPipe: m, 1F1B: p - s). A block that offloads its activations (cost.activation_offload)
keeps none of them on the device: its copies to the host count in the stage's forward (the last
copy out ends its micro-batch there) and backward (each B waits for its copy back in), and the host
holds one micro-batch's of them for each the stage holds at once (`host_bytes_per_node`).

`change(op, config)` re-simulates the micro-batch's timeline incrementally (FlexFlow §5.3's delta
simulation) and runs the schedule again; `run()` simulates it whole; both give the same result.
"""

from __future__ import annotations

from collections.abc import Mapping

from stratagem.sim.builder import Simulation, SimulationResult
from stratagem.sim.schedule import ScheduleRun, StageTimes, run_schedule
from stratagem.sim.trace import TraceTask
from stratagem.space import Configuration, Strategy, check_pipeline, pipeline_of, stage_of


class PipelineSimulation:
    def __init__(self, model, strategy: Strategy, representative: bool = False):
        """`representative`: the micro-batch's timeline with one rank per class of devices alike
        (sim.ranks; no `change` then)."""
        self.pipeline = pipeline_of(strategy)
        check_pipeline(model.graph, strategy, self.pipeline, model.num_devices)
        self.model, self.graph = model, model.graph
        self.stage = stage_of(self.graph, self.pipeline)
        self.blocks = self.pipeline.stage_devices(model.num_devices)
        self.inner = Simulation(model, strategy, representative)
        self._once_a_step_apart()
        self._run: ScheduleRun | None = None
        self._one: SimulationResult | None = None       # the one micro-batch's, of the current timeline

    def run(self) -> SimulationResult:
        return self._schedule(self.inner.run())

    def change(self, op: str, config: Configuration) -> SimulationResult:
        block = self.blocks[self.stage[op]]
        if config.devices.start < block.start or config.devices.stop > block.stop:
            raise ValueError(f"op {op!r} must stay on its stage's devices {block.start}..{block.stop - 1}")
        self.inner.edit(op, config)
        self._once_a_step_apart()
        self.inner.store.update()
        return self._schedule(self.inner.result())

    def summary(self) -> tuple[float, float]:
        result = self.result()
        return result.iteration_time_s, result.peak_memory_bytes

    def _schedule(self, one: SimulationResult) -> SimulationResult:
        self._one = one
        self._run = run_schedule(self.stage_times(), self.pipeline.micro_batches, self.pipeline.schedule)
        return self.result()

    def _crossing(self, k: int) -> bool:
        edge, state = self.inner.state.edges[k], self.inner.state
        return (edge.src_op is not None and not state.is_weight_edge(k)
                and self.stage[edge.src_op] != self.stage[edge.dst_op])

    def _once_a_step_apart(self) -> None:
        """In the one micro-batch's timeline, no time for what the pipeline does otherwise: every
        task moving a tensor between stages (`cut_times` prices the cuts), and each step's gradient
        all-reduces and optimizer updates (`tail_times`: once, after the last micro-batch)."""
        state, store = self.inner.state, self.inner.store
        for k, tasks in state.edge_tasks.items():
            if self._crossing(k):
                for t in (*tasks["fwd"], *tasks["bwd"]):
                    if store.duration[t]:
                        store.set_duration(t, 0.0)
        for name, tasks in state.op_tasks.items():
            once = (*tasks["U"], *(() if state.strategy[name].sharded_state else tasks["sync"]))
            for t in once:
                if store.duration[t]:
                    store.set_duration(t, 0.0)

    def tail_times(self) -> list[float]:
        """Per stage, after its last micro-batch's backward: the all-reduces of its replicated
        weights' gradients one after another, then each device's optimizer updates."""
        p, state = self.pipeline.num_stages, self.inner.state
        sync, update = [0.0] * p, [dict() for _ in range(p)]
        for name, config in state.strategy.items():
            s, cost = self.stage[name], self.model.op_cost(name, config)
            if not config.sharded_state:
                sync[s] += sum(step.time_s for step in cost.sync)
            for d in config.devices:
                update[s][d] = update[s].get(d, 0.0) + cost.update_time_s
        return [sync[s] + max(update[s].values(), default=0.0) for s in range(p)]

    def cut_times(self) -> list[tuple[float, float]]:
        """(X_s, Y_s) per cut: each crossing tensor moved once into the first later stage reading
        it (its first consumer's re-scheduling there), relayed on through every cut it crosses."""
        state, p = self.inner.state, self.pipeline.num_stages
        into: dict[str, dict[int, int]] = {}         # tensor -> {reading stage: its first crossing edge}
        for k, edge in enumerate(state.edges):
            if self._crossing(k):
                into.setdefault(edge.tensor, {}).setdefault(self.stage[edge.dst_op], k)
        cuts = [[0.0, 0.0] for _ in range(p - 1)]
        for by_stage in into.values():
            k = by_stage[min(by_stage)]
            cost = state.edge_cost(k)
            for s in range(self.stage[state.edges[k].src_op], max(by_stage)):
                cuts[s][0] += sum(step.time_s for step in cost.forward_steps)
                cuts[s][1] += sum(step.time_s for step in cost.backward_steps)
        return [tuple(c) for c in cuts]

    # ---- the stages' times from one micro-batch's timeline ------------------------------------
    def stage_times(self) -> list[StageTimes]:
        p = self.pipeline.num_stages
        forward, backward, tail = [0.0] * p, [0.0] * p, self.tail_times()
        state, end = self.inner.state, self.inner.store.end
        for name, tasks in state.op_tasks.items():
            s = self.stage[name]
            per_micro_batch = (*tasks["BG"], *tasks["B"], *(tasks["sync"] if state.strategy[name].sharded_state else ()))
            forward[s] = max([forward[s], *(end[t] for t in (*tasks["G"], *tasks["F"], *tasks["OD"]))])
            backward[s] = max([backward[s], *(end[t] for t in per_micro_batch)])
        for k, tasks in state.edge_tasks.items():
            if not self._crossing(k):
                s = self.stage[state.edges[k].dst_op]
                forward[s] = max([forward[s], *(end[t] for t in tasks["fwd"])])
                backward[s] = max([backward[s], *(end[t] for t in tasks["bwd"])])
        cuts = self.cut_times() + [(0.0, 0.0)]
        times = []
        for s in range(p):
            began = forward[s - 1] if s else 0.0
            gradients = forward[s] if s == p - 1 else backward[s + 1]
            times.append(StageTimes(forward_s=float(max(forward[s] - began, 0.0)),
                                    backward_s=float(max(backward[s] - gradients, 0.0)),
                                    tail_s=float(tail[s]),
                                    send_s=float(cuts[s][0]), send_back_s=float(cuts[s][1])))
        return times

    # ---- the result ---------------------------------------------------------------------------
    @property
    def schedule_run(self) -> ScheduleRun:
        if self._run is None:
            self.run()
        return self._run

    def in_flight_per_device(self) -> list[int]:
        """Per device, the most micro-batches its stage holds at once (as the schedule runs)."""
        held, found = self.schedule_run.in_flight, [1] * self.model.num_devices
        for s, block in enumerate(self.blocks):
            for d in block:
                found[d] = max(held[s], 1)
        return found

    def host_bytes_per_node(self) -> float:
        """The most host memory one node's devices keep offloaded: weight states once, each
        offloaded block's activations once per micro-batch its stage holds at once."""
        return self.model.host_bytes_per_node(self.inner.strategy, self.in_flight_per_device())

    def peak_memory_per_device(self) -> tuple[float, ...]:
        one = self._one.peak_memory_per_device
        activations = self.model.memory_parts(self.inner.strategy)["activations"]
        held = self.schedule_run.in_flight
        peaks = list(one)
        for s, block in enumerate(self.blocks):
            for d in block:
                peaks[d] = one[d] + max(held[s] - 1, 0) * activations[d]
        return tuple(peaks)

    def result(self, with_trace: bool = False) -> SimulationResult:
        run, one = self.schedule_run, self._one
        m = self.pipeline.micro_batches
        peaks = self.peak_memory_per_device()
        compute = [0.0] * len(peaks)
        for a in run.actions:
            for d in self.blocks[a.stage]:
                compute[d] += a.end_s - a.start_s
        iteration = run.iteration_time_s
        return SimulationResult(
            iteration, max(peaks), peaks, max(compute), one.communication_time_s * m,
            one.communication_bytes * m, tuple(c / iteration if iteration else 0.0 for c in compute),
            one.num_tasks * m, self._trace(run) if with_trace else (),
            tuple(f"stage {s} (devices {b.start}-{b.stop - 1})" for s, b in enumerate(self.blocks)),
            tuple("stages" for _ in self.blocks), simulated_tasks=one.simulated_tasks)

    def _trace(self, run: ScheduleRun) -> tuple[TraceTask, ...]:
        tasks = [TraceTask(f"{a.kind}{a.micro_batch}", "forward" if a.kind == "F" else "backward", (a.stage,),
                           a.start_s, a.end_s, (("micro_batch", a.micro_batch),)) for a in run.actions]
        for s, end in enumerate(run.stage_end_s):
            last = max(a.end_s for a in run.actions if a.stage == s)
            if end > last:
                tasks.append(TraceTask("sync + update", "update", (s,), last, end))
        return tuple(tasks)


def open_simulation(model, strategy: Strategy | Mapping[str, Configuration], representative: bool = False):
    """The simulation of `strategy`: of its pipeline when it has stages, else of its one step;
    `representative`: one rank per class of devices alike (sim.ranks)."""
    if pipeline_of(strategy) is not None:
        return PipelineSimulation(model, strategy, representative)
    return Simulation(model, strategy, representative)
