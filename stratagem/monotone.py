"""The closest non-decreasing sequence (isotonic regression by pooling adjacent violators).

    non_decreasing([3.6, 3.0, 1.6, 4.3]) -> [2.73, 2.73, 2.73, 4.3]

For measured quantities that cannot fall as their argument grows (a collective's time as its
message grows, an efficiency curve's fitted points), noise made monotone by least squares.
"""

from __future__ import annotations

from collections.abc import Sequence


def non_decreasing(values: Sequence[float], weights: Sequence[float] | None = None) -> list[float]:
    """Minimizes sum w_i (y_i - x_i)^2 over non-decreasing y (Barlow et al., pool adjacent violators)."""
    weights = [1.0] * len(values) if weights is None else list(weights)
    blocks: list[list[float]] = []          # [mean, weight, count]
    for v, w in zip(values, weights):
        blocks.append([float(v), float(w), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, c2 = blocks.pop()
            v1, w1, c1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return [b[0] for b in blocks for _ in range(int(b[2]))]
