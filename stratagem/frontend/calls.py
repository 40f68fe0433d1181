"""ATen calls recorded in plain, frozen data, so an opaque op can be run again later.

Capture records how to call an opaque op's ATen target in the op's `call` attribute:
`Attrs(target=..., args=..., kwargs=..., output_index=...)`. Tensor arguments are recorded as
`Attrs(tensor=k)`, the op's k-th input; dtypes, devices, layouts and memory formats as
`Attrs(dtype="float32")` and the like (a device is recorded without its value: the call runs on the
device of the tensors it is given). Everything else is a Python scalar, string, None, or a tuple of
these. `encode_call` returns None for a call it cannot record (an argument that is a submodule or
an opaque object); such an op can be planned but not run by the reference interpreter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from stratagem.errors import StratagemError
from stratagem.ir import Attrs


class UnrecordableArgument(Exception):
    """An argument that plain data cannot describe."""


def encode_call(target: Any, args: Sequence[Any], kwargs: Mapping[str, Any],
                tensor_index: Callable[[Any], int | None], output_index: int | None) -> Attrs | None:
    """Record `target(*args, **kwargs)`; `tensor_index(arg)` gives an argument's input position,
    or None when the argument is not a tensor of the graph."""
    try:
        return Attrs(target=target_name(target),
                     args=tuple(_encode(a, tensor_index) for a in args),
                     kwargs=Attrs({k: _encode(v, tensor_index) for k, v in kwargs.items()}),
                     output_index=output_index)
    except UnrecordableArgument:
        return None


def target_name(target: Any) -> str:
    """`aten.lstm_cell.default` for an ATen overload, the qualified name of anything else."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    module = getattr(target, "__module__", None) or ""
    return f"{module}.{getattr(target, '__qualname__', repr(target))}".lstrip(".")


def functional_target(target: Any) -> Any:
    """The out-of-place variant of an in-place ATen overload (`aten.relu_` -> `aten.relu`), so a
    recorded call never mutates the tensors it is given; any other target unchanged."""
    if not isinstance(target, torch._ops.OpOverload) or not target._opname.endswith("_"):
        return target
    if not target._schema.is_mutable:
        return target
    packet = getattr(getattr(torch.ops, target.namespace), target._opname[:-1], None)
    return getattr(packet, target._overloadname, target) if packet is not None else target


def _encode(value: Any, tensor_index: Callable[[Any], int | None]) -> Any:
    index = tensor_index(value)
    if index is not None:
        return Attrs(tensor=index)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_encode(v, tensor_index) for v in value)
    if isinstance(value, torch.dtype):
        return Attrs(dtype=str(value).removeprefix("torch."))
    if isinstance(value, torch.device):
        return Attrs(device="inputs")
    if isinstance(value, torch.layout):
        return Attrs(layout=str(value).removeprefix("torch."))
    if isinstance(value, torch.memory_format):
        return Attrs(memory_format=str(value).removeprefix("torch."))
    raise UnrecordableArgument(repr(value))


def run_call(call: Attrs, inputs: Sequence[torch.Tensor]) -> Any:
    """Run a recorded call on real (or fake) tensors; returns the selected output."""
    device = inputs[0].device if inputs else torch.device("cpu")
    args = tuple(_decode(a, inputs, device) for a in call["args"])
    kwargs = {k: _decode(v, inputs, device) for k, v in call["kwargs"].items()}
    result = resolve_target(call["target"])(*args, **kwargs)
    index = call["output_index"]
    return result if index is None else result[index]


def resolve_target(name: str) -> Callable[..., Any]:
    """The callable a recorded target name refers to: `aten.add.Tensor` -> torch.ops.aten.add.Tensor."""
    namespace, _, rest = name.partition(".")
    opname, _, overload = rest.rpartition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), opname), overload)
    except (AttributeError, RuntimeError):
        raise StratagemError(f"cannot resolve recorded target {name!r}",
                             expected="an operator under torch.ops (namespace.name.overload)",
                             hint="Capture with the same torch version that runs the graph") from None


def _decode(value: Any, inputs: Sequence[torch.Tensor], device: torch.device) -> Any:
    if isinstance(value, Attrs):
        return _decode_tagged(value, inputs, device)
    if isinstance(value, tuple):
        return [_decode(v, inputs, device) for v in value]
    return value


def _decode_tagged(value: Attrs, inputs: Sequence[torch.Tensor], device: torch.device) -> Any:
    (tag, payload), = value.items()
    if tag == "tensor":
        return inputs[payload]
    if tag == "device":
        return device
    return getattr(torch, payload)   # dtype, layout, memory_format
