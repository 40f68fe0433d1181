"""Lower bounds on the simulated iteration time of any completion of a partial strategy.

A partial strategy fixes the choices of some variables (`search.choices`); every completion's
simulated timeline (`sim.builder.Simulation`) contains, for each fixed op o with configuration c,
its tasks F(o, d), B(o, d), U(o, d) on each device d of c (durations from op_cost(o, c)) and its
gradient-sync steps on their links, and for each edge whose two ends are fixed, its re-scheduling
steps on their links (for an input edge, the consumer alone fixes them), unless a consumer before
it reads the same tensor from the same producer: it may read that one's copy (cost.shared_moves;
the complete strategy's `busy_bound` counts exactly the moves the simulator makes). Five bounds, each a
lower bound on the makespan T of every completion:

  busy    T >= sum of the durations of the tasks on resource r, for every device and link r.
          Proof: the engine runs one task at a time on a resource (start(t) >= end of the task
          before it in r's order), and all tasks start at time >= 0; the fixed tasks are a
          subset of r's tasks in every completion and durations are >= 0.       `Bounds.busy`
  work    T >= (W_fixed + sum over unfixed variables v of min_c W(v, c)) / N, where W(v, c) is
          the compute (F + B + U) that v's ops put on all devices under choice c and N the
          devices ops may use. Proof: T >= max_d busy(d) >= the mean over the N devices of
          busy(d), and every unfixed variable adds at least its cheapest W.       `Bounds.work`
  path    T >= the longest chain of dependent tasks:
              E(o)  = f(o) + max(x(k) over o's input and weight edges k,
                                 E(p) + x(k) over o's activation edges k from producers p)
              EB(o) = b(o) + max(E(o), EB(q) + y(k) over o's activation edges k to consumers q)
              T    >= u(o) + s(o) + max(EB(o), EB(q) + y(k) over the weight edges k o owns)
          with f, b, u the per-device forward, backward and update durations of o's
          configuration, s(o) its gradient-sync chain, x(k) and y(k) edge k's forward and
          backward re-scheduling chains; for an unfixed op, the minima over its choices, and
          x = y = 0 for an edge with an unfixed end. Proof: F(o, d) waits for a chain after all
          F(p, .) (or for some F(p, .) when there is none), and for the weight's and input's
          chains, which start at >= 0; B(p, d) for F(p, d) and for a chain after all B(q, .)
          of each consumer (or some B(q, .)); o's first sync step (or U(o, .)) for o's B tasks
          and for every owned weight's backward chain; U(o, d) after the syncs. Each of those
          tasks exists in every completion and its duration is >= the value used; induct in
          topological order (a reader listed after its owner is taken as 0, which only
          lowers the bound).                                                       `Bounds.path`
  device  T >= sum over the tasks on device d that B(o, d) waits for, + s(o) + u(o), for every
          op o fixed on d. Those tasks: F(x, d) for every x from which a path of activation
          edges between ops fixed on d leads to o or to one of o's descendants in that
          sub-graph, and B(y, d) for o and those descendants. Proof: for ops p -> q both on
          d, F(q, d) waits for F(p, d) (directly, or through a re-scheduling chain that waits
          for all F(p, .)), B(p, d) for B(q, d) likewise, and B(q, d) for F(q, d); so all
          those tasks end before B(o, d) does, and being on d they run one at a time from
          time >= 0; o's sync chain and U(o, d) come after B(o, d).     `Bounds.device_chains`
          (Through an op not on d the chain may wait on another device's task, so only ops
          fixed on d count.)
  sync    T >= h + (sum of the durations on link r of the sync chains of the fixed ops whose
          chains start at or after h) + (least update time among them), for every link r and
          every h among those ops' start bounds (the latest of the path bound's and the device
          bound's lower bounds on the end of the op's backward). Proof: Jackson's one-machine
          relaxation: those tasks start at >= h and run one at a time on r; the last to finish
          ends at >= h + the sum, and its op's update follows.         `Bounds.sync_queues`
The bound is the largest of the five. For a complete strategy (without stages) the busy bound alone
is `busy_bound`: the planner simulates only the frontier points it does not rule out (ft_search). Peak memory has one too: the resident bytes (weights,
gradients, optimizer state) of fixed ops on a device are live all iteration, so a device whose
resident bytes exceed the cap makes every completion infeasible (`Bounds.resident`).
"""

from __future__ import annotations

import numpy as np

from stratagem.cost.shared_moves import families, first_readers, mover
from stratagem.search.choices import ChoiceSpace
from stratagem.sim.ranks import every_device
from stratagem.sim.taskgraph import TaskGraph


class Bounds:
    """Per-choice tables of the three bounds for one space (see the module docstring)."""

    def __init__(self, model, space: ChoiceSpace, sim):
        self.model, self.space, self.sim = model, space, sim
        self.num_resources = sim.state.tasks.num_resources
        self.num_devices = model.num_devices
        self.var_of = {op: v for v, var in enumerate(space.variables) for op in var.ops}
        self.ops = [op.name for op in model.graph.ops]
        self.op_index = {name: i for i, name in enumerate(self.ops)}
        self._edge_busy: dict[tuple, np.ndarray] = {}
        self._build_edges()
        self._build_choices()
        self._build_paths()

    # ---- tables -------------------------------------------------------------------------------
    def _build_edges(self) -> None:
        self.own_edges: list[list[int]] = [[] for _ in self.space.variables]
        self.cross_edges: list[tuple[int, int, int]] = []        # (edge, variable a, variable b)
        counted = first_readers(self.model)       # a later reader of a shared tensor may read another's move
        for k, e in enumerate(self.model.edges()):
            if k not in counted:
                continue
            dst = self.var_of[e.dst_op]
            src = self.var_of[e.src_op] if e.src_op is not None else dst
            if src == dst:
                self.own_edges[dst].append(k)
            else:
                self.cross_edges.append((k, src, dst))

    def _build_choices(self) -> None:
        self.own: list[list[np.ndarray]] = []
        self.resident_bytes: list[list[np.ndarray]] = []
        self.work_by_choice: list[np.ndarray] = []
        for v, var in enumerate(self.space.variables):
            own, resident, work = [], [], []
            for choice in var.choices:
                strategy = dict(zip(var.ops, choice))
                busy, memory = np.zeros(self.num_resources), np.zeros(self.num_resources)
                for op, config in strategy.items():
                    self._add_op(busy, memory, op, config)
                for k in self.own_edges[v]:
                    busy += self.edge_busy(k, strategy)
                own.append(busy)
                resident.append(memory)
                work.append(float(busy[:self.num_devices].sum()))
            self.own.append(own)
            self.resident_bytes.append(resident)
            self.work_by_choice.append(np.array(work))
        self.min_work = np.array([w.min() for w in self.work_by_choice])

    def _add_op(self, busy: np.ndarray, memory: np.ndarray, op: str, config) -> None:
        cost = self.model.op_cost(op, config)
        m = cost.memory
        for d in config.devices:
            busy[d] += cost.compute_time_s
            memory[d] += m.parameter_bytes + m.gradient_bytes + m.optimizer_bytes
        _add_steps(busy, cost.sync + cost.offload + cost.reload, self.sim.step_resources)

    def edge_busy(self, k: int, strategy) -> np.ndarray:
        """Link time of edge k's re-scheduling steps, both ends' configurations in `strategy`."""
        e = self.model.edges()[k]
        src = strategy[e.src_op] if e.src_op is not None else None
        key = (k, src, strategy[e.dst_op])
        found = self._edge_busy.get(key)
        if found is None:
            cost = self.model.edge_cost(e.tensor, e.src_op, src, e.dst_op, strategy[e.dst_op])
            found = np.zeros(self.num_resources)
            _add_steps(found, _edge_steps(e, cost), self.sim.step_resources)
            self._edge_busy[key] = found
        return found

    def _build_paths(self) -> None:
        graph, n = self.model.graph, len(self.ops)
        self.in_act: list[list[tuple[int, int]]] = [[] for _ in range(n)]     # (edge, producer)
        self.out_act: list[list[tuple[int, int]]] = [[] for _ in range(n)]    # (edge, consumer)
        self.in_start: list[list[int]] = [[] for _ in range(n)]               # input / weight edges
        self.owned: list[list[tuple[int, int]]] = [[] for _ in range(n)]      # (weight edge, reader)
        for k, e in enumerate(self.model.edges()):
            q = self.op_index[e.dst_op]
            if e.src_op is None or e.tensor not in graph.producer:
                self.in_start[q].append(k)
            if e.src_op is None:
                continue
            p = self.op_index[e.src_op]
            if e.tensor in graph.producer:
                self.in_act[q].append((k, p))
                self.out_act[p].append((k, q))
            else:
                self.owned[p].append((k, q))
        self.fbu_min = np.full((n, 4), np.inf)
        for var in self.space.variables:
            for choice in var.choices:
                for op, config in zip(var.ops, choice):
                    i = self.op_index[op]
                    self.fbu_min[i] = np.minimum(self.fbu_min[i], self._fbu(op, config))
        self._delays: dict[tuple, tuple[float, float]] = {}
        self._sync: dict[tuple, np.ndarray] = {}
        self.incident: list[list[int]] = [[] for _ in range(n)]
        for k, e in enumerate(self.model.edges()):
            for end in {e.src_op, e.dst_op} - {None}:
                self.incident[self.op_index[end]].append(k)
        self.reset()

    # ---- the partial strategy ----------------------------------------------------------------
    def reset(self) -> None:
        """Nothing fixed: every op at its minima, no edge chains."""
        n, num_edges = len(self.ops), len(self.model.edges())
        self.fbu = self.fbu_min.copy()
        self.configs: dict = {}
        self.on = np.zeros((n, self.num_devices), dtype=bool)
        self.forward_delay, self.backward_delay = np.zeros(num_edges), np.zeros(num_edges)

    def fix(self, v: int, choice: int) -> None:
        """Fix variable v's ops to its choice: their rows, devices and now-complete edges."""
        var = self.space.variables[v]
        for op, config in zip(var.ops, var.choices[choice]):
            i = self.op_index[op]
            self.configs[op] = config
            self.fbu[i] = self._fbu(op, config)
            self.on[i, config.first_device:config.first_device + config.num_devices] = True
        for op in var.ops:
            for k in self.incident[self.op_index[op]]:
                self.forward_delay[k], self.backward_delay[k] = self.delays(k, self.configs)

    def unfix(self, v: int) -> None:
        for op in self.space.variables[v].ops:
            i = self.op_index[op]
            del self.configs[op]
            self.fbu[i] = self.fbu_min[i]
            self.on[i] = False
            self.forward_delay[self.incident[i]] = 0.0
            self.backward_delay[self.incident[i]] = 0.0

    def _fbu(self, op: str, config) -> np.ndarray:
        """Per device: forward, backward, update, and the gradient-sync chain's duration."""
        cost = self.model.op_cost(op, config)
        return np.array([cost.forward_time_s, cost.backward_time_s, cost.update_time_s,
                         sum(step.time_s for step in cost.sync)])

    def delays(self, k: int, configs) -> tuple[float, float]:
        """(forward, backward) step-chain durations of edge k when both ends are fixed, else 0."""
        e = self.model.edges()[k]
        if e.dst_op not in configs or (e.src_op is not None and e.src_op not in configs):
            return 0.0, 0.0
        src = configs[e.src_op] if e.src_op is not None else None
        key = (k, src, configs[e.dst_op])
        found = self._delays.get(key)
        if found is None:
            cost = self.model.edge_cost(e.tensor, e.src_op, src, e.dst_op, configs[e.dst_op])
            found = self._delays[key] = (sum(s.time_s for s in cost.forward_steps),
                                         sum(s.time_s for s in cost.backward_steps) if e.src_op else 0.0)
        return found

    # ---- the bounds ---------------------------------------------------------------------------
    def evaluate(self, enough: float = float("inf")) -> float:
        """The path, device and sync bounds of the partial strategy (the busy and work bounds
        are the caller's, kept incrementally), cheapest first, stopping once one reaches
        `enough` (a caller's incumbent: more would not change its decision)."""
        heads = np.zeros(len(self.ops))
        bound = self.path(heads)
        if bound < enough:
            bound = max(bound, self.device_chains(heads))
        if bound < enough:
            bound = max(bound, self.sync_queues(heads))
        return bound

    def path(self, heads: np.ndarray | None = None) -> float:
        """Longest chain of dependent tasks; edges with both ends fixed add their re-scheduling
        chains. Writes into `heads` a lower bound on the start of each op's sync chain."""
        fbu, fwd, bwd = self.fbu, self.forward_delay, self.backward_delay
        n = len(self.ops)
        ends, back = [0.0] * n, [0.0] * n
        for o in range(n):
            ready = max((fwd[k] for k in self.in_start[o]), default=0.0)
            for k, p in self.in_act[o]:
                ready = max(ready, ends[p] + fwd[k])
            ends[o] = fbu[o, 0] + ready
        longest = 0.0
        for o in reversed(range(n)):
            ready = ends[o]
            for k, q in self.out_act[o]:
                ready = max(ready, back[q] + bwd[k])
            back[o] = fbu[o, 1] + ready
            synced = max([back[o]] + [back[q] + bwd[k] for k, q in self.owned[o]])
            longest = max(longest, synced + fbu[o, 3] + fbu[o, 2])
            if heads is not None:
                heads[o] = max(heads[o], synced)
        return longest

    def device_chains(self, heads: np.ndarray | None = None) -> float:
        """The device bound: per device d, the tasks on d that B(o, d) transitively waits for
        through ops fixed on d, serialized on d, then o's sync and update (module docstring).
        Writes the end of B(o, .) it implies into `heads` (a sync chain starts after it)."""
        best = 0.0
        for d in range(self.num_devices):
            on_d = np.flatnonzero(self.on[:, d])
            if len(on_d):
                waited = self._chain_on(on_d.tolist())
                rows = self.fbu[on_d]
                best = max(best, float((waited + rows[:, 3] + rows[:, 2]).max()))
                if heads is not None:
                    heads[on_d] = np.maximum(heads[on_d], waited)
        return best

    def sync_queues(self, heads: np.ndarray) -> float:
        """The sync bound: on each link, the sync chains of fixed ops that start at or after h
        run one at a time, and the last one's update follows (module docstring)."""
        fbu = self.fbu
        ops = [i for i, op in enumerate(self.ops) if op in self.configs and fbu[i, 3] > 0]
        if not ops:
            return 0.0
        ops.sort(key=lambda i: -heads[i])
        durations = np.array([self.sync_busy(self.ops[i], self.configs[self.ops[i]]) for i in ops])
        tails = np.where(durations > 0, fbu[ops, 2][:, None], np.inf)
        finish = np.cumsum(durations, axis=0) + np.minimum.accumulate(tails, axis=0)
        finish = np.where(np.isfinite(finish), finish, 0.0)
        return float((heads[ops][:, None] + finish).max())

    def sync_busy(self, op: str, config) -> np.ndarray:
        key = (op, config)
        found = self._sync.get(key)
        if found is None:
            found = self._sync[key] = np.zeros(self.num_resources)
            for step in self.model.op_cost(op, config).sync:
                found[self.sim.step_resources(step)] += step.time_s
        return found

    def _chain_on(self, on_d: list[int]) -> np.ndarray:
        local = {o: i for i, o in enumerate(on_d)}
        m = len(on_d)
        anc = np.eye(m, dtype=bool)
        for i, o in enumerate(on_d):
            for _, p in self.in_act[o]:
                if p in local:
                    anc[i] |= anc[local[p]]
        up, desc = anc.copy(), np.eye(m, dtype=bool)
        for i in reversed(range(m)):
            for _, q in self.out_act[on_d[i]]:
                if q in local:
                    up[i] |= up[local[q]]
                    desc[i] |= desc[local[q]]
        rows = self.fbu[on_d]
        return up.astype(float) @ rows[:, 0] + desc.astype(float) @ rows[:, 1]


__all__ = ["Bounds"]


def busy_resources(model) -> TaskGraph:
    """The resources `busy_bound` puts tasks on (no task is added): one for many strategies keeps
    each step's resources found once (on 16,384 devices a step's groups list every device)."""
    return TaskGraph(model.cluster, every_device(model.cluster.num_devices))


def busy_bound(model, strategy, resources: TaskGraph | None = None) -> float:
    """The busy bound of a complete strategy without stages: the most time any device or link
    spends on the tasks the simulator gives it (F, B, U on each device of every op's
    configuration; its gathers, again for backward where it re-gathers, and gradient syncs; every
    edge's forward re-scheduling steps and, from a producer, its backward ones; each on the
    resources `TaskGraph.step_resources` says it holds). The simulated iteration time is at least
    this, up to the rounding of adding the same durations in another order. `resources`: from
    `busy_resources(model)`, shared by the strategies bounded."""
    tasks = busy_resources(model) if resources is None else resources
    busy = np.zeros(tasks.num_resources)
    step_time_s = StepTimes()
    for op, config in strategy.items():
        cost = model.op_cost(op, config)
        busy[config.devices.start:config.devices.stop] += cost.compute_time_s
        step_time_s.add(cost.gather * 2 if cost.regather else cost.gather)
        step_time_s.add(cost.sync + cost.offload + cost.reload)
    siblings, position = families(model), {op.name: i for i, op in enumerate(model.graph.ops)}
    for k, edge in enumerate(model.edges()):
        cost = model.edge_cost_in(edge, strategy)
        if k in siblings and mover(model, strategy, k, siblings[k], position,
                                   lambda j: bool(model.edge_cost_in(model.edges()[j], strategy).forward_steps)) != k:
            continue                      # its consumer reads an earlier reader's copy (cost.shared_moves)
        step_time_s.add(_edge_steps(edge, cost))
    step_time_s.onto(busy, tasks.step_resources)
    return float(busy.max()) if len(busy) else 0.0


class StepTimes:
    """Communication steps' times summed per (kind, groups object) before they are put on their
    resources: a plan's thousands of steps share a few hundred groups, and finding a step's
    resources hashes its groups (every device of a large cluster). Keyed by the groups' identity:
    equal groups held in different objects are summed apart, which only costs time."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, int], list] = {}

    def add(self, steps) -> None:
        for step in steps:
            key = (step.kind, id(step.groups))
            found = self._by_key.get(key)
            if found is None:
                self._by_key[key] = [step, step.time_s]
            else:
                found[1] += step.time_s

    def onto(self, busy: np.ndarray, resources_of) -> None:
        for step, time_s in self._by_key.values():
            busy[resources_of(step)] += time_s


def _add_steps(busy: np.ndarray, steps, resources_of) -> None:
    """Each communication step's time on the resources its task holds (summed as StepTimes sums them)."""
    times = StepTimes()
    times.add(steps)
    times.onto(busy, resources_of)


def _edge_steps(edge, cost) -> tuple:
    """The re-scheduling steps of an edge the simulator runs: forward, and backward from a producer."""
    return cost.forward_steps + (cost.backward_steps if edge.src_op is not None else ())
