"""What an instrumented task reads for each tunable value (``space.instrument``), inside the tune job only.

``CURRENT`` maps a knob's key to ``("scale", k)`` (the value where it is defined, times 2**k), ``("split", k)`` (a
program count ``S`` whose programs each take ``cdiv(N, S)`` of the work: ``split(S, k)``) or ``("set", v)``;
a key not in it keeps the task's own value. The job sets it before it loads a configuration's module (module-level
definitions read it on import) and before each call (definitions in the launcher read it on every call).
"""

from __future__ import annotations

import math
import threading
from typing import Any

CURRENT: dict[str, tuple[str, int]] = {}
#: a thread's own values (the job's compile-ahead threads, ``job.Precompiler``): they override ``CURRENT`` there
LOCAL = threading.local()


def _set(key: str) -> tuple[str, int] | None:
    mine = getattr(LOCAL, "current", None)
    return (CURRENT if mine is None else mine).get(key)


def is_set(key: str) -> bool:
    """Whether the job set ``key`` (an autotuned kernel whose configs are not read statically keeps its own list
    where it did not: a kernel the configuration leaves alone)."""
    return _set(key) is not None


def knob(key: str, default: Any) -> Any:
    c = _set(key)
    if c is None:
        if default is None:
            raise KeyError(f"knob {key} has no value (an autotuned kernel's config is always set by the job)")
        return default
    how, v = c
    if how == "set":
        return v
    if how == "split":
        return split(int(default), v)
    base = int(default)
    return max(1, base << v) if v >= 0 else max(1, base >> -v)


def split(count: int, k: int) -> int:
    """A split count ``count`` made about ``2**-k`` times smaller (``k <= 0``), always one of its divisors:
    ``gcd(count, count >> -k)``. A kernel whose program ``p`` takes ``[p * cdiv(N, S), (p + 1) * cdiv(N, S))`` of
    ``N`` covers exactly ``N`` only where ``S`` divides it; a divisor of a count that divided ``N`` still does, so the
    shares stay exact at every shape (4096 -> 64 at the benchmark's N = 4096; 100 -> 4, not 12, at N = 100)."""
    if k >= 0:
        return count
    return math.gcd(count, max(count >> -k, 1))
