"""Sizes the verifier derives from a task's listed shapes (no task code runs here).

A listed shape is a tuple of ints (``(7, 300)``); derived shapes keep its rank and change dims:
odd sizes that are not a multiple of any block constant of the candidate, sizes on both sides of
every constant a candidate's branch compares against, and a size larger than every listed one.
A sentinel shape (``("small",)``, a dict) cannot be changed: the task picks its own sizes.
"""

from __future__ import annotations

import math
from typing import Any

#: Elements a derived shape may hold, per device kind: the CPU interpreter runs every program in
#: Python, so its budget is small (the CPU suite must stay fast); a GPU takes far more.
ELEMENT_BUDGET = {"cpu": 1 << 18, "cuda": 1 << 26}
#: A larger shape holds about this many times the elements of the largest listed one (capped by the budget).
GROWTH = {"cpu": 2.5, "cuda": 8.0}


def is_int_shape(shape: Any) -> bool:
    return (isinstance(shape, tuple) and len(shape) > 0
            and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape))


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def device_kind(device: str) -> str:
    """"cuda" or "cpu" (the size class) for a torch device string or a size class."""
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


def larger_variant(listed: list[tuple[int, ...]], blocks: set[int], device: str) -> tuple[int, ...] | None:
    """The largest listed shape with its largest dim grown (awkwardly) to about GROWTH x the elements."""
    if not listed:
        return None
    base = max(listed, key=numel)
    cap = budget(device, listed)
    target = min(cap, int(numel(base) * GROWTH[device_kind(device)]))
    if target <= numel(base):
        return None
    i = max(range(len(base)), key=lambda k: base[k])
    rest = numel(base) // base[i]
    grown = awkward(max(base[i] + 1, target // max(rest, 1)), blocks, {d for s in listed for d in s})
    shape = base[:i] + (grown,) + base[i + 1:]
    return shape if numel(shape) <= cap else None


def around(values: set[int]) -> list[int]:
    """Sizes on both sides of each constant: c-1, c, c+1, 2c (multiples for ``%`` tests)."""
    out: set[int] = set()
    for c in values:
        out.update({c - 1, c, c + 1, 2 * c, 3 * c})
    return sorted(v for v in out if v >= 1)


def branch_pool(listed: list[tuple[int, ...]], constants: set[int], device: str) -> list[tuple[int, ...]]:
    """Shapes to try for branches no case reaches yet: each listed shape with one dim set to a size
    around a constant, the other dims at their smallest listed value (so the shape stays small); and
    the same for the product of all dims (``x.numel()`` tests), splitting the size over the last dim.
    Sorted smallest first and bounded by the device's element budget."""
    cap = budget(device, listed)
    pool: set[tuple[int, ...]] = set()
    for s in listed:
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
