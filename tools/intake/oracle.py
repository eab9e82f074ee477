"""Oracle mode: a captured task's reference is the original kernel itself.

``RUNTIME`` lists the functions every captured task file carries a copy of (task files import nothing from
tritondx: a candidate that did would be refused as verifier tampering): ``original_kernel`` (the kernel the
program launched, imported from its module when that module is importable, else the task's own unchanged
copy), ``make_group_inputs`` (random inputs shaped like one captured launch signature) and ``fresh_like``
(a launcher's output buffer). ``derive_tolerance`` runs at task-writing time (from the dtype and, for
reductions, the reduction length).
"""

from __future__ import annotations

import importlib
import math
import re
from typing import Any

import torch

# A kernel source that reduces (sums, dots, scans, atomics, loops that accumulate), e.g. "acc += tl.sum(x, 0)"
REDUCTION_RE = re.compile(r"\btl\.(sum|reduce|dot|max|min|argmax|argmin|cumsum|cumprod|associative_scan|"
                          r"atomic_add|dot_scaled|xor_sum)\s*\(|^\s*for\s+\w+\s+in\s+(tl\.)?(range|static_range)\(",
                          re.MULTILINE)

#: elementwise relative tolerance floor per dtype (reordering and contraction differences in fp32; one or
#: two units of the last place in the narrow formats, where the output is rounded)
_ELEMENTWISE_RTOL = {torch.float32: 1e-5, torch.float64: 1e-12}
_ACCUMULATE_EPS = torch.finfo(torch.float32).eps   # Triton kernels accumulate in fp32 (or wider)


def derive_tolerance(dtype: torch.dtype, reduction_length: int | None) -> dict[str, float]:
    """``{"atol", "rtol"}`` for comparing a rewrite with the original kernel.

    Elementwise: ``max(2 * eps(dtype), floor)``. A reduction of length K adds the random-walk growth of
    rounding error in an fp32 accumulator, ``2 * sqrt(K) * eps(fp32)``, to both. Integer and bool outputs
    compare exactly.
    """
    if not (dtype.is_floating_point or dtype.is_complex):
        return {"atol": 0.0, "rtol": 0.0}
    eps = torch.finfo(dtype).eps
    rtol = max(2 * eps, _ELEMENTWISE_RTOL.get(dtype, 0.0))
    if reduction_length and reduction_length > 1:
        rtol += 2 * math.sqrt(reduction_length) * max(_ACCUMULATE_EPS, eps if dtype == torch.float64 else 0.0)
    return {"atol": float(f"{rtol:.3g}"), "rtol": float(f"{rtol:.3g}")}


def is_reduction(source: str) -> bool:
    return bool(REDUCTION_RE.search(source))


def original_kernel(module: str, name: str, fallback: Any) -> Any:
    """The kernel object the program launched: ``module.name`` when importable and a Triton kernel, else
    ``fallback`` (the task file's own copy, which the original task file never changes)."""
    if module and module != "__main__":
        try:
            obj = getattr(importlib.import_module(module), name)
        except Exception:
            return fallback
        for _ in range(8):   # autotune / heuristics wrappers hold the JIT function in .fn
            if type(obj).__name__ in ("JITFunction", "InterpretedFunction"):
                return obj
            obj = getattr(obj, "fn", None)
            if obj is None:
                break
    return fallback


def _random_values(spec: dict[str, Any], dtype: torch.dtype, n: int, g: torch.Generator) -> torch.Tensor:
    lo, hi = spec.get("min"), spec.get("max")
    if dtype == torch.bool:
        if lo is not None and lo == hi:
            return torch.full((n,), bool(lo))
        return torch.rand(n, generator=g) < 0.5
    if dtype.is_floating_point:
        mean, std = spec.get("mean"), spec.get("std")
        if lo is None or mean is None:
            return torch.randn(n, generator=g)
        if not std or lo == hi:
            # a constant input: keep it, unless it is zero (then any data tests the kernel better)
            return torch.full((n,), float(lo)) if lo else torch.randn(n, generator=g)
        return (torch.randn(n, generator=g) * std + mean).clamp(lo, hi)
    # integers: the captured set of values when it was small, else the captured range (sentinels kept rare)
    values = spec.get("values")
    if values:
        idx = torch.randint(0, len(values), (n,), generator=g)
        return torch.tensor(values, dtype=torch.int64)[idx]
    lo, hi = int(lo if lo is not None else 0), int(hi if hi is not None else 100)
    neg = spec.get("sentinels") or []
    base_lo = int(spec.get("nonneg_min", lo)) if neg else lo
    out = torch.randint(base_lo, hi + 1, (n,), generator=g, dtype=torch.int64)
    if neg:
        pick = torch.rand(n, generator=g) < 0.1
        out[pick] = torch.tensor(neg, dtype=torch.int64)[torch.randint(0, len(neg), (int(pick.sum()),), generator=g)]
    return out


def make_tensor(spec: dict[str, Any], dtype: torch.dtype, g: torch.Generator, device: str) -> torch.Tensor:
    """A random tensor with the captured shape, strides, storage offset and value range."""
    shape, stride, offset = spec["shape"], spec["stride"], int(spec.get("offset", 0))
    extent = offset + 1 + sum((s - 1) * st for s, st in zip(shape, stride) if s > 0) if all(shape) else offset
    base = _random_values(spec, dtype, max(extent, 1), g).to(dtype)
    return base.to(device).as_strided(shape, stride, offset)


def make_group_inputs(group: dict[str, Any], dtype: torch.dtype, seed: int, device: str) -> tuple:
    """Inputs of one captured signature: tensors of ``group["primary"]`` dtype take ``dtype``; the others
    keep their captured dtype (indices, masks, fp32 statistics next to bf16 data); scalars keep their value."""
    g = torch.Generator().manual_seed(int(seed))
    out = []
    for spec in group["inputs"]:
        if "value" in spec:
            out.append(spec["value"])
            continue
        d = dtype if spec["dtype"] == group.get("primary") else getattr(torch, spec["dtype"])
        out.append(make_tensor(spec, d, g, device))
    return tuple(out)


def fresh_like(t: torch.Tensor) -> torch.Tensor:
    """A new tensor with ``t``'s values, shape and strides (a launcher's output buffer, never an input's memory)."""
    return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device).copy_(t)


#: copied into every captured task file, in this order (tools/intake/taskgen.py)
RUNTIME = (original_kernel, _random_values, make_tensor, make_group_inputs, fresh_like)
