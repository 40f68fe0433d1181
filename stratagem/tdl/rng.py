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


# Bytes the runtime moves per random number it draws (frontend.torch_impl.rng.uniform and
# runtime.localops' dropout): one torch kernel per integer operation on int64 tensors, each reading
# its operand (8 bytes) and writing its result (8): the element's global position (8 written; the
# partial sums over trailing dims are smaller), the seed added (16); SplitMix64 (adding GOLDEN 16;
# twice a logical shift right, a mask, an xor and a multiply, 16 + 16 + 24 + 16; once a shift, a
# mask and an xor, 56; the top 53 bits: a shift and a mask 32, to float64 16, a scale 16: 280); the
# comparison with p (8 read, 1 written) and the keep mask read where it is applied (1). Counted
# against the kernels torch runs in tests/runtime/test_dropout_cost.py. On an H200 the mask of
# [64, 128, 768] elements takes 0.61-0.63 ms against torch's own dropout's 0.013-0.021.
MASK_BYTES_PER_DRAW = 8 + 16 + 280 + 9 + 1


def dropout_counter(seed: int, position: int) -> int:
    """The counter of element `position` (row-major) under `seed`: seed * 2^32 + position."""
    return seed * (1 << 32) + position
