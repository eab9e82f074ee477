"""The case plan (tools/verify/plan/cases.py): derived sizes, branch sides, drops, seeds (in process, no sandbox)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tritondx.tools.task.module import load_module, norm_shape, tolerance
from tritondx.tools.verify.plan.buffers import degenerate_inputs, written_buffers
from tritondx.tools.verify.plan.cases import make_case_inputs, plan_checks

HERE = Path(__file__).parent
AXPY = HERE / "tiny_axpy.py"
CHECKS = HERE / "checks"
CORPUS = HERE.parents[2].parent / "shared" / "corpus"


def plan(task: Path, cand: Path | str, size_class: str | None = None):
    src = cand.read_text() if isinstance(cand, Path) else cand
    return plan_checks(load_module(str(task), "t"), task.read_text(), src, "cpu", size_class=size_class)


def test_listed_shapes_twice_then_derived_odd_and_larger():
    p = plan(AXPY, AXPY)
    listed = [c.shape for c in p.cases if c.why.startswith("listed")]
    assert listed == [(1000,), (1000,), (4097,), (4097,)]
    derived = [c.shape for c in p.cases if c.why.startswith("derived:")]
    per_dim = [c.shape[0] for c in p.cases if c.why.startswith("derived per dimension")]
    assert sorted(n % 128 for n in per_dim) == [1, 1, 127] and 129 in per_dim, per_dim   # BLOCK = 128 tiles n
    odd = next(c.shape for c in p.cases if "odd" in c.why)
    assert odd[0] % 2 == 1 and odd[0] % 128 and odd not in listed
    larger = next(c.shape for c in p.cases if "larger" in c.why)
    assert math.prod(larger) > 4097
    assert len(derived) == 2 and not p.branches and p.rejection() is None


def test_even_branch_gets_a_size_for_each_side():
    p = plan(AXPY, CHECKS / "k_even_wrong.py")
    (bc,) = p.branches
    assert bc.status == "covered" and set(bc.reached) == {"true", "false"}
    true_case = next(c for c in p.cases if c.label() == bc.reached["true"])
    assert true_case.shape[0] % 1024 == 0            # n % BLOCK == 0 makes EVEN true


def test_unreachable_branch_is_a_rejection_record():
    p = plan(AXPY, CHECKS / "k_unreachable_branch.py")
    klass, reason = p.rejection()
    assert klass == "unchecked_branch" and "n > 1 << 30" in reason and "unreached" in reason
    # on a GPU the bench shape (1 << 24) does not reach it either: still unreached
    assert plan(AXPY, CHECKS / "k_unreachable_branch.py", size_class="cuda").rejection() is not None


def test_branch_reachable_only_at_bench_shape_is_checked_there_on_gpu(tmp_path):
    cand = (CHECKS / "k_unreachable_branch.py").read_text().replace("1 << 30", "1 << 23")
    p_cpu = plan(AXPY, cand)
    assert p_cpu.rejection() is not None                        # beyond the CPU budget
    p_gpu = plan(AXPY, cand, size_class="cuda")   # the GPU size budget (inputs made on the CPU here)
    assert p_gpu.rejection() is None
    assert any(c.shape[0] > 1 << 23 for c in p_gpu.cases)


def test_derived_shape_the_reference_rejects_is_dropped(tmp_path):
    task = tmp_path / "capped.py"
    task.write_text(AXPY.read_text().replace("def reference(x, y):\n",
                                             "def reference(x, y):\n    assert x.numel() <= 4097, 'capped'\n"))
    p = plan(task, task)
    assert all(math.prod(c.shape) <= 4097 for c in p.cases)
    assert any("reference rejects it" in d.why and "capped" in d.why for d in p.dropped)


def test_derived_shape_the_original_launcher_asserts_against_is_dropped(tmp_path):
    task = tmp_path / "capped_launch.py"
    task.write_text(AXPY.read_text().replace("    n = x.numel()\n", "    n = x.numel()\n    assert n < 5000\n"))
    p = plan(task, task)
    assert any("original launcher rejects it" in d.why for d in p.dropped)
    assert all(math.prod(c.shape) < 5000 for c in p.cases)


def test_seeds_are_fresh_per_plan():
    a, b = plan(AXPY, AXPY), plan(AXPY, AXPY)
    assert [c.seed for c in a.cases] != [c.seed for c in b.cases]
    assert len({c.seed for c in a.cases}) == len(a.cases)


def test_sentinel_shapes_are_said_and_not_perturbed(tmp_path):
    task = tmp_path / "sentinel.py"
    task.write_text(AXPY.read_text().replace("CHECK_SHAPES = [(1000,), (4097,)]", "CHECK_SHAPES = [('small',)]")
                    .replace("def make_inputs(shape, dtype, seed, device):\n",
                             "def make_inputs(shape, dtype, seed, device):\n    shape = {('small',): (1000,)}[tuple(shape)]\n"))
    p = plan(task, task)
    assert {c.shape for c in p.cases} == {("small",)}
    assert any("sentinels" in n for n in p.notes)
    # an added branch the sentinel's own size does not flip cannot be searched for: unreached, not dead
    p = plan(task, CHECKS / "k_even_right.py")
    klass, reason = p.rejection()
    assert klass == "unchecked_branch" and "sentinels" in reason


def test_written_buffer_told_from_degenerate_input():
    kv = load_module(str(HERE / "tiny_kv_scatter.py"), "kv")
    inputs = kv.make_inputs((7, 3, 40, 20), kv.DTYPES[0], 1, "cpu")
    assert set(written_buffers(kv.reference, inputs)) == {2}
    assert degenerate_inputs(kv.reference, inputs) == []
    axpy = load_module(str(AXPY), "ax")
    x, y = axpy.make_inputs((1000,), axpy.DTYPES[0], 1, "cpu")
    problems = degenerate_inputs(axpy.reference, (x, y.zero_()))
    assert len(problems) == 1 and problems[0].startswith("input 1 is all zeros")


def test_prefilled_case_fills_the_destination():
    kv_path = HERE / "tiny_kv_scatter.py"
    p = plan(kv_path, kv_path)
    pre = next(c for c in p.cases if c.values == "prefilled")
    kv = load_module(str(kv_path), "kv")
    K, dest, out = make_case_inputs(kv, pre, "cpu")
    assert bool((out != 0).all())


@pytest.mark.skipif(not (CORPUS / "tbg_lightllm_quantize_kv_copy.py").exists(), reason="../shared/corpus absent")
def test_corpus_kv_caches_are_destinations():
    for name, written in (("tbg_lightllm_destindex_copy_kv", {2}), ("tbg_lightllm_quantize_kv_copy", {2, 3})):
        mod = load_module(str(CORPUS / f"{name}.py"), "c")
        inputs = mod.make_inputs(mod.CHECK_SHAPES[0], mod.DTYPES[0], 3, "cpu")
        assert set(written_buffers(mod.reference, inputs)) == written, name


def test_per_output_tolerance(tmp_path):
    rq = load_module(str(HERE / "tiny_rowquant.py"), "rq")
    f32 = rq.DTYPES[0]
    assert tolerance(rq, f32, output=0) == (1.0, 0.0)
    assert tolerance(rq, f32, output=1) == (0.0, 1e-6)
    assert tolerance(rq, f32) == (1.0, 1e-6)                      # the loosest, for a single summary
    task = tmp_path / "keyed.py"
    task.write_text((HERE / "tiny_rowquant.py").read_text().replace(
        'TOLERANCE = {torch.float32: [{"atol": 1, "rtol": 0}, {"atol": 0, "rtol": 1e-6}]}',
        'TOLERANCE = {torch.float32: {1: (0.0, 1e-6), 0: {"atol": 1}}}'))
    keyed = load_module(str(task), "k")
    assert tolerance(keyed, f32, output=1) == (0.0, 1e-6) and tolerance(keyed, f32, output=0) == (1.0, 0.0)
    with pytest.raises(Exception, match="no entry for output 2"):
        tolerance(keyed, f32, output=2)
    assert tolerance(load_module(str(AXPY), "a"), f32, output=3) == (1e-5, 1e-5)   # one entry for all


def test_a_side_no_size_can_reach_is_dead_not_unchecked():
    """A template's `4 if elems <= 1024 else 8` with elems = min(n, 1024): no input size makes it false,
    so its else arm is dead code for the task, not code the checks missed."""
    cand = (CHECKS / "k_even_right.py").read_text().replace(
        "    EVEN = n % BLOCK == 0\n",
        "    EVEN = n % BLOCK == 0\n    elems = min(n, 1024)\n    warps = 4 if elems <= 1024 else 8\n").replace(
        "num_warps=4)", "num_warps=warps)")
    p = plan(AXPY, cand)
    dead = [b for b in p.branches if b.branch.test == "elems <= 1024"]
    assert dead and dead[0].status == "dead" and "not reachable" in dead[0].note
    assert p.rejection() is None



def _unmasked(tmp_path: Path) -> Path:
    """tiny_axpy without its mask, on n // BLOCK programs: right only on multiples of its block."""
    src = AXPY.read_text().replace("    mask = offs < n_elements\n", "    mask = offs < 1 << 40\n")
    src = src.replace("grid = (triton.cdiv(n, BLOCK),)", "grid = (n // BLOCK,)")
    task = tmp_path / "unmasked.py"
    task.write_text(src.replace("CHECK_SHAPES = [(1000,), (4097,)]", "CHECK_SHAPES = [(1024,), (4096,)]"))
    return task


def test_derived_size_outside_the_original_kernels_contract_is_dropped(tmp_path):
    """The unmasked original fails its own odd derived size: the same kernel as a candidate fails it too,
    and that case is dropped (the original's result as the reason), not held against the candidate."""
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.verification import verify_candidate
    task = _unmasked(tmp_path)
    v = verify_candidate(str(task), str(task), "same", get_backend("interpreter"), allowed_ops=["empty_like"])
    assert v.passed, f"{v.klass}: {v.reason}"
    dropped = [line for line in v.coverage if line.startswith("dropped") and "odd" in line]
    assert dropped and "so does the original kernel: outside its contract" in dropped[0], v.coverage
    # listed shapes are never dropped: a candidate wrong on one is rejected
    wrong = tmp_path / "wrong.py"
    wrong.write_text(task.read_text().replace("alpha * x + y", "alpha * x + y + (offs == 4095)"))
    w = verify_candidate(str(task), str(wrong), "wrong", get_backend("interpreter"), allowed_ops=["empty_like"])
    assert not w.passed and w.klass == "mismatch", (w.klass, w.reason)


def test_a_dropped_case_unreaches_the_branch_sides_only_it_reached():
    p = plan(AXPY, CHECKS / "k_even_wrong.py")
    (bc,) = p.branches
    assert bc.status == "covered"
    only = next(c for c in p.cases if c.label() == bc.reached["true"])
    p.drop(only, "outside the original kernel's contract (test)")
    assert "true" not in bc.reached and bc.status == "unreached" and "contract" in bc.note
    assert p.rejection() is not None and any("(test)" in d.why for d in p.dropped)


def test_the_screen_plans_the_listed_shapes_only():
    """scope="screen" (the pass before timing, verify/staged.py): the listed shapes, no derived size, no
    value stress, no branch to cover; the same candidate's full plan has all of them."""
    cand = CHECKS / "k_even_wrong.py"
    mod = load_module(str(AXPY), "t")
    screen = plan_checks(mod, AXPY.read_text(), cand.read_text(), "cpu", scope="screen")
    assert screen.scope == "screen" and {c.why for c in screen.cases} == {"listed in CHECK_SHAPES"}
    assert not screen.branches and screen.rejection() is None
    full = plan(AXPY, cand)
    assert full.scope == "full" and len(full.cases) > len(screen.cases) and full.branches


def test_benchmark_shapes_are_checked_once_per_dtype_and_not_in_the_screen():
    """On a GPU the full plan checks BENCH_SHAPES too (what is timed is checked), one seed each: their
    inputs and outputs cross the process boundary as bytes (the H200 suite's 8192x16384 screens took
    over 400 s at two seeds and two dtypes). The screen leaves them out: a candidate that would win
    gets them in its full checks."""
    mod = load_module(str(AXPY), "t")
    bench = [norm_shape(s) for s in mod.BENCH_SHAPES if norm_shape(s) not in map(norm_shape, mod.CHECK_SHAPES)]
    assert bench
    full = plan_checks(mod, AXPY.read_text(), AXPY.read_text(), "cpu", include_bench=True)
    timed = [c for c in full.cases if c.why.startswith("listed in BENCH_SHAPES")]
    assert sorted(c.shape for c in timed) == sorted(bench) * len(mod.DTYPES)
    screen = plan_checks(mod, AXPY.read_text(), AXPY.read_text(), "cpu", include_bench=True, scope="screen")
    assert not [c for c in screen.cases if c.shape in bench]
