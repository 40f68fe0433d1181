"""The same graph in another floating-point precision (a bf16 or fp16 run of a captured fp32 model).

    with_floating_dtype(graph, "bfloat16")   every floating-point tensor in bfloat16
    with_precision(graph, "bf16-mixed")      the graph as a training precision computes it

Training precisions (`PRECISIONS`), as the planner, the plan file and the cost model name them:
    fp32         weights, activations, gradients and optimizer state in float32 (the graph as captured)
    bf16-mixed   weights, activations and gradients in bfloat16; float32 master weights and optimizer
                 state beside them (Micikevicius et al. 2018; FSDP2's MixedPrecisionPolicy with
                 param_dtype bfloat16): the cost model's `mixed_precision`

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


PRECISIONS = {"fp32": None, "bf16-mixed": "bfloat16"}     # precision -> the dtype the graph computes in


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise GraphError("unknown training precision", expected=" | ".join(PRECISIONS), got=repr(precision),
                         hint="bf16-mixed: bfloat16 compute with float32 master weights and optimizer state")
    return precision


def with_precision(graph: Graph, precision: str) -> Graph:
    dtype = PRECISIONS[check_precision(precision)]
    return graph if dtype is None else with_floating_dtype(graph, dtype)


def has_master_weights(precision: str) -> bool:
    """Whether the precision keeps float32 master weights and optimizer state beside its weights."""
    return PRECISIONS[check_precision(precision)] is not None
