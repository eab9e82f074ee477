"""Comparing a candidate's outputs with the reference (trusted side: runs in the judge)."""

from __future__ import annotations

from typing import Any

import torch


def compare(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
            floor: torch.Tensor | None = None) -> dict[str, Any] | None:
    """None when out matches ref within tolerance; else where and by how much it differs. ``floor``
    (per element, the reference's own sensitivity to rounding of its inputs: ``sensitivity``) is added to
    what each element may differ by."""
    if out.shape != ref.shape:
        return {"reason": f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"}
    if out.dtype != ref.dtype:
        return {"reason": f"dtype {out.dtype} != reference {ref.dtype}"}
    if out.numel() == 0:
        return None
    ref = ref.to(out.device)   # compared where the output is (a CUDA judge's answers are on its device)
    o = out.detach().to(torch.float64) if out.dtype != torch.bool else out.detach().to(torch.int64).double()
    r = ref.detach().to(torch.float64) if ref.dtype != torch.bool else ref.detach().to(torch.int64).double()
    o_fin, r_fin = torch.isfinite(o), torch.isfinite(r)
    bad_nonfinite = (~o_fin) & r_fin
    if bool(bad_nonfinite.any()):
        idx = int(torch.nonzero(bad_nonfinite.flatten())[0])
        return {"reason": f"NaN/Inf where the reference is finite ({int(bad_nonfinite.sum())} elements; "
                          f"first at flat index {idx}: got {o.flatten()[idx].item()}, want {r.flatten()[idx].item()})"}
    same_special = (~r_fin) & ((o == r) | (torch.isnan(o) & torch.isnan(r)))
    diff = (o - r).abs()
    allowed = atol + rtol * r.abs()
    if floor is not None:
        allowed = allowed + floor.to(device=allowed.device, dtype=torch.float64).nan_to_num(0.0, 0.0, 0.0)
    bad = (diff > allowed) & r_fin | ((~r_fin) & ~same_special)
    if bool(bad.any()):
        flat = torch.where(bad.flatten(), diff.flatten().nan_to_num(float("inf")), torch.zeros_like(diff.flatten()))
        idx = int(torch.argmax(flat))
        unravel = []
        rem = idx
        for s in reversed(out.shape):
            unravel.append(rem % s)
            rem //= s
        return {
            "reason": f"{int(bad.sum())}/{out.numel()} elements off; worst at {tuple(reversed(unravel))}: "
                      f"got {o.flatten()[idx].item():.6g}, want {r.flatten()[idx].item():.6g} "
                      f"(atol={atol}, rtol={rtol})",
            "max_abs_err": float(diff[r_fin].max()) if bool(r_fin.any()) else 0.0,
        }
    return None


#: each floating-point input element is moved by this many ``finfo.eps`` of its dtype (relative), one sign at random
SENSITIVITY_EPS = 1.0
#: the estimate is multiplied by this before it widens a comparison
SENSITIVITY_MARGIN = 2.0


def perturbed(inputs: list, which: int, gen: torch.Generator) -> list:
    """Copies of ``inputs`` with every element of input ``which`` (a floating-point tensor) moved by
    ``SENSITIVITY_EPS`` machine epsilons of its dtype, relative, up or down at random."""
    out = []
    for j, t in enumerate(inputs):
        if isinstance(t, torch.Tensor):
            t = t.clone()
            if j == which:
                sign = torch.randint(0, 2, t.shape, generator=gen).double() * 2 - 1
                d = t.detach().cpu().double()
                t = (d + d.abs() * torch.finfo(t.dtype).eps * SENSITIVITY_EPS * sign).to(t.dtype).to(t.device)
        out.append(t)
    return out


def sensitivity(reference, inputs: list, refs: tuple, seed: int) -> list[torch.Tensor | None]:
    """Per output, per element: how far the reference itself moves when its inputs move by rounding-level
    amounts, times ``SENSITIVITY_MARGIN``: the sum over floating-point inputs of the change when that input
    alone moves (``perturbed``; one input at a time, so two inputs' effects cannot cancel in the estimate).
    An honest kernel that computes in another order or with other instructions is off by about this much
    where the result cancels: ``x**4 + 0.5*y**3`` at x100 sums terms of ~1e6 into ~1e4, and products in
    place of ``pow`` were off by 1.1x the tolerance there (CI, 2026-12-02). Where the function is well
    conditioned the floor is a few ulps of the result, far inside any task's tolerance, so a wrong answer
    stays wrong. None for non-float outputs."""
    gen = torch.Generator().manual_seed(seed)
    floors: list[torch.Tensor | None] = [None] * len(refs)
    for j, t in enumerate(inputs):
        if not (isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()):
            continue
        outs = reference(*perturbed(inputs, j, gen))
        outs = outs if isinstance(outs, tuple) else (tuple(outs) if isinstance(outs, list) else (outs,))
        for i, (p, r) in enumerate(zip(outs, refs)):
            if not (isinstance(p, torch.Tensor) and isinstance(r, torch.Tensor) and r.is_floating_point()
                    and p.shape == r.shape):
                continue
            d = (p.detach().cpu().double() - r.detach().cpu().double()).abs().nan_to_num(0.0, 0.0, 0.0)
            floors[i] = d if floors[i] is None else floors[i] + d
    return [f * SENSITIVITY_MARGIN if f is not None else None for f in floors]


def unchanged(t: torch.Tensor, before: torch.Tensor) -> bool:
    """``t`` still holds what ``before`` holds. NaN counts as equal to NaN: ``torch.equal`` alone
    calls every input holding a NaN (e.g. an isfinite task's inputs) modified."""
    before = before.to(t.device)
    if t.is_floating_point() or t.is_complex():
        nan, nan_before = torch.isnan(t), torch.isnan(before)
        return torch.equal(nan, nan_before) and torch.equal(t.masked_fill(nan, 0), before.masked_fill(nan_before, 0))
    return torch.equal(t, before)


def left_as_passed(off_out: object, out: torch.Tensor, inputs: tuple) -> bool:
    """True when the kernels-off call's output ``off_out`` is a fill left untouched, a constant or exactly one of
    the inputs as passed in (a destination prefilled with random values), and the plain call's ``out`` changed it:
    then it is the kernels' output, however close that fill happens to sit to the reference."""
    if not isinstance(off_out, torch.Tensor) or off_out.shape != out.shape or torch.equal(off_out.to(out.device), out):
        return False
    return is_constant(off_out) or any(
        isinstance(t, torch.Tensor) and t.shape == off_out.shape and t.dtype == off_out.dtype and unchanged(off_out, t)
        for t in inputs)


def is_constant(t: torch.Tensor) -> bool:
    """True when every element of ``t`` is the same value (then an untouched fill can match it)."""
    if t.numel() <= 1:
        return True
    flat = t.detach().flatten()
    return bool(torch.all((flat == flat[0]) | (torch.isnan(flat) & torch.isnan(flat[0]))))
