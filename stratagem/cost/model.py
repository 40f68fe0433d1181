"""CostModel: operator and edge costs of any configuration on any cluster (TensorOpt §2.1).

    m(o, s) = m_p + m_t,   t(o, s) = t_c + t_s                          Eq. 1   op_cost
    m(e, s_i, s_j) = reuse delta,   t(e, s_i, s_j) = t_x                 Eq. 2   edge_cost
    t(S) = sum_o t(o) + sum_e t(e);  c(S) = sum_o t_s + sum_e t_x         Eq. 3   plan_cost
    m(S) = max over devices of the ops' and edges' memory there (P), plus the largest transient
           term there (T: what lives only while one op runs forward, cost.transient)

The parts: compute times (cost.compute: roofline, or a measured `ComputeTable`), collectives
(cluster.Cluster: alpha-beta on the links used, contention, or a profiled `CommTable`), memory
(cost.memory), gradient sync and update (cost.opcost), re-scheduling (cost.reschedule: the
collective state machine, or point-to-point transfers) and tensor reuse (cost.edgecost).

Searches call op_cost and edge_cost millions of times: both are memoized per argument tuple, and
everything under them (layouts, re-scheduling plans, collective times) is memoized too, so a
repeated call is one dictionary lookup. Both are priced by content: ops with equal facts
(cost.opcost.OpFacts) under one configuration, and edges with equal facts between equal layouts,
are priced once, so a repeated layer's are looked up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from stratagem.cluster import Cluster, CommTable, load
from stratagem.cost.activation_offload import check_offload, offloaded_ops, with_offload
from stratagem.cost.compute import ComputeModel
from stratagem.cost.compute_table import ComputeTable, ProfileRequest
from stratagem.cost.costs import EdgeCost, OpCost, PlanCost
from stratagem.cost.edgecost import EdgeFacts, consumer_layouts, edge_facts, edge_signature, priced_edge, source_layouts
from stratagem.cost.made import descendant_bits, later_kept_bytes, least_made, made_bytes
from stratagem.cost.memory import Optimizer, check_fused_kernels, kept_tensors, saved_tensors, viewed_input
from stratagem.cost.opcost import OpFacts, OpWork, build_op_cost, op_facts, op_work
from stratagem.cost.oplayouts import OpLayouts
from stratagem.cost.recompute import recomputed_ops, with_recompute
from stratagem.cost.redistribute import Redistribution
from stratagem.cost.reschedule import Rescheduler
from stratagem.cost.sharing import SharedTensor, shared_tensors, sharing_credits
from stratagem.cost.transient import input_transient_bytes, op_transient_bytes, transient_signature, transient_terms
from stratagem.cost.weight_state import check_state, with_states
from stratagem.errors import ConfigError
from stratagem.ir import Graph, Role, TensorSpec, dtype_bytes, weight_owner
from stratagem.space import (
    Configuration, Edge, OpLayout, SpaceOptions, check_reuse, check_strategy, enumerate_configurations, reuse_of,
)
from stratagem.space.tensor_layout import TensorLayout
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.graphops import AnalysisCache


MEMORY_KINDS = ("weights", "gradients", "optimizer_state", "activations", "transient")


class CostModel:
    """Costs of `graph` on the first `num_devices` devices of `cluster` (a Cluster or preset name).

    optimizer: sgd | momentum | adam | adamw; mixed_precision: a bf16 or fp16 graph's weights held
    in float32 (the master weights its optimizer steps, states in float32 too; cost.opcost); shard_updates: ZeRO-style reduce-scatter + sharded update + all-gather instead of an
    all-reduce. compute_table / comm_table: measured tables (objects or JSON paths), preferred
    wherever they have an entry. recompute: blocks recomputed in backward (cost.recompute);
    offload_activations: blocks whose saved activations go to host memory until backward
    (cost.activation_offload); the model's `graph` is the graph as both run it.
    """

    def __init__(self, graph: Graph, cluster: Cluster | str, optimizer: str = "adam",
                 num_devices: int | None = None, compute_table: ComputeTable | str | Path | None = None,
                 comm_table: CommTable | str | Path | None = None, mixed_precision: bool = False,
                 shard_updates: bool = False, recompute: tuple[str, ...] = (),
                 offload_activations: tuple[str, ...] = ()):
        cluster = load(cluster) if isinstance(cluster, str) else cluster
        if comm_table is not None:
            cluster = cluster.with_comm_table(comm_table if isinstance(comm_table, CommTable)
                                              else CommTable.load(comm_table))
        if compute_table is None:
            compute_table = cluster.spec.ops_table      # the one the cluster file names, if any
        if isinstance(compute_table, (str, Path)):
            compute_table = ComputeTable.load(compute_table)
        self.source_graph = graph
        self.recompute = tuple(recompute)
        self.offload_activations = check_offload(graph, offload_activations, self.recompute)
        self.graph, self.cluster = with_offload(with_recompute(graph, recompute), self.offload_activations), cluster
        self._siblings: dict[tuple, CostModel] = {(self.recompute, self.offload_activations): self}
        self.recomputed = recomputed_ops(self.graph)
        self.offloaded = offloaded_ops(self.graph)
        self.num_devices = cluster.device_count(num_devices)
        self.optimizer = Optimizer(optimizer)
        self.mixed_precision = mixed_precision
        self.shard_updates = shard_updates
        self.device = cluster.devices[0].spec
        check_fused_kernels(self.device.fused_kernels)
        self.compute = ComputeModel(self.device, compute_table)
        self.layouts = OpLayouts(graph)
        self.analyses = self.layouts.analyses
        self.rescheduler = Rescheduler(cluster, self.price)
        self._ops: dict[tuple[str, Configuration], OpCost] = {}
        self._alike: dict[str, str] = {}                   # op -> the first op with its facts
        self._by_facts: dict[OpFacts, str] = {}
        self._priced_ops: dict[tuple[str, Configuration], OpCost] = {}     # by that first op
        self._edges: dict[tuple, EdgeCost] = {}
        self._alike_edges: dict[tuple, tuple] = {}          # (tensor, src, dst) -> the first edge with its signature
        self._edges_by_signature: dict[tuple, tuple] = {}
        self._priced: dict[tuple, EdgeCost] = {}
        self._prices: dict[tuple, float] = {}
        self._configs: dict[tuple[str, SpaceOptions], tuple[Configuration, ...]] = {}
        self._by_analysis: dict[tuple[Analysis, SpaceOptions], tuple[Configuration, ...]] = {}
        self._edge_list: tuple[Edge, ...] | None = None
        self._kept: frozenset[str] | None = None
        self._viewed: Mapping[str, str | None] | None = None
        self._saved: Mapping[str, frozenset[str]] | None = None
        self._edges_of: Mapping[str, tuple[int, ...]] | None = None
        self._transients: dict[tuple, Any] = {}      # cost.transient's terms by their arguments
        self._transient_signatures: dict[Edge, tuple] = {}   # cost.transient.transient_signature per edge
        self._shared: tuple[SharedTensor, ...] | None = None
        self._later: Mapping[str, float] | None = None
        self._descendants: tuple[int, ...] | None = None
        self._least_made: np.ndarray | None = None

    # ---- public API ---------------------------------------------------------------------------------
    def recomputing(self, names: tuple[str, ...]) -> "CostModel":
        """The same cost model (cluster, tables, optimizer, precision) with the blocks `names`
        recomputed instead, the others offloaded as before; made once per choice and shared."""
        names = tuple(names)
        return self.with_activations(names, tuple(b for b in self.offload_activations if b not in names))

    def offloading(self, names: tuple[str, ...]) -> "CostModel":
        """The same cost model with the blocks `names` offloading their activations instead, the
        others recomputed as before."""
        names = tuple(names)
        return self.with_activations(tuple(b for b in self.recompute if b not in names), names)

    def with_activations(self, recompute: tuple[str, ...], offload: tuple[str, ...]) -> "CostModel":
        """The same cost model with the blocks `recompute` recomputed and `offload` offloaded
        (every other block keeping its activations)."""
        key = (tuple(recompute), tuple(offload))
        found = self._siblings.get(key)
        if found is None:
            found = CostModel(self.source_graph, self.cluster, self.optimizer.name, self.num_devices,
                              self.compute.table, None, self.mixed_precision, self.shard_updates, *key)
            found._siblings = self._siblings
            self._siblings[key] = found
        return found

    def op_cost(self, op_name: str, config: Configuration) -> OpCost:
        key = (op_name, config)
        found = self._ops.get(key)
        if found is None:
            check_state(self.graph, self.layouts, op_name, config)
            found = self._ops[key] = self._priced_op(self._first_alike(op_name), self._checked(config))
        return found

    def _priced_op(self, op_name: str, config: Configuration) -> OpCost:
        """cost.opcost.build_op_cost of the first op with some facts (`_first_alike`), memoized:
        every op with those facts costs the same under `config`."""
        key = (op_name, config)
        found = self._priced_ops.get(key)
        if found is None:
            found = self._priced_ops[key] = build_op_cost(self, op_name, config)
        return found

    def _first_alike(self, op_name: str) -> str:
        """The first op asked about whose facts (cost.opcost.OpFacts) equal `op_name`'s."""
        found = self._alike.get(op_name)
        if found is None:
            found = self._alike[op_name] = self._by_facts.setdefault(op_facts(self, op_name), op_name)
        return found

    def op_work(self, op_name: str, config: Configuration) -> OpWork:
        """What one device's share of the op computes and moves (what op_cost prices its time from)."""
        return op_work(self, op_name, self._checked(config))

    def edge_cost(self, tensor: str, src_op: str | None, src_config: Configuration | None,
                  dst_op: str, dst_config: Configuration) -> EdgeCost:
        found = self._edges.get((tensor, src_op, src_config.base if src_config is not None else None, dst_op,
                                 dst_config.base))      # weight states move no activation
        if found is None:
            found = self.paired_edge_costs(tensor, src_op, (src_config,), dst_op, (dst_config,))[0]
        return found

    def edge_costs(self, tensor: str, src_op: str | None, src_configs, dst_op: str, dst_configs
                   ) -> list[list[EdgeCost]]:
        """[[edge_cost(tensor, src_op, a, dst_op, b) for b in dst_configs] for a in src_configs],
        with the edge's facts found once and each configuration's layouts once. Edges with equal
        facts (cost.edgecost.EdgeFacts) between equal layouts are priced once, a repeated layer's too."""
        found = self.paired_edge_costs(tensor, src_op, [a for a in src_configs for _ in dst_configs], dst_op,
                                       list(dst_configs) * len(src_configs))
        return [found[i:i + len(dst_configs)] for i in range(0, len(found), len(dst_configs))]

    def paired_edge_costs(self, tensor: str, src_op: str | None, src_configs, dst_op: str, dst_configs
                          ) -> list[EdgeCost]:
        """[edge_cost(tensor, src_op, a, dst_op, b) for a, b in zip(src_configs, dst_configs)],
        found as edge_costs finds them."""
        bases: dict[Configuration | None, Configuration | None] = {None: None}
        layouts, first, found = None, None, []
        for a, b in zip(src_configs, dst_configs):
            a, b = (bases[c] if c in bases else bases.setdefault(c, c.base) for c in (a, b))
            key = (tensor, src_op, a, dst_op, b)
            cost = self._edges.get(key)
            if cost is None:
                first = first or self._first_alike_edge(tensor, src_op, dst_op)
                first_key = (first[0], first[1], a, first[2], b)
                cost = self._edges.get(first_key)
                if cost is None:
                    layouts = layouts or _EdgeLayouts(self, *first)
                    cost = self._edges[first_key] = layouts.priced(a, self._checked(b))
                self._edges[key] = cost
            found.append(cost)
        return found

    def _first_alike_edge(self, tensor: str, src_op: str | None, dst_op: str) -> tuple:
        """The first edge asked about whose signature (cost.edgecost.edge_signature) equals this
        one's, as (tensor, src_op, dst_op): it costs what that one costs under each configuration pair."""
        edge = (tensor, src_op, dst_op)
        found = self._alike_edges.get(edge)
        if found is None:
            found = self._alike_edges[edge] = self._edges_by_signature.setdefault(
                edge_signature(self, tensor, src_op, dst_op), edge)
        return found

    def priced_edge(self, facts: EdgeFacts, src: TensorLayout, grad_target: TensorLayout | None,
                    dst: tuple[TensorLayout, ...], grads: tuple[TensorLayout, ...]) -> EdgeCost:
        """cost.edgecost.priced_edge, memoized by its arguments (what an edge's cost depends on)."""
        key = (facts, src, grad_target, dst, grads)
        found = self._priced.get(key)
        if found is None:
            found = self._priced[key] = priced_edge(self, facts, src, grad_target, dst, grads)
        return found

    def edge_cost_in(self, edge: Edge, strategy: Mapping[str, Configuration],
                     reuse: Mapping[Edge, str] | None = None) -> EdgeCost:
        """What `edge` costs under `strategy`, kept as its reuse choice says (`reuse`, else the
        strategy's own, else the cost's default): what Eq. 3, the simulator and reports all price."""
        src = strategy[edge.src_op] if edge.src_op else None
        cost = self.edge_cost(edge.tensor, edge.src_op, src, edge.dst_op, strategy[edge.dst_op])
        option = (reuse_of(strategy) if reuse is None else reuse).get(edge)
        return cost.with_reuse(option) if option and option != cost.default_reuse else cost

    @property
    def shared_tensors(self) -> tuple[SharedTensor, ...]:
        """Activations two or more consumers keep and their producer does not (cost.sharing), once."""
        if self._shared is None:
            self._shared = shared_tensors(self.graph)
        return self._shared

    @property
    def kept_tensors(self) -> frozenset[str]:
        """Every activation some op keeps for its backward (cost.memory.kept_tensors), once."""
        if self._kept is None:
            self._kept = kept_tensors(self.graph)
        return self._kept

    @property
    def descendants(self) -> tuple[int, ...]:
        """Per op in program order, its descendants as a bit set (cost.made.descendant_bits), once."""
        if self._descendants is None:
            self._descendants = descendant_bits(self.graph)
        return self._descendants

    @property
    def least_made(self) -> np.ndarray:
        """Per op in program order, what it makes that stays at the least (cost.made.least_made), once:
        every simulated plan on device subsets asks for it."""
        if self._least_made is None:
            self._least_made = least_made(self)
        return self._least_made

    @property
    def later_kept(self) -> Mapping[str, float]:
        """Per op, what its descendants keep for backward at the least (cost.made.later_kept_bytes), once."""
        if self._later is None:
            self._later = MappingProxyType(dict(later_kept_bytes(self)))
        return self._later

    @property
    def viewed_inputs(self) -> Mapping[str, str | None]:
        """Per op, the activation its output is a view of, or None (cost.memory.viewed_input), once."""
        if self._viewed is None:
            analyses = self.analyses if self.graph is self.source_graph else AnalysisCache(self.graph)
            self._viewed = {op.name: viewed_input(self.graph, op, analyses) for op in self.graph.ops}
        return self._viewed

    @property
    def saved_by_op(self) -> Mapping[str, frozenset[str]]:
        """Per op, the tensors it keeps for its backward (cost.memory.saved_tensors), once."""
        if self._saved is None:
            self._saved = MappingProxyType({op.name: frozenset(saved_tensors(self.graph, op)) for op in self.graph.ops})
        return self._saved

    @property
    def edges_of(self) -> Mapping[str, tuple[int, ...]]:
        """Per op, the indices (into `edges()`) of the edges it is an end of, in order, once."""
        if self._edges_of is None:
            found: dict[str, list[int]] = {}
            for k, e in enumerate(self.edges()):
                for end in (e.src_op, e.dst_op):
                    if end is not None:
                        found.setdefault(end, []).append(k)
            self._edges_of = MappingProxyType({op: tuple(ks) for op, ks in found.items()})
        return self._edges_of

    def configurations(self, op_name: str, options: SpaceOptions = SpaceOptions()) -> tuple[Configuration, ...]:
        """The op's configurations in `options`; with `state_sharding`, each one the op may hold its
        weights sharded under is followed by its sharded states (cost.weight_state)."""
        key = (op_name, options)
        if key not in self._configs:
            found = self._enumerated(self.analyses[op_name], options)
            if options.state_sharding:
                found = with_states(self.graph, self.layouts, op_name, found, options.offload)
            self._configs[key] = found
        return self._configs[key]

    def _enumerated(self, analysis, options: SpaceOptions) -> tuple[Configuration, ...]:
        """enumerate_configurations, once per analysis (shared by the ops of one signature)."""
        key = (analysis, options)
        found = self._by_analysis.get(key)
        if found is None:
            found = self._by_analysis[key] = enumerate_configurations(analysis, self.num_devices, options)
        return found

    def edges(self) -> tuple[Edge, ...]:
        """Every (tensor, source op, consumer) pair a strategy pays re-scheduling for."""
        if self._edge_list is None:
            found = []
            for op in self.graph.ops:
                for t in dict.fromkeys(op.inputs):
                    source = self._source_of(t)
                    if source is not False and source != op.name:
                        found.append(Edge(t, source, op.name))
            self._edge_list = tuple(found)
        return self._edge_list

    def plan_cost(self, strategy: Mapping[str, Configuration]) -> PlanCost:
        time_s, communication_s, compute_s = self.plan_times_s(strategy)
        parts = self.memory_parts(strategy)
        peaks = tuple(sum(kind[d] for kind in parts.values()) for d in range(self.num_devices))
        return PlanCost(time_s, max(peaks), communication_s, compute_s, peaks)

    def plan_times_s(self, strategy: Mapping[str, Configuration]) -> tuple[float, float, float]:
        """Eq. 3's time of a strategy, and its communication and compute parts (plan_cost's, without
        its memory)."""
        check_strategy(self.graph, strategy)
        check_reuse(self.edges(), reuse_of(strategy))
        time_s = communication_s = compute_s = 0.0
        for op in self.graph.ops:
            cost = self.op_cost(op.name, strategy[op.name])
            time_s, compute_s = time_s + cost.time_s, compute_s + cost.compute_time_s
            communication_s += cost.communication_time_s
        for edge in self.edges():
            cost = self.edge_cost_in(edge, strategy)
            time_s, communication_s = time_s + cost.time_s, communication_s + cost.time_s
        return time_s, communication_s, compute_s

    def memory_parts(self, strategy: Mapping[str, Configuration], terms: Sequence[tuple] | None = None
                     ) -> dict[str, list[float]]:
        """Per kind, per device, the additive memory (weights, gradients, optimizer state,
        activations: saved ones and kept re-scheduled copies, less buffers shared by their
        keepers) and the largest transient term: what Eq. 3's peak adds up. `terms`: the
        strategy's transient_terms, where the caller has them already."""
        spans = _Spans([config.devices for config in strategy.values()], self.num_devices)
        parts = {kind: np.zeros(len(spans.lengths)) for kind in MEMORY_KINDS}       # per span
        ops = [(spans.of(strategy[op.name].devices), self.op_cost(op.name, strategy[op.name]).memory)
               for op in self.graph.ops]
        at = _spread([r for r, _ in ops])
        for kind, field in (("weights", "parameter_bytes"), ("gradients", "gradient_bytes"),
                            ("optimizer_state", "optimizer_bytes")):
            np.add.at(parts[kind], at, _repeated([getattr(m, field) for _, m in ops], ops))
        edges = [(spans.of(strategy[e.dst_op].devices), self.edge_cost_in(e, strategy).extra_memory_bytes)
                 for e in self.edges()]
        np.add.at(parts["activations"], np.concatenate([at, _spread([r for r, _ in edges])]),
                  np.concatenate([_repeated([m.activation_bytes for _, m in ops], ops),
                                  _repeated([b for _, b in edges], edges)]))     # in the order of a loop: ops, then edges
        for num_bytes, devices in sharing_credits(self, strategy):
            np.subtract.at(parts["activations"], list(spans.of(devices)), num_bytes)
        for num_bytes, devices, _ in (transient_terms(self, strategy) if terms is None else terms):
            np.maximum.at(parts["transient"], list(spans.of(devices)), num_bytes)
        return {kind: np.repeat(values, spans.lengths).tolist() for kind, values in parts.items()}

    def host_bytes(self, strategy: Mapping[str, Configuration], copies: Sequence[int] | None = None) -> list[float]:
        """Per device, the weights, gradients and optimizer state its ops keep in host memory
        (the "offloaded" weight state) and the activations its offloaded blocks send there
        (cost.activation_offload), those `copies[d]` times on device d (a pipeline stage's
        micro-batches in flight; once where not given); none of the device's memory."""
        found = np.zeros(self.num_devices)
        times = np.ones(self.num_devices) if copies is None else np.asarray(copies, dtype=float)
        for op in self.graph.ops:
            config = strategy[op.name]
            if config.offloaded or op.name in self.offloaded:
                memory = self.op_cost(op.name, config).memory
                on = slice(config.first_device, config.first_device + config.num_devices)
                found[on] += memory.host_bytes + memory.offloaded_bytes * times[on]
        return found.tolist()

    def host_bytes_per_node(self, strategy: Mapping[str, Configuration], copies: Sequence[int] | None = None
                            ) -> float:
        """The most host memory the devices of one node keep offloaded (`host_bytes`, summed per node)."""
        per_device = np.asarray(self.host_bytes(strategy, copies))
        per = self.cluster.spec.devices_per_node
        padded = np.concatenate([per_device, np.zeros(-len(per_device) % per)])
        return float(padded.reshape(-1, per).sum(axis=1).max()) if len(padded) else 0.0

    def input_transient(self, edge: Edge, src_config: Configuration | None, dst_config: Configuration,
                        option: str | None, kept_by_another: bool) -> tuple[float, float, float]:
        """cost.transient.input_transient_bytes, memoized (every simulated plan asks it per edge), and
        once for edges alike (cost.transient.transient_signature: a repeated layer's edges)."""
        key = (edge, src_config, dst_config, option, kept_by_another)
        found = self._transients.get(key)
        if found is None:
            signature = self._transient_signatures.get(edge)
            if signature is None:
                signature = self._transient_signatures[edge] = ("edge", *transient_signature(self, edge))
            alike = (signature, src_config, dst_config, option, kept_by_another)
            found = self._transients.get(alike)
            if found is None:
                found = self._transients[alike] = input_transient_bytes(self, edge, src_config, dst_config,
                                                                        option, kept_by_another)
            self._transients[key] = found
        return found

    def op_made(self, op_name: str, config: Configuration) -> float:
        """cost.made.made_bytes, memoized."""
        key = ("made", op_name, config)
        found = self._transients.get(key)
        if found is None:
            found = self._transients[key] = made_bytes(self, op_name, config)
        return found

    def op_transient(self, op_name: str, config: Configuration) -> float:
        """cost.transient.op_transient_bytes, memoized."""
        key = (op_name, config)
        found = self._transients.get(key)
        if found is None:
            found = self._transients[key] = op_transient_bytes(self, op_name, config)
        return found

    # ---- shared pieces (used by opcost and edgecost) -------------------------------------------------
    def price(self, kind: str, num_bytes: float, groups: tuple[tuple[int, ...], ...],
              issued: str | None = "move") -> float:
        """One collective's time as the runtime issues it (cluster.comm_table.ISSUED): "move", a
        tensor re-scheduled into a consumer's layout or its gradient back (the re-scheduler's
        steps; a sharded weight's gathers and its gradient's reduce-scatter, cost.opcost);
        "sync", a replicated weight's gradient synchronized (cost.opcost); None, no DTensor call
        (a copy to or from the host)."""
        key = (kind, num_bytes, groups, issued)
        found = self._prices.get(key)
        if found is None:
            found = self._prices[key] = self.cluster.concurrent_collective_time_s(kind, num_bytes, groups, issued)
        return found

    def layout(self, op_name: str, config: Configuration) -> OpLayout:
        return self.layouts.layout(op_name, config)

    def input_layout(self, op_name: str, config: Configuration, index: int, gradient: bool = False
                     ) -> TensorLayout:
        return self.layouts.input_layout(op_name, config, index, gradient)

    def reschedule(self, spec: TensorSpec, src: TensorLayout, dst: TensorLayout) -> Redistribution:
        return self.rescheduler.plan(spec.shape, dtype_bytes(spec.dtype), src, dst)

    def profile_request(self, op_name: str, config: Configuration) -> ProfileRequest:
        return self.layouts.profile_request(op_name, config)

    def _source_of(self, tensor: str) -> str | None | bool:
        """The op a tensor comes from (owner for weights), None for graph inputs, False if none."""
        spec = self.graph.tensors[tensor]
        if tensor in self.graph.producer:
            return self.graph.producer[tensor].name
        if spec.role in (Role.WEIGHT, Role.BUFFER):
            return weight_owner(self.graph, tensor)
        return None if spec.role is Role.INPUT else False

    def _checked(self, config: Configuration) -> Configuration:
        if config.devices.stop > self.num_devices:
            raise ConfigError(f"configuration {config} uses devices beyond the model's {self.num_devices}",
                              hint="Use configurations from CostModel.configurations")
        return config


class _Spans:
    """The devices cut wherever one of `ranges` starts or ends: each span's devices lie in the
    same ranges, so a sum per device over the ranges, in a loop's order, is the sum of its span
    in that order (the same floats added in the same order), repeated over the span's devices.
    On 16,384 devices a plan has a few spans, not 16,384 sums per op."""

    def __init__(self, ranges, num_devices: int):
        self.cuts = sorted({0, num_devices, *(r.start for r in ranges), *(r.stop for r in ranges)})
        self.lengths = np.diff(np.asarray(self.cuts, dtype=np.int64))
        self._index = {cut: i for i, cut in enumerate(self.cuts)}

    def of(self, devices: range) -> range:
        """The spans of a range of devices (its ends among the cuts)."""
        return range(self._index[devices.start], self._index[devices.stop])


def _spread(ranges: list[range]) -> np.ndarray:
    """The devices of each range, one after another."""
    lengths = np.fromiter(map(len, ranges), dtype=np.int64, count=len(ranges))
    starts = np.fromiter((r.start for r in ranges), dtype=np.int64, count=len(ranges))
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))


def _repeated(values: list[float], spans: list[tuple[range, object]]) -> np.ndarray:
    """Each value once per device of its span's range (as `_spread` lists them)."""
    return np.repeat(np.asarray(values, dtype=np.float64), [len(r) for r, _ in spans])


class _EdgeLayouts:
    """One edge's facts, and its distinct layouts at either end by configuration, while
    CostModel.edge_costs fills a table: each pair of distinct layouts is priced (looked up) once."""

    def __init__(self, model: CostModel, tensor: str, src_op: str | None, dst_op: str):
        self.model, self.tensor, self.src_op, self.dst_op = model, tensor, src_op, dst_op
        self.facts = edge_facts(model, tensor, src_op, dst_op)
        self._sources: dict[Configuration | None, int] = {}     # configuration -> distinct layouts' index
        self._consumers: dict[Configuration, int] = {}
        self._layouts: tuple[list, list] = ([], [])             # per end, the distinct layouts
        self._ids: tuple[dict, dict] = ({}, {})                 # and their indices
        self._by_index: dict[tuple[int, int], EdgeCost] = {}

    def priced(self, src_config: Configuration | None, dst_config: Configuration) -> EdgeCost:
        pair = (self._index(0, self._sources, src_config), self._index(1, self._consumers, dst_config))
        found = self._by_index.get(pair)
        if found is None:
            found = self._by_index[pair] = self.model.priced_edge(
                self.facts, *self._layouts[0][pair[0]], *self._layouts[1][pair[1]])
        return found

    def _index(self, end: int, known: dict, config: Configuration | None) -> int:
        found = known.get(config)
        if found is None:
            layouts = source_layouts(self.model, self.tensor, self.src_op, config) if end == 0 else \
                consumer_layouts(self.model, self.facts, self.tensor, self.dst_op, config)
            found = known[config] = self._ids[end].setdefault(layouts, len(self._ids[end]))
            if found == len(self._layouts[end]):
                self._layouts[end].append(layouts)
        return found
