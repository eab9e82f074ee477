"""A real library as the test bed: Liger-Kernel's ops (an installed package, not vendored) captured on CPU."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("liger_kernel")

from tritondx.tools.task.spec import load_task  # noqa: E402

ROOT = __import__("pathlib").Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def liger_tasks(tmp_path_factory):
    import os
    import shutil
    import subprocess
    import sys
    out = tmp_path_factory.mktemp("liger") / "tasks"
    exe = shutil.which("tritondx") or str(__import__("pathlib").Path(sys.executable).parent / "tritondx")
    r = subprocess.run([exe, "capture", "--out", str(out), "--min-share", "1%", "--", "python",
                        str(ROOT / "bench" / "capture" / "liger_ops.py"), "--size", "small"],
                       capture_output=True, text=True, timeout=900, cwd=out.parent,
                       env={**os.environ, "TRITON_INTERPRET": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_liger_ops_are_captured_as_tasks(liger_tasks):
    summary = json.loads((liger_tasks / "capture.json").read_text())
    files = {k["kernel"]: k["file"] for k in summary["kernels"]}
    # softmax forward and backward, cross entropy, rope: each a kernel of the installed package
    assert len(files) >= 4 and all("liger_kernel" in f for f in files.values())
    assert not summary["skipped"], summary["skipped"]
    assert len(summary["tasks"]) == len(files)
    for t in summary["tasks"]:
        load_task(t["task"])


def test_library_kernels_are_the_oracle_and_the_copies_match_them(liger_tasks, run_interpreted, tmp_path):
    code = f"""
import glob, torch
from tritondx.tools.task.module import as_tuple, load_module
for p in sorted(glob.glob({str(liger_tasks / '*.py')!r})):
    m = load_module(p, "l")
    for shape in m.CHECK_SHAPES:
        x = m.make_inputs(shape, m.DTYPES[0], 5, "cpu")
        same = all(torch.equal(a, b) for a, b in zip(as_tuple(m.launch(*x)), as_tuple(m.reference(*x))))
        lib = m._ORIGINAL is not m.__dict__[m.ORACLE["kernel"]] and "liger_kernel" in m._ORIGINAL.fn.__module__
        print(m.NAME, same, lib)
"""
    rows = [ln.split() for ln in run_interpreted(code, tmp_path).splitlines() if ln.strip()]
    assert len(rows) >= 4
    # the reference is the library's own kernel object; the task's copy computes exactly what it does
    assert all(r[1:] == ["True", "True"] for r in rows), rows
