"""Value stress (tools/verify/plan/stress.py): which originals get it, how it is applied, when it is dropped."""

from __future__ import annotations

from pathlib import Path

import torch
from tritondx.tools.task.module import load_module
from tritondx.tools.verify.plan.cases import plan_checks
from tritondx.tools.verify.plan.stress import apply_values, stress_kinds

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[2] / "examples"
BENCH = HERE.parents[2] / "bench" / "suite"


def kinds(path: Path) -> list[str]:
    return [v for v, _ in stress_kinds(path.read_text())]


def test_kinds_follow_what_the_original_computes():
    assert kinds(HERE / "tiny_softmax.py") == ["large"]                      # exp + max/sum
    assert kinds(HERE / "tiny_axpy.py") == ["large"]                         # elementwise: beyond randn's range
    assert kinds(BENCH / "l2_rmsnorm.py") == ["large", "tiny", "huge"]      # rsqrt of a sum


def test_apply_scales_floating_inputs_only():
    x, idx = torch.ones(4), torch.arange(4)
    apply_values((x, idx), "large")
    assert x.tolist() == [100.0] * 4 and idx.tolist() == [0, 1, 2, 3]
    apply_values((x,), "normal")
    assert x.tolist() == [100.0] * 4


def test_stress_dropped_where_the_reference_overflows(tmp_path):
    task = tmp_path / "sum_exp.py"
    # a reduction whose reference has no max shift: exp(100 * x) overflows in float32
    task.write_text((HERE / "tiny_softmax.py").read_text().replace(
        "    return torch.softmax(x, dim=-1)", "    return torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)"))
    p = plan_checks(load_module(str(task), "t"), task.read_text(), task.read_text(), "cpu")
    assert not any(c.values == "large" for c in p.cases)
    assert any(d.values == "large" and "not finite" in d.why for d in p.dropped)
    softmax = HERE / "tiny_softmax.py"
    p = plan_checks(load_module(str(softmax), "s"), softmax.read_text(), softmax.read_text(), "cpu")
    assert any(c.values == "large" for c in p.cases)


def test_stressed_atol_grows_with_the_references_own_outputs():
    """Under x100 inputs a sum's honest rounding error grows with its terms: its atol is scaled by how much
    the reference's outputs grew (x100 for a row sum); a softmax's outputs do not grow (x1), nor does a
    normal case's; an rmsnorm's do not under x1e3 (x~1)."""
    from types import SimpleNamespace

    from tritondx.tools.verify.plan.cases import CheckCase
    from tritondx.tools.verify.judge.case_data import CaseData

    def task(ref):
        return SimpleNamespace(make_inputs=lambda shape, dtype, seed, device: (
            torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype),), reference=ref)

    def scales(ref, values):
        data = CaseData(task(ref), "cpu")
        case = CheckCase(shape=(3, 100), dtype="float32", seed=7, values=values, why="test")
        data.get(case, "test")
        return data.atol_scales(case)

    row_sum = scales(lambda x: x.sum(dim=1), "large")
    assert abs(row_sum[0] - 100.0) < 1e-3, row_sum
    assert scales(lambda x: torch.softmax(x, dim=1), "large")[0] < 1.01
    assert scales(lambda x: x.sum(dim=1), "normal") == [1.0]
    rms = scales(lambda x: x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + 1e-6), "huge")[0]
    assert 1.0 <= rms < 1.05, rms


def _poly(x, y):
    return x * x + 0.5 * y ** 3 + x ** 4


def _poly_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn((1000,), generator=g) * 100 for _ in range(2)]


def test_cancelling_elements_get_the_references_own_sensitivity():
    """x**2 + 0.5*y**3 + x**4 at x100 inputs sums terms of ~1e6 into ~1e4: products in place of pow (the
    cheap_math rewrite) were off by 1.1x the tolerance at one element (CI, seed 658012987). With the
    reference's own sensitivity added (compare.sensitivity) that honest candidate passes, and wrong ones
    (a relative error 3x rtol, a coefficient off by 2e-4, a dropped term) stay rejected on every seed."""
    from tritondx.tools.verify.judge.compare import compare, sensitivity

    rejected_plain = 0
    for seed in [658012987, *range(40)]:
        x, y = _poly_inputs(seed)
        ref = _poly(x, y)
        x2 = x * x
        honest = x2 + 0.5 * (y * y * y) + x2 * x2
        floor = sensitivity(_poly, [x, y], (ref,), seed)[0]
        rejected_plain += compare(honest, ref, 1e-3, 1e-5) is not None
        assert compare(honest, ref, 1e-3, 1e-5, floor=floor) is None, seed
        for wrong in (ref * (1 + 3e-5), x2 + 0.5001 * (y * y * y) + x2 * x2, 0.5 * (y * y * y) + x2 * x2):
            assert compare(wrong, ref, 1e-3, 1e-5, floor=floor) is not None, seed
    assert rejected_plain >= 5   # the case this is for: the plain comparison rejects the honest candidate


def test_a_judged_candidate_within_the_sensitivity_is_accepted_and_says_so():
    """Through the judge's own comparison (Judge._outputs): the honest products pass on the CI seed and the
    checks it ran name the widened output; a candidate off by a relative 3e-5 is a mismatch."""
    from types import SimpleNamespace

    from tritondx.tools.verify.plan.cases import CheckCase
    from tritondx.tools.exec.rejected import Rejected
    from tritondx.tools.verify.judge.case_data import CaseData
    from tritondx.tools.verify.judge.candidate import Judge

    task = SimpleNamespace(make_inputs=lambda shape, dtype, seed, device: tuple(_poly_inputs(seed)),
                           reference=_poly, TOLERANCE={torch.float32: {"atol": 1e-5, "rtol": 1e-5}})
    data = CaseData(task, "cpu")
    case = CheckCase(shape=(1000,), dtype="float32", seed=658012987, values="normal", why="listed")
    snapshot, refs, aliases = data.get(case, "c")
    x, y = snapshot
    x2 = x * x

    def judged(out):
        j = Judge({"device": "cpu", "task": "unused"}, orig=task, data=data)
        layout = [{"type": "Tensor", "device": "cpu"}]
        ans = {"outs": [out], "diag": {"launches": 1, "layout": layout}}
        off = {"outs": [torch.zeros_like(out)], "diag": {"launches": 0, "layout": layout}}
        j._outputs(ans, off, refs, aliases, [], "all", [], "c", torch.float32, [100.0],
                   lambda: data.floors(case))
        return j

    j = judged(x2 + 0.5 * (y * y * y) + x2 * x2)
    assert j.widened == ["c: output 0"] and "rounding sensitivity" in j.ran()[-1]
    try:
        judged(refs[0] * (1 + 3e-5))
    except Rejected as exc:
        assert exc.klass == "mismatch"
    else:
        raise AssertionError("a relative error of 3x rtol was accepted")
