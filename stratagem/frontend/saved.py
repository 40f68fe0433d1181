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
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode

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

    def run(self) -> SavedTensors:   # type: ignore[override]
        with FakeTensorMode() as mode, torch.enable_grad():
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
            result = super().run_node(node)
        self._register(node, result)
        return result

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
            name = self.by_id.get(id(tensor)) or self.by_storage.get(_storage_key(tensor))
            if name is None:
                internal[node] = internal.get(node, 0) + tensor.numel() * tensor.element_size()
            elif name not in saved.setdefault(node, []):
                saved[node].append(name)
        return SavedTensors(True, {k: tuple(v) for k, v in saved.items()}, internal,
                            frozenset(self.requires))


def _storage_key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata
