"""Exported FX nodes -> IR tensors and ops.

Placeholders become tensors: parameters `weight` (named by module path; a tied parameter, which
export lists once per path, becomes one tensor under its first path), buffers, lifted constants and
frozen parameters (requires_grad False) `buffer`, user inputs `input`. Each call_function node then becomes ops, in graph order:

- a node whose value is not a tensor (a size, an assert) makes no op; where a later call names it,
  its value is recorded instead;
- a dead node (no users, not a graph output: e.g. batch norm's in-place `num_batches_tracked += 1`)
  makes no op;
- `alias` and `lift_fresh_copy` are folded: their output is their input, with the same layout;
- `detach` is folded when nothing flowing through it requires grad; otherwise it stays, as an op
  (the IR has no stop-gradient: folding it would plan gradients the model never computes);
- `clone` and `contiguous` stay: they change the layout a following `view` depends on;
- `aten_map.convert(node)` gives library ops, a chain linked by `Intermediate`s; every op is traced
  against its TDL description and checked against the exported shapes; a chain that does not fit
  falls back to opaque, and the capture warning says why;
- otherwise the node becomes opaque ops (`opaque_ops.py`), one per tensor it yields that is used.

Activations get the batch dim that `batchdims.py` detected. Each op's `saved` lists the graph
tensors autograd keeps for it (`saved.py`); for a node that became several ops, each saved tensor
goes to the first op that reads or writes it, and the last op gets the rest.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx

from stratagem.errors import StratagemError
from stratagem.frontend import aten_map, calls, state
from stratagem.frontend.aten_map import Converted, Intermediate
from stratagem.frontend.fxnodes import dtype_name, module_path, tensor_leaves
from stratagem.frontend.opaque_ops import opaque_op
from stratagem.frontend.saved import SavedTensors
from stratagem.ir import Attrs, Op, Role, TensorSpec
from stratagem.tdl.library import LIBRARY

FOLDED = frozenset({"aten.alias.default", "aten.lift_fresh_copy.default"})
FOLDED_WITHOUT_GRAD = frozenset({"aten.detach.default"})   # folding would let gradients through
MAX_RECORDED_CONSTANT = 4096   # elements: lifted constants up to this size keep their values

ROLES = {"PARAMETER": Role.WEIGHT, "BUFFER": Role.BUFFER, "CONSTANT_TENSOR": Role.BUFFER,
         "USER_INPUT": Role.INPUT}

Converter = Callable[[fx.Node], "list[Converted] | None"]


@dataclass(frozen=True)
class Lowered:
    tensors: tuple[TensorSpec, ...]
    ops: tuple[Op, ...]
    outputs: tuple[str, ...]
    opaque_targets: Mapping[str, int]         # ATen target -> number of opaque ops
    rejected: Mapping[str, str]               # ATen target -> why its conversion was refused
    internal_saved_num_bytes: Mapping[str, int]   # op -> bytes autograd keeps outside the IR
    constants: Mapping[str, Attrs]                # small lifted constants: name -> dtype, shape, values
    state_updates: Mapping[str, str]              # buffer -> the tensor holding its next value


class ValueDependentShape(StratagemError):
    """A tensor whose shape depends on the values computed (nonzero, boolean masking, routing)."""


def refuse_value_dependent_shapes(node: fx.Node) -> None:
    """stratagem plans static shapes: a shape known only when the values are (torch.export's
    unbacked symbols, u0, u1, ...) is refused, naming the op, where it ran, and what to do."""
    for leaf in tensor_leaves(node.meta.get("val")):
        if any(not isinstance(d, int) for d in leaf.shape):
            where = module_path(node) or "the model's forward"
            raise ValueDependentShape(
                f"op {calls.target_name(node.target)} in {where} makes a tensor whose shape depends on the values",
                expected="shapes known from the inputs' shapes", got=f"shape {list(leaf.shape)}",
                hint="stratagem plans static shapes: compute with masks instead (torch.where(mask, x, 0) rather "
                     "than x[mask] or nonzero), or give routing a fixed capacity (as MoE layers with a capacity "
                     "factor do)")


class Lowering:
    """One pass over an exported program's graph; `run()` returns the IR pieces."""

    def __init__(self, program: torch.export.ExportedProgram, module: torch.nn.Module,
                 batch_dims: Mapping[str, int | None], input_sample_dims: Mapping[str, int | None],
                 saved: SavedTensors, convert: Converter | None = None):
        self.program, self.module, self.batch_dims = program, module, batch_dims
        self.input_sample_dims, self.saved, self.convert = input_sample_dims, saved, convert
        self.nodes = {n.name: n for n in program.graph.nodes}
        self.names: dict[str, str] = {}           # fx node name -> IR tensor name
        self.constants: dict[str, Any] = {}       # fx node name -> non-tensor value
        self.specs: dict[str, TensorSpec] = {}
        self.ops: list[Op] = []
        self.opaque_targets: Counter[str] = Counter()
        self.rejected: dict[str, str] = {}
        self.traced: dict[tuple, list[tuple[int, ...]]] = {}   # output shapes by (kind, shapes, weights, attrs)
        self.internal: dict[str, int] = {}
        self.recorded: dict[str, Attrs] = {}
        self.outputs = [s.arg.name for s in program.graph_signature.output_specs
                        if s.kind.name == "USER_OUTPUT" and hasattr(s.arg, "name")]
        self.input_kinds = {s.arg.name: s.kind.name for s in program.graph_signature.input_specs
                            if hasattr(s.arg, "name")}
        self.written: dict[str, str] = {}          # buffer (IR name) -> the op that writes it
        self.state_updates: dict[str, str] = {}    # buffer (IR name) -> its next value (state.py)

    def run(self) -> Lowered:
        self._placeholders()
        for node in self.program.graph.nodes:
            if node.op == "call_function" and node.target is not operator.getitem:
                self._lower(node)
        outputs = tuple(self.names[n] for n in self.outputs if n in self.names)
        state.refuse_uncarried(self.written, self.state_updates)
        return Lowered(tuple(self.specs.values()), tuple(self.ops), outputs,
                       dict(self.opaque_targets), dict(self.rejected), dict(self.internal),
                       dict(self.recorded), dict(self.state_updates))

    # ---- what other parts ask ----------------------------------------------------------------
    def tensor_name(self, x: Any) -> str:
        if not self.is_tensor(x):
            raise StratagemError(f"argument {x!r} is not a tensor of the captured graph",
                                 hint="aten_map.convert must name fx nodes whose value is a tensor")
        return self.names[x.name]

    def is_tensor(self, x: Any) -> bool:
        return isinstance(x, fx.Node) and x.name in self.names

    def saved_names(self, node: fx.Node) -> tuple[str, ...] | None:
        if not self.saved.known:
            return None
        found = (self._saved_name(key) for key in self.saved.saved.get(node.name, ()))
        return tuple(dict.fromkeys(n for n in found if n is not None))

    # ---- placeholders ------------------------------------------------------------------------
    def _placeholders(self) -> None:
        canonical = _canonical_paths(self.module)
        frozen = _frozen_parameters(self.program)
        for spec in self.program.graph_signature.input_specs:
            node = self.nodes[spec.arg.name]
            val = node.meta.get("val")
            if spec.kind.name not in ROLES or not isinstance(val, torch.Tensor):
                self.constants[node.name] = val
                continue
            name = canonical.get(spec.target, spec.target) if spec.target else node.name
            self.names[node.name] = name
            if name not in self.specs:
                user = spec.kind.name == "USER_INPUT"
                role = Role.BUFFER if node.name in frozen else ROLES[spec.kind.name]
                self.specs[name] = TensorSpec(name, tuple(val.shape), dtype_name(val.dtype), role,
                                              self.input_sample_dims.get(node.name) if user else None)
            if spec.kind.name == "CONSTANT_TENSOR":
                self._record_constant(name, self.program.constants.get(spec.target))

    def _record_constant(self, name: str, value: Any) -> None:
        """Keep a small constant's values (the interpreter needs them; on meta there are none)."""
        if not isinstance(value, torch.Tensor) or value.device.type == "meta":
            return
        if value.numel() <= MAX_RECORDED_CONSTANT:
            self.recorded[name] = Attrs(dtype=dtype_name(value.dtype), shape=tuple(value.shape),
                                        values=tuple(value.flatten().tolist()))

    # ---- call nodes --------------------------------------------------------------------------
    def _lower(self, node: fx.Node) -> None:
        val = node.meta.get("val")
        if not tensor_leaves(val):
            self.constants[node.name] = val
            return
        refuse_value_dependent_shapes(node)
        buffers = self._written_buffers(node)
        if not node.users and node.name not in self.outputs and not buffers:
            return
        target = calls.target_name(node.target)
        if target in FOLDED or (target in FOLDED_WITHOUT_GRAD and not self._requires_grad(node)):
            self.names[node.name] = self.tensor_name(node.args[0])
            return
        if not self._carry_copy(node, buffers):
            self._convert(node, target)
        for buffer in buffers:
            value = state.new_value_of(node, buffer)
            if value is not None and value.name in self.names:
                self.state_updates[self.names[buffer.name]] = self.names[value.name]

    def _convert(self, node: fx.Node, target: str) -> None:
        try:
            chain = (self.convert or aten_map.convert)(node)
            if chain is not None:
                built = self._build_chain(node, chain)
                self._add(node, built)
                for item, (op, _) in zip(chain, built):
                    if item.writes is not None:
                        self.state_updates[self.tensor_name(item.writes)] = op.outputs[0]
                return
        except Exception as error:   # noqa: BLE001 - a conversion that does not fit falls back
            self.rejected.setdefault(target, f"{type(error).__name__}: {error}")
        self._add_opaque(node, target)

    def _written_buffers(self, node: fx.Node) -> list[fx.Node]:
        """The buffers `node` writes (state.py); a write to a parameter is refused."""
        written = state.written_arguments(node)
        state.refuse_parameter_writes(node, written, self.input_kinds, self.names)
        buffers = [w for w in written if self.input_kinds.get(w.name) == "BUFFER"]
        for buffer in buffers:
            self.written[self.names[buffer.name]] = calls.target_name(node.target)
        return buffers

    def _carry_copy(self, node: fx.Node, buffers: list[fx.Node]) -> bool:
        """copy_(buffer, value) makes no op: value is the buffer's next value."""
        return bool(buffers) and calls.target_name(node.target).startswith("aten.copy_.") and \
            state.new_value_of(node, buffers[0]) is not None

    def _requires_grad(self, node: fx.Node) -> bool:
        if not self.saved.known:
            return True
        return any(n.name in self.saved.requires_grad for n in node.all_input_nodes)

    def _add_opaque(self, node: fx.Node, target: str) -> None:
        if isinstance(node.meta["val"], torch.Tensor):
            values = [(node, None)]
        else:
            values = sorted(((u, u.args[1]) for u in node.users if u.target is operator.getitem
                             and isinstance(u.meta.get("val"), torch.Tensor)), key=lambda p: p[1])
        for k, (value_node, index) in enumerate(values):
            # a tuple's elements become separate ops: the first carries what the node saves
            op, spec = opaque_op(self, node, target, value_node, index)
            self._add(node, [(op, (spec,))], charge=k == 0)
            self.opaque_targets[target] += 1

    def _add(self, node: fx.Node, built: list[tuple[Op, tuple[TensorSpec, ...]]], charge: bool = True) -> None:
        for _, specs in built:
            for spec in specs:
                self.specs[spec.name] = spec
                self.names.setdefault(spec.name, spec.name)
        saved = self.saved_names(node) if charge else ()
        for k, (op, _) in enumerate(built):
            kept = None if _fused(op) else _share_of(saved, built, k)
            self.ops.append(Op(op.name, op.kind, op.inputs, op.outputs, op.attrs, op.module, kept))
        internal = self.saved.internal_num_bytes.get(node.name, 0)
        if internal and charge:
            self.internal[built[-1][0].name] = internal

    # ---- conversion through aten_map ---------------------------------------------------------
    def _build_chain(self, node: fx.Node, chain: Sequence[Converted]
                     ) -> list[tuple[Op, tuple[TensorSpec, ...]]]:
        """Ops for a node. An op with n outputs yields elements produces .. produces + n - 1 of the
        node's output (the library's convention); an `Intermediate` reads an op's first output."""
        elements = self._element_names(node)
        built: list[tuple[Op, tuple[TensorSpec, ...]]] = []
        for k, item in enumerate(chain):
            inputs = [built[x.index][1][0].name if isinstance(x, Intermediate) else self.tensor_name(x)
                      for x in _strip_trailing_none(item.inputs)]
            shapes = self._traced_shapes(item, inputs, built)
            specs = []
            for j, shape in enumerate(shapes):
                index = None if item.produces is None else item.produces + j
                element = elements.get(index) if index is not None else None
                out_name = element or (f"{node.name}.{k}" if len(shapes) == 1 else f"{node.name}.{k}.{j}")
                expected = self._element_shape(node, index) if element else None
                if expected is not None and shape != expected:
                    raise StratagemError(f"{item.kind} output {j} has shape {shape}", expected=str(expected))
                specs.append(TensorSpec(out_name, shape, self._dtype(node, index), Role.ACTIVATION,
                                        self.batch_dims.get(element) if element else None))
            op_name = node.name if len(chain) == 1 else f"{node.name}.{k}"
            built.append((Op(op_name, item.kind, tuple(inputs), tuple(s.name for s in specs), item.attrs,
                             module_path(node)), tuple(specs)))
        produced = {spec.name for _, specs in built for spec in specs}
        missing = set(elements.values()) - produced
        if missing and any(self.nodes[m].users for m in missing if m in self.nodes):
            raise StratagemError("conversion leaves outputs unproduced", got=str(sorted(missing)))
        return built

    def _traced_shapes(self, item: Converted, inputs: list[str],
                       built: list[tuple[Op, tuple[TensorSpec, ...]]]) -> list[tuple[int, ...]]:
        local = {spec.name: spec for _, specs in built for spec in specs}
        specs = [local.get(name) or self.specs[name] for name in inputs]
        shapes = tuple(s.shape for s in specs)
        weights = tuple(s.role in (Role.WEIGHT, Role.BUFFER) for s in specs)
        try:
            key = (item.kind, shapes, weights, Attrs(item.attrs))
            found = self.traced.get(key)
        except TypeError:                     # an attribute that does not hash: traced every time
            key, found = None, None
        if found is None:
            desc = LIBRARY[item.kind].describe(*shapes, weights=list(weights), **dict(item.attrs))
            found = [tuple(desc.output_shape)] * desc.num_outputs
            if key is not None:
                self.traced[key] = found      # a repeated layer's ops are traced once
        return list(found)

    # ---- names, shapes -----------------------------------------------------------------------
    def _element_names(self, node: fx.Node) -> dict[int, str]:
        if isinstance(node.meta.get("val"), torch.Tensor):
            return {0: node.name}
        return {u.args[1]: u.name for u in node.users if u.target is operator.getitem}

    def _element_shape(self, node: fx.Node, index: int) -> tuple[int, ...] | None:
        val = node.meta.get("val")
        val = val if isinstance(val, torch.Tensor) else val[index]
        return tuple(val.shape) if isinstance(val, torch.Tensor) else None

    def _dtype(self, node: fx.Node, index: int | None) -> str:
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            picked = val[index] if index is not None and index < len(val) else None
            val = picked if isinstance(picked, torch.Tensor) else tensor_leaves(val)[0]
        return dtype_name(val.dtype)

    def _saved_name(self, key: str) -> str | None:
        if "#" in key:
            parent, _, index = key.partition("#")
            key = self._element_names(self.nodes[parent]).get(int(index), key)
        return self.names.get(key)


def _fused(op: Op) -> bool:
    """Whether the runtime runs `op` as one fused kernel that keeps what its record's `saves`
    says (tdl `fused_saves`), so that what capture saw a decomposed reference keep does not hold:
    attention without dropout (with dropout, a split runs the written-out form)."""
    record = LIBRARY.get(op.kind)
    return record is not None and record.fused_saves and not dict(op.attrs).get("dropout_p", 0.0)


def _share_of(saved: tuple[str, ...] | None, built: list[tuple[Op, TensorSpec]], k: int
              ) -> tuple[str, ...] | None:
    """The saved tensors op k keeps: those it is the first op of the chain to read or write; the
    last op keeps the ones no op of the chain holds."""
    if saved is None:
        return None

    def holder(tensor: str) -> int:
        return next((i for i, (o, _) in enumerate(built) if tensor in o.inputs or tensor in o.outputs),
                    len(built) - 1)

    return tuple(t for t in saved if holder(t) == k)


def _frozen_parameters(program: torch.export.ExportedProgram) -> frozenset[str]:
    """Placeholder names of parameters that do not require grad (no gradient, no optimizer state)."""
    state = program.state_dict
    return frozenset(s.arg.name for s in program.graph_signature.input_specs
                     if s.kind.name == "PARAMETER" and not state[s.target].requires_grad)


def _canonical_paths(module: torch.nn.Module) -> dict[str, str]:
    """Every parameter or buffer path -> the first path of the same tensor (tied weights)."""
    first: dict[int, str] = {}
    paths: dict[str, str] = {}
    for getter in (module.named_parameters, module.named_buffers):
        for path, tensor in getter(remove_duplicate=False):
            paths[path] = first.setdefault(id(tensor), path)
    return paths


def _strip_trailing_none(inputs: Sequence[Any]) -> list[Any]:
    items = list(inputs)
    while items and items[-1] is None:
        items.pop()
    return items
