"""Task producers: the tasks of one op and of one edge, added to the task graph (FlexFlow §5.1).

For an op o at configuration c, costs oc = model.op_cost(o, c):
    F(o, d), B(o, d), U(o, d) for each device d of c: forward, backward, update (oc's times);
        each device runs forward in program order and backward in reverse, as the runtime (a
        sequential interpreter, then autograd) does: F(o, d) after F(the op before o on d),
        B(o, d) after B(the op after o on d) (`_chain`)
    sync steps (oc.sync): one task per step on the links its groups use, after every B(o, .),
        before U(o, .); also after the gradients of o's weights that other ops read came back
    gathers of weights held sharded (oc.gather): a chain after each device of o reached o's turn
        in forward, before every F(o, .); for "sharded" and "offloaded" the chain again after
        every F(o, .) and each device reached o's turn in backward (B of the op after o there),
        before every B(o, .); "offloaded"'s chains start with the copy of the shards in from the
        host, its sync steps end with the gradient's copy out
    activation offload (oc.offload, oc.reload; cost.activation_offload): the copy to the host after
        every F(o, .); the copy back after it and after backward reached o's block (every B of the
        ops after the block's last op on o's devices; with pipeline stages, also every B of the
        next stage's first op, after which the stage's gradients come), before every B(o, .)
For an edge e = (tensor t, producer p or the data loader or the weight's owner, consumer q) that
moves t (`SimState.mover_of`: the first of the consumers reading t in one layout; the others read
its copy, F(q', d) after its last forward step, and its backward steps wait for every B(q', .)):
    forward steps (edge cost's forward_steps): a chain of tasks after every F(p, .) (none for
        inputs and weights) and after each of q's devices reached q's turn (`SimState.turn_of`:
        the runtime moves q's inputs right before q runs), before F(q, d); with no steps F(q, d)
        follows F(p, d)
    backward steps: a chain after every B(q, .), before B(p, d) (for a weight: before p's sync)

A producer's interface: `add_*(state, unit)` puts the unit's tasks into `state.tasks` with
structural keys (sim.keys) that rise along its dependencies, records them in `state.op_tasks` or
`state.edge_tasks`, and wires them to the tasks already there; `remove_*` takes them out. Delta
simulation removes and re-adds the units a change touches. A new kind of work (a pipeline stage's
sends, a sharded weight's gathers) is a new producer of this shape.
"""

from __future__ import annotations

from stratagem.sim.keys import (
    BACKWARD, FORWARD, RELOAD_SUB, SLOT_BACKWARD_STEPS, SLOT_COMPUTE, SLOT_GATHER, SLOT_OFFLOAD, SLOT_STEPS, SLOT_SYNC,
    UPDATE, edge_step_sub,
)
from stratagem.sim.state import SimState
from stratagem.sim.taskgraph import TaskMeta


def add_op(state: SimState, name: str) -> None:
    config = state.strategy[name]
    devices = state.devices_of(name)
    cost = state.model.op_cost(name, config)
    graph = state.tasks
    tasks: dict[str, list[int]] = {"F": [], "B": [], "U": [], "sync": [], "G": [], "BG": [], "OD": [], "OH": []}
    tasks["G"] = _gathers(state, name, cost.gather, FORWARD)
    tasks["F"] = graph.add_compute(cost.forward_time_s, devices, state.keys(FORWARD, name, SLOT_COMPUTE, devices),
                                   TaskMeta(f"{name} fwd", "forward", name), shared=tasks["G"][-1:])
    if cost.regather:
        tasks["BG"] = _gathers(state, name, cost.gather, BACKWARD, after=list(tasks["F"]))
    if cost.offload:
        _host_copies(state, name, cost, tasks)
    tasks["B"] = graph.add_compute(cost.backward_time_s, devices, state.keys(BACKWARD, name, SLOT_COMPUTE, devices),
                                   TaskMeta(f"{name} bwd", "backward", name),
                                   shared=tasks["BG"][-1:] + tasks["OH"], each=tasks["F"])
    state.op_tasks[name] = tasks
    _chain(state, name)
    for waiting in state.waiting_reloads.get(name, ()):
        if waiting in state.op_tasks and state.op_tasks[waiting]["OH"]:
            graph.add_preds(state.op_tasks[waiting]["OH"][0], list(tasks["B"]))
    previous = list(tasks["B"])
    for j, step in enumerate(cost.sync):
        t = graph.add(step.time_s, graph.step_resources(step), previous, state.key(BACKWARD, name, SLOT_SYNC, j),
                      TaskMeta(f"{name} sync {step.kind}", "sync", name, step.num_bytes * len(step.groups)))
        tasks["sync"].append(t)
        previous = [t]
    if cost.update_time_s > 0:
        tasks["U"] = graph.add_compute(cost.update_time_s, devices, state.keys(UPDATE, name, SLOT_COMPUTE, devices),
                                       TaskMeta(f"{name} update", "update", name), shared=previous if tasks["sync"] else (),
                                       each=None if tasks["sync"] else tasks["B"])


def _host_copies(state: SimState, name: str, cost, tasks: dict[str, list[int]]) -> None:
    """An offloaded op's activations to the host after its forward (OD) and back (OH) once its
    copy out ended and backward reached its block (`_block_turn`; B(name, .) waits for OH)."""
    graph = state.tasks
    (out,), (back,) = cost.offload, cost.reload
    tasks["OD"] = [graph.add(out.time_s, graph.step_resources(out), list(tasks["F"]),
                             state.key(FORWARD, name, SLOT_OFFLOAD, 0),
                             TaskMeta(f"{name} offload", "host copy", name, out.num_bytes * len(out.groups)))]
    tasks["OH"] = [graph.add(back.time_s, graph.step_resources(back), tasks["OD"] + _block_turn(state, name),
                             state.key(BACKWARD, name, SLOT_GATHER, RELOAD_SUB),
                             TaskMeta(f"{name} reload", "host copy", name, back.num_bytes * len(back.groups)))]


def _block_turn(state: SimState, name: str) -> list[int]:
    """The tasks after which backward reaches `name`'s block on each device d of `name`: B of the
    first op after the block's last op that runs on d (none: nothing after the block runs there).
    `_wire_reloads` adds them from the other side when that op's tasks come later."""
    last = state.position[state.offload_from[name]]
    ops, found, left = state.graph.ops, [], [state.devices_of(name)]
    i = last + 1
    while left and i < len(ops):
        other, rest = state.devices_of(ops[i].name), []
        for piece in left:
            lo, hi = max(piece.start, other.start), min(piece.stop, other.stop)
            if lo >= hi:
                rest.append(piece)
                continue
            if ops[i].name in state.op_tasks:
                found += _tasks_on(state, ops[i].name, "B", range(lo, hi))
            rest += [r for r in (range(piece.start, lo), range(hi, piece.stop)) if len(r)]
        left, i = rest, i + 1
    across = state.reloads_wait_for.get(name)
    if across is not None and across in state.op_tasks:
        found += state.op_tasks[across]["B"]
    return found


def _wire_reloads(state: SimState, name: str, before: str, devices: range) -> None:
    """`name` is the op after `before` on `devices`: where `before` lies in an offloaded block
    that ends before `name`, the reloads of that block's ops on those devices wait for B(name)."""
    last = state.offload_from.get(before)
    if last is None or state.position[last] >= state.position[name]:
        return
    for o in state.offload_blocks[last]:
        tasks = state.op_tasks.get(o)
        if not tasks or not tasks["OH"]:
            continue
        theirs = state.devices_of(o)
        lo, hi = max(theirs.start, devices.start), min(theirs.stop, devices.stop)
        if lo < hi:
            state.tasks.add_preds(tasks["OH"][0], _tasks_on(state, name, "B", range(lo, hi)))


def _gathers(state: SimState, name: str, steps, phase: int, after: list[int] = ()) -> list[int]:
    """A chain of the gather steps after the tasks `after` (backward's: the op's forward, which
    the op with no op after it has nothing else to wait for); `_chain` wires its first task after
    the op's turn."""
    graph, chain, preds = state.tasks, [], list(after)
    for j, step in enumerate(steps):
        t = graph.add(step.time_s, graph.step_resources(step), preds, state.key(phase, name, SLOT_GATHER, j),
                      TaskMeta(f"{name} {'gather' if phase == FORWARD else 'regather'}", "gather", name,
                               step.num_bytes * len(step.groups)))
        chain.append(t)
        preds = [t]
    return chain


def _forward_entry(state: SimState, name: str, device: int) -> int:
    """The first task of `name`'s forward turn on `device`: its first gather, else F(name, device)."""
    tasks = state.op_tasks[name]
    return tasks["G"][0] if tasks["G"] else _task_on(state, name, "F", device)


def _backward_entry(state: SimState, name: str, device: int) -> int:
    tasks = state.op_tasks[name]
    return tasks["BG"][0] if tasks["BG"] else _task_on(state, name, "B", device)


def _forward_entries(state: SimState, name: str, devices: range) -> list[int]:
    """`_forward_entry` on each of `devices` (all of them `name`'s)."""
    tasks = state.op_tasks[name]
    return [tasks["G"][0]] * len(devices) if tasks["G"] else _tasks_on(state, name, "F", devices)


def _backward_entries(state: SimState, name: str, devices: range) -> list[int]:
    tasks = state.op_tasks[name]
    return [tasks["BG"][0]] * len(devices) if tasks["BG"] else _tasks_on(state, name, "B", devices)


def _chain(state: SimState, name: str) -> None:
    """Program order on each device of `name`: its forward (gathers first) after the forward of
    the op before it there, and the next op's forward after its own; backward the other way round."""
    store = state.tasks
    for before, devices in state.neighbours(name, -1):
        if before in state.op_tasks:
            store.link(_forward_entries(state, name, devices), _tasks_on(state, before, "F", devices))
            store.link(_backward_entries(state, before, devices), _tasks_on(state, name, "B", devices))
            if state.offload_from:
                _wire_reloads(state, name, before, devices)
    for after, devices in state.neighbours(name, +1):
        if after in state.op_tasks:
            store.link(_forward_entries(state, after, devices), _tasks_on(state, name, "F", devices))
            store.link(_backward_entries(state, name, devices), _tasks_on(state, after, "B", devices))


def bridge(state: SimState, name: str, device: int) -> None:
    """After `name` left `device`: the ops before and after it there in program order, chained."""
    before, after = state.previous_on(name, device), state.next_on(name, device)
    if before is not None and after is not None:
        state.tasks.add_preds(_forward_entry(state, after, device), [_task_on(state, before, "F", device)])
        state.tasks.add_preds(_backward_entry(state, before, device), [_task_on(state, after, "B", device)])
        if state.offload_from:
            _wire_reloads(state, after, before, range(device, device + 1))


def _task_on(state: SimState, name: str, kind: str, device: int) -> int:
    return state.op_tasks[name][kind][device - state.devices_of(name).start]


def _tasks_on(state: SimState, name: str, kind: str, devices: range) -> list[int]:
    """`_task_on` for each of `devices` (a range inside `name`'s devices)."""
    first = state.devices_of(name).start
    return state.op_tasks[name][kind][devices.start - first: devices.stop - first]


def remove_op(state: SimState, name: str) -> None:
    state.tasks.remove_many([t for ts in state.op_tasks.pop(name).values() for t in ts])


def add_edge(state: SimState, k: int) -> None:
    e = state.edges[k]
    mover = state.mover_of(k)
    if mover != k:
        _read_moved(state, k, mover)
        return
    cost = state.edge_cost(k)
    graph = state.tasks
    fwd, bwd = [], []
    weight = state.is_weight_edge(k)
    previous = [] if (e.src_op is None or weight) else list(state.op_tasks[e.src_op]["F"])
    if cost.forward_steps:
        previous += state.turn_of(e.dst_op)
    for j, step in enumerate(cost.forward_steps):
        t = graph.add(step.time_s, graph.step_resources(step), previous,
                      state.key(FORWARD, e.dst_op, SLOT_STEPS, edge_step_sub(k, j)),
                      TaskMeta(f"{e.tensor} {step.kind}", "reschedule", e.dst_op, step.num_bytes * len(step.groups)))
        fwd.append(t)
        previous = [t]
    _wire_forward(state, k, fwd)
    if e.src_op is not None:
        previous = [t for j in state.moved_with(k) for t in state.op_tasks[state.edges[j].dst_op]["B"]]
        for j, step in enumerate(cost.backward_steps):
            t = graph.add(step.time_s, graph.step_resources(step), previous,
                          state.key(BACKWARD, e.dst_op, SLOT_BACKWARD_STEPS, edge_step_sub(k, j)),
                          TaskMeta(f"grad {e.tensor} {step.kind}", "reschedule", e.dst_op,
                                   step.num_bytes * len(step.groups)))
            bwd.append(t)
            previous = [t]
        _wire_backward(state, k, bwd)
    state.edge_tasks[k] = {"fwd": fwd, "bwd": bwd}


def _read_moved(state: SimState, k: int, mover: int) -> None:
    """Edge k's consumer reads the copy edge `mover` made (`SimState.mover_of`): no tasks of its
    own; its forward after that move's last step. The move's backward steps already wait for
    this consumer's backward (`add_edge`: after every B of the consumers reading the copy)."""
    e = state.edges[k]
    state.tasks.link_all(state.op_tasks[e.dst_op]["F"], state.edge_tasks[mover]["fwd"][-1])
    if e.src_op is not None and not state.edge_tasks[mover]["bwd"]:
        _wire_by_device(state, e.src_op, "B", e.dst_op, "B")
    state.edge_tasks[k] = {"fwd": [], "bwd": []}


def remove_edge(state: SimState, k: int) -> None:
    state.tasks.remove_many([t for ts in state.edge_tasks.pop(k).values() for t in ts])


def _wire_forward(state: SimState, k: int, fwd: list[int]) -> None:
    """F(q, d) for each device d of the consumer q after the edge's last step, else after F(p, d)
    of the producer p on d, else (p not on d) after every F(p, .); inputs and weights: nothing."""
    e = state.edges[k]
    consumer_f = state.op_tasks[e.dst_op]["F"]
    if fwd:
        state.tasks.link_all(consumer_f, fwd[-1])
    elif e.src_op is not None and not state.is_weight_edge(k):
        _wire_by_device(state, e.dst_op, "F", e.src_op, "F")


def _wire_by_device(state: SimState, after: str, after_kind: str, before: str, before_kind: str) -> None:
    """Each task of `after` (of that kind) after the task of `before` on its device, or, where
    `before` does not run there, after all of `before`'s."""
    targets, sources = state.op_tasks[after][after_kind], state.op_tasks[before][before_kind]
    mine, theirs = state.devices_of(after), state.devices_of(before)
    both = range(max(mine.start, theirs.start), min(mine.stop, theirs.stop))
    store = state.tasks
    elsewhere = mine
    if len(both):
        store.link(_tasks_on(state, after, after_kind, both), _tasks_on(state, before, before_kind, both))
        elsewhere = (*range(mine.start, both.start), *range(both.stop, mine.stop))
    for d in elsewhere:
        store.add_preds(targets[d - mine.start], sources)


def _wire_backward(state: SimState, k: int, bwd: list[int]) -> None:
    e = state.edges[k]
    owner = state.op_tasks[e.src_op]
    store = state.tasks
    if state.is_weight_edge(k):
        targets = owner["sync"][:1] or owner["U"]
        sources = bwd[-1:] or list(state.op_tasks[e.dst_op]["B"])
        for t in targets:
            store.add_preds(t, sources)
        return
    if bwd:
        store.link_all(owner["B"], bwd[-1])
    else:
        _wire_by_device(state, e.src_op, "B", e.dst_op, "B")
