"""Sizes the verifier derives from a task's listed shapes (no task code runs here).

A listed shape is a tuple of ints (``(7, 300)``); derived shapes keep its rank and change dims:
odd sizes that are not a multiple of any block constant of the candidate, sizes on both sides of
every constant a candidate's branch compares against, per block constant that tiles a dim sizes with remainders
1 and block-1 in that dim (``tiles.py``), and a size larger than every listed one (``cases._Planner._larger``).
A sentinel shape (``("small",)``, a dict) cannot be changed: the task picks its own sizes.
"""

from __future__ import annotations

import math
from typing import Any

#: Input elements a derived shape may take (every tensor ``make_inputs`` gives, summed: ``cases._Planner.input_elems``;
#: not the product of the shape's dims, which overstates a GEMM's (M, N, K) by ~K/2), per device kind: the CPU
#: interpreter runs every program in Python, so its budget is small (the CPU suite must stay fast); a GPU takes far
#: more. (:func:`budget` bounds the sizes the branch search evaluates, by the product, before their inputs exist.)
ELEMENT_BUDGET = {"cpu": 1 << 18, "cuda": 1 << 26, "any": 1 << 40}   # "any": evaluated only, never run
#: A larger shape holds about this many times the elements of the largest listed one (capped by the budget).
GROWTH = {"cpu": 2.5, "cuda": 8.0, "any": 8.0}


def is_int_shape(shape: Any) -> bool:
    return (isinstance(shape, tuple) and len(shape) > 0
            and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape))


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def device_kind(device: str) -> str:
    """The size class of a torch device string ("cuda", "cpu") or of a size class ("any")."""
    if device == "any":
        return "any"
    return "cuda" if str(device).startswith("cuda") else "cpu"


def budget(device: str, listed: list[tuple[int, ...]]) -> int:
    kind = device_kind(device)
    biggest = max((numel(s) for s in listed), default=1)
    return max(biggest, ELEMENT_BUDGET[kind])


def _divisible_by_any(n: int, blocks: set[int]) -> bool:
    return any(b > 1 and n % b == 0 for b in blocks)


def awkward(n: int, blocks: set[int], avoid: set[int]) -> int:
    """The smallest m >= n that is odd, not a multiple of any block constant and not in ``avoid``."""
    m = max(1, n)
    while m % 2 == 0 or _divisible_by_any(m, blocks) or m in avoid:
        m += 1
    return m


def min_dims(listed: list[tuple[int, ...]], rank: int) -> list[int]:
    """Per position, the smallest value any listed shape of that rank has there."""
    same = [s for s in listed if len(s) == rank]
    return [min(s[i] for s in same) for i in range(rank)]


def odd_variant(listed: list[tuple[int, ...]], blocks: set[int]) -> tuple[int, ...] | None:
    """The smallest listed shape with every dim moved to an awkward size (odd, no block multiple, unlisted)."""
    if not listed:
        return None
    base = min(listed, key=numel)
    seen = {d for s in listed for d in s}
    return tuple(awkward(d + 1, blocks, seen) if d > 1 else d for d in base)


def around(values: set[int]) -> list[int]:
    """Sizes on both sides of each constant: c-1, c, c+1, 2c (multiples for ``%`` tests)."""
    out: set[int] = set()
    for c in values:
        out.update({c - 1, c, c + 1, 2 * c, 3 * c})
    return sorted(v for v in out if v >= 1)


def branch_pool(listed: list[tuple[int, ...]], constants: set[int], device: str,
                one_per_rank: bool = False) -> list[tuple[int, ...]]:
    """Shapes to try for branches no case reaches yet: each listed shape with one dim set to a size
    around a constant, the other dims at their smallest listed value (so the shape stays small); and
    the same for the product of all dims (``x.numel()`` tests), splitting the size over the last dim.
    Sorted smallest first and bounded by the device's element budget. ``one_per_rank``: one base
    shape per rank (the other dims are at their minimum anyway), for wide searches."""
    cap = budget(device, listed)
    pool: set[tuple[int, ...]] = set()
    bases = list({len(s): s for s in listed}.values()) if one_per_rank else listed
    for s in bases:
        mins = min_dims(listed, len(s))
        for i in range(len(s)):
            for v in around(constants):
                shape = tuple(v if k == i else mins[k] for k in range(len(s)))
                if numel(shape) <= cap:
                    pool.add(shape)
        if len(s) > 1:
            lead = math.prod(mins[:-1])
            for v in around(constants):
                if v % lead == 0:
                    shape = tuple(mins[:-1]) + (v // lead,)
                    if numel(shape) <= cap:
                        pool.add(shape)
    pool -= set(listed)
    return sorted(pool, key=lambda sh: (numel(sh), sh))


class InputModel:
    """How a task's input tensors follow its shape, learnt from two small ``make_inputs`` calls, so the
    launcher can be evaluated at any size on empty meta tensors (no data, no memory, no task code).

    Each input dim (and each int scalar input) is matched to the shape dim it equals in both calls,
    or found constant; a dim that follows the shape some other way (a product, a multiple) leaves
    the model unusable (:meth:`inputs` returns None) and the caller falls back to ``make_inputs``."""

    def __init__(self, base: tuple[int, ...], base_inputs: tuple, moved: tuple[int, ...], moved_inputs: tuple):
        import torch
        self.ok = len(base_inputs) == len(moved_inputs)
        self.plan: list[Any] = []
        for a, b in zip(base_inputs, moved_inputs) if self.ok else ():
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == b.dim():
                dims = [self._match(x, y, base, moved) for x, y in zip(a.shape, b.shape)]
                self.ok &= all(d is not None for d in dims) and a.dtype == b.dtype
                self.plan.append(("tensor", dims, a.dtype))
            elif isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                m = self._match(a, b, base, moved)
                self.ok &= m is not None
                self.plan.append(("int", m))
            elif not isinstance(a, torch.Tensor) and type(a) is type(b) and a == b:
                self.plan.append(("const", a))
            else:
                self.ok = False

    @staticmethod
    def _match(x: int, y: int, base: tuple[int, ...], moved: tuple[int, ...]) -> tuple[str, int] | None:
        if x == y:
            return ("const", x)
        for i, (p, q) in enumerate(zip(base, moved)):
            if p == x and q == y:
                return ("dim", i)
        return None

    def inputs(self, shape: tuple[int, ...]) -> tuple | None:
        import torch
        if not self.ok:
            return None
        out: list[Any] = []
        for entry in self.plan:
            if entry[0] == "tensor":
                dims = [v if kind == "const" else shape[v] for kind, v in entry[1]]
                out.append(torch.empty(dims, dtype=entry[2], device="meta"))
            elif entry[0] == "int":
                kind, v = entry[1]
                out.append(v if kind == "const" else shape[v])
            else:
                out.append(entry[1])
        return tuple(out)


def moved_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with every dim changed by a different amount (so each dim is told apart)."""
    primes = (3, 5, 7, 11, 13, 17, 19, 23)
    return tuple(d + primes[i % len(primes)] for i, d in enumerate(shape))
