"""The search space of a graph on a cluster, as FT and the brute-force oracle see it.

    groups      = coarsen(graph)                                   (search.coarsen, Tofu §5.1)
    configs[g]  = configurations of g's anchor                     (space.enumerate_configurations)
    member(g, k)= each member's configuration under anchor config k (derive_follower_config);
                  with SpaceOptions.scatter_partial_sums, where a follower reads a partial sum,
                  k comes twice: all-reduced into a replicated follower, then reduce-scattered
                  into a split one (group_variants)
    node cost   = sum over members of op_cost (m = m_p + m_t, t = t_c + t_s; TensorOpt Eq. 1)
                  + re-scheduling inside the group and from the data loader
    edge cost   = per pair (k, p) and reuse option r: edge_cost between the members the edge joins
                  (t = forward + backward re-scheduling; m = the option's memory; Eq. 2)
    transient   = per op, its outputs and inputs live while it runs (cost.transient): on the node
                  for inputs inside the group, on one crossing input's edge otherwise, with
                  levels for further crossing inputs (search.levels): a strategy's peak adds the
                  largest of its terms
    flags       = a group producing buffers several consumers keep carries a flag per such buffer
                  (up to 3) in its configuration index (search.flags): shared buffers count once;
                  levels add digits after the flags (index ((k * F) + f) * L + l)

so that the additive totals of a strategy are TensorOpt's Eq. 3. `SearchSpace.strategy(point)`
turns a solution back into a configuration for every op and a reuse option for every edge;
`additive_cost` re-evaluates a strategy from the cost model directly, without tables (the check).

Tables are cached by what they depend on (the member ops' analysis keys, the tensor, and the
configuration lists), so repeated layers are priced once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from stratagem.cost.edgecost import other_keepers
from stratagem.cost.sharing import SharedTensor, kept_producer_buffers, sharing_credits
from stratagem.cost.transient import input_transient_table, plan_transient
from stratagem.cost.weight_state import can_shard_state, offered_states
from stratagem.ir import Graph, Role
from stratagem.search.coarsen import Group, coarsen, derive_follower_config
from stratagem.search.flags import edge_flag_key, expand_edge, expand_nodes, flagged_tensors, flags_of_strategy, node_flag_memory
from stratagem.search.levels import Level, expand, fold, level_count, level_of, member_inputs
from stratagem.search.problem import CostProblem, EdgeCosts
from stratagem.search.repeats import renamed, twins
from stratagem.search.progress import SILENT, Progress, phase
from stratagem.space import Configuration, SpaceOptions
from stratagem.tdl.graphops import analysis_key

FT_SPACE = SpaceOptions(allow_fewer_devices=False, max_axes=2)


@dataclass(frozen=True)
class CrossEdge:
    model_edge: int                 # index into model.edges()
    src_group: int
    dst_group: int
    options: tuple[tuple[str, ...], ...]   # per (k, p) flattened: reuse option names by r
    defaults: tuple[str | None, ...]       # per (k, p) flattened: the option the edge is priced under


@dataclass
class SearchSpace:
    groups: tuple[Group, ...]
    configs: tuple[tuple[Configuration, ...], ...]
    members: tuple[dict[str, tuple[Configuration, ...]], ...]
    problem: CostProblem
    cross_edges: tuple[CrossEdge, ...]
    flags: tuple[tuple[SharedTensor, ...], ...] = ()    # per group (search.flags); (): none
    levels: tuple[tuple[Level, ...], ...] = ()           # per group (search.levels); (): none

    def num_flags(self, g: int) -> int:
        """How many flag and level values group g's configuration index carries per configuration
        (k'' = k * F_g * L_g + f * L_g + l)."""
        return self._shared_flags(g) * self._levels(g)

    def _shared_flags(self, g: int) -> int:
        return 1 << len(self.flags[g]) if self.flags else 1

    def _levels(self, g: int) -> int:
        return level_count(self.levels[g]) if self.levels else 1

    def config(self, g: int, index: int) -> Configuration:
        """Group g's anchor configuration at problem index k' (its flags dropped)."""
        return self.configs[g][index // self.num_flags(g)]

    def strategy(self, assignment, options=None) -> tuple[dict[str, Configuration], dict[tuple, str]]:
        """Configurations of every op, and non-default reuse choices by (tensor, src, dst)."""
        base = [k // self.num_flags(g) for g, k in enumerate(assignment)]
        strategy: dict[str, Configuration] = {}
        for g, k in enumerate(base):
            for op, per_config in self.members[g].items():
                strategy[op] = per_config[k]
        reuse: dict[tuple, str] = {}
        for e, r in zip(self.cross_edges, options or [0] * len(self.cross_edges)):
            k, p = base[e.src_group], base[e.dst_group]
            pair = k * len(self.configs[e.dst_group]) + p
            names = e.options[pair]
            name = names[r] if r < len(names) else names[0]
            if name and name != e.defaults[pair]:
                reuse[e.model_edge] = name
        return strategy, reuse

    def index_of(self, model, strategy: Mapping[str, Configuration]) -> tuple[int, ...] | None:
        """The problem assignment of a strategy (its exact flags), if it lies in this space."""
        kept = kept_producer_buffers(model, strategy)
        flagged = []                                  # k * F + f, before levels
        for g, group in enumerate(self.groups):
            k = next((k for k, config in enumerate(self.configs[g]) if config.base == strategy[group.anchor].base
                      and all(found[k] == strategy[name] for name, found in self.members[g].items())), None)
            if k is None:
                return None
            flags = flags_of_strategy(model, self.flags[g], kept) if self.flags else 0
            flagged.append(k * self._shared_flags(g) + flags)
        sources = [[flagged[self.problem.edges[level.edge].src] for level in found] for found in self.levels]
        return tuple(index * self._levels(g) + (level_of(self.levels[g], index, sources[g]) if self.levels else 0)
                     for g, index in enumerate(flagged))


def build_search_space(model, options: SpaceOptions = FT_SPACE, coarsening: bool = True,
                       progress: Progress = SILENT) -> SearchSpace:
    """The space and its cost tables, in two phases `progress` is told: per group (its ops'
    configurations, costs and transient terms), then per edge of the graph."""
    graph: Graph = model.graph
    groups = coarsen(graph, model.analyses) if coarsening else tuple(
        Group(op.name, (op.name,), "single") for op in graph.ops)
    group_of = {m: g for g, group in enumerate(groups) for m in group.members}
    with phase(progress, "cost tables: ops", len(groups)):
        configs = tuple(_configurations(model, group.anchor, options) for group in groups)
        flags = flagged_tensors(model, groups, group_of)
        twin = twins(model, groups, configs, flags)
        configs, members = _member_configs(model, groups, configs, twin, options.scatter_partial_sums)
        if options.state_sharding:
            configs, members = zip(*(group_states(model, group, cfgs, found, options.offload)
                                     for group, cfgs, found in zip(groups, configs, members)))
        nodes = _node_tables(model, groups, configs, members, flags, group_of, twin, progress)
    with phase(progress, "cost tables: edges", len(model.edges())):
        edges, cross, crossing, phases = _cross_edge_tables(model, members, flags, group_of, progress)
    node_mem, node_time, node_transient, known = nodes
    levels, carriers = fold(edges, phases, crossing, known, group_of, len(groups), model.later_kept)
    (node_mem, node_time, node_transient), edges = expand([node_mem, node_time, node_transient], edges, levels,
                                                          carriers)
    problem = CostProblem(tuple(node_mem), tuple(node_time), tuple(edges),
                          tuple(group.anchor for group in groups), tuple(node_transient))
    return SearchSpace(groups, configs, members, problem, tuple(cross), flags, levels)


def _member_configs(model, groups, configs, twin, scatter: bool):
    """Each group's configurations (search.space.group_variants, scattering partial sums where
    `scatter`) and each member's configuration per group configuration; a twin's
    (search.repeats) by position."""
    variants: list[tuple] = []
    members: list[dict[str, tuple[Configuration, ...]]] = []
    for g, (group, cfgs) in enumerate(zip(groups, configs)):
        if twin[g] < g:
            variants.append(variants[twin[g]])
            members.append(renamed(members[twin[g]], groups[twin[g]], group))
        else:
            found, per_member = group_variants(model, group, cfgs, scatter)
            variants.append(found)
            members.append(per_member)
    return tuple(variants), tuple(members)


def _node_tables(model, groups, configs, members, flags, group_of, twin, progress: Progress):
    """Per group: memory, time and transient per configuration (flags expanded), and the
    member inputs' transient terms by edge (search.levels); a twin's (search.repeats) are its
    earlier twin's."""
    inner: list[list] = [[] for _ in groups]          # edges inside a group, or into it from graph inputs
    for edge in model.edges():
        if edge.src_op is None or group_of[edge.src_op] == group_of[edge.dst_op]:
            inner[group_of[edge.dst_op]].append(edge)
    node_mem, node_time, node_transient, known = [], [], [], {}
    found_by_group: list[list] = []
    for g, group in enumerate(groups):
        if twin[g] < g:
            node_mem.append(node_mem[twin[g]])
            node_time.append(node_time[twin[g]])
            found_by_group.append(found_by_group[twin[g]])
        else:
            m, t = _node_costs(model, group, members[g], len(configs[g]), group_of, g)
            extra = node_flag_memory(model, flags[g], members[g], len(configs[g])) if flags[g] else None
            node_mem.append(expand_nodes(m, 1 << len(flags[g]), extra))
            node_time.append(expand_nodes(t, 1 << len(flags[g])))
            found = member_inputs(model, group, members[g], len(configs[g]), flags[g], inner[g])
            found_by_group.append([found[name] for name in group.members])
        later = model.later_kept          # a twin's members have later_q of their own: their terms differ
        node_transient.append(np.max(np.stack([inputs.term(later[name])
                                               for name, inputs in zip(group.members, found_by_group[g])]), axis=0))
        known.update(zip(group.members, found_by_group[g]))
        progress.advance()
    return node_mem, node_time, node_transient, known


def _cross_edge_tables(model, members, flags, group_of, progress: Progress):
    """The edges between groups: their cost tables (cached by what they depend on), reuse
    options, which edges enter each op, and their transient phases."""
    edges, cross, crossing, phases = [], [], {}, {}
    cache: dict[tuple, tuple] = {}
    for k, edge in enumerate(model.edges()):
        progress.advance()
        if edge.src_op is None:
            continue
        gs, gd = group_of[edge.src_op], group_of[edge.dst_op]
        if gs == gd:
            continue
        key = _edge_key(model, edge, members[gs][edge.src_op], members[gd][edge.dst_op])
        if key not in cache:
            cache[key] = _edge_table(model, edge, members[gs][edge.src_op], members[gd][edge.dst_op])
        mem, time, names, transient, defaults = cache[key]
        if flags[gs] or flags[gd]:
            flagged_key = (key, edge_flag_key(edge, flags[gs], flags[gd]))
            if flagged_key not in cache:
                cache[flagged_key] = expand_edge(model, edge, (mem, time, transient), flags[gs], flags[gd],
                                                 members[gs][edge.src_op], members[gd][edge.dst_op], names)
            mem, time, transient = cache[flagged_key]
        crossing.setdefault(edge.dst_op, []).append(len(edges))
        phases[len(edges)] = transient
        edges.append(EdgeCosts(gs, gd, mem, time, str(edge)))
        cross.append(CrossEdge(k, gs, gd, names, defaults))
    return edges, cross, crossing, phases


def _configurations(model, op_name: str, options: SpaceOptions) -> tuple[Configuration, ...]:
    """The op's configurations in `options` (weights replicated: `group_states` adds the sharded
    states per group); an op with none there (a scalar loss in a space without replication, a
    batch smaller than the devices) is replicated instead."""
    options = replace(options, state_sharding=False)
    found = model.configurations(op_name, options)
    return found or model.configurations(op_name, replace(options, allow_replicate=True))


def group_states(model, group: Group, configs: tuple[Configuration, ...],
                 members: dict[str, tuple[Configuration, ...]], offload: bool = False
                 ) -> tuple[tuple[Configuration, ...], dict[str, tuple[Configuration, ...]]]:
    """Each group configuration, followed by its sharded weight states where a member may hold
    its weights sharded (cost.weight_state): the anchor's configuration carries the state (the
    group's choice), each member that can shard takes it, the others stay replicated."""
    graph, out, per_member = model.graph, [], {name: [] for name in members}
    for k, config in enumerate(configs):
        able = {name for name, found in members.items()
                if can_shard_state(graph, model.layouts, name, found[k])}
        for state in offered_states(offload) if able else ("replicated",):
            out.append(config.with_state(state))
            for name, found in members.items():
                per_member[name].append(found[k].with_state(state) if name in able else found[k])
    return tuple(out), {name: tuple(found) for name, found in per_member.items()}


def group_variants(model, group: Group, anchor_configs, scatter: bool
                   ) -> tuple[tuple[Configuration, ...], dict[str, tuple[Configuration, ...]]]:
    """The group's configurations and each member's under them: every anchor configuration with
    its followers derived (`member_configs`), then, with `scatter`, again with partial sums
    reduce-scattered into split followers where that differs (search.coarsen, rule 1): the
    all-reduce keeps a follower replicated, which readers that need the whole tensor take for
    free; the reduce-scatter moves half the bytes and splits the follower's work and memory, and
    readers that need the whole tensor gather it."""
    plain = member_configs(model, group, anchor_configs)
    if not scatter:
        return tuple(anchor_configs), plain
    scattered = member_configs(model, group, anchor_configs, scatter=True)
    configs: list[Configuration] = []
    per_member: dict[str, list[Configuration]] = {name: [] for name in plain}
    for k, config in enumerate(anchor_configs):
        differs = any(scattered[name][k] != plain[name][k] for name in plain)
        for found in (plain, scattered) if differs else (plain,):
            configs.append(config)
            for name, chosen in per_member.items():
                chosen.append(found[name][k])
    return tuple(configs), {name: tuple(found) for name, found in per_member.items()}


def member_configs(model, group: Group, anchor_configs, scatter: bool = False
                   ) -> dict[str, tuple[Configuration, ...]]:
    """Each member's configuration per anchor configuration; with `scatter`, followers reading a
    partial sum take a split (search.coarsen.derive_follower_config)."""
    graph = model.graph
    derived: dict[str, tuple[Configuration, ...]] = {group.anchor: tuple(anchor_configs)}
    for name in group.members[1:]:
        op = graph.op(name)
        if group.rule == "shared-weights" and analysis_key(graph, op) == analysis_key(graph, graph.op(group.anchor)):
            derived[name] = tuple(anchor_configs)
            continue
        tensor, source = _source_in_group(graph, op, derived)
        per_config = []
        for src_config in derived[source]:
            placements = model.layout(source, src_config).outputs
            per_config.append(derive_follower_config(graph, model.analyses, op, tensor, src_config,
                                                     placements, scatter))
        derived[name] = tuple(per_config)
    return derived


def _source_in_group(graph: Graph, op, derived: Mapping[str, tuple]) -> tuple[str, str]:
    candidates = [(t, graph.producer[t].name) for t in op.inputs
                  if t in graph.producer and graph.producer[t].name in derived]
    return max(candidates, key=lambda c: graph.op_index[c[1]])


def _node_costs(model, group: Group, members, n: int, group_of, g: int) -> tuple[np.ndarray, np.ndarray]:
    mem, time = np.zeros(n), np.zeros(n)
    in_group = set(group.members)
    for name in group.members:
        for k, config in enumerate(members[name]):
            cost = model.op_cost(name, config)
            mem[k] += cost.memory_bytes - cost.memory.temporary_bytes
            time[k] += cost.time_s
    for edge in model.edges():
        if edge.dst_op not in in_group or (edge.src_op is not None and edge.src_op not in in_group):
            continue
        src = members[edge.src_op] if edge.src_op else (None,) * n
        for k, cost in enumerate(model.paired_edge_costs(edge.tensor, edge.src_op, src, edge.dst_op,
                                                         members[edge.dst_op])):
            mem[k] += cost.extra_memory_bytes
            time[k] += cost.time_s
    return mem, time


def _edge_key(model, edge, src_configs, dst_configs) -> tuple:
    graph = model.graph
    spec = graph.tensors[edge.tensor]
    src_op, dst_op = graph.op(edge.src_op), graph.op(edge.dst_op)
    return (analysis_key(graph, src_op), analysis_key(graph, dst_op), spec.shape, spec.dtype,
            spec.role, src_op.inputs.index(edge.tensor) if edge.tensor in src_op.inputs else
            src_op.outputs.index(edge.tensor), dst_op.inputs.index(edge.tensor), src_configs, dst_configs,
            edge.tensor in model.saved_by_op[src_op.name], edge.tensor in model.saved_by_op[dst_op.name],
            dst_op.name in model.recomputed,
            tuple(t in model.kept_tensors for t in dst_op.outputs), model.viewed_inputs[dst_op.name] is not None,
            other_keepers(graph, edge.tensor, edge.dst_op))


def _edge_table(model, edge, src_configs, dst_configs):
    """[R, K_src, K_dst] memory and time per reuse option, [3, R, K_src, K_dst] transient phases
    (cost.transient), and per (k, p) the options' names and the one it is priced under by default.
    Configurations that differ only in how their weights are held cost an edge the same: priced
    once, repeated."""
    (src_bases, src_index), (dst_bases, dst_index) = _bases(src_configs), _bases(dst_configs)
    if len(src_bases) < len(src_configs) or len(dst_bases) < len(dst_configs):
        mem, time, names, transient, defaults = _edge_table(model, edge, src_bases, dst_bases)
        pairs = [i * len(dst_bases) + j for i in src_index for j in dst_index]
        return (mem[:, src_index][:, :, dst_index], time[:, src_index][:, :, dst_index],
                tuple(names[x] for x in pairs), transient[..., src_index, :][..., dst_index],
                tuple(defaults[x] for x in pairs))
    ks, kd = len(src_configs), len(dst_configs)
    costs = model.edge_costs(edge.tensor, edge.src_op, src_configs, edge.dst_op, dst_configs)
    distinct: dict[int, int] = {}         # by id: the cost model gives pairs of equal layouts one cost
    found = [distinct.setdefault(id(cost), len(distinct)) for row in costs for cost in row]
    rows = [_reuse_row(cost) for cost in {id(cost): cost for row in costs for cost in row}.values()]
    r = max(len(options) for options, _, _ in rows)
    mem, time = (np.full((len(rows), r), np.inf) for _ in range(2))
    for u, (_, m, t) in enumerate(rows):
        mem[u, :len(m)], time[u, :len(t)] = m, t
    at = np.array(found, dtype=np.int64)
    mem, time = (np.ascontiguousarray(table[at].T.reshape(r, ks, kd)) for table in (mem, time))
    names = [rows[u][0] for u in found]
    transient = input_transient_table(model, edge, src_configs, dst_configs, costs, names)
    defaults = tuple(cost.default_reuse for row in costs for cost in row)
    return mem, time, tuple(names), transient, defaults


def _reuse_row(cost) -> tuple[tuple[str, ...], list[float], list[float]]:
    """An edge cost's reuse options by name ("" for none), and the memory and time under each."""
    options = [o.name for o in cost.reuse] or [cost.default_reuse]
    chosen = [cost if name == cost.default_reuse else cost.with_reuse(name) for name in options]
    return (tuple(name or "" for name in options), [c.extra_memory_bytes for c in chosen],
            [c.time_s for c in chosen])


def _bases(configs) -> tuple[tuple[Configuration, ...], np.ndarray]:
    """The distinct configurations with weights replicated, and where each of `configs` is among them."""
    bases = tuple(dict.fromkeys(c.base for c in configs))
    at = {c: i for i, c in enumerate(bases)}
    return bases, np.array([at[c.base] for c in configs], dtype=np.int64)


def additive_cost(model, strategy: Mapping[str, Configuration], terms: Sequence[tuple] | None = None
                  ) -> tuple[float, float]:
    """(peak memory, time) of a strategy (and its reuse choices) as FT counts them, straight from
    the cost model: Eq. 3's sums, plus the largest transient term (cost.transient; `terms`: its
    transient_terms, where the caller has them already)."""
    mem = time = 0.0
    for op in model.graph.ops:
        cost = model.op_cost(op.name, strategy[op.name])
        mem += cost.memory_bytes - cost.memory.temporary_bytes
        time += cost.time_s
    for edge in model.edges():
        cost = model.edge_cost_in(edge, strategy)
        mem += cost.extra_memory_bytes
        time += cost.time_s
    mem -= sum(num_bytes for num_bytes, _ in sharing_credits(model, strategy))
    return mem + plan_transient(model, strategy, terms)[0], time


__all__ = ["FT_SPACE", "SearchSpace", "additive_cost", "build_search_space", "group_variants", "member_configs", "Role"]
