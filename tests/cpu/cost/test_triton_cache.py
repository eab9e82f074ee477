"""The trusted Triton cache layer (tools/exec/triton_cache.py): compiles reused across a task's jobs only
where the kernel source is the same, and a candidate cannot put anything into it.

Compile-only for sm_90 works on CPU (../shared/NOTES.md), so the real Triton cache is exercised."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritondx.tools.exec import triton_cache

KERNEL = '''
import triton, triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) {op}, mask=i < n)
'''

COMPILE = '''
import importlib.util, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
spec = importlib.util.spec_from_file_location("kmod", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
hits = []
triton.knobs.compilation.listener = lambda **kw: hits.append(kw.get("cache_hit"))
src = ASTSource(mod.k, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 128})
triton.compile(src, target=GPUTarget("cuda", 90, 32))
print(json.dumps({"hits": hits}))
'''


def _compile(tmp: Path, kernel: str, env: dict[str, str]) -> list:
    kf = tmp / f"kernel_{abs(hash(kernel))}.py"
    kf.write_text(kernel)
    script = tmp / "compile.py"
    script.write_text(COMPILE)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", triton_cache.TRUSTED_ENV))}
    p = subprocess.run([sys.executable, str(script), str(kf)], env={**base, **env}, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])["hits"]


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*") if p.is_file()}


def test_same_source_hits_the_trusted_layer_other_source_misses_and_never_writes_it(tmp_path):
    a, b = KERNEL.format(op="* 2.0"), KERNEL.format(op="+ 1.0")
    trusted = tmp_path / "trusted"
    # the trusted job (only the original runs there) compiles into the layer
    assert _compile(tmp_path, a, {"TRITON_CACHE_DIR": str(trusted)}) == [False]
    before = _files(trusted)
    assert before
    reader = {triton_cache.TRUSTED_ENV: str(trusted), "TRITON_CACHE_MANAGER": triton_cache.MANAGER}
    private = tmp_path / "private1"
    assert _compile(tmp_path, a, {**reader, "TRITON_CACHE_DIR": str(private)}) == [True]   # same source: hit
    assert not _files(private)                                                              # nothing compiled
    assert _compile(tmp_path, b, {**reader, "TRITON_CACHE_DIR": str(private)}) == [False]  # other source: miss
    assert _files(private) and _files(trusted) == before   # its compile went to its private cache only
    # another job reads the trusted layer only: the first reader's compile of b is not there for it
    assert _compile(tmp_path, b, {**reader, "TRITON_CACHE_DIR": str(tmp_path / "private2")}) == [False]


def test_a_trusted_group_naming_files_outside_the_layer_is_ignored(tmp_path, monkeypatch):
    trusted, private, elsewhere = tmp_path / "t", tmp_path / "p", tmp_path / "x"
    (trusted / "KEY").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "k.cubin").write_bytes(b"bad")
    (trusted / "KEY" / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.cubin": str(elsewhere / "k.cubin")}}))
    monkeypatch.setenv(triton_cache.TRUSTED_ENV, str(trusted))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(private))
    import triton
    monkeypatch.setattr(triton.knobs.cache, "dir", str(private))
    c = triton_cache.LayeredCache("KEY")
    assert c.get_group("k.json") is None
    c.put(b"data", "k.cubin")
    assert (private / "KEY" / "k.cubin").read_bytes() == b"data" and not (trusted / "KEY" / "k.cubin").exists()


def test_jobs_cannot_write_the_trusted_layer(tmp_path):
    """Where the sandbox makes the file system read-only, a job cannot put an entry into the layer
    (and only there is the layer used at all: ``enabled``)."""
    if not triton_cache.enabled():
        pytest.skip("the sandbox here does not make the whole file system read-only: the layer stays off")
    import shutil
    from tritondx.tools.exec.sandbox import run_job
    root = Path.home() / ".cache" / f"tritondx-test-{os.urandom(4).hex()}"  # where the layer lives: not /tmp
    try:
        d = triton_cache.trusted_dir("a task source", root)
        d.mkdir(parents=True)
        task = tmp_path / "writer.py"
        task.write_text(f"open({str(d / 'poison')!r}, 'w').write('x')\n")
        run_job({"kind": "probe", "task": str(task), "device": "cpu"}, timeout=120)
        assert d.is_dir() and not (d / "poison").exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)
