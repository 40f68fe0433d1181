"""Which tensors autograd keeps for backward, per exported node.

The exported graph runs once more, node by node, on fake tensors (no memory, no data) with the
parameters requiring grad, inside `torch.autograd.graph.saved_tensors_hooks`. Every tensor the pack
hook receives is charged to the node that was running, then mapped back to a tensor of the graph:

1. the very object some node produced (or a placeholder): that node's tensor;
2. otherwise a view of one (same storage: `weight.t()` kept by a linear): the tensor that first
   owned the storage, since the view keeps that storage alive;
3. otherwise a tensor that exists only inside the op (layer norm's mean and rstd, a dropout mask,
   max pooling's indices, the gates of an LSTM cell, softmax's output inside cross-entropy). Such
   tensors are not in the IR; their bytes are summed per node (`internal_num_bytes`).

Under `torch.no_grad()` nothing is saved, as in eager (export.py marks the nodes that ran so). A node
that runs with no input requiring grad saves nothing. If the run fails, nothing is known (`known` is False) and ops get `saved=None`.

A repeated layer's nodes are run once (`_Replay`): a node whose op, grad mode and arguments match
one run before (every tensor's shape, strides, offset, dtype, device, requires_grad, and which
arguments share storage; every other argument equal) saves what that one saved, relative to its
own arguments and outputs (the same argument, a view of an argument's storage, an output, an
internal of so many bytes), and gets outputs of the same geometry (a view of the same argument
where the first's was one) without running. Ops that write their arguments, outputs that are
their arguments, and saves of tensors of neither kind are always run.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._mode_utils import no_dispatch

from stratagem.frontend.export import GRAD_ENABLED


@dataclass(frozen=True)
class SavedTensors:
    known: bool
    saved: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # node -> node names
    internal_num_bytes: Mapping[str, int] = field(default_factory=dict)  # node -> bytes
    requires_grad: frozenset[str] = frozenset()                          # node names


def record_saved(program: torch.export.ExportedProgram) -> SavedTensors:
    try:
        return saved_tensors(program)
    except Exception as error:   # noqa: BLE001 - saved tensors are an annotation, never fatal
        warnings.warn(f"capture could not record saved tensors ({type(error).__name__}: {error}); "
                      f"ops get saved=None", stacklevel=3)
        return SavedTensors(known=False)


def saved_tensors(program: Any) -> SavedTensors:
    """What autograd keeps, per node of the program (an ExportedProgram or anything with its
    graph, graph_module, graph_signature and state_dict); raises where the run fails."""
    return _SavedRecorder(program).run()


class _SavedRecorder(fx.Interpreter):
    def __init__(self, program: torch.export.ExportedProgram):
        super().__init__(program.graph_module, graph=program.graph)
        self.trainable = {s.arg.name for s in program.graph_signature.input_specs
                          if s.kind.name == "PARAMETER" and program.state_dict[s.target].requires_grad}
        self.current = ""
        self.packed: list[tuple[str, torch.Tensor]] = []
        self.by_id: dict[int, str] = {}
        self.by_storage: dict[int, str] = {}
        self.keep_alive: list[Any] = []
        self.requires: set[str] = set()
        self.replays: dict[Any, _Replay | None] = {}   # by _signature's key; None: not replayed
        self.mode: FakeTensorMode | None = None        # the run's (`run`)

    def run(self) -> SavedTensors:   # type: ignore[override]
        with FakeTensorMode() as mode, torch.enable_grad():
            self.mode = mode
            args = [self._fake(n, mode) for n in self.graph.nodes if n.op == "placeholder"]
            with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
                super().run(*args)
        return self._resolve()

    def _fake(self, node: fx.Node, mode: FakeTensorMode) -> Any:
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            return val
        fake = torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device=val.device)
        return fake.requires_grad_(node.name in self.trainable and fake.is_floating_point())

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        self.packed.append((self.current, tensor))
        return tensor

    def run_node(self, node: fx.Node) -> Any:
        self.current = node.name
        with torch.set_grad_enabled(node.meta.get(GRAD_ENABLED, True)):
            key, arguments = self._signature(node)
            replay = self.replays.get(key) if key is not None else None
            if replay is not None:
                result = self._replayed(replay, arguments)
            else:
                start = len(self.packed)
                result = super().run_node(node)
                if key is not None and key not in self.replays:
                    self.replays[key] = _replay_of(arguments, result, self.packed[start:], self.by_storage)
        self._register(node, result)
        return result

    def _signature(self, node: fx.Node) -> tuple[Any, list[torch.Tensor]]:
        """(the key a repeat of this node's call has, its tensor arguments), or (None, []) where
        it is not replayed (module docstring)."""
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) \
                or target._schema.is_mutable:
            return None, []
        args, kwargs = self.fetch_args_kwargs_from_env(node)
        tensors: list[torch.Tensor] = []
        try:
            described = _described((args, kwargs), tensors, {})
        except _NotReplayed:
            return None, []
        return (target, torch.is_grad_enabled(), described), tensors

    def _replayed(self, replay: _Replay, arguments: list[torch.Tensor]) -> Any:
        outputs = [None if o is None else o.made(arguments, self.mode) for o in replay.outputs]
        for kind, index, num_bytes in replay.packs:
            if kind == "argument":
                self.packed.append((self.current, arguments[index]))
            elif kind == "output":
                self.packed.append((self.current, outputs[index]))
            else:
                key = None if kind == "internal" else _storage_key((arguments if kind == "argument storage"
                                                                    else outputs)[index])
                self.packed.append((self.current, _Stored(key, num_bytes)))
        return outputs[0] if replay.container is None else replay.container(outputs)

    def _register(self, node: fx.Node, result: Any) -> None:
        self.keep_alive.append(result)
        if isinstance(result, torch.Tensor):
            self._remember(node.name, result, overwrite=True)
        elif isinstance(result, (tuple, list)):
            for i, item in enumerate(result):
                if isinstance(item, torch.Tensor):
                    self._remember(f"{node.name}#{i}", item, overwrite=False)

    def _remember(self, name: str, tensor: torch.Tensor, overwrite: bool) -> None:
        if overwrite or id(tensor) not in self.by_id:
            self.by_id[id(tensor)] = name
        self.by_storage.setdefault(_storage_key(tensor), name)
        if tensor.requires_grad:
            self.requires.add(name)

    def _resolve(self) -> SavedTensors:
        saved: dict[str, list[str]] = {}
        internal: dict[str, int] = {}
        for node, tensor in self.packed:
            if isinstance(tensor, _Stored):
                name = None if tensor.storage is None else self.by_storage.get(tensor.storage)
                num_bytes = tensor.num_bytes
            else:
                name = self.by_id.get(id(tensor)) or self.by_storage.get(_storage_key(tensor))
                num_bytes = tensor.numel() * tensor.element_size()
            if name is None:
                internal[node] = internal.get(node, 0) + num_bytes
            elif name not in saved.setdefault(node, []):
                saved[node].append(name)
        return SavedTensors(True, {k: tuple(v) for k, v in saved.items()}, internal,
                            frozenset(self.requires))


def _storage_key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


# ---- replaying a repeated node ------------------------------------------------------------------
class _NotReplayed(Exception):
    """A node's call is not replayed (an argument with no plain equality, a result of another kind)."""


PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


def _described(value: Any, tensors: list[torch.Tensor], storages: dict[int, int]) -> Any:
    """A hashable description of an argument: tensors by geometry, grad and shared storage
    (appended to `tensors`), containers by their items, plain values as themselves."""
    if isinstance(value, torch.Tensor):
        shared = storages.setdefault(_storage_key(value), len(tensors))
        tensors.append(value)
        return ("tensor", tuple(value.shape), value.stride(), value.storage_offset(), value.dtype,
                value.device, value.requires_grad, shared)
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_described(v, tensors, storages) for v in value))
    if isinstance(value, dict):
        return (dict, tuple((k, _described(v, tensors, storages)) for k, v in value.items()))
    if type(value) in PLAIN:
        return value
    raise _NotReplayed


@dataclass(frozen=True)
class _Stored:
    """A saved tensor known by its storage (None: none of the graph's) and its bytes."""
    storage: int | None
    num_bytes: int


@dataclass(frozen=True)
class _Output:
    """How a replay makes one output: a fresh tensor, or a view of argument `view_of`'s storage."""
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    view_of: int | None

    def made(self, arguments: list[torch.Tensor], mode: FakeTensorMode) -> torch.Tensor:
        if self.view_of is None:
            fresh = _fresh_fake(mode, self.shape, self.stride, self.dtype, self.device)
            return fresh.requires_grad_(self.requires_grad)
        base = arguments[self.view_of]
        if not self.requires_grad:
            base = base.detach()
        return base.as_strided(self.shape, self.stride, self.offset)


def _fresh_fake(mode: FakeTensorMode, shape: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype,
                device: torch.device) -> torch.Tensor:
    """A new fake tensor of this geometry, wrapped as the mode wraps an op's meta output, without
    dispatching empty_strided through the mode (4x faster; a decoder's replayed nodes make thousands)."""
    with no_dispatch():
        meta = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
    return FakeTensor(mode, meta, device)


@dataclass(frozen=True)
class _Replay:
    outputs: tuple[_Output | None, ...]
    packs: tuple[tuple[str, int, int], ...]    # (argument | output | argument storage | output storage | internal, index, bytes)
    container: type | None                     # tuple or list; None: the result is one tensor


def _replay_of(arguments: list[torch.Tensor], result: Any, packed: list[tuple[str, Any]],
               by_storage: dict[int, str]) -> _Replay | None:
    """What a repeat of this call saves and returns, relative to its arguments; None where it
    must run (module docstring)."""
    single = isinstance(result, torch.Tensor)
    outputs = [result] if single else list(result) if isinstance(result, (tuple, list)) else None
    if outputs is None or not all(o is None or isinstance(o, torch.Tensor) for o in outputs):
        return None
    by_argument = {_storage_key(a): i for i, a in reversed(list(enumerate(arguments)))}
    made = []
    for output in outputs:
        if output is None:
            made.append(None)
            continue
        if any(output is a for a in arguments):
            return None
        view_of = by_argument.get(_storage_key(output))
        if view_of is not None and output.requires_grad and not arguments[view_of].requires_grad:
            return None
        made.append(_Output(tuple(output.shape), output.stride(), output.storage_offset(), output.dtype,
                            output.device, output.requires_grad, view_of))
    by_output: dict[int, int] = {}              # the storage of each fresh output
    for j, output in enumerate(outputs):
        if output is not None and made[j].view_of is None:
            if _storage_key(output) in by_output:
                return None          # outputs sharing a storage of their own
            by_output[_storage_key(output)] = j
    packs = []
    for _, tensor in packed:                     # a run's packs: tensors, never _Stored
        num_bytes = tensor.numel() * tensor.element_size()
        argument = next((i for i, a in enumerate(arguments) if tensor is a), None)
        output = next((j for j, o in enumerate(outputs) if tensor is o), None)
        key = _storage_key(tensor)
        if argument is not None:
            packs.append(("argument", argument, num_bytes))
        elif output is not None:
            packs.append(("output", output, num_bytes))
        elif key in by_argument:
            packs.append(("argument storage", by_argument[key], num_bytes))
        elif key in by_output:
            packs.append(("output storage", by_output[key], num_bytes))
        elif key in by_storage:
            return None              # a tensor of the graph the call was not given
        else:
            packs.append(("internal", 0, num_bytes))
    return _Replay(tuple(made), tuple(packs), None if single else type(result))
