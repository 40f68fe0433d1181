"""ATen -> TDL: which library ops (and attributes) describe each ATen op that export produces.

`convert(node)` takes a call_function node of an exported FX graph and returns the library ops that
compute it, in order, or None when the TDL has no description (capture then makes it `opaque`).
One node may become a chain: an input of a `Converted` is either an fx.Node of the exported graph
or `Intermediate(k)`, the output of the k-th op of the same list. `produces` says which element of
the node's output an op yields: 0 for a single-tensor node, i for element i of a tuple output
(split, chunk, unbind), None for an intermediate of the chain. An op with several outputs
(lstm_cell, max_dim) yields elements produces, produces + 1, ... Elements no op produces (the
saved statistics of native_layer_norm, running-statistics updates) are not described; a node
whose undescribed elements feed a computation converts to None.

Covered: the default export IR (no run_decompositions) of GPT-2/LLaMA-style decoders, BERT, T5-style
encoders, ResNet, VGG, Inception, AlexNet, unrolled LSTM cells; and most of the core ATen opset
(`described_targets`; `stratagem ops --coverage` lists the rest). In-place variants (`relu_`,
`add_`) convert as their functional ops. Training batch norm becomes batch_norm_stats followed by
batch_norm_apply (see tdl/library/norm.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from stratagem.frontend.aten import layers, pointwise, shape
from stratagem.frontend.aten.common import Converted, Converter, Intermediate


def _merge(*tables: Mapping[str, Converter]) -> dict[str, Converter]:
    merged: dict[str, Converter] = {}
    for table in tables:
        twice = sorted(set(merged) & set(table))
        if twice:
            raise RuntimeError(f"ATen converters given twice: {twice}")
        merged.update(table)
    return merged


CONVERTERS: Mapping[str, Converter] = MappingProxyType(_merge(pointwise.CONVERTERS, layers.CONVERTERS,
                                                              shape.CONVERTERS))


def target_name(target: Any) -> str:
    """"aten.add.Tensor" for an OpOverload; in-place overloads ("aten.relu_.default") map to their
    functional name ("aten.relu.default")."""
    name = str(target)
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "aten" and parts[1].endswith("_") and not parts[1].startswith("_"):
        parts[1] = parts[1][:-1]
    return ".".join(parts)


def convert(node: Any) -> list[Converted] | None:
    if getattr(node, "op", None) != "call_function":
        return None
    converter = CONVERTERS.get(target_name(node.target))
    return converter(node) if converter is not None else None


def described_targets() -> frozenset[str]:
    """The ATen overloads `convert` has a description for (some arguments may still give None)."""
    return frozenset(CONVERTERS)


__all__ = ["CONVERTERS", "Converted", "Intermediate", "convert", "described_targets", "target_name"]
