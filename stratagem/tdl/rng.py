"""A counter-based random number: `uniform(n)` in [0, 1), a fixed function of the integer n.

TDL descriptions are functions of their inputs, so an op that draws random numbers (dropout)
draws them as a function of the element's position: out[i] keeps x[i] when uniform(seed, i) >= p.
Every partition of the op then draws the same mask, whichever worker computes element i, and the
ground-truth tests can compare split and whole runs exactly. The function is SplitMix64's
finalizer (Steele, Lea, Flood: "Fast splittable pseudorandom number generators", OOPSLA 2014),
whose outputs pass BigCrush for consecutive counters; the top 53 bits become the double.
`stratagem.frontend.torch_impl` computes the same numbers in torch.
"""

from __future__ import annotations

import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB


def splitmix64(counter: np.ndarray) -> np.ndarray:
    """SplitMix64 output for each uint64 counter (arithmetic wraps modulo 2^64)."""
    z = np.asarray(counter, dtype=np.uint64) + np.uint64(GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
    return z ^ (z >> np.uint64(31))


def uniform(counter: np.ndarray) -> np.ndarray:
    """Uniform [0, 1) doubles for non-negative integer counters (given as floats or ints)."""
    with np.errstate(over="ignore"):
        bits = splitmix64(np.asarray(counter).astype(np.int64).astype(np.uint64))
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def dropout_counter(seed: int, position: int) -> int:
    """The counter of element `position` (row-major) under `seed`: seed * 2^32 + position."""
    return seed * (1 << 32) + position
