"""`stratagem.zoo`: the model zoo, importable without importing torch (torch loads on first use).

    import stratagem as sg
    sg.zoo.names(); sg.zoo.info("gpt-7b"); g = sg.zoo.build("gpt-7b")

Everything here forwards to `stratagem.frontend.zoo`, which documents it.
"""

from __future__ import annotations

from typing import Any


def _zoo() -> Any:
    from stratagem.frontend import zoo
    return zoo


def names() -> tuple[str, ...]:
    return _zoo().names()


def info(name: str) -> Any:
    return _zoo().info(name)


def build(name: str, *, batch_size: int | None = None) -> Any:
    return _zoo().build(name, batch_size=batch_size)


def rebatched(name: str, *, batch_size: int, captured_batch: int) -> Any:
    return _zoo().rebatched(name, batch_size=batch_size, captured_batch=captured_batch)


def module(name: str, device: str = "meta", *, batch_size: int | None = None, seed: int = 0) -> Any:
    return _zoo().module(name, device, batch_size=batch_size, seed=seed)


__all__ = ["build", "info", "module", "names", "rebatched"]
