"""Correctness and integrity checks of one candidate (runs inside the sandboxed worker).

The original task supplies the reference, the input maker, the shapes and the tolerances; the
candidate supplies only its kernels and launcher. For every dtype and shape, two fresh seeds:
inputs are random (never zeros), the candidate runs first (so no freed reference output can be
picked up), with fresh allocations poisoned, under the launch guard; then the reference runs on
clones. Rejections carry a class and a one-line reason.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from tritondx.tools.guard import LaunchGuard
from tritondx.tools.taskmod import as_tuple, dtype_name, load_module, norm_shape, tolerance, to_dtype

SEEDS_PER_SHAPE = 2


class Rejected(Exception):
    def __init__(self, klass: str, reason: str):
        self.klass = klass
        self.reason = reason
        super().__init__(f"{klass}: {reason}")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _check_inputs(inputs: tuple, where: str) -> None:
    for i, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and t.numel() > 0 and t.dtype != torch.bool:
            if not bool(torch.any(t != 0)):
                raise Rejected("bad_inputs", f"{where}: input {i} is all zeros; make_inputs must give random data")


def compare(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> dict[str, Any] | None:
    """None when out matches ref within tolerance; else where and by how much it differs."""
    if out.shape != ref.shape:
        return {"reason": f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"}
    if out.dtype != ref.dtype:
        return {"reason": f"dtype {out.dtype} != reference {ref.dtype}"}
    if out.numel() == 0:
        return None
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


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def _aliases(out: torch.Tensor, inputs: tuple) -> bool:
    o0, o1 = _storage_span(out)
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.numel() > 0:
            i0, i1 = _storage_span(t)
            if o0 < i1 and i0 < o1:
                return True
    return False


def verify(job: dict[str, Any]) -> dict[str, Any]:
    device = job["device"]
    orig = load_module(job["task"], "orig")
    guard = LaunchGuard()
    guard.install()
    # Torch ops the initial launcher itself uses are allowed to the candidate too.
    guard.allowed_extra_ops = set(job.get("allowed_ops", []))
    cand = load_module(job["candidate"], "cand") if job["candidate"] != job["task"] else orig
    tampered = guard.tampered()
    if tampered:
        raise Rejected("timing_tampering", f"importing the candidate replaced {', '.join(tampered)}")
    shapes = [norm_shape(s) for s in orig.CHECK_SHAPES]
    if job.get("include_bench"):
        shapes += [norm_shape(s) for s in orig.BENCH_SHAPES if norm_shape(s) not in shapes]
    rng = random.Random(job.get("seed", 0))
    checks = []
    ops_seen: set[str] = set()
    for dtype in [to_dtype(d) for d in orig.DTYPES]:
        atol, rtol = tolerance(orig, dtype)
        for shape in shapes:
            for rep in range(SEEDS_PER_SHAPE):
                seed = rng.randrange(1 << 30)
                where = f"shape {shape} dtype {str(dtype).replace('torch.', '')} seed {seed}"
                inputs = as_tuple(orig.make_inputs(shape, dtype, seed, device))
                _check_inputs(inputs, where)
                snapshot = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
                _sync(device)
                with guard.watch():
                    outs = as_tuple(cand.launch(*inputs))
                _sync(device)
                ops_seen.update(guard.ops)
                if guard.launches == 0:
                    raise Rejected("no_triton_kernel", f"{where}: launch() ran no Triton kernel")
                if guard.side_stream_launches:
                    raise Rejected("side_stream", f"{where}: {guard.side_stream_launches} kernel launch(es) on a "
                                                  "non-default stream the timer does not see")
                forbidden = guard.forbidden_ops()
                if forbidden:
                    raise Rejected("torch_compute", f"{where}: launch() called torch compute ops {forbidden[:6]} "
                                                    "(outputs must come from Triton kernels)")
                if guard.tampered():
                    raise Rejected("timing_tampering", f"{where}: launch() replaced {', '.join(guard.tampered())}")
                for i, (t, s) in enumerate(zip(inputs, snapshot)):
                    if isinstance(t, torch.Tensor) and not torch.equal(t, s):
                        raise Rejected("mutates_inputs", f"{where}: input {i} was modified by launch()")
                refs = as_tuple(orig.reference(*[s.clone() if isinstance(s, torch.Tensor) else s for s in snapshot]))
                _sync(device)
                if len(outs) != len(refs):
                    raise Rejected("wrong_output", f"{where}: launch() returned {len(outs)} outputs, "
                                                   f"reference {len(refs)}")
                for i, (o, r) in enumerate(zip(outs, refs)):
                    if type(o) is not torch.Tensor:
                        raise Rejected("lazy_output", f"{where}: output {i} is {type(o).__name__}, "
                                                      "not a plain torch.Tensor")
                    if _aliases(o, inputs) and not _aliases(r, snapshot):
                        raise Rejected("aliased_output", f"{where}: output {i} aliases an input's memory")
                    if o.device.type != torch.device(device).type:
                        raise Rejected("wrong_output", f"{where}: output {i} is on {o.device}, want {device}")
                    bad = compare(o, r, atol, rtol)
                    if bad:
                        raise Rejected("mismatch", f"{where}: output {i}: {bad['reason']}")
                checks.append({"shape": list(shape) if isinstance(shape, tuple) else shape,
                               "dtype": str(dtype), "seed": seed, "launches": guard.launches})
    return {"passed": True, "checks": checks, "ops": sorted(ops_seen)}


def probe(job: dict[str, Any]) -> dict[str, Any]:
    """Check what a task's format cannot show statically; record the ops the launcher uses."""
    path = job["task"]
    device = job["device"]
    mod = load_module(path, "probe")
    for name in ("CHECK_SHAPES", "BENCH_SHAPES", "DTYPES"):
        value = getattr(mod, name)
        if not isinstance(value, (list, tuple)) or not value:
            return {"ok": False, "problem": f"{name} must be a non-empty list"}
    try:
        dtypes = [to_dtype(d) for d in mod.DTYPES]
    except ValueError as exc:
        return {"ok": False, "problem": f"DTYPES: {exc}"}
    for d in dtypes:
        try:
            tolerance(mod, d)
        except Exception as exc:
            return {"ok": False, "problem": str(exc).split(": ", 1)[-1]}
    shape = norm_shape(mod.CHECK_SHAPES[0])
    try:
        inputs = as_tuple(mod.make_inputs(shape, dtypes[0], 1234, device))
    except Exception as exc:
        return {"ok": False, "problem": f"make_inputs{(shape, str(dtypes[0]), 1234, device)} raised "
                                        f"{type(exc).__name__}: {exc}"}
    if not inputs or not all(isinstance(t, (torch.Tensor, int, float, bool)) for t in inputs):
        kinds = sorted({type(t).__name__ for t in inputs})
        return {"ok": False, "problem": f"make_inputs must return tensors (and plain scalars), got {kinds}"}
    if not any(isinstance(t, torch.Tensor) for t in inputs):
        return {"ok": False, "problem": "make_inputs returned no tensor"}
    try:
        refs = as_tuple(mod.reference(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]))
    except Exception as exc:
        return {"ok": False, "problem": f"reference raised {type(exc).__name__}: {exc}"}
    if not all(isinstance(r, torch.Tensor) for r in refs):
        return {"ok": False, "problem": "reference must return tensors"}
    guard = LaunchGuard()
    guard.install()
    try:
        with guard.watch(poison=False):
            outs = as_tuple(mod.launch(*inputs))
        _sync(device)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {"ok": False, "problem": f"launch raised {type(exc).__name__}: {first[:300]}"}
    if guard.launches == 0:
        return {"ok": False, "problem": "launch ran no Triton kernel"}
    if len(outs) != len(refs):
        return {"ok": False, "problem": f"launch returned {len(outs)} outputs, reference {len(refs)}"}
    for i, (o, r) in enumerate(zip(outs, refs)):
        if not isinstance(o, torch.Tensor):
            return {"ok": False, "problem": f"launch output {i} is {type(o).__name__}, not a tensor"}
        if o.shape != r.shape or o.dtype != r.dtype:
            return {"ok": False, "problem": f"launch output {i} is {tuple(o.shape)} {o.dtype}, "
                                            f"reference gives {tuple(r.shape)} {r.dtype}"}
    return {"ok": True, "ops": sorted(set(guard.ops)), "launches": guard.launches,
            "dtypes": [dtype_name(d) for d in dtypes],
            "tolerances": {dtype_name(d): list(tolerance(mod, d)) for d in dtypes},
            "n_inputs": len(inputs), "n_outputs": len(outs)}
