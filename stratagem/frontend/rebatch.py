"""The captured graph of a model at another batch size, without tracing the model again.

Capture's two exports (the program, and the one with one more sample) are most of its cost, and
the pipeline search needs the graph at each micro-batch size. Here the model is exported once
more with its batch symbolic (torch.export's `Dim`, from 2 to the capture's batch + 1): while
tracing, torch checks that no branch of the model or of its kernels depends on the batch (an
export that would have to specialize it fails). That program is matched node by node to the
capture's own exports (same node kinds and targets, in order; every argument and value equal once
the batch is set to the capture's batch, and to one more against the second export). The program
at batch k is then the capture's export with every argument and value evaluated at k from the
symbolic export's expressions, and capture's later steps run on it as on a fresh export: saved
tensors (a fake-tensor run of every node, which also checks every shape), lowering, sample dims;
the batch dims compare the programs at k and k + 1, as batchdims.py does.

`derived_program` returns None, and the caller captures, wherever exactness is not assured: the
symbolic export fails or does not match; k lies outside its range, or is 1 (export specializes
sizes 0 and 1: a static trace at batch 1 drops, e.g., an expand to a size-1 dim); two distinct size
expressions of the program (shapes, strides, offsets, with 0 and 1) take the same value at k (a
static trace compares concrete sizes and may take a shortcut the symbolic trace did not); a value
is not an integer there. `derived_graph` needs the programs at k and k + 1, and the saved-tensor
run to succeed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch import fx

from stratagem.frontend.capture import Captured, caches_off, input_sample_dims, lowered_graph, positional_inputs
from stratagem.frontend.batchdims import dims_between, is_one_sample, program_keys
from stratagem.frontend.export import export_program
from stratagem.frontend.fxnodes import tensor_leaves
from stratagem.frontend.saved import saved_tensors
from stratagem.ir import Graph

SMALLEST = 2                       # export specializes batch sizes 0 and 1
SYMBOLIC_TARGETS = ("sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "_assert_scalar",
                    "sym_constrain_range")


class NotExact(Exception):
    """A value that cannot be evaluated exactly at a batch size."""


@dataclass(frozen=True)
class DerivedProgram:
    """What capture's later steps read of an ExportedProgram, at another batch size: its graph,
    and the capture's graph module (for the attributes it holds), signature, state and constants."""

    graph: fx.Graph
    graph_module: fx.GraphModule
    graph_signature: Any
    state_dict: Mapping[str, Any]
    constants: Mapping[str, Any]


@dataclass(frozen=True)
class BatchFamily:
    """A capture at `batch` and its export with a symbolic batch, matched node by node.
    `symbolic[i]` is the symbolic export's node for node i of the capture's program; `sizes` every
    distinct size expression of the program (shapes, strides, storage offsets; 0 and 1)."""

    captured: Captured
    module: torch.nn.Module
    symbolic: tuple[fx.Node, ...]
    symbol: sympy.Symbol
    batch: int
    largest: int
    sizes: frozenset[sympy.Expr]


def batch_family(module: torch.nn.Module, inputs_at: Callable[[int], Any], captured: Captured,
                 batch: int) -> BatchFamily | None:
    """The family of `captured` (the capture of `module` on inputs_at(batch)), or None where the
    symbolic export fails or does not reproduce the capture's exports at batch and batch + 1."""
    grown = captured.grown if batch >= SMALLEST else None
    if grown is None:
        return None
    inputs = positional_inputs(module, inputs_at(batch))
    dims = _input_batch_dims(inputs, positional_inputs(module, inputs_at(batch + 1)))
    if dims is None:
        return None
    largest = batch + 1
    dim = torch.export.Dim("batch", min=SMALLEST, max=largest)
    try:
        with caches_off(module):
            program = export_program(module, inputs, tuple(None if d is None else {d: dim} for d in dims))
    except Exception:   # noqa: BLE001 - any failure only costs the derivation
        return None
    return _matched(captured, grown, module, program, batch, largest)


def derived_program(family: BatchFamily, batch: int) -> DerivedProgram | None:
    """The capture's program at `batch`, or None where its exactness is not assured."""
    if not SMALLEST <= batch <= family.largest:
        return None
    try:
        return None if _coincide(family, batch) else _program_at(family, batch)
    except NotExact:
        return None


def derived_graph(family: BatchFamily, batch: int, inputs: Any, name: str) -> Graph | None:
    """The graph capture(module, inputs) gives at `batch` (inputs: the example inputs at that
    batch), or None where its exactness is not assured (the caller captures)."""
    program = derived_program(family, batch)
    grown = derived_program(family, batch + 1)
    if program is None or grown is None or not _same_inputs(program, positional_inputs(family.module, inputs)):
        return None
    try:
        saved = saved_tensors(program)
    except Exception:   # noqa: BLE001 - capture would record nothing known: let it say so
        return None
    module = family.module
    with caches_off(module) as turned_off:
        by_name = input_sample_dims(program, positional_inputs(module, inputs), None)
    return lowered_graph(program, module, dims_between(program, grown, is_one_sample(program, by_name)), by_name,
                         saved, name, turned_off)


# ---- matching the symbolic export to the capture's ------------------------------------------
def _input_batch_dims(inputs: Sequence[Any], grown: Sequence[Any]) -> tuple[int | None, ...] | None:
    """Per input, the dim one longer with one more sample (None: the same input); None where an
    input is no tensor, or differs otherwise."""
    dims: list[int | None] = []
    for a, b in zip(inputs, grown, strict=True):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.dim() != b.dim():
            return None
        changed = [d for d, (m, n) in enumerate(zip(a.shape, b.shape)) if m != n]
        if len(changed) > 1 or (changed and b.shape[changed[0]] != a.shape[changed[0]] + 1):
            return None
        dims.append(changed[0] if changed else None)
    return tuple(dims) if any(d is not None for d in dims) else None


def _matched(captured: Captured, grown: Any, module: torch.nn.Module, program: torch.export.ExportedProgram,
             batch: int, largest: int) -> BatchFamily | None:
    symbolic = tuple(n for n in program.graph.nodes if not _is_symbolic(n))
    static = list(captured.program.graph.nodes)
    if [(n.op, n.target) for n in symbolic] != [(n.op, n.target) for n in static]:
        return None
    symbol = _batch_symbol(program)
    if symbol is None:
        return None
    family = BatchFamily(captured, module, symbolic, symbol, batch, largest, _sizes(symbolic))
    try:
        exact = (_same_program(_program_at(family, batch), captured.program)
                 and _same_program(_program_at(family, batch + 1), grown))
    except NotExact:
        return None
    return family if exact else None


def _is_symbolic(node: fx.Node) -> bool:
    """A node the symbolic export adds: sizes read as values, their arithmetic, runtime asserts."""
    if node.op != "call_function":
        return False
    val = node.meta.get("val")
    return isinstance(val, (torch.SymInt, torch.SymBool, torch.SymFloat)) or \
        any(t in str(node.target) for t in SYMBOLIC_TARGETS)


def _batch_symbol(program: torch.export.ExportedProgram) -> sympy.Symbol | None:
    """The one free symbol of the user inputs' shapes (None: none or several)."""
    users = {s.arg.name for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"}
    found = {s for n in program.graph.nodes if n.name in users and isinstance(n.meta.get("val"), torch.Tensor)
             for d in n.meta["val"].shape if isinstance(d, torch.SymInt) for s in d.node.expr.free_symbols}
    return next(iter(found)) if len(found) == 1 else None


def _sizes(nodes: Sequence[fx.Node]) -> frozenset[sympy.Expr]:
    found: set[sympy.Expr] = {sympy.Integer(0), sympy.Integer(1)}
    for node in nodes:
        for t in tensor_leaves(node.meta.get("val")):
            found.update(_expr(x) for x in (*t.shape, *t.stride(), t.storage_offset()))
    return frozenset(found)


def _coincide(family: BatchFamily, batch: int) -> bool:
    """Whether two distinct size expressions take the same value at `batch`."""
    return len({_int_at(e, family.symbol, batch) for e in family.sizes}) < len(family.sizes)


# ---- the program at a batch size ------------------------------------------------------------
def _program_at(family: BatchFamily, batch: int) -> DerivedProgram:
    source = family.captured.program
    graph = fx.Graph()
    made: dict[fx.Node, fx.Node] = {}
    for node, twin in zip(source.graph.nodes, family.symbolic):
        args = _arguments_at(twin.args, made, family.symbol, batch)
        kwargs = _arguments_at(twin.kwargs, made, family.symbol, batch)
        new = graph.create_node(node.op, node.target, args, kwargs, name=node.name, type_expr=node.type)
        new.meta = dict(node.meta)
        if "val" in node.meta:
            new.meta["val"] = _value_at(twin.meta.get("val"), family.symbol, batch)
        made[twin] = new
    return DerivedProgram(graph, source.graph_module, source.graph_signature, source.state_dict, source.constants)


def _arguments_at(args: Any, made: Mapping[fx.Node, fx.Node], symbol: sympy.Symbol, batch: int) -> Any:
    def leaf(x: Any) -> Any:
        if isinstance(x, fx.Node):
            return made[x] if x in made else _value_at(x.meta.get("val"), symbol, batch)
        return _value_at(x, symbol, batch)
    return fx.node.map_aggregate(args, leaf)


def _value_at(value: Any, symbol: sympy.Symbol, batch: int) -> Any:
    if isinstance(value, torch.SymInt):
        return _int_at(value.node.expr, symbol, batch)
    if isinstance(value, (torch.SymBool, torch.SymFloat)):
        raise NotExact(repr(value))
    if isinstance(value, torch.Tensor):
        return _meta_tensor(value, symbol, batch)
    if type(value) in (list, tuple, torch.Size):
        return type(value)(_value_at(v, symbol, batch) for v in value)
    if isinstance(value, (list, tuple)):
        raise NotExact(f"a value of type {type(value).__name__}")
    return value


def _meta_tensor(t: torch.Tensor, symbol: sympy.Symbol, batch: int) -> torch.Tensor:
    shape = [_int_at(_expr(s), symbol, batch) for s in t.shape]
    stride = [_int_at(_expr(s), symbol, batch) for s in t.stride()]
    offset = _int_at(_expr(t.storage_offset()), symbol, batch)
    extent = offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1 if all(shape) else 0
    storage = torch.empty(max(extent, 0), dtype=t.dtype, device="meta")
    return storage.as_strided(shape, stride, offset)


def _expr(size: Any) -> sympy.Expr:
    return size.node.expr if isinstance(size, torch.SymInt) else sympy.Integer(int(size))


def _int_at(expr: sympy.Expr, symbol: sympy.Symbol, batch: int) -> int:
    value = expr.xreplace({symbol: sympy.Integer(batch)})
    if not value.is_Integer:
        raise NotExact(str(expr))
    return int(value)


# ---- checks ---------------------------------------------------------------------------------
def _same_program(derived: DerivedProgram, program: Any) -> bool:
    """Node by node (batchdims.node_key): the same names, kinds, targets, arguments and values
    (tensors by shape, stride, storage offset, dtype and device). `program`: an export, or its
    ProgramShapes with their keys (the export a forked worker made)."""
    return program_keys(derived) == program_keys(program)


def _same_inputs(program: DerivedProgram, inputs: Sequence[Any]) -> bool:
    """The derived program's user inputs have the shapes and dtypes of the example inputs."""
    users = [s.arg.name for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    nodes = {n.name: n for n in program.graph.nodes}
    vals = [nodes[n].meta.get("val") for n in users]
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    return len(vals) == len(tensors) and all(
        isinstance(v, torch.Tensor) and tuple(v.shape) == tuple(x.shape) and v.dtype == x.dtype
        for v, x in zip(vals, tensors))
