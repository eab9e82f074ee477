"""Failures that used to look like success: a target no compiler takes, an Ascend target without its
environment, a backend without its device are each one line and exit 2 before any run folder is made;
a crashed job leaves no temporary folders behind."""

import shutil
from pathlib import Path

import pytest

from tritondx.errors import BackendUnavailable
from tritondx.tools.backends import targets
from tritondx.tools.backends.cuda.target import cuda_capabilities
from tritondx.tools.backends.npu.target import AUTO_INSTALL_ENV
from tritondx.tools.npu import toolchain

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _one_line_no_folder(r, out, *words):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tritondx: error: "), r.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()


@pytest.mark.parametrize("target,words", [("cuda:999", ["sm_999", "cuda:90"]), ("cuda:ninety", ["unknown target"]),
                                          ("ascend9999", ["unknown Ascend target"])])
def test_bad_target_is_one_line_before_anything(cli, tmp_path, target, words):
    out = tmp_path / "run"
    r = cli("optimize", str(EXAMPLES / "add_tiny_block.py"), "--target", target, "--out", str(out))
    _one_line_no_folder(r, out, *words)
    if target == "cuda:999":  # diagnose goes through the same check
        r = cli("diagnose", str(EXAMPLES / "add_tiny_block.py"), "--target", target, "--out", str(out))
        _one_line_no_folder(r, out, *words)


def test_ascend_target_without_its_environment_says_how(cli, tmp_path, monkeypatch):
    monkeypatch.setenv(toolchain.ENV_VAR, str(tmp_path / "no-such-python"))
    out = tmp_path / "run"
    r = cli("optimize", str(EXAMPLES / "add_tiny_block.py"), "--target", "ascend950", "--out", str(out))
    _one_line_no_folder(r, out, "ascend950", "triton-ascend", "-m tritondx.tools.npu.toolchain install")


def test_ascend_environment_is_installed_on_first_use(monkeypatch):
    monkeypatch.delenv(toolchain.ENV_VAR, raising=False)
    monkeypatch.delenv(AUTO_INSTALL_ENV, raising=False)
    installed = []

    def find_python():
        if not installed:
            raise BackendUnavailable("no triton-ascend environment: the default venv does not exist; install it")
        return "/npu-venv/bin/python"

    monkeypatch.setattr(toolchain, "find_python", find_python)
    monkeypatch.setattr(toolchain, "install", lambda *a, **k: installed.append(True) or "/npu-venv/bin/python")
    lines = []
    assert targets.check_target("ascend950", progress=lines.append) == "ascend950"
    assert installed and len(lines) == 2
    assert "installing it into" in lines[0] and "first use" in lines[0] and "ready" in lines[1]
    # opted out: no install, one line saying how
    installed.clear()
    monkeypatch.setenv(AUTO_INSTALL_ENV, "0")
    with pytest.raises(BackendUnavailable, match="needs the triton-ascend environment"):
        targets.check_target("ascend950", progress=lines.append)
    assert not installed


def test_known_cuda_targets_pass():
    assert targets.check_target("cuda:90") == "cuda:90" and targets.check_target(None) is None
    assert 90 in cuda_capabilities() and 999 not in cuda_capabilities()


def test_backend_without_its_device_leaves_no_run_folder(cli, tmp_path):
    from tritondx.tools.backends.registry import get_backend
    try:
        get_backend("cuda")
        pytest.skip("this host has a GPU")
    except BackendUnavailable:
        pass
    out = tmp_path / "run"
    r = cli("optimize", str(EXAMPLES / "add_tiny_block.py"), "--backend", "cuda", "--out", str(out))
    _one_line_no_folder(r, out, "backend 'cuda' is not available")
    r = cli("optimize", str(EXAMPLES / "add_tiny_block.py"), "--backend", "cuda")
    assert r.returncode == 2 and not (tmp_path / "runs").exists()  # no folder under runs/ either


CRASHING_TASK = '''
import ctypes, tempfile
import torch
import triton
import triton.language as tl

open({marker!r}, "w").write(tempfile.mkdtemp(prefix="tdx-leak-"))


@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    pass


def launch(x):
    ctypes.string_at(0)  # a segfault in the job, as a compiler crash would be
    return x


def reference(x):
    return x


def make_inputs(shape, dtype, seed, device):
    return (torch.randn(shape).to(device=device, dtype=dtype),)


CHECK_SHAPES = [(17,)]
BENCH_SHAPES = [(17,)]
DTYPES = [torch.float32]
'''


def test_crashed_job_leaves_no_temporary_folder(tmp_path, monkeypatch):
    # without a sandbox (a host with neither bubblewrap nor unshare) the job sees the host's temp dir;
    # its temporary files must still live in its job folder, so nothing outlives a crash
    monkeypatch.setenv("TRITONDX_SANDBOX", "none")
    from tritondx.tools.task.capture_job import capture_ir
    import tempfile
    import uuid
    marker = Path(tempfile.gettempdir()) / f"tdx-marker-{uuid.uuid4().hex}.txt"  # jobs may write the temp dir
    task = tmp_path / "crash.py"
    task.write_text(CRASHING_TASK.format(marker=str(marker)))
    manifest, error = capture_ir(str(task), tmp_path / "ir", "cuda:90", per_pass=False, timeout=300)
    assert manifest is None and "segfault" in error
    made = Path(marker.read_text())
    marker.unlink()
    assert made.name.startswith("tdx-leak-")
    leaked = made.exists()
    shutil.rmtree(made, ignore_errors=True)
    assert not leaked, f"{made} outlived its job"


def test_on_an_untimed_backend_a_family_that_passed_is_not_proposed_again(tmp_path):
    """Nothing on the interpreter tells a family's tuning variants apart, so a family with a candidate that
    passed in an earlier round is skipped later (the closure says so); a person reviewing candidates, a
    backend that times, or ``untimed_repeat_families`` gets it again."""
    from pathlib import Path
    from tritondx.agents.rewriter import _context
    task = Path(__file__).resolve().parents[3] / "examples" / "add_tiny_block.py"
    state = {"task_path": str(task), "run_dir": str(tmp_path), "backend": "interpreter", "target": "cuda:90",
             "config": {"backend": "interpreter"}, "findings": [], "best": {"id": "initial", "path": str(task)},
             "candidates": [{"id": "r1c1", "family": "launch_config", "signature": "a"},
                            {"id": "r1c2", "family": "fuse_passes", "signature": "b"}],
             "verifications": [{"id": "r1c1", "candidate_id": "r1c1", "passed": True},
                               {"id": "r1c2", "candidate_id": "r1c2", "passed": False, "klass": "mismatch"}]}
    from tritondx.config import RunConfig
    assert _context(state, RunConfig(backend="interpreter")).unmeasured_families == {"launch_config"}   # may try again
    for cfg in ({"untimed_repeat_families": True}, {"interactive": True}):
        assert _context(state, RunConfig(backend="interpreter", **cfg)).unmeasured_families == set()


def test_where_the_tuner_timed_the_version_the_autotune_families_are_not_proposed(tmp_path):
    """An autotuned kernel with a one-config space motivates ``autotune_widen``; once the tuner timed that version's
    launch space on a backend that times (its configs included), the rewriter leaves the family out. Without a
    timing backend, or before the tuner ran, it is proposed."""
    from pathlib import Path
    from tritondx.agents.rewriter import _context, tuner_covered
    from tritondx.config import RunConfig
    from tritondx.tools.evidence.triage import triage
    from tritondx.tools.rewrite.expert import propose
    from tritondx.tools.task.spec import load_task
    task = Path(__file__).resolve().parents[3] / "bench" / "families" / "autotune_widen.py"
    found = [f.model_dump() for f in triage(load_task(str(task)))[1]]
    assert any("autotune_widen" in f.get("suggests", []) for f in found)
    # the rewrite context is the interpreter's (no GPU here); whether the version was timed is ``can_time``
    base = {"task_path": str(task), "run_dir": str(tmp_path), "backend": "interpreter", "target": "cuda:90",
            "config": {"backend": "interpreter"}, "findings": found, "best": {"id": "initial", "path": str(task)}}
    cfg = RunConfig(backend="interpreter")
    for state, can_time, avoided in ((base, True, False), ({**base, "tuned_for": ["initial"]}, False, False),
                                     ({**base, "tuned_for": ["initial"]}, True, True)):
        ctx = _context(state, cfg)
        ctx.covered = tuner_covered(state, cfg, can_time)
        trail: list[dict] = []
        families = {p.family for p in propose(ctx, limit=8, trail=trail)}
        assert ("autotune_widen" not in families) is avoided, (can_time, families)
        # the closed-findings table says why: the tuner's search, not a person's feedback
        assert ({"family": "autotune_widen", "outcome": "covered_by_tuner"} in
                [{k: t[k] for k in ("family", "outcome")} for t in trail]) is avoided


def test_a_batch_deadline_near_ends_the_run_and_shrinks_the_search():
    """``finish_by`` (a batch's deadline less its final bench's share): far off, the route and the search's budget are
    as configured (the search may stretch while improving); too close for a round, the run ends with what it has; a
    search that no longer fits shrinks to what is left and does not stretch."""
    from tritondx.agents.select import ROUND_RESERVE_S, deadline_route
    from tritondx.agents.tuner import MIN_TUNE_S, TUNE_RESERVE_S, tune_budget
    now = 1000.0
    assert deadline_route(None, "rewriter", "r", now) == ("rewriter", "r")
    assert deadline_route(now + ROUND_RESERVE_S + 1, "rewriter", "r", now) == ("rewriter", "r")
    goto, why = deadline_route(now + 10, "rewriter", "gain 1.2x", now)
    assert goto == "__end__" and "deadline" in why and why.endswith("gain 1.2x")
    assert deadline_route(now - 5, "__end__", "done", now) == ("__end__", "done")
    assert tune_budget(25.0, None, now) == (25.0, True, None)
    assert tune_budget(25.0, now + TUNE_RESERVE_S + 200, now) == (25.0, True, None)
    # the budget is the search's own seconds: its wall time (waits for the device included) capped at what is left
    assert tune_budget(25.0, now + TUNE_RESERVE_S + 100, now) == (25.0, True, 100.0)
    assert tune_budget(25.0, now + TUNE_RESERVE_S + 30, now) == (25.0, False, 30.0)    # fits, but not stretched
    assert tune_budget(25.0, now + TUNE_RESERVE_S + 12, now) == (12.0, False, 12.0)
    assert tune_budget(25.0, now, now) == (MIN_TUNE_S, False, MIN_TUNE_S)
