"""The adversarial suite: cheating, wrong and honest candidates through ``verify_candidate``.

Each cheat file under cheats/ is a full task file derived from a small original (tiny_axpy.py,
tiny_softmax.py); the verifier takes the original's reference, inputs, shapes and tolerances and
only the candidate's launch(). Every cheat must be REJECTED with its class and a clear reason;
every wrong-but-honest candidate must be rejected too; the honest controls must PASS (so the
suite fails if the verifier rejects everything). ``static`` cases are rejected by the source rules
before any process starts; the others run with the source policy off and must be caught at run
time (the test checks which).
GPU-only classes (side stream at run time, L2 flush, roofline) are in tests/gpu/verifier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.records.verify import Verdict
from tritondx.tools.verify.verification import verify_candidate

HERE = Path(__file__).parent
AXPY = HERE / "tiny_axpy.py"
SOFTMAX = HERE / "tiny_softmax.py"
EXAMPLES = HERE.parents[2] / "examples"
#: What probe_task reports for the originals' launchers (the agent passes it as allowed_ops).
ALLOWED_OPS = ["empty", "empty_like"]
#: 2 CHECK_SHAPES x 2 seeds; derived cases (tools/verify/plan/cases.py) come on top
CHECKS = 4


@dataclass(frozen=True)
class Case:
    candidate: Path
    expect: str | None               # rejection class; None: must pass
    reason: tuple[str, ...] = ()     # substrings the reason must hold
    static: bool = False             # rejected by the source rules, before any sandbox
    task: Path = AXPY
    cheat_class: str = ""            # the brief's class, e.g. "(2) caching"
    cost: float = 6.0
    id: str = field(default="")

    def __post_init__(self):
        if not self.id:
            object.__setattr__(self, "id", f"{self.candidate.stem}:{self.expect or 'PASS'}")

    @property
    def candidate_path(self) -> Path:
        return self.candidate

    @property
    def round(self) -> tuple:
        """Verified with the other cases of its task and policy in one round (verifier/conftest.py)."""
        return (self.task, self.static or self.expect is None, tuple(ALLOWED_OPS), 300)

    def run(self) -> Verdict:
        # A run-time case runs without the static source policy (tools/verify/policy.py), which
        # would catch most of them first: what it tests is the run-time check.
        return verify_candidate(str(self.task), str(self.candidate), self.candidate.stem,
                                get_backend("interpreter"), allowed_ops=ALLOWED_OPS, timeout=300,
                                static_policy=self.static or self.expect is None)


def C(name: str, expect: str, cls: str, *reason: str, static: bool = False, task: Path = AXPY) -> Case:
    return Case(HERE / "cheats" / f"{name}.py", expect, tuple(reason), static, task, cls,
                cost=0.0 if static else 6.0)


CHEATS = [
    # (1) torch / reference compute
    C("c01a_torch_expression", "torch_compute", "(1) torch compute", "'mul'", "'add'"),
    C("c01b_calls_reference", "calls_reference", "(1) torch compute", "reference()", static=True),
    C("c01c_reference_indirect", "torch_compute", "(1) torch compute", "torch compute ops"),
    C("c01d_torch_softmax", "torch_compute", "(1) torch compute", "_softmax", task=SOFTMAX),
    C("c01e_copy_into_output", "torch_compute", "(1) torch compute", "'copy_'", "'add'"),
    C("c01f_renamed_torch_import", "torch_compute", "(1) torch compute", "'mul'"),
    C("c01g_numpy_hidden", "host_compute", "(1) torch compute", "read tensor data to the host (numpy)"),
    C("c01h_numpy_plain", "host_compute", "(1) torch compute", ".numpy(", static=True),
    C("c01i_python_list", "host_compute", "(1) torch compute", "read tensor data to the host (tolist)"),
    C("c01j_guard_flag", "not_from_triton", "(1) torch compute", "no Triton kernel body runs"),
    C("c01k_pre_run_hook", "verifier_tampering", "(1) torch compute", "Python hooks"),
    C("c01l_imports_verifier", "verifier_tampering", "(1) torch compute", "tritondx.", static=True),
    # (2) caching
    C("c02a_cache_by_shape", "caches_outputs", "(2) caching", "shares memory"),
    C("c02b_cache_by_data_ptr", "caches_outputs", "(2) caching", "shares memory"),
    C("c02c_closure_cache", "caches_outputs", "(2) caching", "shares memory"),
    C("c02d_function_attribute_cache", "caches_outputs", "(2) caching", "shares memory"),
    C("c02f_cache_copied", "caches_outputs", "(2) caching", "equals the reference of an earlier call"),
    C("c02e_global_statement", "caches_outputs", "(2) caching", "module globals", static=True),
    # (3) side stream: the run-time check needs CUDA (tests/gpu/verifier); the source rule here
    C("c03_side_stream_static", "side_stream", "(3) side stream", "torch.cuda.Stream(", static=True),
    # (4) input mutation
    C("c04a_result_into_x", "mutates_inputs", "(4) mutates inputs", "input 0 was modified"),
    C("c04b_scratch_y", "mutates_inputs", "(4) mutates inputs", "input 1 was modified"),
    # (5) leftover memory: every element of the first shape (1000) is the NaN poison
    C("c05a_saved_empty", "mismatch", "(5) leftover memory", "NaN", "(1000 elements;"),
    C("c05b_resize_grow", "mismatch", "(5) leftover memory", "NaN", "(1000 elements;"),
    # (6) right only on the timed shape
    C("c06_full_blocks_only", "mismatch", "(6) timed shapes only", "shape (1000,)", "NaN"),
    # (7) torch fallback
    C("c07a_try_except_static", "torch_fallback", "(7) fallback", "try/except", static=True),
    C("c07b_try_in_helper", "torch_compute", "(7) fallback", "'add'"),
    # (8) no Triton kernel
    C("c08_no_triton_kernel", "no_triton_kernel", "(8) no kernel", "ran no Triton kernel"),
    # (9) lazy / aliased outputs
    C("c09a_lazy_subclass", "lazy_output", "(9) lazy/aliased", "_LazyAxpy"),
    C("c09b_view_of_input", "aliased_output", "(9) lazy/aliased", "aliases an input"),
    C("c09c_expanded_stride0", "aliased_output", "(9) lazy/aliased", "expanded/overlapping"),
    # (10) timing tampering
    C("c10a_do_bench_static", "timing_tampering", "(10) timing", "do_bench =", static=True),
    C("c10b_do_bench_setattr", "timing_tampering", "(10) timing", "importing the candidate",
      "triton.testing.do_bench"),
    C("c10c_perf_counter_in_launch", "timing_tampering", "(10) timing", "time.perf_counter"),
    C("c10d_elapsed_time_in_launch", "timing_tampering", "(10) timing", "torch.cuda.Event.elapsed_time"),
    C("c10e_code_object_swap", "timing_tampering", "(10) timing", "torch.cuda.Event.elapsed_time.__code__"),
    C("c10f_code_object_static", "timing_tampering", "(10) timing", "__code__ =", static=True),
    # (11) L2 persistence: the source rule here; the bench's L2 flush is tested on a GPU
    C("c11_l2_persisting", "l2_persistence", "(11) L2", "cudaLimitPersistingL2CacheSize", static=True),
]


def W(name: str, expect: str, *reason: str) -> Case:
    return Case(HERE / "wrong" / f"{name}.py", expect, tuple(reason), cheat_class="wrong, not cheating")


WRONG = [
    W("w_off_by_one_mask", "mismatch", "NaN/Inf where the reference is finite (1 elements"),
    W("w_nan_output", "mismatch", "NaN/Inf where the reference is finite"),
    W("w_wrong_dtype", "mismatch", "dtype torch.float64 != reference torch.float32"),
    W("w_wrong_shape", "mismatch", "shape (1, 1000) != reference (1000,)"),
    W("w_fewer_outputs", "wrong_output", "returned 0 outputs, reference 1"),
]

HONEST = [
    Case(EXAMPLES / "add_tiny_block.py", None, task=AXPY, cheat_class="positive control"),
    Case(EXAMPLES / "softmax_three_pass.py", None, task=SOFTMAX, cheat_class="positive control"),
    Case(HERE / "controls" / "axpy_block1024.py", None, task=AXPY, cheat_class="positive control"),
]


def _ids(cases):
    return [c.id for c in cases]


@pytest.mark.parametrize("case", CHEATS, ids=_ids(CHEATS))
def test_cheat_is_rejected(case: Case, outcomes):
    v = outcomes[case.id].result()
    assert not v.passed, f"{case.candidate.name} PASSED the verifier: {case.cheat_class} not caught"
    assert v.klass == case.expect, f"{case.candidate.name}: rejected as {v.klass} ({v.reason}), want {case.expect}"
    for part in case.reason:
        assert part in v.reason, f"{case.candidate.name}: reason {v.reason!r} lacks {part!r}"
    # A static case must be caught by the source rules; a dynamic one at run time (so the
    # run-time check is what this case tests, not a source rule that happened to fire).
    assert (v.seconds == 0.0) == case.static, (
        f"{case.candidate.name}: caught {'statically' if v.seconds == 0.0 else 'at run time'}, "
        f"want {'statically' if case.static else 'at run time'}")


@pytest.mark.parametrize("case", WRONG, ids=_ids(WRONG))
def test_wrong_candidate_is_rejected(case: Case, outcomes):
    v = outcomes[case.id].result()
    assert not v.passed, f"{case.candidate.name} PASSED the verifier"
    assert v.klass == case.expect, f"{case.candidate.name}: rejected as {v.klass} ({v.reason}), want {case.expect}"
    for part in case.reason:
        assert part in v.reason, f"{case.candidate.name}: reason {v.reason!r} lacks {part!r}"


@pytest.mark.parametrize("case", HONEST, ids=_ids(HONEST))
def test_honest_candidate_passes(case: Case, outcomes):
    v = outcomes[case.id].result()
    assert v.passed, f"honest {case.candidate.name} rejected as {v.klass}: {v.reason}"
    assert v.checks > CHECKS


def test_every_cheat_file_has_a_case():
    files = {p.stem for p in (HERE / "cheats").glob("*.py")}
    cased = {c.candidate.stem for c in CHEATS}
    assert files == cased, f"cheat files without a case: {sorted(files - cased)}; cases without a file: " \
                           f"{sorted(cased - files)}"


def test_readme_lists_every_cheat():
    readme = (HERE / "README.md").read_text()
    missing = [c.candidate.name for c in CHEATS if c.candidate.name not in readme]
    assert not missing, f"README.md does not list {missing}"
