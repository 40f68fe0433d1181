"""Which plain attributes of a module a trace reads (repeats.py: twins whose attributes differ only
where their forward never looks, as a decoder layer's `layer_idx`, which Hugging Face's attention
reads only to update a KV cache).

While `recording(attributes)` is entered, each (class, name) given has a data descriptor on the
class that returns the instance's own value (its `__dict__` entry, else what the class held) and
tells every open `Reads` of the read (what the class held: as the class would give it, a
method bound, a property called). A data descriptor on the class takes precedence over the
instance's dict, so `module.name`, `getattr(module, name)` and the module's own `self.name` all
pass through it; reading `module.__dict__` or `vars(module)` directly does not, and is not seen.
Writes go to the instance's dict, as before. On exit each class is put back as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

_ABSENT = object()


class Reads:
    """The reads seen while open: (module, name, value), in order; nested ones see the same."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, str, Any]] = []


class _Recorded:
    """The data descriptor `recording` puts on a class for one attribute name."""

    def __init__(self, name: str, on_class: Any, open_reads: list[Reads]):
        self.name, self.on_class, self.open_reads = name, on_class, open_reads

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            if self.on_class is _ABSENT:
                raise AttributeError(self.name)
            getter = getattr(type(self.on_class), "__get__", None)
            return self.on_class if getter is None else getter(self.on_class, None, owner)
        value = obj.__dict__.get(self.name, _ABSENT)
        if value is _ABSENT:
            if self.on_class is _ABSENT:
                raise AttributeError(f"{type(obj).__name__!r} object has no attribute {self.name!r}")
            getter = getattr(type(self.on_class), "__get__", None)
            value = self.on_class if getter is None else getter(self.on_class, obj, type(obj))
        for reads in self.open_reads:
            reads.seen.append((obj, self.name, value))
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value

    def __delete__(self, obj: Any) -> None:
        del obj.__dict__[self.name]


class Recorder:
    """The open `Reads` of one `recording`: `reading()` opens one; `told(reads)` tells the open
    ones of reads that happened elsewhere (a copied template's)."""

    def __init__(self) -> None:
        self.open_reads: list[Reads] = []

    @contextlib.contextmanager
    def reading(self) -> Iterator[Reads]:
        reads = Reads()
        self.open_reads.append(reads)
        try:
            yield reads
        finally:
            self.open_reads.remove(reads)

    def told(self, seen: Iterable[tuple[Any, str, Any]]) -> None:
        seen = list(seen)
        for reads in self.open_reads:
            reads.seen.extend(seen)


@contextlib.contextmanager
def recording(attributes: Iterable[tuple[type, str]]) -> Iterator[Recorder]:
    """Record the reads of each (class, attribute name) while entered (the module docstring)."""
    recorder = Recorder()
    installed: list[tuple[type, str, Any]] = []
    try:
        for cls, name in dict.fromkeys(attributes):
            before = cls.__dict__.get(name, _ABSENT)
            on_class = next((klass.__dict__[name] for klass in cls.__mro__ if name in klass.__dict__), _ABSENT)
            setattr(cls, name, _Recorded(name, on_class, recorder.open_reads))
            installed.append((cls, name, before))
        yield recorder
    finally:
        for cls, name, before in reversed(installed):
            if before is _ABSENT:
                delattr(cls, name)
            else:
                setattr(cls, name, before)
