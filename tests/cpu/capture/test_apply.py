"""`tritondx apply`: the optimized copy goes back into the user's file as a patch that applies, imports and runs."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest


def _run_folder(task, tmp_path, edits: list[tuple[str, str]], edit, report: dict | None = None):
    """A run folder as `tritondx optimize` leaves it: task_initial.py, optimized_task.py, report.json."""
    run = tmp_path / "run"
    run.mkdir()
    src = task.read_text()
    shutil.copy(task, run / "task_initial.py")
    opt = src
    for old, new in edits:
        opt = edit(opt, old, new)
    (run / "optimized_task.py").write_text(opt)
    rep = {"task": task.stem, "task_path": str(task), "backend": "interpreter", "kernel_class": "elementwise",
           "tiers_used": ["triage"], "speed": "not measured", "speedup": None,
           "best": {"id": "r1c1", "family": "launch_config"},
           "candidates": [{"id": "r1c1", "family": "launch_config", "verified": True,
                           "motivated_by": ["triage.tiny_block:scale_add_kernel"]}],
           "findings": [{"id": "triage.tiny_block:scale_add_kernel", "tier": "triage", "detector": "tiny_block",
                         "message": "BLOCK=128: tiny programs", "subject": "initial"}]}
    (run / "report.json").write_text(json.dumps(report or rep))
    return run


EDITS = [
    ("    BLOCK = 128\n", "    BLOCK = 1024\n"),
    ("BLOCK=BLOCK, num_warps=1)", "BLOCK=BLOCK, num_warps=4)"),
    ("    tl.store(out_ptr + offs, _scale(x, alpha) + y, mask=mask)",
     "    out = _scale(x, alpha) + y\n    tl.store(out_ptr + offs, out, mask=mask)"),
    ("def _scale(x, alpha):\n    return x * alpha", "def _scale(x, alpha):\n    return alpha * x"),
]


def test_patch_applies_imports_and_runs(captured, user_repo, tmp_path, tdx, run_interpreted, edit):
    out, _ = captured
    work = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(user_repo), str(work)], check=True)
    # the run refers to the files the capture saw; apply reads them, writes only the patch
    run = _run_folder(out / "scale_add_kernel.py", tmp_path, EDITS, edit)
    before = (user_repo / "mykernels.py").read_text()
    r = tdx("apply", str(run), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (user_repo / "mykernels.py").read_text() == before          # nothing changed without --commit
    patch = (run / "apply.patch").read_text()
    assert "--- a/mykernels.py" in patch and "Speed not measured" in patch
    assert "+SCALE_BLOCK = 1024" in patch and "num_warps=4)" in patch     # the launcher's own settings
    assert "+    return alpha * x" in patch and "+    out = _scale(x, alpha) + y" in patch
    subprocess.run(["git", "-C", str(work), "apply", "--check", str(run / "apply.patch")], check=True)
    subprocess.run(["git", "-C", str(work), "apply", str(run / "apply.patch")], check=True)
    text = (work / "mykernels.py").read_text()
    assert "@triton.jit\ndef scale_add_kernel" in text                    # the user's decorator kept
    assert run_interpreted("import runpy; runpy.run_path('main.py', run_name='__main__')", work).strip() == "ok"


def test_commit_carries_the_evidence_and_says_speed_was_not_measured(captured, user_repo, tmp_path, tdx, run_git,
                                                                   edit):
    git = run_git
    out, _ = captured
    run = _run_folder(out / "scale_add_kernel.py", tmp_path, EDITS, edit)
    head = git(user_repo, "rev-parse", "HEAD").stdout.strip()
    try:
        r = tdx("apply", str(run), "--commit", cwd=tmp_path,
                env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                     "GIT_COMMITTER_EMAIL": "t@t"})
        assert r.returncode == 0, r.stderr[-2000:]
        msg = git(user_repo, "log", "-1", "--format=%B").stdout
        assert msg.startswith("tritondx: optimize scale_add_kernel (speed not measured)")
        assert "Rewrite: launch_config" in msg and "oracle mode" in msg
        assert "Evidence for the change:\n- [triage] tiny_block: BLOCK=128: tiny programs [read from initial] " \
               "(cited by r1c1)" in msg
        assert "SCALE_BLOCK = 1024" in (user_repo / "mykernels.py").read_text()
    finally:  # the module's other tests read the captured file as it was
        git(user_repo, "reset", "-q", "--hard", head)


def test_a_source_changed_since_capture_is_refused(captured, user_repo, tmp_path, tdx, edit):
    out, _ = captured
    run = _run_folder(out / "scale_add_kernel.py", tmp_path, EDITS, edit)
    path = user_repo / "mykernels.py"
    before = path.read_text()
    try:
        path.write_text(before.replace("mask = offs < n_elements", "mask = n_elements > offs"))
        r = tdx("apply", str(run), cwd=tmp_path)
        assert r.returncode == 2 and "changed since capture" in r.stderr
        assert not (run / "apply.patch").exists()
    finally:
        path.write_text(before)


@pytest.mark.timeout(1500)
def test_capture_batch_apply_end_to_end(captured, user_repo, tmp_path, tdx, run_interpreted):
    """The three commands: the captured folder optimized by `tritondx batch`, then applied."""
    out, _ = captured
    bdir = tmp_path / "batch"
    r = tdx("batch", str(out), "--backend", "interpreter", "--out", str(bdir), "--max-rounds", "1",
            "--only", "scale_add_kernel", "--accept-unmeasured", cwd=tmp_path, timeout=1400)
    # without timing the result is the initial kernel unless a verified candidate is accepted unmeasured
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((bdir / "results.json").read_text())["results"]
    assert [e["status"] for e in res] == ["done"]
    r = tdx("apply", str(bdir), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    patch = (bdir / "runs" / "scale_add_kernel" / "apply.patch").read_text()
    # the offline expert enlarges the 128-element block (launch_config): written where the launcher sets it
    assert "-SCALE_BLOCK = 128" in patch and "+SCALE_BLOCK = " in patch
    work = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(user_repo), str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "apply", str(bdir / "runs" / "scale_add_kernel" / "apply.patch")],
                   check=True)
    assert run_interpreted("import runpy; runpy.run_path('main.py', run_name='__main__')", work).strip() == "ok"


def test_write_changes_the_files_without_git(captured, user_repo, tmp_path, tdx, edit):
    out, _ = captured
    run = _run_folder(out / "scale_add_kernel.py", tmp_path, EDITS, edit)
    path = user_repo / "mykernels.py"
    before = path.read_text()
    try:
        r = tdx("apply", str(run), "--write", cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "written into the files" in r.stdout
        text = path.read_text()
        assert "SCALE_BLOCK = 1024" in text and "    return alpha * x" in text and "num_warps=4)" in text
        assert (run / "apply.patch").exists()
    finally:
        path.write_text(before)
