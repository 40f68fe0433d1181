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
class _Note:
    position: int
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int                 # storage offset relative to the gathered weight's


@contextmanager
def freed_after_forward(gathered: Mapping[int, torch.Tensor],
                        regather: Callable[[int], torch.Tensor]) -> Iterator[None]:
    """`gathered`: input position -> the gathered local weight the kernel reads (contiguous ones
    only are noted); `regather(position)`: that weight gathered again."""
    storages = {_storage(w): (i, w.storage_offset()) for i, w in gathered.items()
                if w is not None and w.is_contiguous() and w.numel()}

    def pack(t: torch.Tensor):
        found = storages.get(_storage(t)) if t.layout == torch.strided and t.numel() else None
        if found is None:
            return t
        position, base = found
        return _Note(position, tuple(t.size()), tuple(t.stride()), t.storage_offset() - base)

    def unpack(saved):
        if not isinstance(saved, _Note):
            return saved
        whole = regather(saved.position).contiguous()
        return whole.as_strided(saved.size, saved.stride, whole.storage_offset() + saved.offset)

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()
