"""Sandboxed jobs: the environment is scrubbed and faults are classified without harming the caller."""

import os

from tritondx.tools.sandbox import classify, run_job, scrubbed_env


def test_scrubbed_env_drops_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-pass")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/x")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy")
    monkeypatch.setenv("TRITON_AUTH_TOKEN", "t0k")
    env = scrubbed_env()
    assert "OPENAI_API_KEY" not in env and "HTTPS_PROXY" not in env and "TRITON_AUTH_TOKEN" not in env
    assert env["TRITON_CACHE_DIR"] == "/tmp/x"


def test_classify():
    assert classify(-11, "", False) == "segfault"
    assert classify(1, "RuntimeError: CUDA error: an illegal memory access was encountered", False) == \
        "illegal_memory_access"
    assert classify(1, "torch.OutOfMemoryError: CUDA out of memory.", False) == "out_of_memory"
    assert classify(None, "", True) == "timeout"
    assert classify(0, "", False) == "ok"


def test_unknown_job_reports_error():
    r = run_job({"kind": "nonsense"}, timeout=120)
    assert r.ok and r.result["passed"] is False and "unknown job kind" in r.result["error"]


def test_probe_reports_task_problem(tmp_path):
    from tritondx.tools.backends.base import get_backend
    from tritondx.tools.verifier import probe_task
    from tritondx.errors import TaskFormatError
    import pytest
    EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[3] / "examples"
    src = (EXAMPLES / "add_tiny_block.py").read_text().replace("return 2.5 * x + y", "raise ValueError('boom')")
    p = tmp_path / "bad_ref.py"
    p.write_text(src)
    with pytest.raises(TaskFormatError, match="reference raised ValueError: boom"):
        probe_task(str(p), get_backend("interpreter"))
    ok = probe_task(str(EXAMPLES / "add_tiny_block.py"), get_backend("interpreter"))
    assert ok["ok"] and ok["launches"] == 1 and ok["tolerances"]["float32"] == [1e-5, 1e-5]
