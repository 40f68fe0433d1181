"""Index expressions of the TDL: what may appear inside `tensor[...]`.

Tofu §4.2 admits affine index arithmetic only: `a*x + b*y + c` with constant coefficients.
We also admit floor division and remainder by a positive constant (`h // g`, `hd % D`), which
reshapes and grouped convolutions need; both are monotone or periodic, so interval bounds stay
exact (see `bounds`). A product of two indices becomes an `IndexProduct`, usable as a value but
rejected as an access index; so is a tensor element used as an index (data-dependent indexing).

    atom  := IndexVar | FloorDiv(Affine, k) | Mod(Affine, k)
    Affine := sum_i coef_i * atom_i + const          (coef_i, const integers)

`bounds(expr, ranges, domain)` is the interval semantics of Tofu Fig. 4, generic over the number
domain: concrete integers (exact regions) or symbolic affine forms (`symbolic.SymForm`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from stratagem.errors import TDLError

_uids = itertools.count()  # identity source for index variables; holds no planner state


class IndexExpr:
    """Base class: arithmetic that keeps index expressions affine where it can."""

    __slots__ = ()

    def to_affine(self) -> "Affine":
        raise NotImplementedError

    def variables(self) -> tuple["IndexVar", ...]:
        return self.to_affine().variables()

    def _coerce(self, other: Any) -> "Affine | None":
        if isinstance(other, bool):
            return None
        if isinstance(other, int):
            return Affine((), other)
        if isinstance(other, float) and other.is_integer():
            return Affine((), int(other))
        if isinstance(other, IndexExpr) and not isinstance(other, IndexProduct):
            return other.to_affine()
        return None

    def __add__(self, other: Any) -> Any:
        rhs = self._coerce(other)
        return NotImplemented if rhs is None else self.to_affine().plus(rhs)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        rhs = self._coerce(other)
        return NotImplemented if rhs is None else self.to_affine().plus(rhs.scaled(-1))

    def __rsub__(self, other: Any) -> Any:
        lhs = self._coerce(other)
        return NotImplemented if lhs is None else lhs.plus(self.to_affine().scaled(-1))

    def __neg__(self) -> "Affine":
        return self.to_affine().scaled(-1)

    def __mul__(self, other: Any) -> Any:
        if isinstance(other, IndexExpr):
            return IndexProduct(self, other)
        rhs = self._coerce(other)
        if rhs is None:
            return NotImplemented
        return self.to_affine().scaled(rhs.const)

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> "IndexExpr":
        k = _positive_constant(other, "//", self)
        return FloorDiv(self.to_affine(), k).simplified()

    def __mod__(self, other: Any) -> "IndexExpr":
        k = _positive_constant(other, "%", self)
        return Mod(self.to_affine(), k).simplified()

    # comparisons build conditions over indices (used by `where`)
    def _cond(self, other: Any, relation: str) -> Any:
        rhs = self._coerce(other)
        if rhs is None:
            return NotImplemented
        return IndexCond(self.to_affine().plus(rhs.scaled(-1)), relation)

    def __lt__(self, other: Any) -> Any:
        return self._cond(other, "<")

    def __le__(self, other: Any) -> Any:
        return self._cond(other, "<=")

    def __gt__(self, other: Any) -> Any:
        return self._cond(other, ">")

    def __ge__(self, other: Any) -> Any:
        return self._cond(other, ">=")

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._cond(other, "==")

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._cond(other, "!=")

    __hash__ = object.__hash__


def _positive_constant(value: Any, symbol: str, expr: IndexExpr) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise TDLError(f"index expression `{expr} {symbol} {value!r}` is not allowed",
                   expected="division or remainder by a positive integer constant",
                   got=f"{type(value).__name__} {value!r}",
                   hint="Index arithmetic must be affine (Tofu §4.2)")


class IndexVar(IndexExpr):
    """A lambda parameter: one dimension of an operator's iteration space."""

    __slots__ = ("name", "uid")

    def __init__(self, name: str):
        self.name = name
        self.uid = next(_uids)

    def to_affine(self) -> "Affine":
        return Affine(((self, 1),), 0)

    @property
    def key(self) -> tuple:
        return ("v", self.uid)

    def __repr__(self) -> str:
        return self.name

    __hash__ = IndexExpr.__hash__


@dataclass(frozen=True, eq=False)
class Affine(IndexExpr):
    """sum(coef * atom) + const; terms are kept sorted by atom key with no zero coefficients."""

    terms: tuple[tuple[Any, int], ...]
    const: int = 0

    def to_affine(self) -> "Affine":
        return self

    @property
    def key(self) -> tuple:
        return (tuple((atom.key, c) for atom, c in self.terms), self.const)

    def plus(self, other: "Affine") -> "Affine":
        merged: dict[tuple, list] = {atom.key: [atom, c] for atom, c in self.terms}
        for atom, c in other.terms:
            entry = merged.setdefault(atom.key, [atom, 0])
            entry[1] += c
        return _make_affine(merged.values(), self.const + other.const)

    def scaled(self, k: int) -> "Affine":
        return _make_affine(([a, c * k] for a, c in self.terms), self.const * k)

    def variables(self) -> tuple[IndexVar, ...]:
        found: dict[int, IndexVar] = {}
        for atom, _ in self.terms:
            for v in atom_variables(atom):
                found[v.uid] = v
        return tuple(found.values())

    def as_single_var(self) -> IndexVar | None:
        """The variable if this expression is exactly one variable (coefficient 1, no constant)."""
        if self.const == 0 and len(self.terms) == 1:
            atom, c = self.terms[0]
            if c == 1 and isinstance(atom, IndexVar):
                return atom
        return None

    def __repr__(self) -> str:
        parts = []
        for atom, c in self.terms:
            text = repr(atom) if c == 1 else f"-{atom!r}" if c == -1 else f"{c}*{atom!r}"
            parts.append(text)
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts).replace("+ -", "- ")

    __hash__ = IndexExpr.__hash__


def _make_affine(entries: Any, const: int) -> Affine:
    terms = sorted(((a, c) for a, c in entries if c != 0), key=lambda t: repr(t[0].key))
    return Affine(tuple(terms), const)


@dataclass(frozen=True, eq=False)
class FloorDiv(IndexExpr):
    inner: Affine
    divisor: int

    @property
    def key(self) -> tuple:
        return ("div", self.inner.key, self.divisor)

    def to_affine(self) -> Affine:
        return Affine(((self, 1),), 0)

    def simplified(self) -> IndexExpr:
        """Exact when every coefficient and the constant are multiples of the divisor."""
        inner, k = self.inner, self.divisor
        if k == 1:
            return inner
        if inner.const % k == 0 and all(c % k == 0 for _, c in inner.terms):
            return _make_affine(([a, c // k] for a, c in inner.terms), inner.const // k)
        return self

    def __repr__(self) -> str:
        return f"({self.inner!r}) // {self.divisor}"

    __hash__ = IndexExpr.__hash__


@dataclass(frozen=True, eq=False)
class Mod(IndexExpr):
    inner: Affine
    divisor: int

    @property
    def key(self) -> tuple:
        return ("mod", self.inner.key, self.divisor)

    def to_affine(self) -> Affine:
        return Affine(((self, 1),), 0)

    def simplified(self) -> IndexExpr:
        inner, k = self.inner, self.divisor
        if k == 1:
            return Affine((), 0)
        kept = [(a, c) for a, c in inner.terms if c % k != 0]
        if len(kept) != len(inner.terms) or inner.const % k != inner.const:
            return Mod(_make_affine(kept, inner.const % k), k)
        return self

    def __repr__(self) -> str:
        return f"({self.inner!r}) % {self.divisor}"

    __hash__ = IndexExpr.__hash__


@dataclass(frozen=True, eq=False)
class IndexProduct(IndexExpr):
    """A product of two index expressions: fine as a value, not affine, so never an access index."""

    left: IndexExpr
    right: IndexExpr

    def to_affine(self) -> Affine:
        raise TDLError(f"index expression `{self!r}` is a product of two indices",
                       expected="affine index arithmetic (Tofu §4.2)", got=repr(self))

    def variables(self) -> tuple[IndexVar, ...]:
        out: dict[int, IndexVar] = {}
        for side in (self.left, self.right):
            vs = side.variables() if isinstance(side, IndexProduct) else side.to_affine().variables()
            out.update((v.uid, v) for v in vs)
        return tuple(out.values())

    def __repr__(self) -> str:
        return f"({self.left!r}) * ({self.right!r})"

    __hash__ = IndexExpr.__hash__


@dataclass(frozen=True, eq=False)
class IndexCond:
    """`expr <relation> 0` over indices, e.g. `j - A < 0`; used by `where` to narrow index ranges."""

    expr: Affine
    relation: str

    def __repr__(self) -> str:
        return f"{self.expr!r} {self.relation} 0"

    def __bool__(self) -> bool:
        raise TDLError(f"condition `{self!r}` used as a Python bool",
                       hint="Use tdl.where(condition, a, b) inside a description instead of `if`")


def atom_variables(atom: Any) -> tuple[IndexVar, ...]:
    if isinstance(atom, IndexVar):
        return (atom,)
    return atom.inner.variables()


def as_index(value: Any) -> IndexExpr | None:
    """An int or index expression as an Affine index; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Affine((), value)
    if isinstance(value, IndexExpr):
        return value
    return None


# ---- interval semantics (Tofu Fig. 4), generic over a number domain ------------------------------

class Domain(Protocol):
    def floordiv(self, value: Any, k: int) -> Any: ...
    def mod_bounds(self, lo: Any, hi: Any, k: int) -> tuple[Any, Any]: ...


class IntDomain:
    """Concrete integer bounds: exact for affine, floor-division and remainder."""

    @staticmethod
    def floordiv(value: int, k: int) -> int:
        return value // k

    @staticmethod
    def mod_bounds(lo: int, hi: int, k: int) -> tuple[int, int]:
        if hi - lo + 1 >= k or lo // k != hi // k:
            return 0, k - 1
        return lo % k, hi % k


INT_DOMAIN = IntDomain()

Ranges = Mapping[int, tuple[Any, Any]]  # variable uid -> (lo, hi), inclusive


def bounds(expr: IndexExpr, ranges: Ranges, domain: Domain = INT_DOMAIN) -> tuple[Any, Any]:
    """Inclusive [lo, hi] of `expr` when each variable ranges over `ranges[uid]`."""
    affine = expr.to_affine()
    lo = hi = affine.const
    for atom, coef in affine.terms:
        a_lo, a_hi = _atom_bounds(atom, ranges, domain)
        if coef >= 0:
            lo, hi = lo + a_lo * coef, hi + a_hi * coef
        else:
            lo, hi = lo + a_hi * coef, hi + a_lo * coef
    return lo, hi


def _atom_bounds(atom: Any, ranges: Ranges, domain: Domain) -> tuple[Any, Any]:
    if isinstance(atom, IndexVar):
        return ranges[atom.uid]
    lo, hi = bounds(atom.inner, ranges, domain)
    if isinstance(atom, FloorDiv):
        return domain.floordiv(lo, atom.divisor), domain.floordiv(hi, atom.divisor)
    return domain.mod_bounds(lo, hi, atom.divisor)


def evaluate(expr: IndexExpr, values: Mapping[int, Any]) -> Any:
    """Evaluate at concrete (or numpy-array) variable values."""
    affine = expr.to_affine()
    total: Any = affine.const
    for atom, coef in affine.terms:
        if isinstance(atom, IndexVar):
            v = values[atom.uid]
        elif isinstance(atom, FloorDiv):
            v = evaluate(atom.inner, values) // atom.divisor
        else:
            v = evaluate(atom.inner, values) % atom.divisor
        total = total + coef * v
    return total


def simplify(expr: IndexExpr, ranges: Ranges) -> IndexExpr:
    """Remove floor-divisions and remainders that the variable ranges make affine.

    `(k*e + r) // k == e + r // k` and `(k*e + r) % k == r % k` always hold; when moreover
    `r // k` is one constant b over `ranges`, they are `e + b` and `r - b*k`. This turns the
    row-major index arithmetic of a reshape back into plain affine indices, and keeps the
    // and % of the rest small (so their interval bounds stay tight).
    """
    affine = expr.to_affine()
    result = Affine((), affine.const)
    for atom, coef in affine.terms:
        result = result.plus(_simplify_atom(atom, ranges).to_affine().scaled(coef))
    return result


def _simplify_atom(atom: Any, ranges: Ranges) -> IndexExpr:
    if isinstance(atom, IndexVar):
        return atom
    inner = simplify(atom.inner, ranges).to_affine()
    k = atom.divisor
    exact = _make_affine(([a, c] for a, c in inner.terms if c % k == 0), inner.const - inner.const % k)
    rest = _make_affine(([a, c] for a, c in inner.terms if c % k != 0), inner.const % k)
    lo, hi = bounds(rest, ranges)
    block = lo // k if lo // k == hi // k else None
    if isinstance(atom, FloorDiv):
        quotient = _make_affine(([a, c // k] for a, c in exact.terms), exact.const // k)
        remainder = Affine((), block) if block is not None else FloorDiv(rest, k).to_affine()
        return quotient.plus(remainder)
    return rest.plus(Affine((), -block * k)) if block is not None else Mod(rest, k).simplified()
