"""The same graph in another floating-point precision (a bf16 or fp16 run of a captured fp32 model).

    with_floating_dtype(graph, "bfloat16")   every floating-point tensor in bfloat16

Integer and boolean tensors (indices, labels, masks) keep their dtype; ops, shapes and roles are
unchanged, so every op's FLOPs are the same and its bytes scale with the new element size.
"""

from __future__ import annotations

from dataclasses import replace

from stratagem.errors import GraphError
from stratagem.ir.dtypes import FLOATING
from stratagem.ir.graph import Graph


def with_floating_dtype(graph: Graph, dtype: str) -> Graph:
    if dtype not in FLOATING:
        raise GraphError("a floating-point dtype to compute the graph in", expected=f"one of {sorted(FLOATING)}",
                         got=repr(dtype), hint="Use the torch dtype name without the 'torch.' prefix")
    tensors = {name: replace(spec, dtype=dtype) if spec.dtype in FLOATING else spec
               for name, spec in graph.tensors.items()}
    return replace(graph, tensors=tensors)
