"""What micro-batching trains as the global batch does: the one account for the pipeline search
(which plans no stages for a graph it refuses) and the runtime (which refuses such a plan before
anything launches).

A plan with stages runs the graph of one micro-batch m times and adds up the m losses, each
weighted (`loss_reduction`: 1/m for a mean, 1 for a sum), so the gradients accumulate to those of
the global batch's loss. That is the same training only for a graph with
    one scalar floating-point output, the loss, a mean or a sum over its elements (not a
        class-weighted loss, whose mean divides by the batch's own total weight)
    every input cut along a sample dim
    no op but the loss reducing over the batch (batch normalization's statistics would be each
        micro-batch's)
    no buffer written in forward (running statistics would be written m times a step)
    no dropout (its mask is drawn at each element's position in the micro-batch's tensor: every
        micro-batch would draw the first one's)
`check_micro_batchable` raises ConfigError naming the first it finds.
"""

from __future__ import annotations

from stratagem.errors import ConfigError
from stratagem.ir import Graph
from stratagem.ir.dtypes import FLOATING
from stratagem.tdl.graphops import AnalysisCache

LOSS_REDUCTIONS = ("mean", "sum")
WEIGHTED_LOSSES = ("cross_entropy", "nll_loss")     # a third input: class weights
NO_STAGES = "Plan it without pipeline stages"


def check_micro_batchable(graph: Graph) -> None:
    _one_loss(graph)
    _sample_inputs(graph)
    _not_mixing(graph, AnalysisCache(graph))
    _no_state(graph)
    _no_dropout(graph)
    reduction = loss_reduction(graph)
    if reduction not in LOSS_REDUCTIONS:
        op = graph.producer[graph.outputs[0]]
        raise ConfigError(f"cannot tell how the micro-batch losses of op {op.name!r} ({op.kind}) add up",
                          expected="a loss that is the mean or the sum of its elements (reduction 'mean' or "
                                   "'sum', or a mean or sum op)",
                          got=f"reduction {reduction!r}" if reduction else f"a {op.kind} op", hint=NO_STAGES)


def _one_loss(graph: Graph) -> None:
    outputs = [graph.tensors[t] for t in graph.outputs]
    if len(outputs) != 1 or outputs[0].shape != () or outputs[0].dtype not in FLOATING:
        raise ConfigError("a pipeline plan trains on the graph's loss, one number per micro-batch",
                          expected="one scalar floating-point graph output",
                          got=", ".join(f"{s.name} {list(s.shape)} {s.dtype}" for s in outputs) or "no output",
                          hint=NO_STAGES)


def _no_state(graph: Graph) -> None:
    updates = dict(graph.meta.get("state_updates") or {})
    if updates:
        raise ConfigError("a pipeline plan cannot run a model whose forward writes buffers",
                          expected="no buffer written in forward",
                          got=f"{len(updates)} written (e.g. {min(updates)!r}): each micro-batch would write "
                              "it once, where the global batch writes it once per step",
                          hint=NO_STAGES)


def _sample_inputs(graph: Graph) -> None:
    for name in graph.inputs:
        if graph.tensors[name].sample_dim is None:
            raise ConfigError(f"graph input {name!r} has no sample dim to cut micro-batches along",
                              expected="every graph input with a batch dim", got=str(graph.tensors[name]),
                              hint=NO_STAGES)


def _no_dropout(graph: Graph) -> None:
    for op in graph.ops:
        p = op.attrs.get("p", 0) if op.kind == "dropout" and op.attrs.get("train", False) else 0
        p = op.attrs.get("dropout_p", 0) if op.kind == "scaled_dot_product_attention" else p
        if p:
            raise ConfigError(f"op {op.name!r} ({op.kind}) drops out with p = {p}",
                              expected="no dropout under pipeline stages",
                              got="a mask drawn at each element's position in the micro-batch's tensor, "
                                  "so every micro-batch would draw the first one's mask, not its own",
                              hint=NO_STAGES)


def _not_mixing(graph: Graph, analyses: AnalysisCache) -> None:
    """Refuse ops (but the loss) with a reduction over the sample dim of an input (batch norm's
    statistics): a micro-batch would see only its own samples."""
    loss = graph.producer[graph.outputs[0]].name
    mixing = [op for op in graph.ops if op.name != loss and any(
        d.is_reduction and analyses[op.name].addresses_sample_dim(d.name) for d in analyses[op.name].dims)]
    if mixing:
        op = mixing[0]
        kinds = sorted({o.kind for o in mixing})
        raise ConfigError(f"op {op.name!r} ({op.kind}) mixes the samples of a batch, so micro-batches "
                          "cannot train as the global batch does",
                          expected="ops that compute each sample from that sample alone (but the loss)",
                          got=f"{len(mixing)} ops reducing over the batch ({', '.join(kinds)}), e.g. batch "
                              "normalization in training mode, whose statistics would be each micro-batch's",
                          hint=NO_STAGES + ", or a model with per-sample normalization (LayerNorm, "
                                            "GroupNorm)")


def loss_reduction(graph: Graph) -> str | None:
    """'mean' or 'sum' when the micro-batch losses add up to the global one by a fixed weight: not
    a class-weighted loss (its mean divides by the batch's own total weight)."""
    op = graph.producer[graph.outputs[0]]
    if op.kind in LOSS_REDUCTIONS:
        return op.kind
    if op.kind in WEIGHTED_LOSSES and len(op.inputs) > 2:
        return "mean over class weights" if op.attrs.get("reduction") == "mean" else op.attrs.get("reduction")
    return op.attrs.get("reduction")
