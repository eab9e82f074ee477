"""The check cases' inputs and reference outputs, made once per case for every candidate a judge job checks
(``CaseData``), with the reference's own rounding sensitivity and the tolerance scale of a value stress."""

from __future__ import annotations

import threading

import torch

from tritondx.tools.task.module import as_tuple, to_dtype
from tritondx.tools.verify.plan.cases import make_case_inputs
from tritondx.tools.verify.judge.compare import sensitivity
from tritondx.tools.verify.judge.probe import _check_inputs
from tritondx.tools.verify.plan.stress import SCALES


def _span(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def _aliases(out: torch.Tensor, inputs) -> bool:
    o0, o1 = _span(out)
    return any(isinstance(t, torch.Tensor) and t.numel() > 0 and o0 < _span(t)[1] and _span(t)[0] < o1
               for t in inputs)


class CaseData:
    """Inputs and reference outputs of the check cases, made once per (shape, dtype, seed, values) and
    shared by every candidate a judge job checks (a round's candidates get the same cases). Both are
    kept on the host (the runner gets bytes anyway): between checks the judge holds no device memory."""

    def __init__(self, orig, device: str) -> None:
        self.orig, self.device = orig, device
        self._made: dict[tuple, tuple] = {}
        self._atol: dict[tuple, list[float]] = {}
        self._floors: dict[tuple, list] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(case) -> tuple:
        return (case.dtype, repr(case.shape), case.seed, case.values)

    def get(self, case, where: str) -> tuple[list, tuple, list]:
        """(inputs, reference outputs on the host, which reference outputs alias an input)."""
        key = self._key(case)
        with self._lock:
            if key not in self._made:
                inputs = make_case_inputs(self.orig, case, self.device)
                if case.values == "normal":  # stressed values are scaled normal ones
                    _check_inputs(inputs, where, self.orig.reference)
                refs = tuple(r.detach().cpu() if isinstance(r, torch.Tensor) else r for r in as_tuple(
                    self.orig.reference(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])))
                snapshot = [t.detach().cpu().clone() if isinstance(t, torch.Tensor) else t for t in inputs]
                del inputs
                ref_aliases = [isinstance(r, torch.Tensor) and _aliases(r, snapshot) for r in as_tuple(refs)]
                self._made[key] = (snapshot, refs, ref_aliases)
                self._atol[key] = self._atol_scales(case, refs)
            return self._made[key]

    def floors(self, case) -> list:
        """Per output, the reference's own sensitivity on this case (``compare.sensitivity``), made the first
        time a candidate's output is off by more than the tolerance (``get`` first)."""
        key = self._key(case)
        with self._lock:
            if key not in self._floors:
                snapshot, refs, _ = self._made[key]
                inputs = [t.to(self.device) if isinstance(t, torch.Tensor) else t for t in snapshot]
                try:
                    self._floors[key] = sensitivity(self.orig.reference, inputs, refs, case.seed)
                except Exception:  # noqa: BLE001 - the user's reference on moved inputs: no floor, the plain comparison stands
                    self._floors[key] = [None] * len(refs)
            return self._floors[key]

    def atol_scales(self, case) -> list[float]:
        """Per output, the factor the task's ``atol`` is multiplied by on this case (``get`` first)."""
        return self._atol[self._key(case)]

    def _atol_scales(self, case, refs: tuple) -> list[float]:
        """On inputs scaled up by a value stress, an honest kernel's rounding error grows with the terms it
        adds, not with its result: a sum of x100 values that nearly cancel has an error ~100x the task's atol
        (an honest reduction in another order was rejected, CI 2026-12-02). The atol is scaled by how much
        the reference's own outputs grew (mean magnitude, stressed over the same seed unstressed, at most the
        stress factor): x100 for a sum, ~x1 for a softmax or a norm, whose outputs do not grow."""
        factor = SCALES.get(case.values, 1.0)
        if factor <= 1.0:
            return [1.0] * len(as_tuple(refs))
        base = as_tuple(self.orig.make_inputs(case.shape, to_dtype(case.dtype), case.seed, self.device))
        base_refs = as_tuple(self.orig.reference(*[t.clone() if isinstance(t, torch.Tensor) else t for t in base]))
        out = []
        for r, b in zip(as_tuple(refs), base_refs):
            if not (isinstance(r, torch.Tensor) and isinstance(b, torch.Tensor) and r.is_floating_point()
                    and b.is_floating_point() and r.numel() and r.shape == b.shape):
                out.append(1.0)
                continue
            grown = float(r.detach().double().abs().mean()) / max(float(b.detach().double().abs().mean()), 1e-30)
            out.append(min(max(grown, 1.0), factor) if grown == grown else 1.0)   # NaN: no scaling
        return out
