"""What lives only while an op runs: the transient part of peak memory (one memory model for FT,
the cost model's plan totals and the simulator).

Per device, the peak memory of a training iteration under strategy S is modelled as

    peak(S) = P(S) + T(S)
    P(S)    = what stays until backward, additive along the graph (TensorOpt Eq. 3's memory):
              weights, gradients, optimizer state, saved activations, kept re-scheduled copies
    T(S)    = max over ops q of what lives around q's forward beyond what P(S) holds by then:
        T_q = max( own_q + sum_e L_e,                                while q runs
                   sum_e H_e + max_e (P_e - H_e) - made_q )          while input e is re-scheduled
              - later_q
    with, per input edge e of q (configurations of both ends, reuse option r):
        s_e = the source's buffer, unless it is kept for backward (by its producer, or by a
              consumer reading it as it is: this one, or another, cost.sharing's flag for FT);
              nothing from the data loader or a weight's owner (the batch, the resident weight)
        c_e = the consumer's re-scheduled copy, unless the consumer keeps it (keep_before drops
              it, keep_after drops the producer's copy instead)
        x_e = the re-scheduling scratch
        re-scheduled:  L_e = c_e (at the run), H_e = max(s_e, c_e) (while another input moves),
                       P_e = s_e + c_e + x_e (while it moves: the source is read into the copy)
        read as is:    L_e = H_e = P_e = s_e
        own_q = q's outputs that no op keeps for backward (a view has none: it aliases its input),
                the copies of its weights q makes for its forward and frees after it (gathered
                under the "sharded" state, cast under mixed precision: cost.opcost), and each
                output only its consumers keep, beyond |t| / n: P(S) counts it at the keepers'
                copies (made after q runs, at least |t| / n) or at q's buffer (a consumer reading
                it as it is), while q's buffer is live when q runs
    and what P(S) counts that does not exist yet at that moment, at its least over strategies:
        made_q  = what q's forward makes that stays until backward: what its kernel keeps inside
                  (exact, per configuration), and each output some op keeps, at its bytes over
                  the devices (no layout on them holds less: its blocks cover the tensor)
        later_q = the same least made_j summed over q's descendants j (ops that read what q
                  makes, at any distance: none of them has run forward when q does)
An op holds all its inputs while it runs (a residual add: both summands and the sum); a source
buffer re-scheduled into a copy is released once read, before the op's outputs appear.

P(S) - later_q - made_q is at least what stays until backward and exists when q's input moves,
so peak(S) bounds every moment of forward from above (what a view makes is its source's buffer,
and weight copies kept for backward may be gathered early: neither is discounted). It equals the
simulated peak where the peak comes while q runs and every descendant's kept tensors are at
their least (split over every device, as data parallel and the lean plans keep them); it
overestimates by how much more the descendants keep under S (replicated activations after an
early large term). `benchmarks/frontier_agreement.py` measures by how much.

Each (L_e, H_e, P_e) is pairwise in the configurations; FT carries T beside its sums
(search.ft_peak: one FT pass per threshold on T), each op's term on one input edge that crosses
groups, with levels for its other such inputs (search.levels).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from functools import reduce

import numpy as np

from stratagem.cost.made import later_on_devices, least_bytes
from stratagem.cost.memory import keeps_copy, keeps_input, saved_tensors
from stratagem.cost.sharing import kept_producer_buffers
from stratagem.ir import dtype_bytes
from stratagem.space import Configuration, Edge


def op_transient_bytes(model, op_name: str, config: Configuration) -> float:
    """own_q(k), per device of the configuration (the module's formula)."""
    graph = model.graph
    op = graph.op(op_name)
    gathered = model.op_cost(op_name, config).weight_copies.forward_bytes
    if model.viewed_inputs[op_name] is not None:
        return gathered
    layout = model.layouts.output_layout(op_name, config)
    kept, saved = model.kept_tensors, model.saved_by_op[op_name]
    own = 0.0
    for t in op.outputs:
        buffer = layout.local_num_elements(graph.tensors[t].shape) * dtype_bytes(graph.tensors[t].dtype)
        if t not in kept:
            own += buffer
        elif t not in saved:
            own += buffer - least_bytes(model, t)
    return gathered + own


def input_transient_bytes(model, edge: Edge, src_config: Configuration | None, dst_config: Configuration,
                          option: str | None = None, kept_by_another: bool = False) -> tuple[float, float, float]:
    """(L_e, H_e, P_e) of `edge` (the module's formula). `kept_by_another`: another consumer keeps
    the producer's buffer, reading it as it is."""
    cost = model.edge_cost(edge.tensor, edge.src_op, src_config, edge.dst_op, dst_config)
    spec = model.graph.tensors[edge.tensor]
    itemsize = dtype_bytes(spec.dtype)
    position = model.graph.op(edge.dst_op).inputs.index(edge.tensor)
    dst_layout = model.input_layout(edge.dst_op, dst_config, position)
    dst_bytes = dst_layout.local_num_elements(spec.shape) * itemsize
    if not _produced(model, edge):
        return _phases(0.0, _consumer_keeps(model, edge, None), cost, dst_bytes)
    src_layout = model.layouts.output_layout(edge.src_op, src_config)
    option = option or cost.default_reuse
    return _phases(_source_bytes(_keeps(model, edge), option, kept_by_another,
                                 src_layout.local_num_elements(spec.shape) * itemsize, src_layout == dst_layout),
                   _consumer_keeps(model, edge, option), cost, dst_bytes)


def transient_signature(model, edge: Edge) -> tuple:
    """What `input_transient_bytes` reads of `edge` besides the configurations, option and
    `kept_by_another`: the edge's cost signature (the first alike edge: its cost, tensor size and
    the layouts at both ends per configuration), whether each end keeps the tensor for backward,
    and whether the consumer keeps its copy. Edges with equal signatures have equal terms (a
    repeated layer's edges)."""
    keeps = _keeps(model, edge) if _produced(model, edge) else None
    return (model._first_alike_edge(edge.tensor, edge.src_op, edge.dst_op), keeps,
            keeps_input(model.graph, model.graph.op(edge.dst_op), edge.tensor))


def input_transient_table(model, edge: Edge, src_configs, dst_configs, costs, option_names,
                          kept_by_another: bool = False) -> np.ndarray:
    """[3, R, K_src, K_dst]: (L_e, H_e, P_e) over every pair of configurations and reuse option
    (np.inf where a pair has fewer options); `costs[i][j]` the edge's cost and
    `option_names[i * K_dst + j]` its options, as search.space prices them. Equal to
    `input_transient_bytes` entry by entry, with each configuration's layouts and sizes computed once."""
    ks, kd = len(src_configs), len(dst_configs)
    table = np.full((3, max(len(n) for n in option_names), ks, kd), np.inf)
    spec = model.graph.tensors[edge.tensor]
    itemsize = dtype_bytes(spec.dtype)
    position = model.graph.op(edge.dst_op).inputs.index(edge.tensor)
    dst = [model.input_layout(edge.dst_op, c, position) for c in dst_configs]
    dst_bytes = [lay.local_num_elements(spec.shape) * itemsize for lay in dst]
    produced = _produced(model, edge)
    src = [model.layouts.output_layout(edge.src_op, c) for c in src_configs] if produced else []
    src_bytes = [lay.local_num_elements(spec.shape) * itemsize for lay in src]
    keeps = _keeps(model, edge) if produced else (False, False)
    for i in range(ks):
        for j in range(kd):
            cost = costs[i][j]
            for r, name in enumerate(option_names[i * kd + j] or (None,)):
                option = name or cost.default_reuse
                source = _source_bytes(keeps, option, kept_by_another, src_bytes[i], src[i] == dst[j]) \
                    if produced else 0.0
                table[:, r, i, j] = _phases(source, _consumer_keeps(model, edge, option), cost, dst_bytes[j])
    return table


def op_term(own, inputs: Sequence[tuple], made=0.0, later: float = 0.0):
    """T_q from own_q, its inputs' (L, H, P), made_q and later_q (the module's formula; scalars or
    broadcastable arrays, where +inf marks a missing reuse option and stays +inf)."""
    running = own + sum((lhp[0] for lhp in inputs), 0.0)
    if not inputs:
        return running - later
    if all(isinstance(x, float) for x in (own, made)) and all(isinstance(x, float) for lhp in inputs for x in lhp):
        return _scalar_term(running, inputs, made) - later     # the same arithmetic, without numpy's per-call cost
    held = sum((lhp[1] for lhp in inputs), 0.0)
    with np.errstate(invalid="ignore"):
        moving = reduce(np.maximum, [np.where(np.isinf(lhp[2]), np.inf, np.subtract(lhp[2], lhp[1]))
                                     for lhp in inputs])
    return np.maximum(running, held + moving - made) - later


def _scalar_term(running: float, inputs: Sequence[tuple[float, float, float]], made: float) -> float:
    held = sum((lhp[1] for lhp in inputs), 0.0)
    moving = max(math.inf if math.isinf(p) else p - h for _, h, p in inputs)
    return max(running, held + moving - made)


def _produced(model, edge: Edge) -> bool:
    return edge.src_op is not None and edge.tensor in model.graph.op(edge.src_op).outputs


def _consumer_keeps(model, edge: Edge, option: str | None) -> bool:
    return keeps_copy(model.graph, model.graph.op(edge.dst_op), edge.tensor, option)


def _source_bytes(keeps: tuple[bool, bool], option: str | None, kept_by_another: bool, src_bytes: float,
                  reads_as_is: bool) -> float:
    """s_e: the source's buffer unless someone keeps it for backward."""
    producer_keeps = (keeps[0] and option != "keep_after") or kept_by_another
    consumer_keeps = keeps[1] and option != "keep_before"
    return 0.0 if producer_keeps or (consumer_keeps and reads_as_is) else float(src_bytes)


def _phases(source: float, consumer_keeps: bool, cost, dst_bytes: float) -> tuple[float, float, float]:
    """(L_e, H_e, P_e) from s_e, whether the consumer keeps its copy, and the edge's steps."""
    if not cost.forward_steps:
        return source, source, source
    copy = 0.0 if consumer_keeps else float(dst_bytes)
    return copy, max(source, copy), source + copy + float(cost.temporary_bytes)


def _keeps(model, edge: Edge) -> tuple[bool, bool]:
    """Whether the producer, and the consumer, keep the edge's tensor for backward."""
    graph = model.graph
    return (edge.tensor in saved_tensors(graph, graph.op(edge.src_op)),
            edge.tensor in saved_tensors(graph, graph.op(edge.dst_op)))


def transient_terms(model, strategy: Mapping[str, Configuration]) -> Iterator[tuple[float, tuple[int, ...], str]]:
    """Every term of T(S): (bytes, the devices it is on, the op)."""
    reuse = getattr(strategy, "reuse", {})
    shared = kept_producer_buffers(model, strategy)
    inputs: dict[str, list[tuple[float, float, float]]] = {}
    for edge in model.edges():
        src = strategy[edge.src_op] if edge.src_op else None
        inputs.setdefault(edge.dst_op, []).append(model.input_transient(
            edge, src, strategy[edge.dst_op], reuse.get(edge), edge.tensor in shared))
    later = later_on_devices(model, strategy)
    for op in model.graph.ops:
        config = strategy[op.name]
        yield (float(op_term(model.op_transient(op.name, config), inputs.get(op.name, []),
                             model.op_made(op.name, config), later[op.name])),
               config.devices, op.name)


def plan_transient(model, strategy: Mapping[str, Configuration], terms: Sequence[tuple] | None = None
                   ) -> tuple[float, str]:
    """T(S) of a whole strategy, and the op where it is reached; `terms`: its transient_terms,
    where the caller has them already."""
    found = transient_terms(model, strategy) if terms is None else terms
    return max(((num_bytes, where) for num_bytes, _, where in found), default=(0.0, ""))
