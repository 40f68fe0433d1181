"""Activation offload at run time (Megatron-LM's CPU activation offloading; torch's `save_on_cpu`):
the ops of an offloaded block send what autograd saves of their activations to host memory in
forward and copy it back when backward needs it. It mirrors the "forward" and "backward" lines of
cost.activation_offload's account:

    with offloaded(weights, on_copy, gathered):        # around one op's local kernel
        result = kernel(...)

    pack    a saved tensor lying in a gathered weight (`gathered`: the "sharded" state's note,
            runtime.regather)                      -> the note, gathered again in backward
            one sharing storage with `weights` (the local tensors the op reads for its WEIGHT and
            BUFFER inputs: cast or gathered copies included), or not strided
                                                   -> itself: weights stay on the device
            any other (an activation, or what the kernel keeps inside)
                                                   -> a new host tensor holding a copy (pinned when
                                                      it comes from a CUDA device); `on_copy(bytes)`
    unpack  a note -> the weight gathered again; a host copy -> copied back to its device
            (non_blocking when pinned); anything else as it is

One pair of hooks does both the notes and the copies because PyTorch applies only the innermost
saved_tensors_hooks. On CPU ranks the host is the device: the copy is a real one all the same, so
that the training a CPU run checks is the one that reads the copies back; it saves no memory there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from stratagem.runtime.regather import GatheredWeights, Note


@dataclass(frozen=True)
class HostCopy:
    """A saved activation in host memory, and the device it came from."""
    tensor: torch.Tensor
    device: torch.device
    pinned: bool


def to_host(t: torch.Tensor) -> HostCopy:
    """A copy of `t` in a new host tensor: pinned when `t` is on a CUDA device (so that the copy
    back can run beside compute), a plain one otherwise (a CPU rank's copy is still a copy). The
    copy out waits for its end, as `save_on_cpu`'s does: the host tensor is whole when it returns."""
    pinned = t.device.type == "cuda" and torch.cuda.is_available()
    host = torch.empty(t.size(), dtype=t.dtype, device="cpu", pin_memory=pinned)
    host.copy_(t.detach())
    return HostCopy(host, t.device, pinned)


def from_host(copy: HostCopy) -> torch.Tensor:
    """The host copy back on its device (on a CPU rank: the host copy itself)."""
    return copy.tensor.to(copy.device, non_blocking=copy.pinned)


def size_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


@contextmanager
def offloaded(weights: Iterable[torch.Tensor | None], on_copy: Callable[[int], None],
              gathered: GatheredWeights | None = None) -> Iterator[None]:
    """Saved activations to host memory while the context is open, weights left on the device,
    gathered weights noted (see the module's docstring); `on_copy(bytes)` is told each copy."""
    kept = {_storage(w) for w in weights if w is not None and w.layout == torch.strided and w.numel()}

    def pack(t: torch.Tensor):
        note = gathered.note(t) if gathered is not None else None
        if note is not None:
            return note
        if t.layout != torch.strided or _storage(t) in kept:
            return t
        copy = to_host(t)
        on_copy(size_bytes(t))
        return copy

    def unpack(saved):
        if isinstance(saved, Note):
            return gathered.restore(saved)
        if isinstance(saved, HostCopy):
            return from_host(saved)
        return saved

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()
