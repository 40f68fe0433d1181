"""The model zoo: every model the three papers measured, LLaMA-style decoders up to 70B, and
Hugging Face models from configs. Each forward returns its training loss.

    names()                       the model names (`<name>-tiny` is the tiny variant of each)
    info(name)                    batch size, source, published size, notes
    module(name, device="meta")   (nn.Module, example inputs); device="cpu" builds real weights
    build(name)                   the captured Graph (captured on meta, cached per process)
"""

from __future__ import annotations

import difflib
from typing import Any

import torch
from torch import nn

from stratagem import values
from stratagem.errors import StratagemError
from stratagem.frontend.zoo.catalog import ENTRIES
from stratagem.frontend.zoo.entry import ModelInfo, Published, Variant, ZooEntry
from stratagem.ir import Graph

TINY = "-tiny"


class UnknownModelError(StratagemError):
    """A model name the zoo does not have."""


def names() -> tuple[str, ...]:
    return tuple(ENTRIES)


def resolve(name: str) -> tuple[ZooEntry, bool]:
    """(entry, tiny?) for a zoo name such as `gpt-7b` or `gpt-7b-tiny`."""
    if not isinstance(name, str):
        raise UnknownModelError("a zoo model is named by a string", expected="a name such as 'gpt-tiny'",
                                got=repr(name), hint="Run `stratagem models` to list them")
    if name in ENTRIES:
        return ENTRIES[name], False
    if name.endswith(TINY) and name[: -len(TINY)] in ENTRIES:
        return ENTRIES[name[: -len(TINY)]], True
    close = difflib.get_close_matches(name, [*ENTRIES, *(n + TINY for n in ENTRIES)], n=5, cutoff=0.5)
    raise UnknownModelError(f"no model {name!r} in the zoo",
                            expected=f"one of {len(ENTRIES)} names" + (f", e.g. {', '.join(close)}" if close else ""),
                            got=repr(name), hint="Run `stratagem models` to list them")


def variant(name: str) -> Variant:
    entry, tiny = resolve(name)
    return entry.tiny if tiny else entry.full


def info(name: str) -> ModelInfo:
    entry, tiny = resolve(name)
    chosen = entry.tiny if tiny else entry.full
    return ModelInfo(name, chosen.batch_size, entry.source, None if tiny else entry.published,
                     entry.notes, tiny, entry.requires, "fp32" if tiny else entry.precision)


def module(name: str, device: str | torch.device = "meta", *, batch_size: int | None = None,
           seed: int = 0) -> tuple[nn.Module, tuple[Any, ...]]:
    """The model and example inputs at its batch size. On a real device the weights are initialized
    and the inputs drawn with `seed`; on meta nothing is allocated."""
    chosen = variant(name)
    batch = chosen.batch_size if batch_size is None else values.integer(batch_size, "batch size")
    device = torch.device(device)
    if device.type != "meta":
        torch.manual_seed(seed)
    with device:
        model = chosen.build()
    generator = torch.Generator().manual_seed(seed)
    return model, chosen.inputs(batch, device, generator)


class Zoo:
    """Captured graphs, built on first request and kept for the life of this object."""

    def __init__(self) -> None:
        self._graphs: dict[tuple[str, int | None], Graph] = {}

    def build(self, name: str, *, batch_size: int | None = None) -> Graph:
        resolve(name)
        key = (name, batch_size)
        if key not in self._graphs:
            from stratagem.frontend.capture import capture
            model, example = module(name, "meta", batch_size=batch_size)
            self._graphs[key] = capture(model, example, name=name)
        return self._graphs[key]


_PROCESS_ZOO = Zoo()


def build(name: str, *, batch_size: int | None = None) -> Graph:
    """The captured graph of a zoo model (cached for this process)."""
    return _PROCESS_ZOO.build(name, batch_size=batch_size)


__all__ = ["ModelInfo", "Published", "UnknownModelError", "Variant", "Zoo", "ZooEntry", "build", "info",
           "module", "names", "resolve", "variant"]
