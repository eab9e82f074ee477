"""Telling a written-into destination buffer (a zero-filled KV cache) from a degenerate input.

An all-zero input usually means ``make_inputs`` forgot to randomise (a kernel that ignores it would
still pass). A destination buffer is different: the kernel writes part of it and the caller reads
the rest as it was. The reference shows which one it is: refill the buffer with random values and
run the reference again; a destination comes back in one of the outputs (same shape and dtype)
unchanged where nothing was written and overwritten elsewhere, while the zero-filled call's output
holds zeros at exactly those untouched places.
"""

from __future__ import annotations

from typing import Callable

import torch


def random_fill(t: torch.Tensor, seed: int) -> torch.Tensor:
    """A tensor like ``t`` with nonzero random values (ints in [1, 100), floats ~ N(0, 1) shifted off 0)."""
    g = torch.Generator().manual_seed(seed)
    if t.dtype == torch.bool:
        return torch.ones_like(t)
    if t.is_floating_point() or t.is_complex():
        v = torch.randn(t.shape, generator=g, dtype=torch.float32)
        v = torch.where(v.abs() < 0.1, torch.full_like(v, 0.5), v)
        return v.to(dtype=t.dtype, device=t.device)
    return torch.randint(1, 100, t.shape, generator=g, dtype=torch.int64).to(dtype=t.dtype, device=t.device)


def _clone(inputs: tuple) -> list:
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]


def written_buffers(reference: Callable, inputs: tuple, seed: int = 0x5EED) -> dict[int, str]:
    """{input index: why} for every all-zero tensor input that the reference treats as a destination."""
    from tritondx.tools.task.module import as_tuple
    zero = [i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.numel() > 0
            and t.dtype != torch.bool and not bool(torch.any(t != 0))]
    if not zero:
        return {}
    try:
        base = as_tuple(reference(*_clone(inputs)))
    except Exception:  # noqa: BLE001 - the probe reports a failing reference itself
        return {}
    out: dict[int, str] = {}
    for i in zero:
        buf = inputs[i]
        fill = random_fill(buf, seed + i)
        args = _clone(inputs)
        args[i] = fill.clone()
        try:
            refilled = as_tuple(reference(*args))
        except Exception:  # noqa: BLE001
            continue
        for j, (o0, o1) in enumerate(zip(base, refilled)):
            if not (isinstance(o0, torch.Tensor) and isinstance(o1, torch.Tensor)):
                continue
            if o1.shape != buf.shape or o1.dtype != buf.dtype or o0.shape != buf.shape:
                continue
            # kept: the old contents show through (with a zero fill that place was 0); a written value
            # that happens to equal the fill is not kept (it was nonzero with the zero fill)
            kept = (o1 == fill) & (o0 == 0)
            if bool(kept.any()) and not bool(kept.all()):
                out[i] = (f"input {i} is a destination: output {j} keeps its old contents at {int(kept.sum())} of "
                          f"{kept.numel()} elements and is written elsewhere")
                break
    return out


def degenerate_inputs(reference: Callable, inputs: tuple) -> list[str]:
    """One line per all-zero input that is not a destination buffer (``make_inputs`` must randomise)."""
    written = None
    out = []
    for i, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and t.numel() > 0 and t.dtype != torch.bool and not bool(torch.any(t != 0)):
            if written is None:
                written = written_buffers(reference, inputs)
            if i not in written:
                out.append(f"input {i} is all zeros; make_inputs must give random data (a destination buffer "
                           "the kernel writes into is accepted when the reference returns it, written)")
    return out
