"""How a candidate's runner ends (tools/verify/runner.py)."""

from __future__ import annotations

from tritondx.tools.verify import spawn


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
