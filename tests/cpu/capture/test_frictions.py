"""Issue 35's frictions, each at its mechanism: capture's exit status and last line follow the program (a
kernel the interpreter cannot run is named, with why), no `next: tritondx batch` for an empty folder,
`batch --accept-unmeasured`, and the evidence an `apply` patch cites is the evidence for the change."""

from __future__ import annotations

import json
import textwrap

import pytest

from tritondx.tools.intake.apply import _evidence, evidence_for_change

# a user's kernel that calls a method on a float scalar argument: compiled Triton makes `scale` a typed
# scalar, the interpreter passes a Python float (what Liger-Kernel's swiglu / rms_norm do with
# gate_multiplier / eps)
BAD_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def scaled_copy_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale.to(tl.float32), mask=mask)


@triton.jit
def plain_copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def scaled_copy(x, scale):
    out = torch.empty_like(x)
    scaled_copy_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), scale, BLOCK=64)
    return out


def plain_copy(x):
    out = torch.empty_like(x)
    plain_copy_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out
'''


def _program(tmp_path, body: str):
    (tmp_path / "kern.py").write_text(BAD_KERNEL)
    (tmp_path / "app.py").write_text(textwrap.dedent(body))
    return tmp_path


def _capture(tdx, tmp_path, *extra: str):
    return tdx("capture", "--out", str(tmp_path / "cap"), *extra, "--", "python", "app.py", cwd=tmp_path,
               env={"TRITON_INTERPRET": "1"})


def test_a_kernel_the_interpreter_cannot_run_fails_the_capture_with_its_name_and_why(tmp_path, tdx):
    _program(tmp_path, """
        import torch
        from kern import scaled_copy
        scaled_copy(torch.randn(100), 2.0)
        print("done")
    """)
    r = _capture(tdx, tmp_path)
    assert r.returncode == 1, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])    # the program's status
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("tritondx: error: the program exited with code 1: kernel scaled_copy_kernel (")
    assert "kern.py:" in last and "cannot run under the Triton interpreter" in last
    # why: the line, the argument, and the interpreter's own error
    assert "`scale.to(...)`" in last and "plain Python float" in last and "'float' object has no attribute 'to'" in last
    assert "no launch wrote any of its tensors" not in r.stdout + r.stderr       # not a consequence for the cause
    assert "next: tritondx batch" not in r.stdout                                 # nothing to batch
    summary = json.loads((tmp_path / "cap" / "capture.json").read_text())
    assert summary["exit_code"] == 1 and summary["failures"][0]["name"] == "scaled_copy_kernel"
    assert summary["failures"][0]["interpreter_unsupported"] and summary["failures"][0]["line"] == 12
    assert not list((tmp_path / "cap").glob("*.py"))


def test_a_program_that_fails_before_any_launch_says_what_failed(tmp_path, tdx):
    _program(tmp_path, """
        import triton
        rows = {}
        print(rows["missing"])
    """)
    r = _capture(tdx, tmp_path)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert "the program exited with code 1 before any Triton launch: KeyError: 'missing'" in last
    assert "app.py:4" in last and "next:" not in r.stdout


def test_exit_status_follows_the_program_and_tasks_still_written(tmp_path, tdx):
    _program(tmp_path, """
        import sys
        import torch
        from kern import plain_copy
        plain_copy(torch.randn(100))
        sys.exit(3)
    """)
    r = _capture(tdx, tmp_path)
    assert r.returncode == 3
    assert (tmp_path / "cap" / "plain_copy_kernel.py").exists()       # what was captured is kept
    assert r.stderr.strip().splitlines()[-1] == ("tritondx: error: the program exited with code 3: "
                                                 "its own output above says why")


def test_a_failure_the_program_handles_is_a_warning_and_the_rest_is_captured(tmp_path, tdx):
    _program(tmp_path, """
        import torch
        from kern import plain_copy, scaled_copy
        x = torch.randn(100)
        try:
            y = scaled_copy(x, 2.0)
        except Exception:            # a fallback when the kernel cannot run here
            y = x * 2.0
        plain_copy(y)
        print("done")
    """)
    r = _capture(tdx, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "tritondx: warning: kernel scaled_copy_kernel" in r.stderr and "cannot run under" in r.stderr
    assert "skipped: scaled_copy_kernel: cannot be made a task: its launch failed (AttributeError" in r.stdout
    assert (tmp_path / "cap" / "plain_copy_kernel.py").exists()
    assert r.stdout.strip().splitlines()[-1] == f"next: tritondx batch {tmp_path / 'cap'}"


def test_liger_swiglu_under_the_interpreter_is_named(tmp_path, tdx):
    """The issue's case: Liger-Kernel's swiglu (an installed library) under TRITON_INTERPRET=1."""
    pytest.importorskip("liger_kernel")
    (tmp_path / "app.py").write_text("import torch\nfrom liger_kernel.ops.swiglu import LigerSiLUMulFunction\n"
                                     "LigerSiLUMulFunction.apply(torch.randn(4, 64), torch.randn(4, 64))\n")
    r = _capture(tdx, tmp_path)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert "kernel _swiglu_forward_kernel (liger_kernel/ops/swiglu.py:" in last
    assert "cannot run under the Triton interpreter" in last and "gate_multiplier" in last
    assert "next: tritondx batch" not in r.stdout


# ---- batch --accept-unmeasured -------------------------------------------------------------------------------

def test_batch_passes_accept_unmeasured_to_each_optimize(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import tritondx.batch
    from tritondx.cli import app
    seen = {}

    def fake_run_batch(folder, out, **kw):
        seen.update(kw)
        return {"done": 0}

    monkeypatch.setattr(tritondx.batch, "run_batch", fake_run_batch)
    r = CliRunner().invoke(app, ["batch", str(tmp_path), "--out", str(tmp_path / "b"), "--accept-unmeasured"])
    assert r.exit_code == 0, r.output
    assert "--accept-unmeasured" in seen["extra_args"]
    seen.clear()
    r = CliRunner().invoke(app, ["batch", str(tmp_path), "--out", str(tmp_path / "b")])
    assert r.exit_code == 0 and "--accept-unmeasured" not in seen["extra_args"]


# ---- apply: the evidence for the change ----------------------------------------------------------------------

def _report(findings, candidates, closure=(), best="r1c1"):
    return {"task": "k", "backend": "interpreter", "kernel_class": "elementwise", "tiers_used": ["triage", "ir"],
            "best": {"id": best, "family": "launch_config"}, "findings": findings, "candidates": candidates,
            "closure": list(closure)}


# the report: launch_config picked BLOCK=1024 at n=3004 (r1c1); grid_too_small was read from r1c1
TINY = {"id": "triage.tiny_block:k:5", "tier": "triage", "detector": "tiny_block", "subject": "initial",
        "message": "BLOCK=128: tiny programs"}
GRID = {"id": "ir.grid_too_small:k@r1c1", "tier": "ir", "detector": "grid_too_small", "subject": "r1c1",
        "message": "grid has 3 programs for 132 SMs"}
VEC = {"id": "ir.vector_width:k:9", "tier": "ir", "detector": "non_vectorized_global_access",
       "message": "4-byte loads"}


def test_evidence_is_what_argues_for_the_change_tagged_with_where_it_was_read():
    rep = _report([TINY, GRID, VEC], [{"id": "r1c1", "family": "launch_config", "verified": True,
                                      "motivated_by": [TINY["id"]], "parent": None}],
                  closure=[{"finding": VEC["id"], "status": "fixed"}, {"finding": TINY["id"], "status": "tried"}])
    why, about = evidence_for_change(rep)
    assert len(why) == 2 and "tiny_block" in why[0] and "[read from initial]" in why[0] and "cited by r1c1" in why[0]
    assert "non_vectorized_global_access" in why[1] and "gone from r1c1" in why[1]
    assert about == ["[ir] grid_too_small: grid has 3 programs for 132 SMs [read from r1c1]"]
    text = _evidence(rep, {})
    head, tail = text.split("Still reported on the chosen version r1c1")
    assert "grid_too_small" not in head and "grid_too_small" in tail     # never under "Evidence for the change"


def test_a_parents_findings_count_and_nothing_cited_is_said():
    r2 = {"id": "r2c1", "family": "vectorize", "verified": True, "motivated_by": [GRID["id"]], "parent": "r1c1"}
    r1 = {"id": "r1c1", "family": "launch_config", "verified": True, "motivated_by": [TINY["id"]], "parent": None}
    why, about = evidence_for_change(_report([TINY, GRID], [r1, r2], best="r2c1"))
    # r2c1 was made from r1c1 for a finding read from r1c1: evidence for it, tagged so
    assert any("grid_too_small" in w and "[read from r1c1]" in w and "cited by r2c1" in w for w in why)
    assert any("tiny_block" in w and "cited by r1c1" in w for w in why) and not about
    text = _evidence(_report([GRID], [{"id": "r1c1", "family": "launch_config", "verified": True,
                                       "motivated_by": [], "parent": None}]), {})
    assert "Evidence for the change: no finding cited by this candidate or fixed by it" in text


def test_apply_says_why_an_unmeasured_run_kept_the_initial_kernel(captured, tmp_path, tdx):
    out, _ = captured
    run = tmp_path / "run"
    run.mkdir()
    task = out / "scale_add_kernel.py"
    for name in ("task_initial.py", "optimized_task.py"):
        (run / name).write_text(task.read_text())
    (run / "report.json").write_text(json.dumps(
        {"task": task.stem, "task_path": str(task), "backend": "interpreter", "speed": "not measured",
         "best": {"id": "initial"}, "candidates": [{"id": "r1c1", "family": "launch_config", "verified": True}]}))
    r = tdx("apply", str(run), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "nothing to apply (speed was not measured on interpreter, so the run kept the initial kernel although " \
           "1 candidate(s) verified (r1c1); `--accept-unmeasured` on batch or optimize" in r.stdout


def test_a_crash_after_a_handled_kernel_failure_is_the_crash(tmp_path, tdx):
    _program(tmp_path, """
        import torch
        from kern import scaled_copy
        try:
            scaled_copy(torch.randn(100), 2.0)
        except Exception:
            pass
        raise RuntimeError("later, unrelated")
    """)
    r = _capture(tdx, tmp_path)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert "the program exited with code 1: RuntimeError: later, unrelated at " in last and "app.py:8" in last
    assert "(kernels whose launch failed before: scaled_copy_kernel)" in last
