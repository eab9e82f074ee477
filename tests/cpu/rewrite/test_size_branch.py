"""Issue 37 item 3: a template behind a size branch whose other side is the original code, unchanged.

On a task whose shapes are sentinels (no size can be derived), the softmax template with the original as its
fallback is verified (the fallback side needs no check, and the coverage says so), while the plain template,
whose fallback is new code (the online kernel), is still rejected ``unchecked_branch``: the rule for new
branches stays. The branch rule itself: a side is the original only when everything it reaches is."""

from __future__ import annotations

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.verify.verification import verify_candidate
from tritondx.tools.verify.plan.branches import added_branches

TASK = "softmax_fixed_programs"


def _verdict(rw, source, tmp_path, label):
    path = tmp_path / f"{label}.py"
    path.write_text(source)
    return verify_candidate(str(rw.task_path(TASK)), str(path), label, get_backend("interpreter"))


def test_template_with_the_original_as_fallback_survives_sentinel_shapes(rw, tmp_path):
    ctx = rw.context_from(TASK, [])
    props = [p for p in propose(ctx, limit=8) if p.family == "fuse_passes"]
    kinds = [p.params.get("template") for p in props]
    assert kinds[0] == "softmax_row_or_original" and "softmax" in kinds
    fallback = props[0]
    assert any(m.startswith("multi_pass_loops") for m in fallback.motivated_by)
    (b,) = added_branches(ctx.original.source, fallback.source)
    assert b.needs == [True] and b.original == [False] and "original code path, unchanged" in b.why
    r = _verdict(rw, fallback.source, tmp_path, "fallback")
    assert r.passed, f"{r.klass}: {r.reason}"
    lines = [ln for ln in r.coverage if "original code path" in ln]
    assert lines and "covered" in lines[0]
    # the plain template: both sides are new code, the task's sizes reach one: rejected as before
    plain = props[kinds.index("softmax")]
    r2 = _verdict(rw, plain.source, tmp_path, "plain")
    assert not r2.passed and r2.klass == "unchecked_branch"


def test_a_changed_kernel_on_the_fallback_side_is_not_the_original(rw):
    ctx = rw.context_from(TASK, [])
    fallback = next(p for p in propose(ctx, limit=8) if p.params.get("template") == "softmax_row_or_original")
    orig = ctx.original.source
    # the kernel the fallback launches changed: the side must be checked again
    changed = fallback.source.replace("s += tl.exp(v - mx)", "s += tl.exp(v - mx) * 1.0")
    (b,) = added_branches(orig, changed)
    assert b.needs == [True, False] and b.original == []
    # a module constant the fallback reads changed
    (b,) = added_branches(orig, fallback.source.replace("PROGRAMS = 32", "PROGRAMS = 64"))
    assert b.needs == [True, False]
    # a test with an effect (an in-place op) is not a free choice of side
    (b,) = added_branches(orig, fallback.source.replace("if x.shape[-1] <= 16384", "if x.add_(0).shape[-1] <= 16384"))
    assert b.needs == [True, False]
    # the launcher's arguments to the helper on the fallback path changed: not the original path either
    bent = fallback.source.replace("    return softmax(x)", "    return softmax(x * 1.0)")
    (b,) = added_branches(orig, bent)
    assert b.needs == [True, False]


def test_the_original_as_true_side(rw):
    orig = rw.task_path(TASK).read_text()
    cand = orig.replace("def launch(x):\n    return softmax(x)",
                        "def launch(x):\n    if x.shape[0] > 1:\n        return softmax(x)\n    return torch.softmax(x, -1)")
    (b,) = added_branches(orig, cand)
    assert b.needs == [False] and b.original == [True]


def test_a_module_level_effect_is_not_the_original(rw):
    ctx = rw.context_from(TASK, [])
    fallback = next(p for p in propose(ctx, limit=8) if p.params.get("template") == "softmax_row_or_original")
    orig = ctx.original.source
    effect = fallback.source.replace("PROGRAMS = 32\n", "PROGRAMS = 32\ntorch.set_flush_denormal(True)\n")
    (b,) = added_branches(orig, effect)
    assert b.needs == [True, False]
    fresh = fallback.source.replace("PROGRAMS = 32\n", "PROGRAMS = 32\n_TDX_LIMIT = 16384\n")
    (b,) = added_branches(orig, fresh)
    assert b.needs == [True]                    # a new constant under a new name changes nothing


def test_norm_template_with_the_original_as_fallback(rw, tmp_path):
    task = "rmsnorm_sentinel"
    ctx = rw.context_from(task, [])
    props = [p for p in propose(ctx, limit=8) if p.family == "fuse_passes"]
    kinds = [p.params.get("template") for p in props]
    assert kinds[0] == "rmsnorm_rows_or_original" and "rmsnorm" in kinds
    (b,) = added_branches(ctx.original.source, props[0].source)
    assert b.original == [False]
    path = tmp_path / "fallback.py"
    path.write_text(props[0].source)
    r = verify_candidate(str(rw.task_path(task)), str(path), "fallback", get_backend("interpreter"))
    assert r.passed, f"{r.klass}: {r.reason}"
    plain = tmp_path / "plain.py"
    plain.write_text(props[kinds.index("rmsnorm")].source)
    r2 = verify_candidate(str(rw.task_path(task)), str(plain), "plain", get_backend("interpreter"))
    assert not r2.passed and r2.klass == "unchecked_branch"


def test_int_shapes_keep_the_plain_templates(rw):
    """Listed int shapes: the verifier derives sizes for both sides, so no fallback variant is made."""
    props = [p for p in propose(rw.context_from("l2_rmsnorm", []), limit=8) if p.family == "fuse_passes"]
    assert props and not any(str(p.params.get("template", "")).endswith("_or_original") for p in props)


def test_a_definition_with_an_import_time_effect_is_not_the_original(rw):
    ctx = rw.context_from(TASK, [])
    fallback = next(p for p in propose(ctx, limit=8) if p.params.get("template") == "softmax_row_or_original")
    bad_default = fallback.source.replace("PROGRAMS = 32\n",
                                          "PROGRAMS = 32\n\n\ndef _noop(x=torch.set_flush_denormal(True)):\n    return x\n")
    (b,) = added_branches(ctx.original.source, bad_default)
    assert b.needs == [True, False]
