"""The model zoo: every model the three papers measured, LLaMA-style decoders up to 70B, and
Hugging Face models from configs. Each forward returns its training loss.

    names()                       the model names (`<name>-tiny` is the tiny variant of each)
    info(name)                    batch size, source, published size, notes
    module(name, device="meta")   (nn.Module, example inputs); device="cpu" builds real weights
    build(name)                   the captured Graph (captured on meta, cached per process)
    rebatched(name, batch_size=k, captured_batch=b)
                                  build(name, batch_size=k): the pipeline search's micro-batches
                                  (captured for a model of twin blocks; else derived from the
                                  capture at b where that is exact, rebatch.py)
"""

from __future__ import annotations

import difflib
from typing import Any

import torch
from torch import nn

from stratagem import values
from stratagem.errors import StratagemError
from stratagem.frontend.capture import Captured, capture_with_exports
from stratagem.frontend.rebatch import BatchFamily, batch_family, derived_graph, derived_program
from stratagem.frontend.repeats import has_twins
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
    """Captured graphs, built on first request and kept for the life of this object; and, for
    `rebatched`, the exports of the latest capture and the latest batch family (rebatch.py)."""

    def __init__(self) -> None:
        self._graphs: dict[tuple[str, int | None], Graph] = {}
        self._latest: tuple[tuple[str, int], Captured] | None = None
        self._family: tuple[tuple[str, int], BatchFamily | None] | None = None
        self._twins: dict[str, bool] = {}

    def build(self, name: str, *, batch_size: int | None = None) -> Graph:
        resolve(name)
        key = (name, batch_size)
        if key not in self._graphs:
            self._graphs[key] = self._captured(name, _batch(name, batch_size)).graph
        return self._graphs[key]

    def rebatched(self, name: str, *, batch_size: int, captured_batch: int) -> Graph:
        """The graph `build(name, batch_size=batch_size)` gives (the pipeline search's
        micro-batches): for a model of twin blocks (frontend.repeats) captured, since its exports
        trace one block per kind of call, where the symbolic export a batch family needs traces
        every block (hf:llama-7b's three micro-batch sizes: 10.8 s captured against 20.5 s
        derived; gpt-70b's 18.9 against 43.5 s); for another model derived from the capture at
        `captured_batch` where rebatch.py can tell it is exact, else captured."""
        resolve(name)
        key = (name, batch_size)
        if key not in self._graphs:
            family = None if self._has_twins(name) else self.family(name, captured_batch)
            derived = None if family is None else derived_graph(family, batch_size, _example(name, batch_size), name)
            if derived is None:
                grown = None if family is None else derived_program(family, batch_size + 1)
                derived = self._captured(name, batch_size, grown).graph
            self._graphs[key] = derived
        return self._graphs[key]

    def _has_twins(self, name: str) -> bool:
        if name not in self._twins:
            self._twins[name] = has_twins(module(name, "meta")[0])
        return self._twins[name]

    def family(self, name: str, batch_size: int) -> BatchFamily | None:
        """The batch family of the model's capture at `batch_size` (the latest one only is kept)."""
        key = (name, batch_size)
        if self._family is None or self._family[0] != key:
            captured = self._latest[1] if self._latest is not None and self._latest[0] == key else \
                self._captured(name, batch_size)
            model, _ = module(name, "meta", batch_size=batch_size)
            self._family = (key, batch_family(model, lambda b: _example(name, b), captured, batch_size))
        return self._family[1]

    def _captured(self, name: str, batch_size: int, grown: Any = None) -> Captured:
        model, example = module(name, "meta", batch_size=batch_size)
        captured = capture_with_exports(model, example, name=name, grown=grown)
        self._latest = ((name, batch_size), captured)
        return captured


def _batch(name: str, batch_size: int | None) -> int:
    return variant(name).batch_size if batch_size is None else values.integer(batch_size, "batch size")


def _example(name: str, batch_size: int) -> tuple[Any, ...]:
    """The model's example inputs at `batch_size`, on meta."""
    return variant(name).inputs(batch_size, torch.device("meta"), torch.Generator().manual_seed(0))


_PROCESS_ZOO = Zoo()


def build(name: str, *, batch_size: int | None = None) -> Graph:
    """The captured graph of a zoo model (cached for this process)."""
    return _PROCESS_ZOO.build(name, batch_size=batch_size)


def rebatched(name: str, *, batch_size: int, captured_batch: int) -> Graph:
    """`build(name, batch_size=batch_size)` (Zoo.rebatched: captured for a model of twin blocks,
    else derived from the capture at `captured_batch` where that is exact; cached for this process)."""
    return _PROCESS_ZOO.rebatched(name, batch_size=batch_size, captured_batch=captured_batch)


__all__ = ["ModelInfo", "Published", "UnknownModelError", "Variant", "Zoo", "ZooEntry", "build", "info",
           "module", "names", "rebatched", "resolve", "variant"]
