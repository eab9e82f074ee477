"""How a candidate's runner ends (tools/verify/runner/runner.py)."""

from __future__ import annotations

from tritondx.tools.verify.judge import spawn


def test_a_runner_ends_without_the_interpreters_teardown(tmp_path):
    """At the end of its requests the runner leaves at once (``os._exit``): no interpreter teardown for
    the judge to wait on (torch's: about 1 s per runner), and no exit handler of candidate code runs."""
    cand = tmp_path / "atexit_cand.py"
    cand.write_text("import atexit, os\n\natexit.register(lambda: os.write(2, b'EXIT HANDLER RAN\\n'))\n\n"
                    "def launch(x):\n    return x\n")
    r = spawn.RunnerProcess(str(cand), "cpu", [], hide=[])
    try:
        assert r.hello.get("ok"), r.hello
        r.req.close()
        assert r.proc.wait(timeout=30) == 0
        tail = r.stderr_tail()
    finally:
        r.close()
    assert "EXIT HANDLER RAN" not in tail, tail


def test_a_preloaded_runner_imports_torch_and_triton_and_no_candidate_code_before_its_hello(tmp_path):
    """``RunnerProcess(preload=True)`` (the hardware check's runner under ncu, started outside the profiler
    lock): the runner answers the preload with torch and Triton imported, and the candidate module runs only
    after ``begin()`` sends the hello; then the runner serves calls as any other."""
    import torch

    cand = tmp_path / "marker_cand.py"
    cand.write_text("import os\nos.write(2, b'CANDIDATE IMPORTED\\n')\n\n"
                    "def launch(x):\n    return x\n")
    r = spawn.RunnerProcess(str(cand), "cpu", [], hide=[], preload=True)
    try:
        assert r.preloaded == {"ok": True, "preloaded": ["torch", "triton"]}
        assert r.hello == {} and "CANDIDATE IMPORTED" not in r.stderr_tail()
        assert r.begin().get("ok") and "CANDIDATE IMPORTED" in r.stderr_tail()
        assert r.begin() is r.hello   # sent once
        ans = r.call([torch.ones(3)], inputs_back=False)
        assert torch.equal(ans["outs"][0], torch.ones(3))
    finally:
        r.close()


def test_a_preloaded_runner_keeps_staged_inputs_and_calls_name_them(tmp_path):
    """The hardware check hands every call's inputs to its preloaded runner before the profiler lock
    (``RunnerProcess.stage``); a call then names them by index. Staging after the hello is refused; an unknown
    index is a failed call, not a crash."""
    import pytest
    import torch

    cand = tmp_path / "double_cand.py"
    cand.write_text("import os\nos.write(2, b'CANDIDATE IMPORTED\\n')\n\ndef launch(x, s):\n    return x * s\n")
    r = spawn.RunnerProcess(str(cand), "cpu", [], hide=[], preload=True)
    try:
        assert r.stage([torch.arange(4.0), 2.0]) == 0
        assert r.stage([torch.ones(3), 3.0]) == 1
        assert "CANDIDATE IMPORTED" not in r.stderr_tail()   # staged before the candidate's import
        assert r.begin().get("ok")
        with pytest.raises(RuntimeError):
            r.stage([torch.ones(1), 1.0])
        assert torch.equal(r.call([], inputs_back=False, staged=1)["outs"][0], torch.full((3,), 3.0))
        assert torch.equal(r.call([], inputs_back=False, staged=0)["outs"][0], torch.arange(4.0) * 2)
        bad = r.call([], inputs_back=False, staged=7)
        assert bad["outs"] is None and "no staged inputs" in bad["diag"]["error"]
        assert torch.equal(r.call([torch.ones(2), 5.0], inputs_back=False)["outs"][0], torch.full((2,), 5.0))
    finally:
        r.close()
    view = torch.arange(24.0).reshape(4, 6)[:, 1:5].t()   # a strided view keeps its layout when staged
    strides = tmp_path / "stride_cand.py"
    strides.write_text("def launch(x):\n    return (x * 1, __import__('torch').tensor(list(x.stride()) + [x.storage_offset()]))\n")
    r = spawn.RunnerProcess(str(strides), "cpu", [], hide=[], preload=True)
    try:
        k = r.stage([view])
        r.begin()
        outs = r.call([], inputs_back=False, staged=k)["outs"]
        # the same layout as the inputs a call sends itself (the wire sends a view's storage span)
        assert torch.equal(outs[0], view) and outs[1].tolist()[:2] == list(view.stride())
        assert torch.equal(outs[1], r.call([view], inputs_back=False)["outs"][1])
    finally:
        r.close()


COMPILING_CAND = '''
import triton
import triton.compiler as tc
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def bump(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)


def launch(x):
    # a compile for an H100 target (a CPU-only compile here, as a kernel's first launch on a GPU does it)
    src = tc.ASTSource(bump, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 128},
                       attrs={})
    tc.compile(src, target=GPUTarget("cuda", 90, 32))
    return x
'''


def test_a_runner_tells_its_compiles_and_the_judge_gives_the_device_back_meanwhile(tmp_path, monkeypatch):
    """A call's Triton compile (``runner.CompileNotes``): the runner tells the judge when it starts and ends, the
    judge gives its device hold back meanwhile (``gpulock.step_aside``: a waiting timer need not wait for a
    compile) and holds it again before the runner goes on; the call answers as usual."""
    import torch

    from tritondx.tools.exec import gpulock

    (tmp_path / "locks").mkdir()
    monkeypatch.setenv(gpulock.JOB_LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(gpulock, "_OPENED", None)
    cand = tmp_path / "compiling_cand.py"
    cand.write_text(COMPILING_CAND)
    hello = {**spawn.runner_hello("cpu", [], COMPILING_CAND, False), "compile_notes": 0.0}
    r = spawn.RunnerProcess(str(cand), "cpu", [], hide=[], hello=hello)
    try:
        assert r.hello.get("ok"), r.hello
        before = gpulock.usage()["aside_s"]
        with gpulock.phase("shared"):
            hold = gpulock.current_hold()
            ans = r.call([torch.ones(3)], inputs_back=False)
            assert not hold.aside, "the judge holds the device again when the answer comes"
        assert ans["diag"].get("error") is None, ans["diag"]
        assert torch.equal(ans["outs"][0], torch.ones(3))
        assert gpulock.usage()["aside_s"] > before, "the device was not given back during the compile"
    finally:
        r.close()
    # without notes (a CPU runner's hello), the same call keeps the hold throughout
    r = spawn.RunnerProcess(str(cand), "cpu", [], hide=[])
    try:
        before = gpulock.usage()["aside_s"]
        with gpulock.phase("shared"):
            ans = r.call([torch.ones(3)], inputs_back=False)
        assert ans["diag"].get("error") is None and gpulock.usage()["aside_s"] == before
    finally:
        r.close()


def test_a_staged_case_gives_every_call_fresh_inputs_from_the_same_bytes(tmp_path):
    """``RunnerProcess.stage_case`` (the judge sends a case's inputs once, with the device given back): every
    ``call(staged="case")`` rebuilds them from the kept bytes, so what one call did to its inputs never reaches the
    next; a later case replaces the earlier; a call naming a case before any was staged is a failed call."""
    import torch

    cand = tmp_path / "mutating_cand.py"
    cand.write_text("def launch(x):\n    out = x + 1\n    x.zero_()\n    return out\n")
    r = spawn.RunnerProcess(str(cand), "cpu", [], hide=[])
    try:
        missing = r.call([], staged="case")
        assert missing["outs"] is None and "no staged inputs" in missing["diag"]["error"]
        r.stage_case([torch.arange(4.0)])
        first = r.call([], staged="case")
        second = r.call([], staged="case", inputs_back=False)
        assert torch.equal(first["outs"][0], torch.arange(4.0) + 1)
        assert torch.equal(first["inputs_after"][0], torch.zeros(4)), "the runner answers its own copy's state"
        assert torch.equal(second["outs"][0], torch.arange(4.0) + 1), "the second call got the mutated copy"
        r.stage_case([torch.full((3,), 5.0)])
        assert torch.equal(r.call([], staged="case")["outs"][0], torch.full((3,), 6.0))
    finally:
        r.close()


def test_a_large_answer_crosses_the_pipe_with_the_device_given_back(tmp_path, monkeypatch):
    """An answer of at least ``runner.ANSWER_NOTE_BYTES`` is announced (``{"note": "answering"}``, with the hello's
    notes on): the judge reads its bytes with the device hold given back and holds it again to rebuild them; a small
    answer keeps the hold throughout; either way the answer is the same."""
    import torch

    from tritondx.tools.exec import gpulock
    from tritondx.tools.verify.runner import runner as runner_py

    (tmp_path / "locks").mkdir()
    monkeypatch.setenv(gpulock.JOB_LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(gpulock, "_OPENED", None)
    src = "def launch(x):\n    return x * 2\n"
    cand = tmp_path / "double_cand.py"
    cand.write_text(src)
    big = torch.arange(float(runner_py.ANSWER_NOTE_BYTES // 4))   # one output at the threshold, float32
    hello = {**spawn.runner_hello("cpu", [], src, False), "compile_notes": 0.25}
    r = spawn.RunnerProcess(str(cand), "cpu", [], hide=[], hello=hello)
    try:
        assert r.hello.get("ok"), r.hello
        with gpulock.phase("shared"):
            hold = gpulock.current_hold()
            before = gpulock.usage()["aside_s"]
            small = r.call([torch.ones(8)], inputs_back=False)
            assert gpulock.usage()["aside_s"] == before and r.seconds["answers"] == 0.0, \
                "a small answer kept the hold"
            ans = r.call([big], inputs_back=False)
            assert not hold.aside, "the judge holds the device again when the answer is rebuilt"
        assert torch.equal(small["outs"][0], torch.full((8,), 2.0))
        assert torch.equal(ans["outs"][0], big * 2)
        assert r.seconds["answers"] > 0.0 and gpulock.usage()["aside_s"] > before, \
            "the device was not given back while the answer's bytes crossed the pipe"
    finally:
        r.close()
    # without notes (a CPU runner's hello) the same answer comes unannounced, under the hold
    r = spawn.RunnerProcess(str(cand), "cpu", [], hide=[])
    try:
        with gpulock.phase("shared"):
            ans = r.call([big], inputs_back=False)
        assert torch.equal(ans["outs"][0], big * 2) and r.seconds["answers"] == 0.0
    finally:
        r.close()
