"""Weights gathered for forward and freed after it ("sharded" state, FSDP's reshard_after_forward):
what the kernel saves of a gathered weight for backward is gathered again when backward needs it.

    with freed_after_forward(gathered, regather):      # around one op's local kernel
        result = kernel(...)

Autograd saves tensors through `torch.autograd.graph.saved_tensors_hooks`: a saved tensor that
shares storage with a gathered weight (the weight, or a view of it such as the transpose a linear
keeps) is packed as a note of where it lay in the weight; unpacking calls `regather(position)`
for the weight gathered anew (a collective over its data-parallel group: every rank's backward
unpacks in the same order, as it runs the same graph) and takes the same view of it. The gathered
copy itself is released after forward, as any moved copy (execute.released_after). A saved copy
that does not share the weight's storage (a kernel that cast or copied it) is kept as it is: the
training is the same, only that copy's memory is not given back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Note:
    """Where a saved tensor lay in a gathered weight: what backward gathers again."""
    position: int
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int                 # storage offset relative to the gathered weight's


@dataclass(frozen=True)
class GatheredWeights:
    """One op's gathered weights, as the saved-tensor hooks see them: `note` packs a saved tensor
    lying in one of them (else None), `restore` unpacks a note. A value of its own, so that another
    pair of hooks (runtime.activation_offload) can do this as well as its own work: PyTorch applies
    only the innermost saved_tensors_hooks."""
    storages: Mapping[int, tuple[int, int]]       # storage address -> (input position, its offset)
    regather: Callable[[int], torch.Tensor]

    def note(self, t: torch.Tensor) -> Note | None:
        found = self.storages.get(_storage(t)) if t.layout == torch.strided and t.numel() else None
        if found is None:
            return None
        position, base = found
        return Note(position, tuple(t.size()), tuple(t.stride()), t.storage_offset() - base)

    def restore(self, saved: Note) -> torch.Tensor:
        whole = self.regather(saved.position).contiguous()
        return whole.as_strided(saved.size, saved.stride, whole.storage_offset() + saved.offset)


def gathered_weights(gathered: Mapping[int, torch.Tensor],
                     regather: Callable[[int], torch.Tensor]) -> GatheredWeights:
    """`gathered`: input position -> the gathered local weight the kernel reads (contiguous ones
    only are noted); `regather(position)`: that weight gathered again."""
    return GatheredWeights({_storage(w): (i, w.storage_offset()) for i, w in gathered.items()
                            if w is not None and w.is_contiguous() and w.numel()}, regather)


@contextmanager
def freed_after_forward(gathered: Mapping[int, torch.Tensor],
                        regather: Callable[[int], torch.Tensor]) -> Iterator[None]:
    """The kernel's saved copies of the gathered weights noted in forward, gathered again in
    backward (arguments as `gathered_weights`)."""
    weights = gathered_weights(gathered, regather)

    def pack(t: torch.Tensor):
        note = weights.note(t)
        return t if note is None else note

    def unpack(saved):
        return weights.restore(saved) if isinstance(saved, Note) else saved

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()
