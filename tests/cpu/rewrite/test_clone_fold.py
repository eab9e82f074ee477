"""clone_fold: ``launch`` copies a tensor that its kernel then updates in place; the kernel reads the original and
writes a fresh buffer instead (``tools/evidence/inplace.py`` says where, ``tools/rewrite/clone_fold.py`` rewrites)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.evidence.inplace import fold_plan
from tritondx.tools.evidence.triage import triage
from tritondx.tools.rewrite.clone_fold import fold_source
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.task.spec import parse_task_source
from tritondx.tools.verify.verification import verify_candidate

SHOWCASE = Path(__file__).resolve().parents[3] / "bench" / "families" / "clone_fold.py"


def test_the_copies_fold_into_the_kernel_and_the_candidate_passes(rw, tmp_path):
    found = [f for f in rw.make_context("clone_fold").findings if f.detector == "clone_then_inplace"]
    assert found and found[0].suggests == ["clone_fold"] and "w = w.clone(), m = m.clone()" in found[0].message
    (p,) = [p for p in propose(rw.make_context("clone_fold")) if p.family == "clone_fold"]
    src = p.source
    assert "w__src = w\n    w = torch.empty_like(w)" in src and ".clone()" not in src
    assert "def sgd_step(w, g, m, lr, mu, *, w__src, m__src):" in src
    assert "return sgd_step(w, g, m, LR, MU, w__src=w__src, m__src=m__src)" in src
    assert "(w, w__src, g, m, m__src, n, lr, mu, BLOCK=1024)" in src
    assert "def sgd_momentum_kernel(w_ptr, w_ptr__src, g_ptr, m_ptr, m_ptr__src, n, lr, mu, BLOCK: tl.constexpr)" in src
    # loads read the source, stores write the fresh buffer
    assert "w = tl.load(w_ptr__src + offs, mask=mask)" in src and "tl.store(w_ptr + offs, w, mask=mask)" in src
    assert "m = tl.load(m_ptr__src + offs, mask=mask)" in src and "g = tl.load(g_ptr + offs" in src
    rw.verify("clone_fold", src, tmp_path)
    assert not [f for f in triage(parse_task_source(src, "cand.py"))[1] if f.detector == "clone_then_inplace"]


def test_pointers_computed_from_the_copy_get_twins():
    src = SHOWCASE.read_text().replace(
        "    w = tl.load(w_ptr + offs, mask=mask)\n", "    wp = w_ptr + offs\n    w = tl.load(wp, mask=mask)\n").replace(
        "    tl.store(w_ptr + offs, w, mask=mask)", "    tl.store(wp, w, mask=mask)")
    new, plan = fold_source(src)
    assert "    wp = w_ptr + offs\n    wp__src = w_ptr__src + offs\n    w = tl.load(wp__src, mask=mask)" in new
    assert "tl.store(wp, w, mask=mask)" in new


def _variant(old: str, new: str) -> str:
    src = SHOWCASE.read_text()
    assert old in src
    return src.replace(old, new)


@pytest.mark.parametrize("old,new,why,culprits", [
    ("    tl.store(w_ptr + offs, w, mask=mask)", "    tl.store(w_ptr + offs, w, mask=(offs < n) | (g > 0))",
     "a store mask from a loaded value whose bounds cannot be told apart from the data (test_clone_fold_masked.py: "
     "those that can fold as guarded stores)", "w"),
    ("    tl.store(m_ptr + offs, m, mask=mask)",
     "    tl.store(m_ptr + offs, m, mask=mask)\n    m = tl.load(m_ptr + offs, mask=mask)",
     "a load after a store reads the kernel's own write", "m"),
    ("    tl.store(w_ptr + offs, w, mask=mask)",
     "    idx = tl.load(g_ptr + offs, mask=mask).to(tl.int32)\n    tl.store(w_ptr + idx, w, mask=mask)",
     "a store through a loaded index (a scatter)", "w"),
    ("    m = m.clone()\n", "    m = m.clone()\n    m.mul_(1.0)\n", "torch touches the copy's contents", "m"),
    ("    return sgd_step(w, g, m, LR, MU)", "    sgd_step(w[:10], g, m, LR, MU)\n    return sgd_step(w, g, m, LR, MU)",
     "a view of the copy", "w"),
    ("    n = w.numel()\n", "    n = w.numel()\n    if n > 10:\n        w = w + 0\n", "the copy bound again", "w"),
    ("    return w, m\n", "    return w, m\n\n\ndef other(w):\n    return sgd_step(w, w, w, 0.1, 0.1)\n",
     "a helper on the path called from elsewhere", "wm"),
    ("    mask = offs < n\n", "    mask = offs < n\n    for _ in range(1):\n        tl.store(w_ptr + offs, 0.0, mask=mask)\n",
     "a store in a loop", "w"),
    ("    w = tl.load(w_ptr + offs, mask=mask)\n", "    wp = w_ptr + offs; gp = g_ptr + offs\n    w = tl.load(wp, mask=mask)\n",
     "a derivation sharing its line with another statement (its twin could not follow it)", "w"),
    ("    n = w.numel()\n", "    n = w.numel()\n    assert not bool((w == m).all())\n", "a comparison reads the copy", "wm"),
    ("    return sgd_step(w, g, m, LR, MU)", "    sgd_step(w, g, m, LR, MU)\n    return sgd_step(w, g, m, LR, MU)",
     "the copy updated twice: the second update would read the source, not the first one's result", "wm"),
    ("    return sgd_step(w, g, m, LR, MU)", "    for _ in range(2):\n        sgd_step(w, g, m, LR, MU)\n    return w, m",
     "the copy updated in a loop", "wm"),
])
def test_no_fold_where_the_kernel_or_the_launcher_could_need_the_copy(old, new, why, culprits):
    """The copy the change concerns stays a copy; the other may still fold on its own (the next test)."""
    plan = fold_plan(ast.parse(_variant(old, new)))
    assert plan is None or not set(plan.roots) & set(culprits), why


def test_a_copy_that_cannot_fold_stays_and_the_other_folds_and_passes(tmp_path):
    """A kernel that writes only some elements of one copy (a scatter through a loaded index, as a KV-cache update
    writes one slot) needs that copy; the copy it writes wholly folds on its own, and the candidate passes."""
    src = _variant("    tl.store(w_ptr + offs, w, mask=mask)",
                   "    idx = tl.load(g_ptr + offs, mask=mask).to(tl.int32) * 0 + offs\n"
                   "    tl.store(w_ptr + idx, w, mask=mask)")
    new, plan = fold_source(src)
    assert plan.roots == ["m"]
    assert "    w = w.clone()\n" in new and "m__src = m\n    m = torch.empty_like(m)" in new
    assert "m = tl.load(m_ptr__src + offs, mask=mask)" in new and "w = tl.load(w_ptr + offs, mask=mask)" in new
    task, cand = tmp_path / "task.py", tmp_path / "cand.py"
    task.write_text(src)
    cand.write_text(new)
    r = verify_candidate(str(task), str(cand), "cand", get_backend("interpreter"), allowed_ops=["clone"])
    assert r.passed, r.reason


def test_clones_apart_a_nested_helper_and_identity_checks_still_fold(rw, tmp_path):
    """The clones need not be consecutive statements; a helper defined inside a host function on the path does not
    lose that function's calls; ``x is not None`` reads no contents. The candidate passes the checks."""
    src = _variant("    w = w.clone()\n    m = m.clone()\n", "    w = w.clone()\n    assert w is not None\n    m = m.clone()\n")
    src = src.replace("    n = w.numel()\n", "    def size(t):\n        return t.numel()\n    n = size(g)\n")
    new, plan = fold_source(src)
    lines = src.splitlines()
    assert plan.roots == ["w", "m"] and plan.lines == [lines.index("    w = w.clone()") + 1, lines.index("    m = m.clone()") + 1]
    assert "    w__src = w\n    w = torch.empty_like(w)\n    assert w is not None\n    m__src = m\n" in new
    assert "(w, w__src, g, m, m__src, n, lr, mu, BLOCK=1024)" in new
    task = tmp_path / "task.py"
    task.write_text(src)
    cand = tmp_path / "cand.py"
    cand.write_text(new)
    r = verify_candidate(str(task), str(cand), "cand", get_backend("interpreter"))
    assert r.passed, r.reason


def test_the_kernels_own_in_place_use_is_required_and_launch_must_clone_its_own_parameter():
    assert fold_plan(ast.parse(SHOWCASE.read_text())) is not None
    assert fold_plan(ast.parse(_variant("    w = w.clone()\n", "    w = g.clone()\n"))) is not None  # m still folds
    assert fold_plan(ast.parse(_variant("    w = w.clone()\n    m = m.clone()\n", ""))) is None


def test_an_element_the_kernel_leaves_unwritten_fails_the_verifier(tmp_path):
    """The plan does not prove that the stores cover the tensor (the grid): the verifier's poisoned allocations do.
    A launcher that updates only the first half of its copy: the fold's fresh buffer has an unwritten second half."""
    half = _variant("    n = w.numel()\n    sgd_momentum_kernel[(triton.cdiv(n, 1024),)](w, g, m, n, lr, mu, BLOCK=1024)",
                    "    n = w.numel() // 2\n    sgd_momentum_kernel[(triton.cdiv(n, 1024),)](w, g, m, n, lr, mu, BLOCK=1024)")
    half = half.replace('''def reference(w, g, m):
    m2 = MU * m + g
    return w - LR * m2, m2''', '''def reference(w, g, m):
    k = w.numel() // 2
    m2, w2 = m.clone(), w.clone()
    m2[:k] = MU * m[:k] + g[:k]
    w2[:k] = w[:k] - LR * m2[:k]
    return w2, m2''')
    task, cand = tmp_path / "half.py", tmp_path / "cand.py"
    task.write_text(half)
    new, _ = fold_source(half)
    cand.write_text(new)
    r = verify_candidate(str(task), str(cand), "cand", get_backend("interpreter"))
    assert not r.passed and r.klass == "mismatch" and "NaN/Inf where the reference is finite" in r.reason, r
