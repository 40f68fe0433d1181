"""Memory accounting: the buffers each op and edge holds, and the tasks between which they live
(the peak over the timeline is `sim.memory.peak_memory`).

  - weights, gradients and optimizer state are resident (their shards, when held sharded);
  - an op's copy of its weight (gathered from shards, or cast to the compute dtype) lives from its
    first gather (or F(o, d)) until F(o, d), or until B(o, d) when kept for backward; a
    re-gathered one again from its backward gather until B(o, d);
  - each output shard lives from F(p, d) until its last use on d: its forward readers, and the
    backward of p or of a consumer reading the same buffer if they keep it for backward
    (`state.saved`, the op record's `saves` or what capture recorded);
  - a re-scheduled copy lives from its first step until the consumer's forward, or its backward if
    the consumer keeps it (unless the reuse option is keep_before); step scratch lives while the
    steps run; keep_after drops the producer's copy after forward (TensorOpt's tensor reuse);
  - a view (`cost.memory.viewed_input`) has no buffer: the one it reads lives on for the view's users.
  - what an op's kernel keeps besides its saved tensors (cost.memory.kept_inside_bytes: the
    log-probabilities of a cross-entropy) lives from F(o, d) until B(o, d);
  - an op of a recomputed block keeps again what it would have kept, from the block's
    recomputation (the backward of its last op) until its own backward (cost.recompute);
  - an op of an offloaded block (cost.activation_offload) holds what it would have kept until its
    copy to the host ends (OD: its outputs, inputs it shares with their producer, its re-scheduled
    or sliced copies, what its kernel keeps inside), and again from its copy back (OH) until its
    backward;
Gradients of activations are not counted (transient, at most a few layers' worth).

`op_buffers` and `edge_buffers` are asked after every unit's tasks exist (a buffer's life ends at
tasks of other units); after a delta edit, `touched_by` says which units' buffers to ask again.
"""

from __future__ import annotations

import numpy as np

from stratagem.cost.memory import keeps_copy
from stratagem.cost.opcost import kept_inside
from stratagem.ir import dtype_bytes
from stratagem.sim.memory import BufferColumns, BufferSet, task_ids
from stratagem.sim.state import SimState


def op_buffers(state: SimState, name: str) -> BufferSet:
    """Resident state, and each output shard from F(name, d) until its last use on d (a view
    that aliases its input has no buffer of its own: `_output_users` keeps its source alive)."""
    config = state.strategy[name]
    cost = state.model.op_cost(name, config)
    memory = cost.memory
    tasks = state.op_tasks[name]
    op = state.graph.op(name)
    resident = memory.parameter_bytes + memory.gradient_bytes + memory.optimizer_bytes
    layout = state.model.layouts.output_layout(name, config)
    aliased = view_source(state, name) is not None
    outputs = [(layout.local_num_elements(state.graph.tensors[t].shape) * dtype_bytes(state.graph.tensors[t].dtype),
                _output_users(state, name, t)) for t in (() if aliased else op.outputs)]
    recomputed = _recomputed_sizes(state, name)
    forward, backward = tasks["F"], tasks["B"]
    found = BufferColumns(state.devices_of(name))
    if resident:
        found.add(resident, None)
    _add_weight_copies(found, cost.weight_copies, tasks)
    if memory.kept_inside_bytes:
        found.add(memory.kept_inside_bytes, forward, backward)
    if recomputed:
        start = _recomputation_starts(state, name)
        for num_bytes in recomputed:
            found.add(num_bytes, start, backward)
    if tasks["OD"]:     # offloaded: what its kernel keeps inside until the copy out ends, all it sent from the copy back
        inside = kept_inside(state.model, op, state.model.input_layout(name, config, 0) if op.inputs else None)
        if inside:
            found.add(inside, forward, tasks["OD"][0])
        found.add(memory.offloaded_bytes, tasks["OH"][0], backward)
    for size, users in outputs:
        found.add_users(size, forward, _or_own(users, forward))
    return found.done()


def _or_own(users: np.ndarray, forward) -> np.ndarray:
    """`users` (rows of tasks, -1 for none), with F(o, d) for a device that has none: an output
    nobody reads lives while its op runs."""
    own = task_ids(forward).reshape(-1, 1)
    if not users.shape[1]:
        return own
    none = (users < 0).all(axis=1)
    if none.any():
        users = users.copy()
        users[none, 0] = own[none, 0]
    return users


def _add_weight_copies(found: BufferColumns, copies, tasks) -> None:
    """The op's copies of its weights (cost.costs.WeightCopies) on each of its devices: from its
    first gather (else its forward) until its forward ends, or its backward; a re-gathered one
    again from its backward gather until its backward ends."""
    start = tasks["G"][0] if tasks["G"] else tasks["F"]
    for num_bytes, until in ((copies.freed_bytes + copies.regathered_bytes, "F"), (copies.kept_bytes, "B")):
        if num_bytes:
            found.add(num_bytes, start, tasks[until])
    if copies.regathered_bytes and tasks["BG"]:
        found.add(copies.regathered_bytes, tasks["BG"][0], tasks["B"])


def edge_buffers(state: SimState, k: int) -> BufferSet:
    """The consumer's re-scheduled (or locally sliced) copy, and scratch while steps run."""
    e = state.edges[k]
    fwd = state.edge_tasks[k]["fwd"]
    if not fwd:
        return _slice_buffers(state, k) if state.mover_of(k) == k else BufferColumns(range(0)).done()
    cost = state.edge_cost(k)
    spec = state.graph.tensors[e.tensor]
    size = state.target_layout(k).local_num_elements(spec.shape) * dtype_bytes(spec.dtype)
    readers = state.moved_with(k)
    found = BufferColumns(state.devices_of(e.dst_op))
    if len(readers) == 1 and view_source(state, e.dst_op) != k:
        found.add(size, fwd[0], _copy_until(state, k))
    else:       # the copy lives until the last of its readers (and of their views' users) needs it
        found.add_users(size, fwd[0], np.concatenate([_copy_users(state, j) for j in readers], axis=1))
    if cost.temporary_bytes:
        found.add(cost.temporary_bytes, fwd[0], fwd[-1])
    return found.done()


def _copy_until(state: SimState, k: int):
    """Edge k's consumer's tasks after which it no longer needs the re-scheduled copy, per
    device: its forward, its backward if it keeps it, its copy to the host if offloaded."""
    e = state.edges[k]
    tasks = state.op_tasks[e.dst_op]
    option = state.edge_cost(k).default_reuse                  # the option it is priced under
    kept = keeps_copy(state.graph, state.graph.op(e.dst_op), e.tensor, option)
    if not kept and option != "keep_before" and _offloads(state, e.dst_op, e.tensor):
        return tasks["OD"][0]
    return tasks["B"] if kept else tasks["F"]


def _copy_users(state: SimState, k: int) -> np.ndarray:
    """`_copy_until` as columns of tasks per device, with the users of the consumer's output
    where the consumer is a view of the copy."""
    e = state.edges[k]
    devices = state.devices_of(e.dst_op)
    until = _copy_until(state, k)
    column = np.full((len(devices), 1), until, dtype=np.int64) if isinstance(until, (int, np.integer)) \
        else task_ids(until).reshape(-1, 1)
    if view_source(state, e.dst_op) != k:
        return column
    return np.concatenate([column, _output_users(state, e.dst_op, state.graph.op(e.dst_op).outputs[0])], axis=1)


def touched_by(state: SimState, op: str) -> tuple[set[str], set[int]]:
    """The ops and edges whose buffers' lives a change of `op` can move: it, its neighbours, the
    producers up chains of views from them, and the edges into those views."""
    neighbours = {op} | {end for k in state.edges_of.get(op, ()) for end in
                         (state.edges[k].src_op, state.edges[k].dst_op) if end}
    neighbours |= _recomputed_with(state, op)
    edges = set(state.edges_of.get(op, ())) | set(_view_edges(state, neighbours))
    edges |= {j for k in edges for j in state.siblings.get(k, ())}      # a shared copy lives for all its readers
    return _alias_sources(state, neighbours) | neighbours, edges


def _recomputed_with(state: SimState, op: str) -> set[str]:
    """The ops whose recomputed activations live from `op`'s backward (its block's last op)."""
    start = state.graph.meta.get("recompute_from", {})
    return {name for name, last in start.items() if last == op}


def _recomputed_sizes(state: SimState, name: str) -> list[float]:
    """The bytes a recomputed op keeps again on each of its devices (cost.recompute): what its
    kernel keeps inside, then each saved tensor's shard; [] when `name` is not recomputed."""
    graph = state.graph
    if name not in graph.meta.get("recompute_from", {}):
        return []
    saved = graph.meta.get("recompute_saved", {}).get(name, ())
    config, op = state.strategy[name], graph.op(name)
    inside = kept_inside(state.model, op, state.model.input_layout(name, config, 0) if op.inputs else None)
    found = [inside] if inside else []
    for t in saved:
        spec = graph.tensors[t]
        layout = (state.model.layouts.output_layout(name, config) if t in op.outputs
                  else state.model.input_layout(name, config, op.inputs.index(t)))
        found.append(layout.local_num_elements(spec.shape) * dtype_bytes(spec.dtype))
    return found


def _offloads(state: SimState, name: str, tensor: str) -> bool:
    """Whether `name`'s block offloads its activations and `tensor` is one it sends to the host."""
    return bool(state.offload_saved) and tensor in state.offload_saved.get(name, ()) and bool(state.op_tasks[name]["OD"])


def _recomputation_starts(state: SimState, name: str) -> list[int]:
    """When a recomputed op's kept tensors live again on each of its devices: from the start of
    its block's recomputation (the backward of the block's last op there, else its own), until
    its backward."""
    last = state.graph.meta["recompute_from"][name]
    own = state.op_tasks[name]["B"]
    if last not in state.op_tasks:
        return list(own)
    theirs, tasks = state.devices_of(last), state.op_tasks[last]["B"]
    return [tasks[d - theirs.start] if d in theirs else b for d, b in zip(state.devices_of(name), own)]


def view_source(state: SimState, name: str) -> int | None:
    """The edge whose buffer `name`'s output aliases: a view reading its input whole (the
    producer's shard in the same layout, or a re-scheduled copy); None otherwise."""
    tensor = state.viewed[name]
    if tensor is None:
        return None
    for k in state.edges_of.get(name, ()):
        e = state.edges[k]
        if e.dst_op == name and e.tensor == tensor and k in state.edge_tasks:
            moved = state.edge_tasks[k]["fwd"] or state.mover_of(k) != k     # its own copy, or another reader's
            return k if moved or state.same_layout(k) else None
    return None


def _output_users(state: SimState, name: str, tensor: str) -> np.ndarray:
    """The tasks that need name's shard of `tensor`, per device of `name` (a row each, by index;
    -1 where a column has no task there): forward readers, backward of whoever keeps it, and the
    users of every view that aliases it, in that order."""
    devices = state.devices_of(name)
    columns: list[np.ndarray] = []
    out = [k for k in state.edges_of.get(name, ())
           if state.edges[k].src_op == name and state.edges[k].tensor == tensor]
    for k in out:                                   # forward readers
        if k not in state.edge_tasks:
            continue
        steps = state.edge_tasks[k]["fwd"]
        if steps:
            columns.append(np.full((len(devices), 1), steps[0], dtype=np.int64))
        else:
            columns.append(_on_shared_devices(state, devices, state.edges[k].dst_op, "F"))
    if tensor in state.saved[name] and not _dropped_by_producer(state, name, tensor):
        columns.append(task_ids(state.op_tasks[name]["B"]).reshape(-1, 1))
    if _offloads(state, name, tensor):
        columns.append(np.full((len(devices), 1), state.op_tasks[name]["OD"][0], dtype=np.int64))
    for k in out:                                   # consumers keeping the producer's buffer
        consumer = state.edges[k].dst_op
        if not state.edge_tasks[k]["fwd"] and state.same_layout(k):
            if tensor in state.saved[consumer]:
                columns.append(_on_shared_devices(state, devices, consumer, "B"))
            elif _offloads(state, consumer, tensor):
                columns.append(_on_shared_devices(state, devices, consumer, "OD"))
    for k in out:                                   # views aliasing it
        view = state.edges[k].dst_op
        if not state.edge_tasks[k]["fwd"] and view_source(state, view) == k:
            columns.append(_view_users(state, devices, view))
    if not columns:
        return np.zeros((len(devices), 0), dtype=np.int64)
    return np.concatenate(columns, axis=1)


def _on_shared_devices(state: SimState, devices: range, other: str, kind: str) -> np.ndarray:
    """One column: other's task of `kind` on each of `devices` where `other` runs there, else -1
    (its copy to the host, "OD", is one task for all its devices)."""
    theirs = state.devices_of(other)
    if theirs == devices and kind != "OD":                 # the same devices: its tasks, in order
        return task_ids(state.op_tasks[other][kind]).reshape(-1, 1)
    column = np.full((len(devices), 1), -1, dtype=np.int64)
    lo, hi = max(devices.start, theirs.start), min(devices.stop, theirs.stop)
    if lo < hi:
        tasks = state.op_tasks[other][kind]
        column[lo - devices.start: hi - devices.start, 0] = (
            tasks[0] if kind == "OD" else task_ids(tasks[lo - theirs.start: hi - theirs.start]))
    return column


def _view_users(state: SimState, devices: range, view: str) -> np.ndarray:
    """The users of a view's output, as columns over `devices` (-1 where the view does not run)."""
    theirs = state.devices_of(view)
    view_users = _output_users(state, view, state.graph.op(view).outputs[0])
    if theirs == devices:
        return view_users
    columns = np.full((len(devices), view_users.shape[1]), -1, dtype=np.int64)
    lo, hi = max(devices.start, theirs.start), min(devices.stop, theirs.stop)
    if lo < hi:
        columns[lo - devices.start: hi - devices.start] = view_users[lo - theirs.start: hi - theirs.start]
    return columns


def _dropped_by_producer(state: SimState, name: str, tensor: str) -> bool:
    """keep_after on an edge of `tensor`: the producer's copy goes after forward and is
    rebuilt from the consumer's in backward (TensorOpt's tensor reuse)."""
    for k in state.edges_of.get(name, ()):
        e = state.edges[k]
        if e.src_op == name and e.tensor == tensor and state.edge_tasks.get(k, {}).get("fwd"):
            if state.edge_cost(k).default_reuse == "keep_after":   # the option chosen
                return True
    return False


def _slice_buffers(state: SimState, k: int) -> BufferSet:
    """A consumer that keeps a local slice of its input (no communication) holds that slice; one
    that keeps a graph input holds its shard of it (the loader's batch, kept for backward)."""
    e = state.edges[k]
    offloaded = _offloads(state, e.dst_op, e.tensor)
    if e.src_op is not None and (state.is_weight_edge(k) or state.same_layout(k)) \
            or (e.tensor not in state.saved[e.dst_op] and not offloaded):
        return BufferColumns(range(0)).done()
    q = state.graph.op(e.dst_op)
    dst = state.strategy[e.dst_op]
    spec = state.graph.tensors[e.tensor]
    local = state.model.input_layout(e.dst_op, dst, q.inputs.index(e.tensor)).local_num_elements(spec.shape)
    tasks = state.op_tasks[e.dst_op]
    found = BufferColumns(state.devices_of(e.dst_op))
    found.add(local * dtype_bytes(spec.dtype), tasks["F"], tasks["OD"][0] if offloaded else tasks["B"])
    return found.done()


def _alias_sources(state: SimState, names) -> set[str]:
    """Producers up chains of views from `names`: their buffers' lives depend on the views'."""
    found, stack = set(), list(names)
    while stack:
        tensor = state.viewed[stack.pop()]
        producer = state.graph.producer.get(tensor) if tensor else None
        if producer is not None and producer.name not in found:
            found.add(producer.name)
            stack.append(producer.name)
    return found


def _view_edges(state: SimState, names) -> list[int]:
    """Edges into the views up those chains (a re-scheduled copy a view aliases)."""
    views = {n for n in _alias_sources(state, names) | set(names) if state.viewed[n] is not None}
    return [k for v in views for k in state.edges_of.get(v, ()) if state.edges[k].dst_op == v
            and k in state.edge_tasks and state.edges[k].tensor == state.viewed[v]]
