"""Sandboxed jobs: the environment is scrubbed and faults are classified without harming the caller."""

import os

from tritondx.tools.exec.sandbox import classify, run_job, scrubbed_env


def test_scrubbed_env_drops_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-pass")
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/x")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy")
    monkeypatch.setenv("TRITON_AUTH_TOKEN", "t0k")
    env = scrubbed_env()
    assert "OPENAI_API_KEY" not in env and "HTTPS_PROXY" not in env and "TRITON_AUTH_TOKEN" not in env
    assert env["TRITON_CACHE_DIR"] == "/tmp/x"


def test_scrubbed_env_never_passes_the_seal_key_on(monkeypatch):
    """The judge's seal key has an allowed prefix (TRITONDX_JOB_) and no secret-looking name: a process
    started with the environment it is in never gets it; one given it on purpose (``extra``) does."""
    from tritondx.tools.verify.judge import seal
    monkeypatch.setenv(seal.SEAL_ENV, "k" * 64)
    monkeypatch.setenv("TRITONDX_JOB_OTHER", "1")
    env = scrubbed_env()
    assert seal.SEAL_ENV not in env and env["TRITONDX_JOB_OTHER"] == "1"
    assert scrubbed_env({seal.SEAL_ENV: "given"})[seal.SEAL_ENV] == "given"


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
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.task.probe_job import probe_task
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


_STAGE_TASK = '''
import os
out, cache = os.environ["TRITONDX_JOB_OUT"], os.environ["TRITON_CACHE_DIR"]
os.makedirs(os.path.join(out, "sub"), exist_ok=True)
open(os.path.join(out, "sub", "b.txt"), "w").write("nested")
open(os.path.join(out, "a.txt"), "w").write("kept")
os.symlink("/etc/passwd", os.path.join(out, "link"))
os.mkfifo(os.path.join(out, "fifo"))
open(os.path.join(cache, "marker"), "w").write("cached")
raise RuntimeError("stage probe done")
'''


def test_outputs_come_back_and_cache_dir_is_kept(tmp_path):
    """A job writes its out_dir (an IR capture's folder) at its real path: the regular files come back
    after the job, a symlink or fifo does not; ``cache_dir`` is its Triton cache and is kept."""
    from tritondx.tools.exec.sandbox import isolation
    task = tmp_path / "stage_task.py"
    task.write_text(_STAGE_TASK)
    out, cache = tmp_path / "run" / "ir" / "tier_round1", tmp_path / "triton-cache"
    r = run_job({"kind": "probe", "task": str(task), "device": "cpu", "out_dir": str(out)}, timeout=120,
                env={"TRITONDX_JOB_OUT": str(out)}, cache_dir=cache)
    assert "stage probe done" in r.result["problem"], r
    assert (out / "a.txt").read_text() == "kept" and (out / "sub" / "b.txt").read_text() == "nested"
    assert (cache / "marker").read_text() == "cached"
    if isolation().readonly:  # copied back by the sandbox; without it the job wrote the folder itself
        assert not (out / "link").exists() and not (out / "link").is_symlink() and not (out / "fifo").exists()


def test_without_cache_dir_the_triton_cache_is_scratch(tmp_path):
    """TRITON_CACHE_DIR from the caller's environment is not the job's: its cache is in its scratch."""
    task = tmp_path / "cache_task.py"
    task.write_text('import os\nraise RuntimeError("CACHE=" + os.environ["TRITON_CACHE_DIR"] + " CWD=" + os.getcwd())\n')
    r = run_job({"kind": "probe", "task": str(task), "device": "cpu"}, timeout=120,
                env={"TRITON_CACHE_DIR": str(tmp_path / "shared-cache")})
    problem = r.result["problem"]
    cwd = problem.split(" CWD=")[1]
    assert f"CACHE={cwd}/" in problem and not (tmp_path / "shared-cache").exists(), problem

