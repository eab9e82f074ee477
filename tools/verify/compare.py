"""Comparing a candidate's outputs with the reference (trusted side: runs in the judge)."""

from __future__ import annotations

from typing import Any

import torch


def compare(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> dict[str, Any] | None:
    """None when out matches ref within tolerance; else where and by how much it differs."""
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


def unchanged(t: torch.Tensor, before: torch.Tensor) -> bool:
    """``t`` still holds what ``before`` holds. NaN counts as equal to NaN: ``torch.equal`` alone
    calls every input holding a NaN (e.g. an isfinite task's inputs) modified."""
    before = before.to(t.device)
    if t.is_floating_point() or t.is_complex():
        nan, nan_before = torch.isnan(t), torch.isnan(before)
        return torch.equal(nan, nan_before) and torch.equal(t.masked_fill(nan, 0), before.masked_fill(nan_before, 0))
    return torch.equal(t, before)


def is_constant(t: torch.Tensor) -> bool:
    """True when every element of ``t`` is the same value (then an untouched fill can match it)."""
    if t.numel() <= 1:
        return True
    flat = t.detach().flatten()
    return bool(torch.all((flat == flat[0]) | (torch.isnan(flat) & torch.isnan(flat[0]))))
