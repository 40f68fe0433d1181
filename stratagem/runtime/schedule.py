"""A plan as one rank executes it (no torch): per op, its mesh, the layout it reads each input in,
its output layout, this rank's share and adapter; per tensor, where it lives when it appears.

    data inputs    the data loader's layout (space.tensor_layout.loader_layout): S(sample dim) on the
                   1-D mesh of all devices when the batch divides evenly, else R
    parameters     the layout their owner (first consumer, cost.memory.weight_owner) reads them in:
                   the placements the plan gives them, and the ones their gradients are synced to;
                   a weight its owner holds sharded (the configuration's `state`), the stored
                   layout of cost.weight_state: the owner gathers it when it reads it
    activations    the producer's output layout

Every configuration covers all devices (space.runnable refuses sub-blocks), so a layout's mesh is
its shape; a plan for one device runs on the 1-element mesh (1,) with everything replicated.
`mesh_shapes` lists every mesh the run needs: the ops', the loader's, and the common refinement
(space.tensor_layout.refine) of each pair a tensor moves between.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from stratagem.cost.oplayouts import OpLayouts
from stratagem.cost.weight_state import sharded_weights
from stratagem.errors import ConfigError
from stratagem.ir import Graph, Op, Role, weight_owner
from stratagem.runtime.views import WorkerView, worker_view
from stratagem.space import REPLICATE, Configuration, OpLayout, Strategy, check_strategy, layout
from stratagem.space.halo import Halo, halo_exchange
from stratagem.space.regions import input_boxes
from stratagem.space.runnable import adapter_of
from stratagem.space.tensor_layout import TensorLayout, input_layout, loader_layout, output_layout, refine
from stratagem.tdl.library import LIBRARY


@dataclass(frozen=True)
class OpStep:
    op: Op
    attrs: Mapping[str, Any]                   # with the library's defaults
    layout: OpLayout
    inputs: tuple[TensorLayout, ...]           # the layout each input is read in
    outputs: TensorLayout
    view: WorkerView                           # this rank's share
    adapter: str | None
    analysis: Any
    stored: Mapping[int, TensorLayout]         # input position -> layout of a weight held sharded
    regather: bool                             # gather those again for backward ("sharded" state)
    halos: Mapping[int, Halo]                  # input position -> its halo exchange (read in `inputs`'
                                               # base layout, then exchanged: runtime.halo)

    @property
    def mesh_shape(self) -> tuple[int, ...]:
        return self.outputs.mesh_shape


@dataclass(frozen=True)
class Schedule:
    graph: Graph
    num_devices: int
    rank: int
    steps: tuple[OpStep, ...]
    sources: Mapping[str, TensorLayout]        # tensor -> its layout where it appears
    mesh_shapes: tuple[tuple[int, ...], ...]

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.graph.tensors.values() if s.role in (Role.WEIGHT, Role.BUFFER))


def on_mesh(lay: TensorLayout) -> TensorLayout:
    """A layout on a real mesh: the whole-tensor layout of a one-device plan becomes (1,), R."""
    return lay if lay.mesh_shape else TensorLayout(lay.first_device, (1,), (REPLICATE,))


def build_schedule(graph: Graph, strategy: Strategy | Mapping[str, Configuration], num_devices: int, rank: int,
                   input_layouts: Mapping[str, TensorLayout] | None = None) -> Schedule:
    """Rank `rank`'s steps under the strategy's per-op configurations (its reuse choices are the
    simulator's account of what autograd keeps; the runtime leaves keeping to autograd).
    `input_layouts`: graph inputs that arrive in a layout of their own, not the loader's (a
    pipeline stage's received activations: runtime.stages)."""
    check_strategy(graph, strategy)
    layouts = OpLayouts(graph)
    steps = tuple(_step(graph, layouts, op, strategy[op.name], rank) for op in graph.ops)
    by_op = {s.op.name: s for s in steps}
    sources = {name: on_mesh(loader_layout(graph.tensors[name], num_devices)) for name in graph.inputs}
    sources.update(input_layouts or {})
    sources.update(_parameter_layouts(graph, by_op, num_devices))
    for s in steps:
        sources.update((t, s.outputs) for t in s.op.outputs)
    return Schedule(graph, num_devices, rank, steps, sources, _mesh_shapes(steps, sources, num_devices))


def _step(graph: Graph, layouts: OpLayouts, op: Op, config: Configuration, rank: int) -> OpStep:
    analysis = layouts.analyses[op.name]
    op_layout = layout(analysis, config)
    halos = _halos(analysis, config, op_layout)
    inputs = tuple(on_mesh(halos[i].base if i in halos else input_layout(op_layout, i)) for i in range(len(op.inputs)))
    attrs = dict(op.attrs) if op.kind == "opaque" else LIBRARY[op.kind].attrs_with_defaults(op.attrs)
    view = worker_view(analysis, config, rank if config.num_devices > 1 else config.first_device)
    stored = {w.position: w.stored for w in sharded_weights(graph, layouts, op.name, config)}
    return OpStep(op, attrs, op_layout, inputs, on_mesh(output_layout(op_layout)), view,
                  adapter_of(analysis, config), analysis, stored, bool(stored) and config.regathers,
                  MappingProxyType(halos))


def _halos(analysis, config: Configuration, op_layout) -> dict[int, Halo]:
    """The halo exchange of each input read in irregular regions (space.runnable admits only
    those that are halos of a regular layout)."""
    found = {}
    for i, placements in enumerate(op_layout.inputs):
        if None not in placements:
            continue
        lay = TensorLayout(config.first_device, config.mesh_shape, tuple(placements))
        halo = halo_exchange(lay, input_boxes(analysis, config, i), tuple(analysis.input_shapes[i]))
        if isinstance(halo, str):
            raise ConfigError(f"op {analysis.name!r} under {config} reads input {i} in regions the runtime "
                              "cannot deliver", got=halo, hint="plan with runnable=True (the default)")
        found[i] = halo
    return found


def _parameter_layouts(graph: Graph, by_op: Mapping[str, OpStep], num_devices: int
                       ) -> dict[str, TensorLayout]:
    found = {}
    for spec in graph.tensors.values():
        if spec.role not in (Role.WEIGHT, Role.BUFFER):
            continue
        owner = weight_owner(graph, spec.name)
        if owner is None:
            found[spec.name] = TensorLayout(0, (num_devices,), (REPLICATE,))
            continue
        step = by_op[owner]
        position = step.op.inputs.index(spec.name)
        found[spec.name] = step.stored.get(position, step.inputs[position])
    return found


def _mesh_shapes(steps, sources: Mapping[str, TensorLayout], num_devices: int) -> tuple[tuple[int, ...], ...]:
    shapes = {(num_devices,)} | {s.mesh_shape for s in steps}
    for s in steps:
        for t, target in zip(s.op.inputs, s.inputs):
            pair = refine(sources[t], target)
            if pair is not None:
                shapes.add(pair[0].mesh_shape)
    return tuple(sorted(shapes, key=lambda shape: (len(shape), shape)))
