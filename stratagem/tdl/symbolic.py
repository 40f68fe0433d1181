"""Symbolic intervals (Tofu §4.2, Eq. 1 and Fig. 4).

Tofu represents the range of every index as an affine function of the symbolic upper bounds of
the iteration space: I = [sum_i l_i X_i + c, sum_i u_i X_i + c]. `SymForm` is one such affine
form (coefficients over symbols, plus a constant); `SymInterval` is a pair of them. The
arithmetic of Fig. 4 (I +- k, I * k, I / k, I +- I') is what `indexing.bounds` performs when it
is handed `SYM_DOMAIN`. We keep separate lower and upper constants, because we use inclusive
integer bounds and a convolution's halo shifts only the upper end.

Here the symbol of an index `x` is its extent X (the dimension size), so `x` starts as
[0, X - 1], and worker w of k along x as [w X / k, (w + 1) X / k - 1].
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any


@dataclass(frozen=True)
class SymForm:
    """sum(coefs[s] * s) + const, for symbols s (extent names) and rational coefficients."""

    coefs: tuple[tuple[str, Fraction], ...] = ()
    const: Fraction = Fraction(0)

    @staticmethod
    def symbol(name: str, coef: Fraction | int = 1) -> "SymForm":
        return SymForm(((name, Fraction(coef)),), Fraction(0))

    @staticmethod
    def constant(value: Fraction | int) -> "SymForm":
        return SymForm((), Fraction(value))

    def _merged(self, other: "SymForm", sign: int) -> "SymForm":
        table = dict(self.coefs)
        for name, c in other.coefs:
            table[name] = table.get(name, Fraction(0)) + sign * c
        coefs = tuple(sorted((n, c) for n, c in table.items() if c != 0))
        return SymForm(coefs, self.const + sign * other.const)

    def __add__(self, other: Any) -> "SymForm":
        return self._merged(_as_form(other), 1)

    __radd__ = __add__

    def __sub__(self, other: Any) -> "SymForm":
        return self._merged(_as_form(other), -1)

    def __rsub__(self, other: Any) -> "SymForm":
        return _as_form(other)._merged(self, -1)

    def __mul__(self, k: Any) -> "SymForm":
        k = Fraction(k)
        return SymForm(tuple((n, c * k) for n, c in self.coefs if c * k != 0), self.const * k)

    __rmul__ = __mul__

    def __truediv__(self, k: Any) -> "SymForm":
        return self * (1 / Fraction(k))

    def evaluate(self, extents: Mapping[str, int]) -> Fraction:
        return sum((c * extents[n] for n, c in self.coefs), self.const)

    def __str__(self) -> str:
        parts = []
        for name, c in self.coefs:
            parts.append(name if c == 1 else f"-{name}" if c == -1 else f"{_frac(c)}*{name}")
        if self.const or not parts:
            parts.append(_frac(self.const))
        return " + ".join(parts).replace("+ -", "- ")


def _frac(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _as_form(value: Any) -> SymForm:
    return value if isinstance(value, SymForm) else SymForm.constant(value)


@dataclass(frozen=True)
class SymInterval:
    """Inclusive [lo, hi]; printed half-open as [lo, hi + 1)."""

    lo: SymForm
    hi: SymForm

    def evaluate(self, extents: Mapping[str, int]) -> tuple[Fraction, Fraction]:
        return self.lo.evaluate(extents), self.hi.evaluate(extents)

    def __str__(self) -> str:
        return f"[{self.lo}, {self.hi + 1})"


class SymDomain:
    """Fig. 4 has no floor: we bound x // k by [lo/k - (k-1)/k, hi/k], exact when k divides."""

    @staticmethod
    def floordiv(value: SymForm, k: int) -> SymForm:
        return value / k

    @staticmethod
    def mod_bounds(lo: SymForm, hi: SymForm, k: int) -> tuple[SymForm, SymForm]:
        return SymForm.constant(0), SymForm.constant(k - 1)


SYM_DOMAIN = SymDomain()
