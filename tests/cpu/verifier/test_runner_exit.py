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
