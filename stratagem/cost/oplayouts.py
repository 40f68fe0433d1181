"""Layouts of every op input and output under a configuration, memoized per op analysis (ops
of one signature share them; no cluster needed).

Shared by the cost model and by `profile_requests`, which lists the distinct local ops a search
would run: for each op and each configuration the space offers, the kernel one device executes
(kind, local input shapes and dtypes, attributes, which inputs need gradients).
"""

from __future__ import annotations

from dataclasses import replace

from stratagem.cost.compute_table import ProfileRequest, Work
from stratagem.cost.opcost import op_work
from stratagem.space.tensor_layout import TensorLayout, input_layout, output_layout
from stratagem.space.regions import input_boxes
from stratagem.ir import Graph
from stratagem.space import Configuration, OpLayout, SpaceOptions, enumerate_configurations, layout
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.graphops import AnalysisCache


class OpLayouts:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.analyses = AnalysisCache(graph)
        self._layouts: dict[tuple[Analysis, Configuration], OpLayout] = {}      # by analysis: ops of one
        self._inputs: dict[tuple[Analysis, Configuration, int, bool], TensorLayout] = {}   # signature share them

    def layout(self, op_name: str, config: Configuration) -> OpLayout:
        config = config.base                      # how weights are held changes no placement
        analysis = self.analyses[op_name]
        key = (analysis, config)
        found = self._layouts.get(key)
        if found is None:
            found = self._layouts[key] = layout(analysis, config)
        return found

    def input_layout(self, op_name: str, config: Configuration, index: int, gradient: bool = False
                     ) -> TensorLayout:
        config = config.base
        analysis = self.analyses[op_name]
        key = (analysis, config, index, gradient)
        found = self._inputs.get(key)
        if found is None:
            op_layout = self.layout(op_name, config)
            regular = all(p is not None for p in op_layout.inputs[index])
            boxes = None if regular else input_boxes(analysis, config, index)
            found = self._inputs[key] = input_layout(op_layout, index, gradient, boxes)
        return found

    def output_layout(self, op_name: str, config: Configuration, gradient: bool = False) -> TensorLayout:
        return output_layout(self.layout(op_name, config), gradient)

    def profile_request(self, op_name: str, config: Configuration) -> ProfileRequest:
        op, graph = self.graph.op(op_name), self.graph
        specs = [graph.tensors[t] for t in op.inputs]
        shapes = tuple(self.input_layout(op_name, config, i).local_shape(s.shape) for i, s in enumerate(specs))
        out = self.output_layout(op_name, config).local_shape(graph.tensors[op.outputs[0]].shape)
        return ProfileRequest(op.kind, shapes, tuple(s.dtype for s in specs), op.attrs,
                              tuple(t in graph.requires_grad for t in op.inputs), out)


def profile_requests(graph: Graph, num_devices: int, options: SpaceOptions = SpaceOptions()
                     ) -> tuple[ProfileRequest, ...]:
    """Every distinct local op of `graph` under the configurations a search would consider, each
    with the work the cost model prices it by (kept with its measurement: ops of its kind at sizes
    not measured are estimated from it)."""
    layouts = OpLayouts(graph)
    found: dict = {}
    for op in graph.ops:
        for config in enumerate_configurations(layouts.analyses[op.name], num_devices, options):
            request = layouts.profile_request(op.name, config)
            if request.key not in found:
                work = op_work(layouts, op.name, config)
                found[request.key] = replace(request, work=Work(work.flops, work.num_bytes + work.mask_bytes))
    return tuple(found.values())
