"""`stratagem.tdl.rng.uniform` in torch: SplitMix64 on int64 tensors (torch's integer arithmetic
wraps modulo 2^64; `>>` is arithmetic, so logical shifts mask the sign bits off)."""

from __future__ import annotations

import torch

from stratagem.tdl.rng import GOLDEN, MIX1, MIX2, dropout_counter


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


def _shift_right(z: torch.Tensor, bits: int) -> torch.Tensor:
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def uniform(counter: torch.Tensor) -> torch.Tensor:
    """Uniform [0, 1) doubles, equal to tdl.rng.uniform for the same int64 counters."""
    z = counter.to(torch.int64) + _signed(GOLDEN)
    z = (z ^ _shift_right(z, 30)) * _signed(MIX1)
    z = (z ^ _shift_right(z, 27)) * _signed(MIX2)
    z = z ^ _shift_right(z, 31)
    return _shift_right(z, 11).to(torch.float64) * (1.0 / (1 << 53))


def dropout_keep(shape, p: float, seed: int, device=None) -> torch.Tensor:
    """The keep mask of the whole tensor of `shape` (row-major positions from 0)."""
    positions = torch.arange(int(torch.Size(shape).numel()), dtype=torch.int64, device=device)
    return (uniform(positions + dropout_counter(seed, 0)) >= p).reshape(shape)
